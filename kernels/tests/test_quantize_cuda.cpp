/// \file test_quantize_cuda.cpp
/// \brief GPU conformance: every byte of the CUDA quantizers' output equals qtc::ref::quantize.
///
/// Coverage matrix (TEST_P Conformance):
///   recipes  NVFP4 {1x16, 16x16, row-scaled, RHT, 4over6 MAE/MSE x 448/256 x 1x16/16x16, row-scaled 4over6,
///            SR 1x16/16x16/RHT, te_pyref 1x16/16x16/4over6, torchao, single-plane}; MXFP8 {E4M3/E5M2 x
///            rceil/ocp_floor x 1x32/32x32, profiles ocp and torchao (rceil/floor/ceil/even x E4M3/E5M2), single-plane}; FP8 block {1x128/128x128 x E4M3/E5M2 x pow2, eps, te_pyref,
///            single-plane, UE8M0 scales}; FP8 tensor {E4M3/E5M2, pow2, eps, te_pyref}; MXFP4 {te rceil/ocp_floor,
///            ocp, torchao floor/rceil/ceil/even, triton_kernels ROUND_UP/ROUND_DOWN, vllm_cutlass even, fbgemm ceil,
///            quark even, single-plane}
///   inputs   F32, BF16, F16 (RHT: BF16 only)
///   shapes   16x16 32x48 48x80 128x128 304x304 256x272 1x32 65x80 37x45 (where legal); 4096x4096 and 8192x5120
///            (BF16, normal input; 4096x4096 also F32 for NVFP4 1x16)
///   values   normal, heavy-tailed, zero rows/columns/blocks, tiny and subnormal, huge, exact E2M1 and E4M3
///            ties, NaN/Inf/-0
///   checked  data bytes, compact scales, amax, scale_inv; on shapes up to 304x304 also padded and swizzled
///            scales (all bytes, padding zero) and dequantization (F32 and BF16 outputs).
/// Other suites: quantize_with_amax (NVFP4, FP8 tensor), the backend object, the GPU gate, determinism (every kernel:
/// repeats, streams, grid sizes, load paths, NVFP4 kernel variants and tile orders give the same bytes).
/// Gate, seeds, inputs and failure messages come from the verdict library (qtc/test_support.hpp): no device ->
/// skipped (failure under QTC_REQUIRE_GPU=1); a legal case the gating table refuses on this card -> registered and
/// skipped with the table's reason.
/// Env: QTC_SEED (seed), QTC_SMALL=1 (shapes up to 304x304 only, for compute-sanitizer), QTC_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdlib>
#include <memory>

#include "../src/common/launch.hpp"  // the packed-encoder test hook
#include "gpu_test_util.hpp"
#include "qtc/cuda/backend.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/layouts.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"

