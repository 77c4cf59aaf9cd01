/// \file gemm_cuda_test_util.hpp
/// \brief What the GPU GEMM and grouped tests (kernels/tests/gemm_cuda_*_test.cpp, one executable test_gemm_cuda)
///        share: the seed and the GPU gate, exact-by-construction host operands, running a GEMM on host operands,
///        the random-input bound check, the grouped helpers (row slices, group-size arrays on the device, the
///        grouped recipes and their per-group comparison) and the CUDA-graph fixture (CapturedGraph).
///
/// Exact inputs (STYLE.md item 6): element values from {0, ±0.5, ±1, ±1.5, ±2, ±3} and power-of-two scales,
/// so every product and partial sum is exact in FP32 (and in Hopper's FP8 MMA accumulator) in any order.
/// No GPU: skipped with "no CUDA device"; QTC_REQUIRE_GPU=1 turns that into a failure; a path the gating table
/// refuses on this card is skipped with the table's reason (test_support.hpp's gate). QTC_SEED overrides the seed.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "qtc/codec.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/gemm.hpp"
#include "qtc/cuda/grouped.hpp"
#include "qtc/gemm.hpp"
#include "qtc/grouped.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "qtc/test_support.hpp"

namespace qtc::cuda::gemm_test {

/// The seed (QTC_SEED overrides; test_support.hpp).
inline uint64_t seed() { return qtc::testing::test_seed(20261129ull); }

/// Empty when a CUDA device is usable, else why not.
inline std::string device_reason() { return device_count() > 0 ? std::string() : std::string("no CUDA device"); }

/// The one GPU gate (test_support.hpp): no device -> skip, or fail under QTC_REQUIRE_GPU=1; a feature the gating
/// table refuses here -> skip with the table's reason.
#define QTC_REQUIRE_FEATURE(f) QTC_GPU_GATE_FEATURE(device_reason(), device_supports(f))

/// NVFP4 GEMM, native or emulated: supported when either is; else the native path's reason.
inline gating::Support nvfp4_gemm_support() {
  const gating::Support native = device_supports(gating::Feature::kGemmNvfp4);
  return native.supported ? native : device_supports(gating::Feature::kGemmNvfp4Emulated).supported ? gating::Support{true, {}} : native;
}

// ------------------------------------------------------------------------------------------------
// Exact-by-construction host tensors

inline const float kVals[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f};

inline float small_value(std::mt19937_64& g) {
  const float v = kVals[g() % 6];
  return (g() & 1) ? -v : v;
}

inline uint8_t fp8_code(float v, Fp8Type t) { return t == Fp8Type::kE4M3 ? encode_e4m3(v) : encode_e5m2(v); }

inline ScaleMatrix f32_scales(int64_t rows, int64_t cols, std::mt19937_64& g) {
  ScaleMatrix s;
  s.type = ScaleType::kF32;
  s.rows = rows;
  s.cols = cols;
  s.bytes.resize(static_cast<size_t>(rows * cols) * 4);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float v = std::ldexp(1.0f, static_cast<int>(g() % 5) - 2);
    std::memcpy(s.bytes.data() + i * 4, &v, 4);
  }
  return s;
}

inline Plane fp8_plane(int64_t R, int64_t C, Fp8Type t, std::mt19937_64& g) {
  Plane p;
  p.data_rows = R;
  p.data_cols = C;
  p.data.resize(static_cast<size_t>(R * C));
  for (auto& b : p.data) b = fp8_code(small_value(g), t);
  return p;
}

inline QuantizedTensor exact_fp8_tensor(int64_t M, int64_t K, Fp8Type t, std::mt19937_64& g) {
  QuantizedTensor q;
  q.recipe.set_options(Fp8TensorOptions{});
  q.recipe.set_fp8_type(t);
  q.rows = M;
  q.cols = K;
  q.rowwise = fp8_plane(M, K, t, g);
  Plane c;  // the columnwise plane is the transpose of the same bytes (TE_FORMATS.md §4.1)
  c.data_rows = K;
  c.data_cols = M;
  c.data.resize(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) c.data[static_cast<size_t>(j * M + i)] = q.rowwise->data[static_cast<size_t>(i * K + j)];
  q.columnwise = c;
  q.scale_inv = std::ldexp(1.0f, static_cast<int>(g() % 5) - 2);
  return q;
}

