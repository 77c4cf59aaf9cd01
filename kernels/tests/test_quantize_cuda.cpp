/// \file test_quantize_cuda.cpp
/// \brief GPU conformance: every byte of the CUDA quantizers' output equals qtc::ref::quantize.
///
/// Coverage matrix (TEST_P Conformance):
///   recipes  NVFP4 {1x16, 16x16, row-scaled, RHT, 4over6 MAE/MSE x 448/256 x 1x16/16x16, row-scaled 4over6,
///            SR 1x16/16x16/RHT, te_pyref 1x16/16x16/4over6, torchao, single-plane}; MXFP8 {E4M3/E5M2 x
///            rceil/ocp_floor x 1x32/32x32, profiles ocp and torchao (rceil/floor/ceil/even x E4M3/E5M2), single-plane}; FP8 block {1x128/128x128 x E4M3/E5M2 x pow2, eps, te_pyref,
///            single-plane}; FP8 tensor {E4M3/E5M2, pow2, eps, te_pyref}
///   inputs   F32, BF16, F16 (RHT: BF16 only)
///   shapes   16x16 32x48 48x80 128x128 304x304 256x272 1x32 65x80 (where legal); 4096x4096 and 8192x5120
///            (BF16, normal input; 4096x4096 also F32 for NVFP4 1x16)
///   values   normal, heavy-tailed, zero rows/columns/blocks, tiny and subnormal, huge, exact E2M1 and E4M3
///            ties, NaN/Inf/-0
///   checked  data bytes, compact scales, amax, scale_inv; on shapes up to 304x304 also padded and swizzled
///            scales (all bytes, padding zero) and dequantization (F32 and BF16 outputs).
/// Other suites: quantize_with_amax (NVFP4, FP8 tensor), the backend object, the GPU gate.
/// Env: QTC_SEED (seed), QTC_SMALL=1 (shapes up to 304x304 only, for compute-sanitizer), QTC_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cfloat>
#include <memory>

#include "../src/launch.hpp"  // the packed-encoder test hook
#include "gpu_test_util.hpp"
#include "qtc/backend.hpp"
#include "qtc/cuda/backend.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"