namespace qtc::test {
namespace {

using Input = Family;  // the library's input families (test_support.hpp)
inline const char* input_name(Input k) { return qtc::testing::family_name(k); }

struct RecipeCase {
  std::string label;
  Recipe r;
};

std::vector<RecipeCase> recipes() {
  std::vector<RecipeCase> v;
  auto nv = [&](const std::string& label, auto f) {
    Recipe r = Recipe::of(Nvfp4Options{});
    f(r);
    v.push_back({label, r});
  };
  nv("Nvfp41x16", [](Recipe&) {});
  nv("Nvfp416x16", [](Recipe& r) { r.nvfp4().tile_2d = true; });
  nv("Nvfp4RowScaled", [](Recipe& r) { r.nvfp4().row_scaled = true; });
  nv("Nvfp4Rht", [](Recipe& r) { r.nvfp4().rht = true; });
  nv("Nvfp4RhtNoSignMask", [](Recipe& r) { r.nvfp4().rht = true; r.nvfp4().rht_sign_mask = 0; });
  nv("Nvfp4FourOverSixMae448", [](Recipe& r) { r.nvfp4().fourover6 = true; });
  nv("Nvfp4FourOverSixMse256", [](Recipe& r) { r.nvfp4().fourover6 = true; r.nvfp4().fourover6_err = ErrMode::kMSE; r.nvfp4().e4m3_max = 256; });
  nv("Nvfp416x16FourOverSixMae256", [](Recipe& r) { r.nvfp4().tile_2d = true; r.nvfp4().fourover6 = true; r.nvfp4().e4m3_max = 256; });
  nv("Nvfp416x16FourOverSixMse448", [](Recipe& r) { r.nvfp4().tile_2d = true; r.nvfp4().fourover6 = true; r.nvfp4().fourover6_err = ErrMode::kMSE; });
  nv("Nvfp4RowScaledFourOverSix256", [](Recipe& r) { r.nvfp4().row_scaled = true; r.nvfp4().fourover6 = true; r.nvfp4().e4m3_max = 256; r.columnwise = false; });
  nv("Nvfp4Sr", [](Recipe& r) { r.nvfp4().stochastic = true; r.nvfp4().seed = 0x1234ABCDull; });
  nv("Nvfp416x16Sr", [](Recipe& r) { r.nvfp4().tile_2d = true; r.nvfp4().stochastic = true; r.nvfp4().seed = 77; });
  nv("Nvfp4RhtSr", [](Recipe& r) { r.nvfp4().rht = true; r.nvfp4().stochastic = true; r.nvfp4().seed = 0xFEEDull << 33; });
  nv("Nvfp41x16PyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; });
  nv("Nvfp416x16PyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; r.nvfp4().tile_2d = true; });
  nv("Nvfp4FourOverSixPyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; r.nvfp4().fourover6 = true; });
  nv("Nvfp41x16TorchAO", [](Recipe& r) { r.profile = Profile::kTorchAO; });
  nv("Nvfp41x16TorchAOBlockOnly", [](Recipe& r) { r.profile = Profile::kTorchAO; r.nvfp4().per_tensor_scale = false; });
  nv("Nvfp41x16RowOnly", [](Recipe& r) { r.columnwise = false; });
  nv("Nvfp41x16ColOnly", [](Recipe& r) { r.rowwise = false; });
  nv("Nvfp4RhtColOnly", [](Recipe& r) { r.nvfp4().rht = true; r.rowwise = false; });
  auto mx = [&](const std::string& label, auto f) {
    Recipe r = Recipe::of(Mxfp8Options{});
    f(r);
    v.push_back({label, r});
  };
  mx("Mxfp8E4m3Rceil", [](Recipe&) {});
  mx("Mxfp8E5m2Rceil", [](Recipe& r) { r.set_fp8_type(Fp8Type::kE5M2); });
  mx("Mxfp8E4m3Rceil32x32", [](Recipe& r) { r.mxfp8().tile_2d = true; });
  mx("Mxfp8E4m3Floor", [](Recipe& r) { r.mxfp8().scale_rule = MxScaleRule::kOcpFloor; });
  mx("Mxfp8E5m2Floor32x32", [](Recipe& r) { r.mxfp8().scale_rule = MxScaleRule::kOcpFloor; r.set_fp8_type(Fp8Type::kE5M2); r.mxfp8().tile_2d = true; });
  mx("Mxfp8E4m3Ocp", [](Recipe& r) { r.mxfp8().scale_rule = MxScaleRule::kOcpFloor; r.profile = Profile::kOCP; });
  mx("Mxfp8E5m2Ocp32x32", [](Recipe& r) { r.mxfp8().scale_rule = MxScaleRule::kOcpFloor; r.profile = Profile::kOCP; r.set_fp8_type(Fp8Type::kE5M2); r.mxfp8().tile_2d = true; });
  mx("Mxfp8E4m3TorchAORceil", [](Recipe& r) { r.profile = Profile::kTorchAO; });
  mx("Mxfp8E4m3TorchAOFloor", [](Recipe& r) { r.profile = Profile::kTorchAO; r.mxfp8().scale_rule = MxScaleRule::kOcpFloor; });
  // torchao's to_mx: every ScaleCalculationMode x E4M3/E5M2 (the torchao_device.cuh path of the generic kernel)
  mx("Mxfp8E5m2TorchAORceil", [](Recipe& r) { r.profile = Profile::kTorchAO; r.set_fp8_type(Fp8Type::kE5M2); });
  mx("Mxfp8E5m2TorchAOFloor", [](Recipe& r) { r.profile = Profile::kTorchAO; r.mxfp8().scale_rule = MxScaleRule::kOcpFloor; r.set_fp8_type(Fp8Type::kE5M2); });
  mx("Mxfp8E4m3TorchAOCeil", [](Recipe& r) { r.profile = Profile::kTorchAO; r.mxfp8().scale_rule = MxScaleRule::kCeil; });
  mx("Mxfp8E5m2TorchAOCeil", [](Recipe& r) { r.profile = Profile::kTorchAO; r.mxfp8().scale_rule = MxScaleRule::kCeil; r.set_fp8_type(Fp8Type::kE5M2); });
  mx("Mxfp8E4m3TorchAOEven", [](Recipe& r) { r.profile = Profile::kTorchAO; r.mxfp8().scale_rule = MxScaleRule::kEven; });
  mx("Mxfp8E5m2TorchAOEven", [](Recipe& r) { r.profile = Profile::kTorchAO; r.mxfp8().scale_rule = MxScaleRule::kEven; r.set_fp8_type(Fp8Type::kE5M2); });
  mx("Mxfp8E4m3RceilRowOnly", [](Recipe& r) { r.columnwise = false; });
  mx("Mxfp8E4m3RceilColOnly", [](Recipe& r) { r.rowwise = false; });
  auto fb = [&](const std::string& label, auto f) {
    Recipe r = Recipe::of(Fp8BlockOptions{});
    f(r);
    v.push_back({label, r});
  };
  fb("Fp8Block1x128E4m3", [](Recipe&) {});
  fb("Fp8Block1x128E4m3Pow2", [](Recipe& r) { r.set_pow2_scales(true); });
  fb("Fp8Block1x128E5m2", [](Recipe& r) { r.set_fp8_type(Fp8Type::kE5M2); });
  fb("Fp8Block1x128E4m3Eps1", [](Recipe& r) { r.set_eps(1.0f); });
  fb("Fp8Block128x128E4m3", [](Recipe& r) { r.fp8_block().tile_2d = true; });
  fb("Fp8Block128x128E4m3Pow2", [](Recipe& r) { r.fp8_block().tile_2d = true; r.set_pow2_scales(true); });
  fb("Fp8Block128x128E5m2Pow2Eps", [](Recipe& r) { r.fp8_block().tile_2d = true; r.set_pow2_scales(true); r.set_fp8_type(Fp8Type::kE5M2); r.set_eps(1e-3f); });
  fb("Fp8Block1x128PyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; });
  fb("Fp8Block1x128ColOnly", [](Recipe& r) { r.rowwise = false; });
  // Scales stored as UE8M0 bytes (scale_dtype=ue8m0, issue 24 item 2): the same kernels, byte scale stores
  fb("Fp8Block1x128E4m3Pow2Ue8m0", [](Recipe& r) { r.set_pow2_scales(true); r.fp8_block().ue8m0_scales = true; });
  fb("Fp8Block128x128E4m3Pow2Ue8m0", [](Recipe& r) { r.fp8_block().tile_2d = true; r.set_pow2_scales(true); r.fp8_block().ue8m0_scales = true; });
  fb("Fp8Block1x128E5m2Pow2EpsUe8m0", [](Recipe& r) { r.set_pow2_scales(true); r.set_fp8_type(Fp8Type::kE5M2); r.set_eps(1e-4f); r.fp8_block().ue8m0_scales = true; });
  fb("Fp8Block1x128PyRefPow2Ue8m0", [](Recipe& r) { r.profile = Profile::kTEPyRef; r.set_pow2_scales(true); r.fp8_block().ue8m0_scales = true; });
  fb("Fp8Block128x128ColOnlyPow2Ue8m0", [](Recipe& r) { r.fp8_block().tile_2d = true; r.rowwise = false; r.set_pow2_scales(true); r.fp8_block().ue8m0_scales = true; });
  auto ft = [&](const std::string& label, auto f) {
    Recipe r = Recipe::of(Fp8TensorOptions{});
    f(r);
    v.push_back({label, r});
  };
  ft("Fp8TensorE4m3", [](Recipe&) {});
  ft("Fp8TensorE5m2", [](Recipe& r) { r.set_fp8_type(Fp8Type::kE5M2); });
  ft("Fp8TensorE4m3Pow2", [](Recipe& r) { r.set_pow2_scales(true); });
  ft("Fp8TensorE4m3Eps", [](Recipe& r) { r.set_eps(1e-2f); });
  ft("Fp8TensorPyRef", [](Recipe& r) { r.profile = Profile::kTEPyRef; });
  ft("Fp8TensorRowOnly", [](Recipe& r) { r.columnwise = false; });
  auto m4 = [&](const std::string& label, MxScaleRule rule, Profile p, bool row = true, bool col = true) {
    v.push_back({label, Recipe::of(Mxfp4Options{.scale_rule = rule}, p, row, col)});
  };
  m4("Mxfp4TeRceil", MxScaleRule::kRceil, Profile::kTE);
  m4("Mxfp4TeFloor", MxScaleRule::kOcpFloor, Profile::kTE);
  m4("Mxfp4Ocp", MxScaleRule::kOcpFloor, Profile::kOCP);
  m4("Mxfp4TorchAOFloor", MxScaleRule::kOcpFloor, Profile::kTorchAO);
  m4("Mxfp4TorchAORceil", MxScaleRule::kRceil, Profile::kTorchAO);
  m4("Mxfp4TorchAOCeil", MxScaleRule::kCeil, Profile::kTorchAO);
  m4("Mxfp4TorchAOEven", MxScaleRule::kEven, Profile::kTorchAO);
  m4("Mxfp4RceilRowOnly", MxScaleRule::kRceil, Profile::kTE, true, false);
  m4("Mxfp4FloorColOnly", MxScaleRule::kOcpFloor, Profile::kTE, false, true);
  m4("Mxfp4TritonRoundUp", MxScaleRule::kRceil, Profile::kTritonKernels);
  m4("Mxfp4TritonRoundDown", MxScaleRule::kOcpFloor, Profile::kTritonKernels);
  m4("Mxfp4VllmCutlassEven", MxScaleRule::kEven, Profile::kVllmCutlass);
  m4("Mxfp4FbgemmCeil", MxScaleRule::kCeil, Profile::kFbgemm);
  m4("Mxfp4QuarkEven", MxScaleRule::kEven, Profile::kQuark);
  // Single-rule variants (as `qtc identify` builds them) of rules the kernels read by name and implement at both
  // values (path_rules.hpp, kCudaRules): each against the reference like every other case.
  auto variant = [](Profile base, const char* name, auto change) {
    ProfileRules pr = profile_rules(base);
    pr.name = name;
    change(pr);
    return register_profile_variant(pr);
  };
  const Profile recip = variant(Profile::kTE, "test_cuda_te_fp8_scale_reciprocal", [](ProfileRules& p) { p.fp8_scale_reciprocal = true; });
  const Profile nan_te = variant(Profile::kTE, "test_cuda_te_nan_amax", [](ProfileRules& p) { p.nan_amax = true; });
  const Profile py_inf = variant(Profile::kTEPyRef, "test_cuda_te_pyref_inf_amax_scale_one", [](ProfileRules& p) { p.fp8_inf_amax_scale_zero = false; });
  const Profile ao_floor = variant(Profile::kTorchAO, "test_cuda_torchao_no_tiny_floor", [](ProfileRules& p) { p.nvfp4_tiny_block_floor = false; });
  const Profile ao_nan = variant(Profile::kTorchAO, "test_cuda_torchao_nan_ignored", [](ProfileRules& p) { p.nan_amax = false; });
  const Profile ao_sat = variant(Profile::kTorchAO, "test_cuda_torchao_satfinite", [](ProfileRules& p) { p.mx_nonfinite = MxNonFinite::kSatFinite; });
  fb("Fp8Block1x128ScaleReciprocal", [&](Recipe& r) { r.profile = recip; });
  fb("Fp8Block128x128NanAmax", [&](Recipe& r) { r.profile = nan_te; r.fp8_block().tile_2d = true; });
  fb("Fp8Block1x128PyRefInfScaleOne", [&](Recipe& r) { r.profile = py_inf; });
  ft("Fp8TensorNanAmax", [&](Recipe& r) { r.profile = nan_te; });
  ft("Fp8TensorScaleReciprocal", [&](Recipe& r) { r.profile = recip; });
  ft("Fp8TensorPyRefInfScaleOne", [&](Recipe& r) { r.profile = py_inf; });
  nv("Nvfp41x16TorchAONoTinyFloor", [&](Recipe& r) { r.profile = ao_floor; });
  nv("Nvfp41x16TorchAONanIgnored", [&](Recipe& r) { r.profile = ao_nan; });
  mx("Mxfp8E4m3TorchAOSatFinite", [&](Recipe& r) { r.profile = ao_sat; });
  m4("Mxfp4TorchAOSatFinite", MxScaleRule::kRceil, ao_sat);
  return v;
}

struct Shape {
  int64_t M, K;
};
constexpr Shape kSmallShapes[] = {{16, 16}, {32, 48}, {48, 80}, {128, 128}, {304, 304}, {256, 272}, {1, 32}, {65, 80},
                                  {37, 45}};  // 37x45: odd M and K (MXFP4's half-filled last byte; FP8 partial blocks)
constexpr Shape kBigShapes[] = {{4096, 4096}, {8192, 5120}};

struct Case {
  size_t recipe;
  DType dtype;
  Shape shape;
  Input input;
  cuda::Nvfp4Kernel kernel = cuda::Nvfp4Kernel::kAuto;  ///< NVFP4: every case runs with kAuto and with kGeneric
  cuda::CastKernel cast = cuda::CastKernel::kAuto;      ///< MXFP8 / FP8: every case runs with kAuto and with kPipelined
};

/// The kinds whose cast kernels have a pipelined variant (LaunchOptions::cast_kernel).
bool has_cast_variant(const Recipe& r) {
  return r.kind() == RecipeKind::kMXFP8 || r.kind() == RecipeKind::kFP8Block || r.kind() == RecipeKind::kFP8Tensor;
}

bool is_small(const Shape& s) { return s.M * s.K <= 304 * 304; }

/// Whether the reference's rules allow this input for this recipe (shape multiples, RHT BF16 only). Cases that are
/// legal but refused by the gating table on this card are registered and skip with the table's reason.
bool legal(const Recipe& r, DType t, int64_t M, int64_t K) {
  try {
    r.validate_input(t, M, K);
    return true;
  } catch (const Error&) {
    return false;
  }
}

/// The gating table's verdict for this case on the current device (asked once a device is there).
gating::Support table_support(const Recipe& r, DType t, int64_t M, int64_t K) {
  const std::string why = cuda::unsupported_reason(r, t, M, K);
  return why.empty() ? gating::Support{.supported = true, .reason = {}} : gating::Support{.supported = false, .reason = why};
}

std::vector<Case> all_cases() {
  const auto rs = recipes();
  std::vector<Case> out;
  const bool small_only = env_flag("QTC_SMALL");
  for (size_t ri = 0; ri < rs.size(); ++ri) {
    const Recipe& r = rs[ri].r;
    for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& s : kSmallShapes) {
        if (!legal(r, t, s.M, s.K)) continue;  // illegal by the reference's rules (the gating table: skipped, below)
        for (Input k : qtc::testing::kAllFamilies) {
          out.push_back({ri, t, s, k});
          if (r.kind() == RecipeKind::kNVFP4) out.push_back({ri, t, s, k, cuda::Nvfp4Kernel::kGeneric});
          if (has_cast_variant(r)) out.push_back({ri, t, s, k, cuda::Nvfp4Kernel::kAuto, cuda::CastKernel::kPipelined});
        }
      }
      if (small_only) continue;
      for (const Shape& s : kBigShapes) {
        const bool f32_extra = t == DType::kF32 && rs[ri].label == "Nvfp41x16" && s.M == 4096;
        if (t != DType::kBF16 && !f32_extra) continue;
        if (!legal(r, t, s.M, s.K)) continue;
        out.push_back({ri, t, s, Input::kNormal});
        if (r.kind() == RecipeKind::kNVFP4) out.push_back({ri, t, s, Input::kNormal, cuda::Nvfp4Kernel::kGeneric});
        if (has_cast_variant(r)) out.push_back({ri, t, s, Input::kNormal, cuda::Nvfp4Kernel::kAuto, cuda::CastKernel::kPipelined});
      }
    }
  }
  return out;
}

const std::vector<RecipeCase>& recipe_table() {
  static const std::vector<RecipeCase> t = recipes();
  return t;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::ostringstream os;
  os << recipe_table()[c.recipe].label << dtype_name(c.dtype) << c.shape.M << "x" << c.shape.K << input_name(c.input)
     << (c.kernel == cuda::Nvfp4Kernel::kGeneric ? "GenericKernel" : "") << (c.cast == cuda::CastKernel::kPipelined ? "Pipelined" : "");
  std::string s = os.str();
  std::string out;
  for (char ch : s)
    if (std::isalnum(static_cast<unsigned char>(ch))) out += ch;
  return out;
}

/// GoogleTest prints a case by its readable name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << recipe_table()[c.recipe].label << " " << dtype_name(c.dtype) << " [" << c.shape.M << ", " << c.shape.K << "] "
      << input_name(c.input) << (c.kernel == cuda::Nvfp4Kernel::kGeneric ? " (generic NVFP4 kernel)" : "")
      << (c.cast == cuda::CastKernel::kPipelined ? " (pipelined cast kernel)" : "");
}

/// A device result (already on the host) against the reference, every output (planes, scales in their layout,
/// amax, scale_inv; any NaN equals any NaN): the library's first-mismatch message, with the block's inputs when x is
/// given and the scales are compact.
::testing::AssertionResult outputs_match(const QuantizedTensor& want, const QuantizedTensor& got, const HostMatrix* x = nullptr) {
  const MatrixView xv = x ? x->view() : MatrixView{};
  return qtc::testing::outputs_equal(want, got, x ? &xv : nullptr, qtc::testing::NanRule::kAnyNanEqual);
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

class Conformance : public ::testing::TestWithParam<Case> {};

TEST_P(Conformance, BitExactAgainstReference) {
  const Case& c = GetParam();
  const RecipeCase& rc = recipe_table()[c.recipe];
  QTC_GPU_GATE_FEATURE(gpu_unavailable_reason(), table_support(rc.r, c.dtype, c.shape.M, c.shape.K));
  const uint64_t seed = test_seed() ^ (c.recipe * 0x100000001B3ull) ^ (static_cast<uint64_t>(c.input) << 48);
  const HostMatrix x = make_input(c.input, c.dtype, c.shape.M, c.shape.K, seed);
  const std::string ctx = "recipe " + rc.r.name() + " (" + rc.label + "), input " + std::string(dtype_name(c.dtype)) + " [" +
                          std::to_string(c.shape.M) + ", " + std::to_string(c.shape.K) + "] " + input_name(c.input) +
                          ", seed " + hex(test_seed(), 16) + " (QTC_SEED; case seed " + hex(seed, 16) + ")" +
                          (c.kernel == cuda::Nvfp4Kernel::kGeneric ? ", generic NVFP4 kernel" : "") +
                          (c.cast == cuda::CastKernel::kPipelined ? ", pipelined cast kernel" : "");
  SCOPED_TRACE(ctx);
  const cuda::LaunchOptions launch{.nvfp4_kernel = c.kernel, .cast_kernel = c.cast};
  const QuantizedTensor want = ref::quantize(x.view(), rc.r);
  GpuInput in(x);
  cuda::DeviceQuantized dq = cuda::quantize(in.view, rc.r, in.s, ScaleLayout::kCompact, launch);
  const QuantizedTensor got = cuda::to_host(dq, in.s);
  ASSERT_TRUE(outputs_match(want, got, &x));

  if (!is_small(c.shape)) return;
  // Padded and swizzled scales written by the kernels: every byte, padding zero.
  // Every layout the plane has (FlashInfer's 8x4 one included), through the shared ScaleGeometry offset.
  for (ScaleLayout lay : {ScaleLayout::kPadded, ScaleLayout::kSwizzled, ScaleLayout::kSwizzled8x4, ScaleLayout::kDeepGemmPackedUe8m0}) {
    if (rc.r.kind() == RecipeKind::kFP8Tensor) break;
    if (!describe_plane(rc.r, PlaneKind::kRowwise, c.shape.M, c.shape.K).has_layout(lay)) continue;
    cuda::DeviceQuantized dl = cuda::quantize(in.view, rc.r, in.s, lay, launch);
    QuantizedTensor gl = cuda::to_host(dl, in.s);
    QuantizedTensor wl = want;
    ref::convert_layout(wl, lay);
    EXPECT_TRUE(outputs_match(wl, gl)) << "layout " << layout_name(lay);
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
      HostMatrix got_y(ot, yw.rows, yw.cols);
      got_y.bytes = std::move(yg);
      // BF16: NaN payloads may differ; any NaN equals any NaN (as for F32)
      EXPECT_TRUE(qtc::testing::matrices_equal(std::string(pk == PlaneKind::kRowwise ? "dequantized_rowwise " : "dequantized_columnwise ") +
                                                   (ot == DType::kF32 ? "F32" : "BF16"),
                                               yw, got_y, qtc::testing::NanRule::kAnyNanEqual));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Quantize, Conformance, ::testing::ValuesIn(all_cases()), case_name);

// ---------------------------------------------------------------------------------------------------------
// quantize_with_amax: the global amax supplied (FSDP2 shards, fused norms): NVFP4 and FP8 tensor.

// The fast NVFP4 kernel's packed eight-at-a-time E2M1 encoder (kernels/src/kinds/nvfp4_fast.cuh) against the scalar
// encoder of the generic kernel, on every float in each of its 8 slots.
TEST(Nvfp4PackedEncoder, MatchesScalarOnAllFloats) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  EXPECT_EQ(cuda::detail::e2m1x2_exhaustive_mismatches(), 0);
}

TEST(QuantizeWithAmax, EqualsReference) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  const uint64_t seed = test_seed();
  QTC_SEED_TRACE(seed);
  for (DType t : {DType::kF32, DType::kBF16}) {
    const HostMatrix x = make_input(Input::kNormal, t, 128, 96, seed);
    const float true_amax = ref::amax(x.view());
    for (const RecipeCase& rc : recipe_table()) {
      const Recipe& r = rc.r;
      const bool ok = (r.kind() == RecipeKind::kNVFP4 && !r.nvfp4_row_scaled()) || r.kind() == RecipeKind::kFP8Tensor;
      if (!ok || !cuda::unsupported_reason(r, t, 128, 96).empty()) continue;
      for (float a : {true_amax, true_amax * 0.5f, 0.0f, INFINITY})
        for (int path = 0; path < 2; ++path) {  // NVFP4: the auto and the generic kernel; FP8 tensor: auto and pipelined
          const bool nv = r.kind() == RecipeKind::kNVFP4;
          const cuda::LaunchOptions launch = path == 0 ? cuda::LaunchOptions{}
                                             : nv      ? cuda::LaunchOptions{.nvfp4_kernel = cuda::Nvfp4Kernel::kGeneric}
                                                       : cuda::LaunchOptions{.cast_kernel = cuda::CastKernel::kPipelined};
          SCOPED_TRACE(rc.label + " amax " + std::to_string(a) +
                       (path == 0 ? "" : nv ? " (generic NVFP4 kernel)" : " (pipelined cast kernel)"));
          const QuantizedTensor want = ref::quantize_with_amax(x.view(), r, a, a * 0.75f);
          GpuInput in(x);
          cuda::DeviceQuantized dq = cuda::allocate_quantized(r, t, 128, 96, ScaleLayout::kCompact, in.s);
          cuda::quantize_with_amax_into(in.view, dq, a, a * 0.75f, in.s, launch);
          EXPECT_TRUE(outputs_match(want, cuda::to_host(dq, in.s), &x));
        }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Determinism (issue 27 item 2): every quantize kernel writes the same bytes whatever the launch: repeated
// launches, another stream, two launches running at once on two streams, the grid-stride kernels (persistent
// tile kernels, the global amax pass) capped at 1, 3 and 7 CTAs, and the other kernels that serve the same call
// (input one element off 16-byte alignment: the scalar-load paths; NVFP4: the generic kernel instead of the fast
// one, and the fast kernel with other tile orders and stage counts: row-major; strips of 3 tiles, three stages). Every output buffer is poisoned with a different byte before each run, so a byte no kernel writes shows.

/// Sets the grid-stride cap for its scope.
struct GridCap {
  explicit GridCap(int64_t n) { cuda::detail::set_grid_stride_cap(n); }
  ~GridCap() { cuda::detail::set_grid_stride_cap(0); }
};
/// Allocates the outputs, fills every byte with `poison`, quantizes (stream-ordered, not synchronized).
cuda::DeviceQuantized quantize_poisoned(const cuda::DeviceMatrixView& v, const Recipe& r, cudaStream_t s, int poison,
                                        const cuda::LaunchOptions& launch = {}) {
  cuda::DeviceQuantized dq = cuda::allocate_quantized(r, v.dtype, v.rows, v.cols, ScaleLayout::kCompact, s);
  auto fill = [&](const cuda::DeviceBuffer& b) {
    if (b.bytes() != 0) QTC_CUDA_CHECK(cudaMemsetAsync(b.data(), poison, b.bytes(), s));
  };
  for (const auto* pl : {&dq.rowwise, &dq.columnwise}) {
    if (!pl->has_value()) continue;
    fill((*pl)->data);
    fill((*pl)->scale);
    fill((*pl)->amax);
  }
  fill(dq.scale_inv);
  fill(dq.workspace);
  cuda::quantize_into(v, dq, s, launch);
  return dq;
}

TEST(Determinism, EveryKernelSameBytesAcrossLaunchesStreamsGridsAndPaths) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  const uint64_t seed = test_seed();
  QTC_SEED_TRACE(seed);
  cudaStream_t s2 = nullptr;
  QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  struct Cfg {
    DType t;
    Shape shape;
    Input input;
  };
  // Ragged against every tile (64 x 128, 64 x 64, 128 x 128, 32 x 64); the larger one spans several waves of
  // CTAs when the grid is capped.
  const Cfg cfgs[] = {{DType::kBF16, {320, 288}, Input::kSpecial},
                      {DType::kF32, {320, 288}, Input::kHeavy},
                      {DType::kBF16, {1056, 1088}, Input::kHeavy}};
  int compared = 0;
  for (const RecipeCase& rc : recipe_table()) {
    for (const Cfg& cfg : cfgs) {
      const int64_t M = cfg.shape.M, K = cfg.shape.K;
      if (!legal(rc.r, cfg.t, M, K) || !cuda::unsupported_reason(rc.r, cfg.t, M, K).empty()) continue;
      const std::string ctx = rc.label + " " + std::string(dtype_name(cfg.t)) + " [" + std::to_string(M) + ", " +
                              std::to_string(K) + "] " + input_name(cfg.input);
      SCOPED_TRACE(ctx);
      const HostMatrix x = make_input(cfg.input, cfg.t, M, K, seed ^ (0x9E37ull * static_cast<uint64_t>(compared + 1)));
      GpuInput in(x);
      // The same input one element past a 16-byte boundary: no kernel's vectorized (16-byte) loads apply.
      const size_t es = dtype_size(cfg.t);
      cuda::DeviceBuffer off(x.bytes.size() + 16, in.s);
      QTC_CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(off.data()) + es, x.bytes.data(), x.bytes.size(),
                                     cudaMemcpyHostToDevice, in.s));
      const cuda::DeviceMatrixView unaligned{static_cast<const uint8_t*>(off.data()) + es, cfg.t, M, K};

      const QuantizedTensor base = cuda::to_host(quantize_poisoned(in.view, rc.r, in.s, 0x00), in.s);
      auto check = [&](const QuantizedTensor& got, const std::string& how) {
        EXPECT_TRUE(qtc::testing::outputs_equal(base, got, nullptr, qtc::testing::NanRule::kBitExact))
            << "not deterministic: " << how << " differs from the first launch";
      };
      for (int rep = 1; rep <= 2; ++rep)
        check(cuda::to_host(quantize_poisoned(in.view, rc.r, in.s, 0x11 * rep), in.s), "repeated launch " + std::to_string(rep));
      check(cuda::to_host(quantize_poisoned(in.view, rc.r, s2, 0xFF), s2), "launch on a second stream");
      {
        // Two launches in flight at once on two streams (ordered after the input upload by a sync).
        QTC_CUDA_CHECK(cudaStreamSynchronize(in.s));
        cuda::DeviceQuantized a = quantize_poisoned(in.view, rc.r, in.s, 0x5A);
        cuda::DeviceQuantized b = quantize_poisoned(in.view, rc.r, s2, 0xA5);
        check(cuda::to_host(a, in.s), "concurrent launch (first stream)");
        check(cuda::to_host(b, s2), "concurrent launch (second stream)");
      }
      for (int64_t cap : {1, 3, 7}) {
        const GridCap g(cap);
        check(cuda::to_host(quantize_poisoned(in.view, rc.r, in.s, 0x77), in.s),
              "grid-stride kernels capped at " + std::to_string(cap) + " CTAs");
      }
      check(cuda::to_host(quantize_poisoned(unaligned, rc.r, in.s, 0xC3), in.s), "unaligned input (scalar-load paths)");
      if (rc.r.kind() == RecipeKind::kNVFP4) {
        check(cuda::to_host(quantize_poisoned(in.view, rc.r, in.s, 0x3C, {.nvfp4_kernel = cuda::Nvfp4Kernel::kGeneric}), in.s),
              "generic NVFP4 kernel (LaunchOptions::nvfp4_kernel = generic)");
        check(cuda::to_host(quantize_poisoned(in.view, rc.r, in.s, 0x4B, {.nvfp4_strip = 1}), in.s),
              "row-major tile order (LaunchOptions::nvfp4_strip = 1)");
        {
          const GridCap g(5);
          check(cuda::to_host(quantize_poisoned(in.view, rc.r, in.s, 0xB4, {.nvfp4_stages = 3, .nvfp4_strip = 3}), in.s),
                "strips of 3 tiles, three stages, 5 CTAs (LaunchOptions::nvfp4_strip = 3, nvfp4_stages = 3)");
        }
      }
      if (has_cast_variant(rc.r)) {
        const cuda::LaunchOptions pipe{.cast_kernel = cuda::CastKernel::kPipelined};
        check(cuda::to_host(quantize_poisoned(in.view, rc.r, in.s, 0x69, pipe), in.s), "pipelined cast kernel (LaunchOptions::cast_kernel)");
        for (int64_t cap : {1, 3}) {
          const GridCap g(cap);
          check(cuda::to_host(quantize_poisoned(in.view, rc.r, in.s, 0x96, pipe), in.s),
                "pipelined cast kernel on " + std::to_string(cap) + " CTAs");
        }
      }
      ++compared;
    }
  }
  QTC_CUDA_CHECK(cudaStreamDestroy(s2));
  EXPECT_GT(compared, 100) << "too few recipe/shape cases compared";
}

// ---------------------------------------------------------------------------------------------------------
// Profile rules the kernels do not implement (path_rules.hpp: the check the vectorized CPU path makes too): a
// single-rule variant of a profile is refused naming the rule, never run with the rule it toggles ignored. Runs
// without a device (the rule check comes before the device's).

TEST(CudaRules, VariantTogglingAnUnimplementedRuleIsRefusedByName) {
  struct Toggle {
    const char* name;
    Profile base;
    void (*change)(ProfileRules&);
    RecipeKind kind;
    const char* rule;
  };
  const Toggle toggles[] = {
      {"test_cuda_te_neg_zero", Profile::kTE, [](ProfileRules& p) { p.nvfp4_neg_zero_positive = true; }, RecipeKind::kNVFP4, "rule nvfp4.neg_zero on"},
      {"test_cuda_te_nan_scale", Profile::kTE, [](ProfileRules& p) { p.nvfp4_nan_scale = true; }, RecipeKind::kNVFP4, "rule nvfp4.nan_scale on"},
      {"test_cuda_te_pyref_nan_ignored", Profile::kTEPyRef, [](ProfileRules& p) { p.nan_amax = false; }, RecipeKind::kNVFP4, "rule nan_amax off"},
      {"test_cuda_te_cast_nan", Profile::kTE, [](ProfileRules& p) { p.fp8_satfinite = false; }, RecipeKind::kFP8Block, "rule fp8.cast_overflow"},
      {"test_cuda_te_cast_nan_t", Profile::kTE, [](ProfileRules& p) { p.fp8_satfinite = false; }, RecipeKind::kFP8Tensor, "rule fp8.cast_overflow"},
      {"test_cuda_torchao_mx_jax", Profile::kTorchAO, [](ProfileRules& p) { p.mx_order = MxOrder::kJax; }, RecipeKind::kMXFP8, "rule mxfp8.order jax"},
  };
  for (const Toggle& t : toggles) {
    ProfileRules pr = profile_rules(t.base);
    pr.name = t.name;
    t.change(pr);
    Recipe r = Recipe::of(Recipe::default_options(t.kind));
    r.profile = register_profile_variant(pr);
    SCOPED_TRACE(std::string(t.name) + " " + r.name());
    const std::string why = cuda::unsupported_reason(r, DType::kBF16, 64, 128);
    EXPECT_NE(why.find(t.rule), std::string::npos) << "refusal: '" << why << "'";
    EXPECT_NE(why.find("the CUDA kernels"), std::string::npos) << why;
    if (gpu_unavailable_reason().empty()) {  // the quantize call itself refuses too
      const HostMatrix x = make_input(Input::kNormal, DType::kBF16, 64, 128, test_seed());
      GpuInput in(x);
      EXPECT_THROW(cuda::quantize(in.view, r, in.s), Error);
    }
  }
}

// The fast NVFP4 kernel asked for explicitly on a call it cannot serve: an error naming why, not another kernel.
TEST(Nvfp4KernelChoice, FastRefusesWhatItCannotServe) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  const HostMatrix x = make_input(Input::kNormal, DType::kF32, 64, 128, test_seed());
  GpuInput in(x);
  try {
    (void)cuda::quantize(in.view, Recipe::of(Nvfp4Options{}), in.s, ScaleLayout::kCompact, {.nvfp4_kernel = cuda::Nvfp4Kernel::kFast});
    ADD_FAILURE() << "F32 input on the fast NVFP4 kernel was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BF16 or F16"), std::string::npos) << e.what();
  }
  // ... and where it can serve the call, the same bytes as the generic kernel.
  const HostMatrix xb = make_input(Input::kHeavy, DType::kBF16, 128, 256, test_seed());
  GpuInput inb(xb);
  const Recipe r = Recipe::of(Nvfp4Options{});
  const QuantizedTensor fast = cuda::to_host(cuda::quantize(inb.view, r, inb.s, ScaleLayout::kCompact, {.nvfp4_kernel = cuda::Nvfp4Kernel::kFast}), inb.s);
  const QuantizedTensor gen = cuda::to_host(cuda::quantize(inb.view, r, inb.s, ScaleLayout::kCompact, {.nvfp4_kernel = cuda::Nvfp4Kernel::kGeneric}), inb.s);
  EXPECT_TRUE(qtc::testing::outputs_equal(gen, fast, nullptr, qtc::testing::NanRule::kBitExact));
  EXPECT_THROW((void)cuda::quantize(inb.view, r, inb.s, ScaleLayout::kCompact, {.nvfp4_stages = 4}), Error);
}