inline QuantizedTensor exact_fp8_block(int64_t M, int64_t K, bool two_d, std::mt19937_64& g) {
  QuantizedTensor q;
  q.recipe.set_options(Fp8BlockOptions{});
  q.recipe.fp8_block().tile_2d = two_d;
  q.rows = M;
  q.cols = K;
  auto cd = [](int64_t a) { return (a + 127) / 128; };
  q.rowwise = fp8_plane(M, K, Fp8Type::kE4M3, g);
  q.rowwise->scale = two_d ? f32_scales(cd(M), cd(K), g) : f32_scales(M, cd(K), g);
  q.columnwise = fp8_plane(K, M, Fp8Type::kE4M3, g);
  q.columnwise->scale = two_d ? f32_scales(cd(K), cd(M), g) : f32_scales(K, cd(M), g);
  ref::convert_layout(q, ScaleLayout::kPadded);
  return q;
}

inline Plane nvfp4_plane(int64_t R, int64_t C, std::mt19937_64& g, float amax) {
  static const uint8_t kPow2Sf[] = {0x30, 0x38, 0x40, 0x48};  // E4M3 0.5, 1, 2, 4
  Plane p;
  p.data_rows = R;
  p.data_cols = C / 2;
  p.data.resize(static_cast<size_t>(R * C / 2));
  for (auto& b : p.data) b = static_cast<uint8_t>((g() & 0xF) | ((g() & 0xF) << 4));  // every E2M1 code
  p.scale.type = ScaleType::kE4M3;
  p.scale.rows = R;
  p.scale.cols = C / 16;
  p.scale.bytes.resize(static_cast<size_t>(R * C / 16));
  for (auto& b : p.scale.bytes) b = kPow2Sf[g() % 4];
  p.amax = {amax};
  return p;
}

inline QuantizedTensor exact_nvfp4(int64_t M, int64_t K, std::mt19937_64& g, float amax_row, float amax_col) {
  QuantizedTensor q;
  q.recipe.set_options(Nvfp4Options{});
  q.rows = M;
  q.cols = K;
  q.rowwise = nvfp4_plane(M, K, g, amax_row);
  q.columnwise = nvfp4_plane(K, M, g, amax_col);
  return q;
}

/// Makes `q` row-scaled: amax per row (rowwise) and per column (columnwise), powers of two times 2688.
inline void make_row_scaled(QuantizedTensor& q, std::mt19937_64& g) {
  q.recipe.nvfp4().row_scaled = true;
  q.rowwise->amax.resize(static_cast<size_t>(q.rows));
  for (auto& a : q.rowwise->amax) a = 2688.0f * std::ldexp(1.0f, static_cast<int>(g() % 7) - 3) * (1.0f + 0.125f * (g() % 8));
  q.columnwise->amax.resize(static_cast<size_t>(q.cols));
  for (auto& a : q.columnwise->amax) a = 2688.0f * std::ldexp(1.0f, static_cast<int>(g() % 7) - 3) * (1.0f + 0.125f * (g() % 8));
}

// ------------------------------------------------------------------------------------------------
// Running and comparing

struct DeviceArray {
  DeviceBuffer buf;
  DeviceArray(const HostMatrix& h, cudaStream_t s) : buf(h.bytes.size(), s) {
    QTC_CUDA_CHECK(cudaMemcpyAsync(buf.data(), h.bytes.data(), h.bytes.size(), cudaMemcpyHostToDevice, s));
  }
};

inline HostMatrix download(const DeviceBuffer& d, DType t, int64_t rows, int64_t cols) {
  HostMatrix h(t, rows, cols);
  QTC_CUDA_CHECK(cudaMemcpy(h.bytes.data(), d.data(), h.bytes.size(), cudaMemcpyDeviceToHost));
  return h;
}

inline double at(const HostMatrix& m, int64_t i) {
  uint16_t h = 0;
  float f = 0;
  switch (m.dtype) {
    case DType::kF32: std::memcpy(&f, m.bytes.data() + i * 4, 4); return f;
    case DType::kBF16: std::memcpy(&h, m.bytes.data() + i * 2, 2); return bf16_to_f32(h);
    default: std::memcpy(&h, m.bytes.data() + i * 2, 2); return f16_to_f32(h);
  }
}