namespace qtc::test {
namespace {

enum class Input { kNormal, kHeavy, kZeros, kTiny, kHuge, kTies, kSpecial };
constexpr Input kAllInputs[] = {Input::kNormal, Input::kHeavy, Input::kZeros, Input::kTiny,
                                Input::kHuge,   Input::kTies,  Input::kSpecial};

const char* input_name(Input k) {
  switch (k) {
    case Input::kNormal: return "Normal";
    case Input::kHeavy: return "Heavy";
    case Input::kZeros: return "ZeroBlocks";
    case Input::kTiny: return "Tiny";
    case Input::kHuge: return "Huge";
    case Input::kTies: return "Ties";
    case Input::kSpecial: return "NanInfNegZero";
  }
  return "?";
}

/// Smallest positive normal and largest finite value of an input type.
double type_tiny(DType t) { return t == DType::kF16 ? 0x1p-14 : 0x1p-126; }
double type_max(DType t) { return t == DType::kF16 ? 65504.0 : (t == DType::kBF16 ? 0x1.FEp127 : 0x1.FFFFFEp127); }

/// Writes value v (rounded RN-even) at flat index i of a matrix of type t; `ulp` adds that many units in
/// the last place of the stored magnitude (ties and their neighbours).
void put(HostMatrix& m, int64_t i, double v, int ulp = 0) {
  uint32_t bits = float_to_dtype_bits(static_cast<float>(v), m.dtype);
  if (ulp != 0 && v != 0.0) bits = static_cast<uint32_t>(static_cast<int64_t>(bits) + ulp);
  if (m.dtype == DType::kF32)
    std::memcpy(m.bytes.data() + 4 * i, &bits, 4);
  else {
    const uint16_t b = static_cast<uint16_t>(bits);
    std::memcpy(m.bytes.data() + 2 * i, &b, 2);
  }
}

HostMatrix make_input(Input kind, DType t, int64_t M, int64_t K, uint64_t seed) {
  HostMatrix x(t, M, K);
  const double tiny = type_tiny(t), big = type_max(t);
  parallel_chunks(M * K, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = i / K, c = i % K;
      const double n = normal(seed, static_cast<uint64_t>(i));
      const double u = uniform01(seed ^ 0xA5A5ull, static_cast<uint64_t>(i));
      switch (kind) {
        case Input::kNormal: put(x, i, n * 3.0); break;
        case Input::kHeavy: put(x, i, n * std::exp(4.0 * normal(seed ^ 0x77ull, static_cast<uint64_t>(i)))); break;
        case Input::kZeros: {
          // zero rows, zero columns and zero 16x16 / 32x32 / 128x128 regions; the rest normal
          const bool zero = (r % 7 == 3) || (c % 11 == 5) || ((r / 16 + c / 16) % 5 == 0) || ((r / 32) % 3 == 1 && (c / 32) % 2 == 0) ||
                            ((r / 128 + c / 128) % 3 == 2 && M > 128 && K > 128);
          put(x, i, zero ? 0.0 : n);
          break;
        }
        case Input::kTiny: {
          // subnormals of the input type and the smallest normals; a few rows of ordinary scale
          const double v = (u < 0.5 ? tiny * u * 2.0 : tiny * (1.0 + 8.0 * u)) * (n < 0 ? -1.0 : 1.0);
          put(x, i, (r % 13 == 12) ? n * 1e-3 : v);
          break;
        }
        case Input::kHuge: put(x, i, (u < 0.3 ? big : big * (0.25 + 0.5 * u)) * (n < 0 ? -1.0 : 1.0)); break;
        case Input::kTies: {
          // Rows of even index: blocks of 16 whose max is 6 * 2^b and whose other elements are the E2M1 tie
          // points t * 2^b (exact after multiplying by a power-of-two enc), +-1 ulp. One element holds the global
          // amax 2688 (S_enc = 1). Rows of odd index: E4M3 midpoints (1 + (2m+1)/16) * 2^e for power-of-two scales.
          static constexpr double kTie[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
          const uint64_t h = mix(seed, static_cast<uint64_t>(i));
          const int b = static_cast<int>((mix(seed, static_cast<uint64_t>(r * 1000003 + c / 16)) % 9)) - 4;
          const double sgn = (h & 1) ? -1.0 : 1.0;
          if (r == 0 && c == 0) {
            put(x, i, 2688.0);
          } else if (r % 2 == 0) {
            if (c % 16 == static_cast<int64_t>(mix(seed, static_cast<uint64_t>(r * 7919 + c / 16)) % 16))
              put(x, i, sgn * 6.0 * std::ldexp(1.0, b));
            else
              put(x, i, sgn * kTie[(h >> 1) % 7] * std::ldexp(1.0, b), static_cast<int>((h >> 8) % 3) - 1);
          } else {
            const int m = static_cast<int>((h >> 1) % 8), ex = static_cast<int>((h >> 4) % 12) - 6;
            put(x, i, sgn * (1.0 + (2.0 * m + 1.0) / 16.0) * std::ldexp(1.0, ex));
          }
          break;
        }
        case Input::kSpecial: {
          const uint64_t h = mix(seed ^ 0x5Bull, static_cast<uint64_t>(i)) % 64;
          double v = n;
          if (h == 0) v = std::nan("");
          else if (h == 1) v = INFINITY;
          else if (h == 2) v = -INFINITY;
          else if (h < 8) v = -0.0;
          else if (h < 10) v = 0.0;
          put(x, i, v);
          break;
        }
      }
    }
  });
  return x;
}

struct RecipeCase {
  std::string label;
  Recipe r;
};

std::vector<RecipeCase> recipes() {
  std::vector<RecipeCase> v;
  auto nv = [&](const std::string& label, auto f) {
    Recipe r;
    r.kind = RecipeKind::kNVFP4;
    f(r);
    v.push_back({label, r});
  };
  nv("Nvfp41x16", [](Recipe&) {});
  nv("Nvfp416x16", [](Recipe& r) { r.tile_2d = true; });
  nv("Nvfp4RowScaled", [](Recipe& r) { r.row_scaled = true; });
  nv("Nvfp4Rht", [](Recipe& r) { r.rht = true; });
  nv("Nvfp4RhtNoSignMask", [](Recipe& r) { r.rht = true; r.rht_sign_mask = 0; });
  nv("Nvfp4FourOverSixMae448", [](Recipe& r) { r.fourover6 = true; });
  nv("Nvfp4FourOverSixMse256", [](Recipe& r) { r.fourover6 = true; r.fourover6_err = ErrMode::kMSE; r.e4m3_max = 256; });
  nv("Nvfp416x16FourOverSixMae256", [](Recipe& r) { r.tile_2d = true; r.fourover6 = true; r.e4m3_max = 256; });
  nv("Nvfp416x16FourOverSixMse448", [](Recipe& r) { r.tile_2d = true; r.fourover6 = true; r.fourover6_err = ErrMode::kMSE; });
  nv("Nvfp4RowScaledFourOverSix256", [](Recipe& r) { r.row_scaled = true; r.fourover6 = true; r.e4m3_max = 256; r.columnwise = false; });
  nv("Nvfp4Sr", [](Recipe& r) { r.stochastic = true; r.seed = 0x1234ABCDull; });
  nv("Nvfp416x16Sr", [](Recipe& r) { r.tile_2d = true; r.stochastic = true; r.seed = 77; });
  nv("Nvfp4RhtSr", [](Recipe& r) { r.rht = true; r.stochastic = true; r.seed = 0xFEEDull << 33; });
  nv("Nvfp41x16PyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; });
  nv("Nvfp416x16PyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; r.tile_2d = true; });
  nv("Nvfp4FourOverSixPyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; r.fourover6 = true; });
  nv("Nvfp41x16TorchAO", [](Recipe& r) { r.profile = Profile::kTorchAO; });
  nv("Nvfp41x16TorchAOBlockOnly", [](Recipe& r) { r.profile = Profile::kTorchAO; r.per_tensor_scale = false; });
  nv("Nvfp41x16RowOnly", [](Recipe& r) { r.columnwise = false; });
  nv("Nvfp41x16ColOnly", [](Recipe& r) { r.rowwise = false; });
  nv("Nvfp4RhtColOnly", [](Recipe& r) { r.rht = true; r.rowwise = false; });
  auto mx = [&](const std::string& label, auto f) {
    Recipe r;
    r.kind = RecipeKind::kMXFP8;
    f(r);
    v.push_back({label, r});
  };
  mx("Mxfp8E4m3Rceil", [](Recipe&) {});
  mx("Mxfp8E5m2Rceil", [](Recipe& r) { r.fp8 = Fp8Type::kE5M2; });
  mx("Mxfp8E4m3Rceil32x32", [](Recipe& r) { r.mx_2d = true; });
  mx("Mxfp8E4m3Floor", [](Recipe& r) { r.scale_rule = MxScaleRule::kOcpFloor; });
  mx("Mxfp8E5m2Floor32x32", [](Recipe& r) { r.scale_rule = MxScaleRule::kOcpFloor; r.fp8 = Fp8Type::kE5M2; r.mx_2d = true; });
  mx("Mxfp8E4m3Ocp", [](Recipe& r) { r.scale_rule = MxScaleRule::kOcpFloor; r.profile = Profile::kOCP; });
  mx("Mxfp8E5m2Ocp32x32", [](Recipe& r) { r.scale_rule = MxScaleRule::kOcpFloor; r.profile = Profile::kOCP; r.fp8 = Fp8Type::kE5M2; r.mx_2d = true; });
  mx("Mxfp8E4m3TorchAORceil", [](Recipe& r) { r.profile = Profile::kTorchAO; });
  mx("Mxfp8E4m3TorchAOFloor", [](Recipe& r) { r.profile = Profile::kTorchAO; r.scale_rule = MxScaleRule::kOcpFloor; });
  // torchao's to_mx: every ScaleCalculationMode x E4M3/E5M2 (the torchao_device.cuh path of the generic kernel)
  mx("Mxfp8E5m2TorchAORceil", [](Recipe& r) { r.profile = Profile::kTorchAO; r.fp8 = Fp8Type::kE5M2; });
  mx("Mxfp8E5m2TorchAOFloor", [](Recipe& r) { r.profile = Profile::kTorchAO; r.scale_rule = MxScaleRule::kOcpFloor; r.fp8 = Fp8Type::kE5M2; });
  mx("Mxfp8E4m3TorchAOCeil", [](Recipe& r) { r.profile = Profile::kTorchAO; r.scale_rule = MxScaleRule::kCeil; });
  mx("Mxfp8E5m2TorchAOCeil", [](Recipe& r) { r.profile = Profile::kTorchAO; r.scale_rule = MxScaleRule::kCeil; r.fp8 = Fp8Type::kE5M2; });
  mx("Mxfp8E4m3TorchAOEven", [](Recipe& r) { r.profile = Profile::kTorchAO; r.scale_rule = MxScaleRule::kEven; });
  mx("Mxfp8E5m2TorchAOEven", [](Recipe& r) { r.profile = Profile::kTorchAO; r.scale_rule = MxScaleRule::kEven; r.fp8 = Fp8Type::kE5M2; });
  mx("Mxfp8E4m3RceilRowOnly", [](Recipe& r) { r.columnwise = false; });
  mx("Mxfp8E4m3RceilColOnly", [](Recipe& r) { r.rowwise = false; });
  auto fb = [&](const std::string& label, auto f) {
    Recipe r;
    r.kind = RecipeKind::kFP8Block;
    f(r);
    v.push_back({label, r});
  };
  fb("Fp8Block1x128E4m3", [](Recipe&) {});
  fb("Fp8Block1x128E4m3Pow2", [](Recipe& r) { r.pow2_scales = true; });
  fb("Fp8Block1x128E5m2", [](Recipe& r) { r.fp8 = Fp8Type::kE5M2; });
  fb("Fp8Block1x128E4m3Eps1", [](Recipe& r) { r.eps = 1.0f; });
  fb("Fp8Block128x128E4m3", [](Recipe& r) { r.block_2d = true; });
  fb("Fp8Block128x128E4m3Pow2", [](Recipe& r) { r.block_2d = true; r.pow2_scales = true; });
  fb("Fp8Block128x128E5m2Pow2Eps", [](Recipe& r) { r.block_2d = true; r.pow2_scales = true; r.fp8 = Fp8Type::kE5M2; r.eps = 1e-3f; });
  fb("Fp8Block1x128PyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; });
  fb("Fp8Block1x128ColOnly", [](Recipe& r) { r.rowwise = false; });
  auto ft = [&](const std::string& label, auto f) {
    Recipe r;
    r.kind = RecipeKind::kFP8Tensor;
    f(r);
    v.push_back({label, r});
  };
  ft("Fp8TensorE4m3", [](Recipe&) {});
  ft("Fp8TensorE5m2", [](Recipe& r) { r.fp8 = Fp8Type::kE5M2; });
  ft("Fp8TensorE4m3Pow2", [](Recipe& r) { r.pow2_scales = true; });
  ft("Fp8TensorE4m3Eps", [](Recipe& r) { r.eps = 1e-2f; });
  ft("Fp8TensorPyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; });
  ft("Fp8TensorRowOnly", [](Recipe& r) { r.columnwise = false; });
  return v;
}

struct Shape {
  int64_t M, K;
};
constexpr Shape kSmallShapes[] = {{16, 16}, {32, 48}, {48, 80}, {128, 128}, {304, 304}, {256, 272}, {1, 32}, {65, 80}};
constexpr Shape kBigShapes[] = {{4096, 4096}, {8192, 5120}};

struct Case {
  size_t recipe;
  DType dtype;
  Shape shape;
  Input input;
};

bool is_small(const Shape& s) { return s.M * s.K <= 304 * 304; }

std::vector<Case> all_cases() {
  const auto rs = recipes();
  std::vector<Case> out;
  const bool small_only = env_flag("QTC_SMALL");
  for (size_t ri = 0; ri < rs.size(); ++ri) {
    const Recipe& r = rs[ri].r;
    for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& s : kSmallShapes) {
        if (!cuda::unsupported_reason(r, t, s.M, s.K).empty()) continue;  // illegal here (reference rules)
        for (Input k : kAllInputs) out.push_back({ri, t, s, k});
      }
      if (small_only) continue;
      for (const Shape& s : kBigShapes) {
        const bool f32_extra = t == DType::kF32 && rs[ri].label == "Nvfp41x16" && s.M == 4096;
        if (t != DType::kBF16 && !f32_extra) continue;
        if (!cuda::unsupported_reason(r, t, s.M, s.K).empty()) continue;
        out.push_back({ri, t, s, Input::kNormal});
      }
    }
  }
  return out;
}

const std::vector<RecipeCase>& recipe_table() {
  static const std::vector<RecipeCase> t = recipes();
  return t;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::ostringstream os;
  os << recipe_table()[c.recipe].label << dtype_name(c.dtype) << c.shape.M << "x" << c.shape.K << input_name(c.input);
  std::string s = os.str();
  std::string out;
  for (char ch : s)
    if (std::isalnum(static_cast<unsigned char>(ch))) out += ch;
  return out;
}

/// GoogleTest prints a case by its readable name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << recipe_table()[c.recipe].label << " " << dtype_name(c.dtype) << " [" << c.shape.M << ", " << c.shape.K << "] "
      << input_name(c.input);
}

/// Decoders for failure messages.
std::function<std::string(uint64_t)> data_decoder(const Recipe& r) {
  return [r](uint64_t b) {
    std::ostringstream os;
    if (r.kind == RecipeKind::kNVFP4) {
      os << "lo " << decode_e2m1(static_cast<uint8_t>(b & 0xF)) << ", hi " << decode_e2m1(static_cast<uint8_t>((b >> 4) & 0xF));
    } else {
      os << (r.fp8 == Fp8Type::kE4M3 ? decode_e4m3(static_cast<uint8_t>(b)) : decode_e5m2(static_cast<uint8_t>(b)));
    }
    return os.str();
  };
}
std::function<std::string(uint64_t)> scale_decoder(ScaleType t) {
  return [t](uint64_t b) {
    std::ostringstream os;
    if (t == ScaleType::kE4M3) os << decode_e4m3(static_cast<uint8_t>(b));
    else if (t == ScaleType::kE8M0) os << "2^" << (static_cast<int>(b) - 127);
    else os << bits_f32(static_cast<uint32_t>(b));
    return os.str();
  };
}
std::string f32_describe(uint64_t b) {
  std::ostringstream os;
  os << bits_f32(static_cast<uint32_t>(b));
  return os.str();
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

/// Compares a device result (already on the host) with the reference, every field; "" when equal.
std::string compare(const QuantizedTensor& want, const QuantizedTensor& got) {
  std::ostringstream os;
  const Recipe& r = want.recipe;
  auto plane = [&](const std::optional<Plane>& w, const std::optional<Plane>& g, const char* nm) {
    if (w.has_value() != g.has_value()) {
      os << nm << " plane: present " << g.has_value() << ", expected " << w.has_value() << "\n";
      return;
    }
    if (!w) return;
    if (w->data_rows != g->data_rows || w->data_cols != g->data_cols)
      os << nm << " data shape [" << g->data_rows << ", " << g->data_cols << "], expected [" << w->data_rows << ", "
         << w->data_cols << "]\n";
    std::string m = compare_elems(std::string(nm) + " data", w->data, g->data, w->data_rows, w->data_cols, 1, data_decoder(r));
    if (!m.empty()) os << m << "\n";
    if (w->scale.rows != g->scale.rows || w->scale.cols != g->scale.cols || w->scale.type != g->scale.type ||
        w->scale.layout != g->scale.layout)
      os << nm << " scale shape/type/layout differ: [" << g->scale.rows << ", " << g->scale.cols << "] vs expected ["
         << w->scale.rows << ", " << w->scale.cols << "]\n";
    m = compare_elems(std::string(nm) + " scales", w->scale.bytes, g->scale.bytes, w->scale.rows, w->scale.cols,
                      w->scale.elem_size(), scale_decoder(w->scale.type));
    if (!m.empty()) os << m << "\n";
    m = compare_elems(std::string(nm) + " amax", f32_bytes(w->amax), f32_bytes(g->amax), 1,
                      static_cast<int64_t>(w->amax.size()), 4, f32_describe);
    if (!m.empty()) os << m << "\n";
  };
  plane(want.rowwise, got.rowwise, "rowwise");
  plane(want.columnwise, got.columnwise, "columnwise");
  if (r.kind == RecipeKind::kFP8Tensor) {
    const uint32_t a = f32_bits(want.scale_inv), b = f32_bits(got.scale_inv);
    if (a != b && !(std::isnan(want.scale_inv) && std::isnan(got.scale_inv)))
      os << "scale_inv: expected " << hex(a, 8) << " (" << want.scale_inv << "), got " << hex(b, 8) << " (" << got.scale_inv << ")\n";
  }
  return os.str();
}

/// RAII stream + device copy of the input.
struct GpuInput {
  cudaStream_t s = nullptr;
  cuda::DeviceBuffer buf;
  cuda::DeviceMatrixView view;
  explicit GpuInput(const HostMatrix& x) {
    QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    buf = cuda::DeviceBuffer(x.bytes.size(), s);
    if (!x.bytes.empty()) QTC_CUDA_CHECK(cudaMemcpyAsync(buf.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, s));
    view = {buf.data(), x.dtype, x.rows, x.cols};
  }
  ~GpuInput() {
    buf = cuda::DeviceBuffer();
    (void)cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);
  }
};

class Conformance : public testing::TestWithParam<Case> {};

TEST_P(Conformance, BitExactAgainstReference) {
  QTC_REQUIRE_GPU_OR_SKIP();
  const Case& c = GetParam();
  const RecipeCase& rc = recipe_table()[c.recipe];
  const uint64_t seed = test_seed() ^ (c.recipe * 0x100000001B3ull) ^ (static_cast<uint64_t>(c.input) << 48);
  const HostMatrix x = make_input(c.input, c.dtype, c.shape.M, c.shape.K, seed);
  const std::string ctx = "recipe " + rc.r.name() + " (" + rc.label + "), input " + std::string(dtype_name(c.dtype)) + " [" +
                          std::to_string(c.shape.M) + ", " + std::to_string(c.shape.K) + "] " + input_name(c.input) +
                          ", seed " + hex(test_seed(), 16) + " (QTC_SEED; case seed " + hex(seed, 16) + ")";
  SCOPED_TRACE(ctx);
  const QuantizedTensor want = ref::quantize(x.view(), rc.r);
  GpuInput in(x);
  cuda::DeviceQuantized dq = cuda::quantize(in.view, rc.r, in.s, ScaleLayout::kCompact);
  const QuantizedTensor got = cuda::to_host(dq, in.s);
  const std::string diff = compare(want, got);
  ASSERT_TRUE(diff.empty()) << diff;

  if (!is_small(c.shape)) return;
  // Padded and swizzled scales written by the kernels: every byte, padding zero.
  for (ScaleLayout lay : {ScaleLayout::kPadded, ScaleLayout::kSwizzled}) {
    if (rc.r.kind == RecipeKind::kFP8Tensor) break;
    if (lay == ScaleLayout::kSwizzled && rc.r.kind == RecipeKind::kFP8Block) continue;
    cuda::DeviceQuantized dl = cuda::quantize(in.view, rc.r, in.s, lay);
    QuantizedTensor gl = cuda::to_host(dl, in.s);
    QuantizedTensor wl = want;
    ref::convert_layout(wl, lay);
    const std::string d2 = compare(wl, gl);
    EXPECT_TRUE(d2.empty()) << (lay == ScaleLayout::kPadded ? "padded layout: " : "swizzled layout: ") << d2;
  }
  // Dequantization of each plane (F32 and BF16 outputs).
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    if ((pk == PlaneKind::kRowwise && !want.rowwise) || (pk == PlaneKind::kColumnwise && !want.columnwise)) continue;
    for (DType ot : {DType::kF32, DType::kBF16}) {
      const HostMatrix yw = ref::dequantize(want, pk, ot);
      cuda::DeviceBuffer dy(yw.bytes.size(), in.s);
      cuda::dequantize(dq, pk, ot, dy.data(), in.s);
      std::vector<uint8_t> yg(yw.bytes.size());
      if (!yg.empty()) QTC_CUDA_CHECK(cudaMemcpyAsync(yg.data(), dy.data(), yg.size(), cudaMemcpyDeviceToHost, in.s));
      QTC_CUDA_CHECK(cudaStreamSynchronize(in.s));
      const size_t es = dtype_size(ot);
      std::string d3;
      if (ot == DType::kF32) {
        d3 = compare_elems("dequantized F32", yw.bytes, yg, yw.rows, yw.cols, 4, f32_describe);
      } else {
        // bf16: NaN payloads may differ; compare values with NaN == NaN
        std::vector<uint8_t> a(yw.bytes.size() * 2), b(yg.size() * 2);
        for (size_t i = 0; i < yw.bytes.size() / es; ++i) {
          uint16_t u, v;
          std::memcpy(&u, yw.bytes.data() + 2 * i, 2);
          std::memcpy(&v, yg.data() + 2 * i, 2);
          const uint32_t fu = static_cast<uint32_t>(u) << 16, fv = static_cast<uint32_t>(v) << 16;
          std::memcpy(a.data() + 4 * i, &fu, 4);
          std::memcpy(b.data() + 4 * i, &fv, 4);
        }
        d3 = compare_elems("dequantized BF16 (as F32)", a, b, yw.rows, yw.cols, 4, f32_describe);
      }
      EXPECT_TRUE(d3.empty()) << (pk == PlaneKind::kRowwise ? "rowwise " : "columnwise ") << d3;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Quantize, Conformance, testing::ValuesIn(all_cases()), case_name);

// ---------------------------------------------------------------------------------------------------------
// quantize_with_amax: the global amax supplied (FSDP2 shards, fused norms): NVFP4 and FP8 tensor.

// The fast NVFP4 kernel's packed two-at-a-time E2M1 encoder (kernels/src/nvfp4_fast.cuh) against the scalar
// encoder of the generic kernel, on every float.
TEST(Nvfp4PackedEncoder, MatchesScalarOnAllFloats) {
  QTC_REQUIRE_GPU_OR_SKIP();
  EXPECT_EQ(cuda::detail::e2m1x2_exhaustive_mismatches(), 0);
}

TEST(QuantizeWithAmax, EqualsReference) {
  QTC_REQUIRE_GPU_OR_SKIP();
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + hex(seed, 16));
  for (DType t : {DType::kF32, DType::kBF16}) {
    const HostMatrix x = make_input(Input::kNormal, t, 128, 96, seed);
    const float true_amax = ref::amax(x.view());
    for (const RecipeCase& rc : recipe_table()) {
      const Recipe& r = rc.r;
      const bool ok = (r.kind == RecipeKind::kNVFP4 && !r.row_scaled) || r.kind == RecipeKind::kFP8Tensor;
      if (!ok || !cuda::unsupported_reason(r, t, 128, 96).empty()) continue;
      for (float a : {true_amax, true_amax * 0.5f, 0.0f, INFINITY}) {
        SCOPED_TRACE(rc.label + " amax " + std::to_string(a));
        const QuantizedTensor want = ref::quantize_with_amax(x.view(), r, a, a * 0.75f);
        GpuInput in(x);
        cuda::DeviceQuantized dq = cuda::allocate_quantized(r, t, 128, 96, ScaleLayout::kCompact, in.s);
        cuda::quantize_with_amax_into(in.view, dq, a, a * 0.75f, in.s);
        const std::string diff = compare(want, cuda::to_host(dq, in.s));
        EXPECT_TRUE(diff.empty()) << diff;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// The backend object (`qtc verify --backend cuda`).

TEST(CudaBackend, MatchesCpuBackend) {
  auto be = make_cuda_backend();
  ASSERT_EQ(be->name(), "cuda");
  if (!be->unavailable_reason().empty()) {
    EXPECT_EQ(be->unavailable_reason(), gpu_unavailable_reason());
  }
  QTC_REQUIRE_GPU_OR_SKIP();
  auto cpu = make_cpu_backend();
  const HostMatrix x = make_input(Input::kHeavy, DType::kBF16, 64, 128, test_seed());
  for (const RecipeCase& rc : recipe_table()) {
    SCOPED_TRACE(rc.label);
    ASSERT_EQ(be->unsupported_reason(rc.r, DType::kBF16, 64, 128), "");
    const QuantizedTensor want = cpu->quantize(x.view(), rc.r);
    const QuantizedTensor got = be->quantize(x.view(), rc.r);
    EXPECT_EQ(compare(want, got), "");
    const PlaneKind pk = want.rowwise ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
    const HostMatrix yw = cpu->dequantize(want, pk, DType::kF32);
    const HostMatrix yg = be->dequantize(got, pk, DType::kF32);
    EXPECT_EQ(compare_elems("dequantized", yw.bytes, yg.bytes, yw.rows, yw.cols, 4, f32_describe), "");
  }
  Recipe bad;
  bad.kind = RecipeKind::kNVFP4;
  EXPECT_NE(be->unsupported_reason(bad, DType::kBF16, 17, 32), "") << "M % 16 != 0 must be refused with the rule";
}

}  // namespace
}  // namespace qtc::test