// ---------------------------------------------------------------------------------------------------------
// The backend object (`qtc verify --backend cuda`).

TEST(CudaBackend, MatchesCpuBackend) {
  auto be = make_cuda_backend();
  ASSERT_EQ(be->name(), "cuda");
  if (!be->unavailable_reason().empty()) {
    EXPECT_EQ(be->unavailable_reason(), gpu_unavailable_reason());
  }
  QTC_GPU_GATE(gpu_unavailable_reason());
  auto cpu = make_cpu_backend();
  const HostMatrix x = make_input(Input::kHeavy, DType::kBF16, 64, 128, test_seed());
  for (const RecipeCase& rc : recipe_table()) {
    SCOPED_TRACE(rc.label);
    ASSERT_EQ(be->unsupported_reason(rc.r, DType::kBF16, 64, 128), "");
    const QuantizedTensor want = cpu->quantize(x.view(), rc.r);
    const QuantizedTensor got = be->quantize(x.view(), rc.r);
    EXPECT_TRUE(outputs_match(want, got, &x));
    const PlaneKind pk = want.rowwise ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
    const HostMatrix yw = cpu->dequantize(want, pk, DType::kF32);
    const HostMatrix yg = be->dequantize(got, pk, DType::kF32);
    EXPECT_TRUE(qtc::testing::matrices_equal("dequantized", yw, yg, qtc::testing::NanRule::kAnyNanEqual));
  }
  Recipe bad = Recipe::of(Nvfp4Options{});
  EXPECT_NE(be->unsupported_reason(bad, DType::kBF16, 17, 32), "") << "M % 16 != 0 must be refused with the rule";
}

}  // namespace
}  // namespace qtc::test