/// Bitwise equality of a GPU output with the exact reference: the library's first-mismatch message (coordinate,
/// count, both bit patterns decoded).
inline ::testing::AssertionResult bitwise_equal(const HostMatrix& got, const HostMatrix& want) {
  return qtc::testing::matrices_equal("output", want, got);
}

struct Shapes {
  int64_t a_rows, a_cols, b_rows, b_cols;
};
/// Tensor shapes of A and B for a layout (M tokens, N outputs, K inputs), as in the reference test.
inline Shapes shapes(ref::GemmKind k, int64_t M, int64_t N, int64_t K) {
  switch (k) {
    case ref::GemmKind::kFprop: return {N, K, M, K};
    case ref::GemmKind::kDgrad: return {N, K, M, N};
    default: return {M, K, M, N};
  }
}

inline const ref::GemmKind kKinds[] = {ref::GemmKind::kFprop, ref::GemmKind::kDgrad, ref::GemmKind::kWgrad};
inline const char* kind_name(ref::GemmKind k) {
  return k == ref::GemmKind::kFprop ? "fprop" : (k == ref::GemmKind::kDgrad ? "dgrad" : "wgrad");
}

/// GPU result of gemm() for host operands, as a host matrix.
inline HostMatrix run_gpu(GemmContext& ctx, const QuantizedTensor& A, const QuantizedTensor& B, const ref::GemmArgs& args,
                   bool row_scaled = false) {
  const ref::ResolvedGemm dims = row_scaled ? ref::ResolvedGemm{} : ref::resolve_gemm(A, B, args);
  const DeviceQuantized da = from_host(A, ctx.stream()), db = from_host(B, ctx.stream());
  const int64_t n = row_scaled ? (args.transb ? B.cols : B.rows) : dims.b.rows;
  const int64_t m = row_scaled ? (args.transa ? A.rows : A.cols) : dims.a.rows;
  DeviceGemmArgs d;
  d.transa = args.transa;
  d.transb = args.transb;
  d.alpha = args.alpha;
  d.beta = args.beta;
  d.out = args.out;
  std::optional<DeviceArray> c, bias;
  if (args.c != nullptr) {
    c.emplace(*args.c, ctx.stream());
    d.c = c->buf.data();
  }
  HostMatrix bias_h;
  if (!args.bias.empty()) {
    // cuBLASLt's FP8 table: with F32 output the bias is BF16 (gemm.hpp, DeviceGemmArgs::bias)
    const bool fp8 = A.recipe.kind() == RecipeKind::kFP8Tensor || A.recipe.kind() == RecipeKind::kFP8Block;
    bias_h = HostMatrix(fp8 && args.out == DType::kF32 ? DType::kBF16 : args.out, 1, m);
    for (int64_t j = 0; j < m; ++j) bias_h.set(0, j, args.bias[static_cast<size_t>(j)]);
    bias.emplace(bias_h, ctx.stream());
    d.bias = bias->buf.data();
  }
  DeviceBuffer out(static_cast<size_t>(n * m) * dtype_size(args.out), ctx.stream());
  if (row_scaled)
    gemm_nvfp4_row_scaled(ctx, da, db, d, out.data());
  else
    gemm(ctx, da, db, d, out.data());
  QTC_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  return download(out, args.out, n, m);
}

constexpr int64_t kM = 256, kN = 384, kK = 512;

// ------------------------------------------------------------------------------------------------
// Random inputs: error within the path's bound; worst error printed in ULPs next to the bound

struct Bound {
  double per_term;   ///< relative error per accumulated term (FP32 accumulation: 2^-24 per addition)
  double constant;   ///< extra relative error independent of K (Hopper FP8 MMA internal accumulation)
};

inline void check_random(GemmContext& ctx, const char* path, const Recipe& ra, const Recipe& rb, ref::GemmKind k, DType out,
                  Bound bnd, std::mt19937_64& g) {
  const int64_t M = 256, N = 256, K = 1024;
  const Shapes s = shapes(k, M, N, K);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  auto input = [&](int64_t r, int64_t c) {
    HostMatrix x(DType::kBF16, r, c);
    for (int64_t i = 0; i < r * c; ++i) x.as<uint16_t>()[i] = f32_to_bf16(dn(g) * (1.0f + static_cast<float>(i % 13)));
    return x;
  };
  QuantizedTensor a = ref::quantize(input(s.a_rows, s.a_cols).view(), ra);
  QuantizedTensor b = ref::quantize(input(s.b_rows, s.b_cols).view(), rb);
  if (ra.kind() == RecipeKind::kFP8Block) {
    ref::convert_layout(a, ScaleLayout::kPadded);
    ref::convert_layout(b, ScaleLayout::kPadded);
  }
  const ref::GemmArgs args = ref::GemmArgs::of(k, out);
  const HostMatrix got = run_gpu(ctx, a, b, args);
  QuantizedTensor ac = a, bc = b;
  ref::convert_layout(ac, ScaleLayout::kCompact);
  ref::convert_layout(bc, ScaleLayout::kCompact);
  const ref::ResolvedGemm rg = ref::resolve_gemm(ac, bc, args);
  const HostMatrix want = ref::gemm_exact(rg, args);
  // Σ|alpha·a·b| per output, from the FP64 bound helper (E = γ·S, so S = E/γ).
  const std::vector<double> e = ref::gemm_eigen_error_bound(rg, args);
  const int64_t kred = rg.a.k;  // the reduction length of this layout
  const double nk = static_cast<double>(kred + 3), gamma = nk * 0x1p-53 / (1 - nk * 0x1p-53) * 1.01;
  // Reported in "ULPs of S": the error divided by the output ULP at the magnitude of S = Σ|alpha·a·b|
  // (ULPs of the result itself are meaningless where the sum cancels to near zero).
  double worst = 0, worst_bound = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double x = at(want, i), y = at(got, i);
    const double sabs = e[static_cast<size_t>(i)] / gamma;
    const double ulp = ref::ulp_of(out, std::max(std::fabs(x), std::fabs(y)));
    const double bound = ulp + (bnd.per_term * static_cast<double>(kred) + bnd.constant) * sabs;
    const double err = std::fabs(x - y);
    const double ulp_s = ref::ulp_of(out, std::max(sabs, std::fabs(x)));
    if (err / ulp_s > worst) {
      worst = err / ulp_s;
      worst_bound = bound / ulp_s;
    }
    if (err > bound && bad++ < 4)
      ADD_FAILURE() << path << " " << kind_name(k) << ": (" << i / want.cols << ", " << i % want.cols << ") gpu " << y
                    << " exact " << x << " err " << err << " > bound " << bound << " (S = " << sabs << ")";
  }
  EXPECT_EQ(bad, 0);
  std::printf("GEMMERR path=%s layout=%s out=%s k=%lld worst_ulps_of_S=%.3f bound_ulps_of_S=%.3f\n", path, kind_name(k),
              out == DType::kF32 ? "F32" : "BF16", static_cast<long long>(kred), worst, worst_bound);
}

// FP32 accumulation: one rounding per addition (2^-24 relative each) plus the alpha/epilogue rounding.
constexpr Bound kFp32Acc{0x1p-24, 0x1p-23};
// Hopper's FP8 MMA adds each 32-deep k-step into an accumulator that keeps about 14 significant bits
// (DeepSeek-V3 report, §3.3.2) before cuBLAS promotes to FP32 (FAST_ACCUM = 0): up to 2^-13 of |S| per
// k-step, i.e. 2^-13/32 = 2^-18 per term. The first H200 run measured up to about 2^-11.3·|S| at k = 256
// (dgrad/wgrad), beyond the 2^-13 constant assumed before; 2^-18·k covers it (2^-10 at k = 256).
constexpr Bound kFp8Hopper{0x1p-18, 0x1p-23};

// ------------------------------------------------------------------------------------------------
// Grouped row-scaled NVFP4 fprop (MoE)

/// Rows [r0, r0 + n) of a row-scaled NVFP4 rowwise-only tensor, as its own tensor (row-scaled quantization
/// is row-independent, so this is what quantizing the group alone gives).
inline QuantizedTensor slice_rows(const QuantizedTensor& q, int64_t r0, int64_t n) {
  QuantizedTensor s;
  s.recipe = q.recipe;
  s.rows = n;
  s.cols = q.cols;
  if (n == 0) return s;
  Plane p;
  const Plane& src = *q.rowwise;
  p.data_rows = n;
  p.data_cols = src.data_cols;
  p.data.assign(src.data.begin() + r0 * src.data_cols, src.data.begin() + (r0 + n) * src.data_cols);
  p.scale = src.scale;
  p.scale.rows = n;
  p.scale.bytes.assign(src.scale.bytes.begin() + r0 * src.scale.cols, src.scale.bytes.begin() + (r0 + n) * src.scale.cols);
  p.amax.assign(src.amax.begin() + r0, src.amax.begin() + r0 + n);
  s.rowwise = p;
  return s;
}

// ------------------------------------------------------------------------------------------------
// Grouped NVFP4 quantization with device group sizes, captured once in a CUDA graph and replayed

/// A non-blocking stream destroyed (after a synchronisation) when it goes out of scope: declare it before
/// the buffers made on it, so they are freed while it is alive.
struct OwnedStream {
  cudaStream_t s = nullptr;
  OwnedStream() { QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~OwnedStream() {
    (void)cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
};

// ------------------------------------------------------------------------------------------------
// Grouped quantization, every grouped recipe (quantize_grouped_into), captured in a CUDA graph

struct GroupCase {
  const char* name;
  Recipe r;
  ScaleLayout layout;
};

inline std::vector<GroupCase> grouped_recipes() {
  std::vector<GroupCase> v;
  auto add = [&](const char* n, RecipeKind k, ScaleLayout l, auto&& tweak) {
    Recipe r;
    r.set_options(Recipe::default_options(k));
    r.columnwise = false;
    tweak(r);
    v.push_back({n, r, l});
  };
  add("nvfp4 per-tensor compact", RecipeKind::kNVFP4, ScaleLayout::kCompact, [](Recipe&) {});
  add("nvfp4 per-tensor swizzled", RecipeKind::kNVFP4, ScaleLayout::kSwizzled, [](Recipe&) {});
  add("nvfp4 row-scaled swizzled", RecipeKind::kNVFP4, ScaleLayout::kSwizzled, [](Recipe& r) { r.nvfp4().row_scaled = true; });
  add("mxfp8 e4m3 compact", RecipeKind::kMXFP8, ScaleLayout::kCompact, [](Recipe&) {});
  add("mxfp8 e5m2 swizzled", RecipeKind::kMXFP8, ScaleLayout::kSwizzled, [](Recipe& r) { r.set_fp8_type(Fp8Type::kE5M2); });
  add("mxfp8 e4m3 ocp floor swizzled", RecipeKind::kMXFP8, ScaleLayout::kSwizzled,
      [](Recipe& r) { r.mxfp8().scale_rule = MxScaleRule::kOcpFloor; });
  add("fp8 tensor e4m3", RecipeKind::kFP8Tensor, ScaleLayout::kCompact, [](Recipe&) {});
  add("fp8 block 1x128", RecipeKind::kFP8Block, ScaleLayout::kCompact, [](Recipe&) {});
  add("fp8 block 1x128 pow2", RecipeKind::kFP8Block, ScaleLayout::kCompact, [](Recipe& r) { r.set_pow2_scales(true); });
  return v;
}

template <typename T>
std::vector<T> to_host_vec(const DeviceBuffer& b, cudaStream_t st) {
  std::vector<T> h(b.bytes() / sizeof(T));
  if (!h.empty()) QTC_CUDA_CHECK(cudaMemcpyAsync(h.data(), b.data(), h.size() * sizeof(T), cudaMemcpyDeviceToHost, st));
  return h;
}

/// Compares every group of a grouped quantization with quantizing the group alone (reference), and checks
/// that rows in no group kept the sentinel byte of the data buffer.
inline void expect_groups_equal(const GroupCase& c, const HostMatrix& x, const std::vector<int64_t>& sizes,
                         const std::vector<int64_t>& offs, const DeviceGroupedQuantized& out, uint8_t sentinel,
                         cudaStream_t st) {
  const int64_t K = x.cols, cap = x.rows, G = static_cast<int64_t>(sizes.size());
  const auto data = to_host_vec<uint8_t>(out.data, st);
  const auto scale = to_host_vec<uint8_t>(out.scale, st);
  const auto amax = to_host_vec<float>(out.amax, st);
  const auto sinv = to_host_vec<float>(out.scale_inv, st);
  const auto soff = to_host_vec<int64_t>(out.scale_offsets, st);
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  ref::GroupedRows rows;
  rows.first_dims = sizes;
  for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
  rows.last_dim = K;
  rows.capacity = cap;
  const auto want = ref::quantize_grouped(x.view(), rows, c.r);
  const int64_t row_bytes = c.r.kind() == RecipeKind::kNVFP4 ? K / 2 : K;
  std::vector<uint8_t> live(static_cast<size_t>(cap), 0);
  for (int64_t gi = 0; gi < G; ++gi) {
    const int64_t n = sizes[static_cast<size_t>(gi)], o = offs[static_cast<size_t>(gi)];
    for (int64_t i = 0; i < n; ++i) live[static_cast<size_t>(o + i)] = 1;
    if (n == 0) continue;
    QuantizedTensor q = want[static_cast<size_t>(gi)];
    if (c.layout == ScaleLayout::kSwizzled) ref::convert_layout(q, ScaleLayout::kSwizzled);
    const Plane& p = *q.rowwise;
    EXPECT_EQ(std::memcmp(data.data() + o * row_bytes, p.data.data(), p.data.size()), 0) << c.name << " group " << gi << " data";
    if (c.r.kind() != RecipeKind::kFP8Tensor) {
      const size_t at = c.layout == ScaleLayout::kSwizzled ? static_cast<size_t>(soff[static_cast<size_t>(gi)])
                                                           : static_cast<size_t>(o * out.scale_cols) * p.scale.elem_size();
      ASSERT_LE(at + p.scale.bytes.size(), scale.size()) << c.name << " group " << gi;
      EXPECT_EQ(std::memcmp(scale.data() + at, p.scale.bytes.data(), p.scale.bytes.size()), 0)
          << c.name << " group " << gi << " scales (" << p.scale.bytes.size() << " bytes at " << at << ")";
    }
    if (c.r.kind() == RecipeKind::kNVFP4) {
      for (int64_t i = 0; i < static_cast<int64_t>(p.amax.size()); ++i) {
        EXPECT_EQ(amax[static_cast<size_t>(c.r.nvfp4_row_scaled() ? o + i : gi)], p.amax[static_cast<size_t>(i)])
            << c.name << " group " << gi << " amax " << i;
      }
    }
    if (c.r.kind() == RecipeKind::kFP8Tensor) {
      EXPECT_EQ(amax[static_cast<size_t>(gi)], p.amax[0]) << c.name << " group " << gi << " amax";
      EXPECT_EQ(sinv[static_cast<size_t>(gi)], q.scale_inv) << c.name << " group " << gi << " scale_inv";
    }
  }
  int64_t touched = 0;
  for (int64_t r = 0; r < cap; ++r)
    if (!live[static_cast<size_t>(r)])
      for (int64_t j = 0; j < row_bytes; ++j) touched += data[static_cast<size_t>(r * row_bytes + j)] != sentinel;
  EXPECT_EQ(touched, 0) << c.name << ": bytes of rows in no group were written";
}

inline HostMatrix random_input(DType t, int64_t rows, int64_t cols, std::mt19937_64& g) {
  std::normal_distribution<float> dn(0.0f, 1.0f);
  HostMatrix x(t, rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) x.set(i / cols, i % cols, dn(g) * (1.0f + static_cast<float>(i % 7)));
  return x;
}

// ------------------------------------------------------------------------------------------------
// Device-driven grouped row-scaled NVFP4 GEMM: group sizes on the device only, captured in a CUDA graph once and
// replayed with other sizes; every replay bitwise the per-group reference (exact inputs)

/// The engine row of the device-driven path (gating::grouped_row_scaled_path): skip with its reason when none.
inline gating::Support device_grouped_support() {
  const gating::GroupedPath gp = gating::grouped_row_scaled_path(device_capability());
  if (!gp.engine) return {false, "grouped row-scaled NVFP4 with device group sizes: " + gp.why};
  return device_supports(*gp.engine);
}

/// Offsets for sizes with `gap` unused rows after each group (capacity padding between groups).
inline std::vector<int64_t> offsets_with_gaps(const std::vector<int64_t>& sizes, int64_t gap) {
  std::vector<int64_t> o;
  int64_t r = 0;
  for (int64_t n : sizes) {
    o.push_back(r);
    r += n + gap;
  }
  return o;
}

inline ref::GroupedRows ref_rows(const std::vector<int64_t>& sizes, const std::vector<int64_t>& offs, int64_t K, int64_t cap) {
  ref::GroupedRows rows;
  rows.first_dims = sizes;
  for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
  rows.last_dim = K;
  rows.capacity = cap;
  return rows;
}

/// The reference grouped fprop for one size set (padding rows: the 0x3F sentinel).
inline HostMatrix grouped_fprop_reference(const std::vector<QuantizedTensor>& wq, const QuantizedTensor& x,
                                   const std::vector<int64_t>& sizes, const std::vector<int64_t>& offs, DType out,
                                   const std::vector<float>* bias_gn, int64_t N) {
  const int64_t K = x.cols, cap = x.rows;
  const ref::GroupedRows rows = ref_rows(sizes, offs, K, cap);
  HostMatrix want(out, cap, N);
  std::fill(want.bytes.begin(), want.bytes.end(), 0x3F);
  for (size_t gi = 0; gi < wq.size(); ++gi) {  // per group: the ungrouped reference with the group's own bias
    if (sizes[gi] == 0) continue;
    ref::GemmArgs args = ref::GemmArgs::of(ref::GemmKind::kFprop, out);
    if (bias_gn != nullptr) args.bias.assign(bias_gn->begin() + static_cast<int64_t>(gi) * N, bias_gn->begin() + static_cast<int64_t>(gi + 1) * N);
    const HostMatrix dg = ref::gemm_nvfp4_row_scaled(wq[gi], slice_rows(x, offs[gi], sizes[gi]), args);
    std::memcpy(want.bytes.data() + static_cast<size_t>(offs[gi] * N) * dtype_size(out), dg.bytes.data(), dg.bytes.size());
  }
  (void)rows;
  return want;
}

struct DeviceSizes {
  DeviceBuffer fd, off;
  DeviceSizes(int64_t G, cudaStream_t st) : fd(static_cast<size_t>(G) * 8, st), off(static_cast<size_t>(G) * 8, st) {}
  void set(const std::vector<int64_t>& sizes, const std::vector<int64_t>& offs, cudaStream_t st) {
    QTC_CUDA_CHECK(cudaMemcpyAsync(fd.data(), sizes.data(), sizes.size() * 8, cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(off.data(), offs.data(), offs.size() * 8, cudaMemcpyHostToDevice, st));
  }
};

// ------------------------------------------------------------------------------------------------
// CUDA graphs: capture a call once, replay it after the device-side routing changed

/// One CUDA graph: `body` captured on `st` (global capture mode) and instantiated; launch() replays it on `st`.
/// Synchronises `st` before the capture (the context's scratch and every buffer must exist already: a call made
/// eagerly once before capturing sizes them). Destroyed with the object; a throwing body ends the capture first.
class CapturedGraph {
 public:
  template <typename F>
  CapturedGraph(cudaStream_t st, F&& body) : st_(st) {
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    QTC_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    try {
      body();
    } catch (...) {
      cudaGraph_t g = nullptr;
      (void)cudaStreamEndCapture(st, &g);
      if (g != nullptr) (void)cudaGraphDestroy(g);
      throw;
    }
    QTC_CUDA_CHECK(cudaStreamEndCapture(st, &graph_));
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph_, 0);
    if (e != cudaSuccess) {
      (void)cudaGraphDestroy(graph_);
      QTC_CUDA_CHECK(e);
    }
  }
  ~CapturedGraph() {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  /// Replays the graph on the capture stream (stream-ordered, no synchronisation).
  void launch() const { QTC_CUDA_CHECK(cudaGraphLaunch(exec_, st_)); }

 private:
  cudaStream_t st_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace qtc::cuda::gemm_test
