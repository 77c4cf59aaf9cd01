/// \file profile.cpp
/// \brief The profile records (the one list of profiles), their description and the variants that
///        `qtc identify` builds by toggling one rule (the toggles: rule_toggles.cpp).
#include "qtc/profile.hpp"

#include <deque>
#include <mutex>

#include "qtc/error.hpp"

namespace qtc {

namespace detail {
/// Appends the MXFP4 profiles of the inference engines' quantizers (issue 24), in Profile order after ml_dtypes_cast.
void append_mxfp4_engine_profiles(std::vector<ProfileRules>& v);
/// mx_order_text of those profiles' orders.
std::string_view engine_mx_order_text(MxOrder o);
/// Their mxfp4.nonfinite_block text (and that of TE's PyTorch reference, `te_reference`); "" for another order.
std::string_view engine_mx4_nonfinite_text(MxOrder o, bool te_reference);
/// The mxfp4.order text of TE's PyTorch reference (ProfileRules::mxfp4_te_reference).
std::string_view te_reference_mx4_order_text();
/// Appends the profiles of GPU paths whose CPU path has its own profile (compressed_tensors_triton), after those.
void append_gpu_path_profiles(std::vector<ProfileRules>& v, const ProfileRules& compressed_tensors);
/// nvfp4_order_text / mx_order_text of their orders.
std::string_view gpu_path_nvfp4_order_text();
std::string_view gpu_path_mx_order_text();
}  // namespace detail

namespace {

std::vector<ProfileRules> make_builtin() {
  std::vector<ProfileRules> v;
  ProfileRules te;
  te.id = Profile::kTE;
  te.name = "te";
  te.version = 1;
  te.follows = "TransformerEngine's CUDA kernels (2.x)";
  te.mx_scale_rules = {MxScaleRule::kRceil, MxScaleRule::kOcpFloor};
  te.mxfp4_scale_rules = {MxScaleRule::kRceil, MxScaleRule::kOcpFloor};
  v.push_back(te);

  ProfileRules py = te;
  py.id = Profile::kTEPyRef;
  py.name = "te_pyref";
  py.follows = "TransformerEngine's pure-PyTorch and C++ test references";
  py.nan_amax = true;
  py.nvfp4_neg_zero_positive = true;
  py.nvfp4_nan_scale = true;
  py.fp8_inf_amax_scale_zero = true;
  py.nvfp4_stochastic = false;
  py.version = 2;  // 1: no MXFP4 (TE's only MXFP4 rule is this reference's pow_2_scales mode: conformance/README.md)
  py.follows = "TransformerEngine's pure-PyTorch and C++ test references (MXFP4: NVFP4QuantizerRef pow_2_scales, 1x32)";
  py.mxfp4_te_reference = true;
  py.mxfp4_scale_rules = {MxScaleRule::kRceil};
  v.push_back(py);

  ProfileRules ocp;
  ocp.id = Profile::kOCP;
  ocp.name = "ocp";
  ocp.follows = "OCP Microscaling Formats (MX) v1.0";
  ocp.nvfp4 = ocp.fp8_block = ocp.fp8_tensor = false;
  ocp.nan_amax = true;
  ocp.mx_nonfinite = MxNonFinite::kNaN;
  ocp.mx_scale_rules = {MxScaleRule::kOcpFloor};
  ocp.mxfp4_scale_rules = {MxScaleRule::kOcpFloor};
  v.push_back(ocp);

  ProfileRules ao;
  ao.id = Profile::kTorchAO;
  ao.name = "torchao";
  ao.version = 2;  // 1: two-level NVFP4 dividing by the total scale, MXFP8 with TE's scale arithmetic
  ao.follows = "torchao 0.18.0 (nvfp4_quantize, to_mx)";
  ao.fp8_block = ao.fp8_tensor = false;
  ao.nan_amax = true;
  ao.nvfp4_order = Nvfp4Order::kTorchAO;
  ao.nvfp4_nan_scale = true;
  ao.nvfp4_tiny_block_floor = true;
  ao.nvfp4_single_level = true;
  ao.nvfp4_stochastic = false;
  ao.mx_order = MxOrder::kTorchAO;
  ao.mx_nonfinite = MxNonFinite::kNaN;
  ao.mx_scale_rules = {MxScaleRule::kRceil, MxScaleRule::kOcpFloor, MxScaleRule::kCeil, MxScaleRule::kEven};
  ao.mxfp4_scale_rules = ao.mx_scale_rules;  // to_mx(elem_dtype=torch.float4_e2m1fn_x2), every ScaleCalculationMode
  v.push_back(ao);

  // The FP8 quantizers of the model toolkits and inference engines (issue 25). Each defines FP8 block and FP8
  // tensor only; every rule below is read from the implementation's code (the dump scripts under
  // conformance/peers/ name the functions).
  ProfileRules fp8_peer;
  fp8_peer.nvfp4 = fp8_peer.mxfp8 = fp8_peer.mxfp4 = false;
  fp8_peer.mxfp4_scale_rules.clear();
  fp8_peer.nan_amax = true;  // torch.amax / torch.max propagate NaN
  fp8_peer.fp8_torch_nan = true;

  ProfileRules mo = fp8_peer;
  mo.id = Profile::kModelOpt;
  mo.name = "modelopt";
  mo.follows = "nvidia-modelopt 0.47.0 FP8QTensor.quantize (per tensor; block_sizes {-1: 128} / {-1: 128, -2: 128})";
  mo.fp8_form = mo.fp8_tensor_form = Fp8Form::kInvDiv;
  mo.fp8_input_dtype_arith = true;
  mo.fp8_satfinite = false;
  mo.fp8_zero_scale = Fp8ZeroScale::kKeep;
  mo.fp8_block_amax_nan_lanes = true;
  // ... and its NVFP4 and MXFP8 quantizers (NVFP4QTensor.quantize with get_weights_scaling_factor_2,
  // MXFP8QTensor.quantize): one record per implementation.
  mo.follows = "nvidia-modelopt 0.47.0 (NVFP4QTensor.quantize with get_weights_scaling_factor_2, MXFP8QTensor.quantize, "
               "FP8QTensor.quantize per tensor and with block_sizes {-1: 128} / {-1: 128, -2: 128})";
  mo.nvfp4 = mo.mxfp8 = true;
  mo.nvfp4_order = Nvfp4Order::kModelOpt;
  mo.nvfp4_nan_scale = true;
  mo.nvfp4_neg_zero_positive = true;
  mo.nvfp4_stochastic = false;
  mo.mx_order = MxOrder::kModelOpt;
  mo.mx_nonfinite = MxNonFinite::kNaN;  // NaN reaches the block amax (then the scale 0x00 of the order)
  mo.mx_scale_rules = {MxScaleRule::kRceil};
  v.push_back(mo);

  ProfileRules ct = fp8_peer;
  ct.id = Profile::kCompressedTensors;
  ct.name = "compressed_tensors";
  ct.follows = "compressed-tensors 0.20.0 FP8 / FP8_BLOCK presets (calculate_qparams, compute_dynamic_scales_and_zp, quantize)";
  ct.fp8_form = ct.fp8_tensor_form = Fp8Form::kInvDiv;
  ct.fp8_input_dtype_arith = true;
  ct.fp8_satfinite = true;  // torch.clamp(x / s, -448, 448) before the cast
  ct.fp8_zero_scale = Fp8ZeroScale::kDtypeEps;
  ct.fp8_block_amax_nan_lanes = true;
  ct.fp8_zero_point_add = true;
  ct.fp8_bf16_nan_positive = true;
  // ... and its NVFP4, MXFP8 and MXFP4 presets (ct_peers.cpp; conformance/peers/compressed_tensors_dump.py).
  ct.version = 2;  // 1: FP8 / FP8_BLOCK only
  ct.follows = "compressed-tensors 0.20.0 presets NVFP4, MXFP8, MXFP4, FP8, FP8_BLOCK (generate_gparam, calculate_qparams, "
               "compute_dynamic_scales_and_zp, quantize, pack_fp4_to_uint8, compress_mx_scale; CPU)";
  ct.nvfp4 = ct.mxfp8 = ct.mxfp4 = true;
  ct.nvfp4_order = Nvfp4Order::kCompressedTensors;
  ct.nvfp4_nan_scale = true;           // the NaN's sign by PyTorch's lane (nvfp4.order compressed_tensors)
  ct.nvfp4_neg_zero_positive = true;   // -0.0 + the zero point is +0 (NaN data: the order's text)
  ct.nvfp4_stochastic = false;
  ct.mx_order = MxOrder::kCompressedTensors;
  ct.mx_nonfinite = MxNonFinite::kNaN;  // NaN reaches the block amax (then the scale of the order's NaN lanes)
  ct.mx_scale_rules = {MxScaleRule::kPow2Round};
  ct.mxfp4_scale_rules = {MxScaleRule::kPow2Round};
  v.push_back(ct);

  ProfileRules vl = fp8_peer;
  vl.id = Profile::kVllm;
  vl.name = "vllm";
  vl.follows = "vLLM 0.33.0 QuantFP8.forward_native (per tensor) and _quantize_group_native (groups of 128)";
  vl.fp8_form = Fp8Form::kInvDiv;            // _quantize_group_native: x / s
  vl.fp8_tensor_form = Fp8Form::kInvMulRcp;  // forward_native: x * s.reciprocal()
  vl.fp8_tensor_amax_full_reduction = true;
  vl.fp8_satfinite = true;         // clamp to +-448 before the cast
  vl.fp8_pow2 = Fp8Pow2::kCeilLog2;
  vl.fp8_scale_min = static_cast<float>(1.0 / (448.0 * 512.0));
  // ... and its NVFP4 emulation reference.
  vl.follows = "vLLM 0.33.0 ref_nvfp4_quant (global_scale = 2688 / amax in the input's dtype, as vLLM's tests), "
               "QuantFP8.forward_native (per tensor) and _quantize_group_native (groups of 128)";
  vl.nvfp4 = true;
  vl.nvfp4_order = Nvfp4Order::kVllm;
  vl.nvfp4_nan_scale = true;
  vl.nvfp4_neg_zero_positive = true;
  vl.nvfp4_stochastic = false;
  v.push_back(vl);

  ProfileRules dg = fp8_peer;
  dg.id = Profile::kDeepGemm;
  dg.name = "deepgemm";
  dg.follows = "DeepGEMM deep_gemm/utils/math.py per_token_cast_to_fp8 / per_block_cast_to_fp8 (amax clamp 1e-4: eps)";
  dg.fp8_form = dg.fp8_tensor_form = Fp8Form::kInvMulRcp;
  dg.fp8_satfinite = false;
  dg.fp8_pow2 = Fp8Pow2::kCeilBits;
  v.push_back(dg);

  ProfileRules vt = fp8_peer;
  vt.id = Profile::kVllmTriton;
  vt.name = "vllm_triton";
  vt.follows = "vLLM 0.33.0 Triton _per_token_group_quant_fp8 (GPU; read from the code, eps 1e-10 is the recipe's eps)";
  vt.nan_amax = false;  // tl.max ignores NaN
  vt.fp8_torch_nan = false;
  // 1: data x / s (IEEE), a NaN data value NaN (0x7F); the H200 dumps of 2026-12-03 refuted both. 2: rcp.approx
  // modelled as RN(1 / s) (534 of 540 H200 dumps). 3: rcp.approx from its measured table (qtc/rcp_approx.hpp).
  vt.version = 3;
  vt.fp8_form = vt.fp8_tensor_form = Fp8Form::kRcpMaxMulRcp;  // y / y_s is div.full.f32: y * rcp.approx(y_s)
  vt.fp8_clamp_nan = Fp8ClampNaN::kPlusMax;  // tl.clamp(NaN, fp8_min, fp8_max) -> +448 on sm_90 (NaN and Inf / Inf)
  vt.fp8_satfinite = true;  // tl.clamp to +-448
  vt.fp8_pow2 = Fp8Pow2::kCeilLog2;
  v.push_back(vt);

  // SGLang 0.5.23, sglang/kernels/ops/quantization/fp8_kernel.py (GPU only; read from the code, no vector yet):
  // absmax = max(tl.max(|y|), eps) (NaN ignored), y_s = absmax / 448 (a runtime float32 division).
  ProfileRules sg = vt;
  sg.id = Profile::kSglangTriton;
  sg.name = "sglang_triton";
  sg.follows = "SGLang 0.5.23 Triton _per_token_group_quant_8bit (row-major scales; GPU, read from the code)";
  // y_s = absmax / bit8_max is div.full.f32: absmax * rcp.approx(448) = absmax * RN(1/448); y * (1.0 / y_s): y * rcp(y_s)
  sg.fp8_form = sg.fp8_tensor_form = Fp8Form::kRcpMaxMulRcp;
  sg.fp8_clamp_nan = Fp8ClampNaN::kMinusMax;  // runtime bounds: NaN -> -448
  sg.fp8_pow2 = Fp8Pow2::kNone;                            // the row-major kernel has no UE8M0 option
  v.push_back(sg);

  ProfileRules sc = vt;
  sc.id = Profile::kSglangTritonColMajor;
  sc.name = "sglang_triton_colmajor";
  sc.follows = "SGLang 0.5.23 Triton _per_token_group_quant_8bit_colmajor (SCALE_UE8M0: exp2(ceil(log2|y_s|)); GPU, read from the code)";
  sc.fp8_form = sc.fp8_tensor_form = Fp8Form::kRcpMaxMulRcp;  // absmax * rcp(448), y * rcp(y_s) (div.full.f32)
  sc.fp8_clamp_nan = Fp8ClampNaN::kMinusMax;
  sc.fp8_pow2 = Fp8Pow2::kCeilLog2;
  v.push_back(sc);

  // JAX's block-scale quantizer (jax.nn.scaled_dot_general) on XLA CPU.
  ProfileRules jx;
  jx.id = Profile::kJax;
  jx.name = "jax";
  // 1: NaN propagated into every F32 block amax (XLA's vectorized reduce drops it: 403 of 405 dumps). 2: NVFP4 block
  // maxima of BF16 / F16 inputs still propagated NaN (their xs = x / global_scale is float32: the 8-lane rule too),
  // and their block scale divided by 6 (MAX is then a constant of the input dtype: max|xs| * RN(1/6)).
  jx.version = 3;
  jx.follows = "JAX 0.10.2 / 0.11.0 jax._src.cudnn.scaled_matmul_stablehlo.quantize (mxfp8, nvfp4 with global_scale "
               "amax / 2688) on XLA CPU";
  jx.fp8_block = jx.fp8_tensor = jx.mxfp4 = false;
  jx.mxfp4_scale_rules.clear();
  jx.nan_amax = true;
  jx.nvfp4_order = Nvfp4Order::kJax;
  jx.nvfp4_nan_scale = true;
  jx.nvfp4_stochastic = false;
  jx.mx_order = MxOrder::kJax;
  jx.mx_nonfinite = MxNonFinite::kNaN;
  jx.mx_scale_rules = {MxScaleRule::kRceil};
  v.push_back(jx);

  // Quantizers written with a library's own casts, no quantization library (issue 25; conformance/peers/
  // cast_mx_dump.py): MXFP8 scale (amax / elem_max) cast to float8_e8m0fnu, data (x / scale) cast to FP8; float32.
  // The files carry scale_rule rceil (the key's default): the E8M0 rounding is the cast's, named by mxfp8.order.
  ProfileRules tc;
  tc.id = Profile::kTorchCast;
  tc.name = "torch_cast";
  tc.follows = "PyTorch 2.11 casts: MXFP8 (amax / elem_max).to(torch.float8_e8m0fnu), (x / scale.float()).to(torch.float8_*)";
  tc.nvfp4 = tc.fp8_block = tc.mxfp4 = false;
  // FP8 per tensor as users write it with the casts (conformance/peers/cast_dump.py): amax = torch.max(|x|) (float32,
  // NaN 0xFFFFFFFF from the full reduction), scale = 448 / amax, (x * scale).to(float8), scale_inv = 1 / scale.
  tc.fp8_tensor = true;
  tc.fp8_tensor_form = Fp8Form::kCast;
  tc.fp8_tensor_amax_full_reduction = true;
  tc.fp8_torch_nan = true;
  tc.fp8_satfinite = false;
  tc.version = 2;  // 1: MXFP8 only
  tc.mxfp4_scale_rules.clear();
  tc.nan_amax = true;  // torch.amax propagates NaN
  tc.nvfp4_stochastic = false;
  tc.mx_order = MxOrder::kTorchCast;
  tc.mx_nonfinite = MxNonFinite::kNaN;
  tc.mx_scale_rules = {MxScaleRule::kRceil};
  v.push_back(tc);

  ProfileRules md = tc;
  md.id = Profile::kMlDtypesCast;
  md.name = "ml_dtypes_cast";
  md.follows = "ml_dtypes 0.7 casts: MXFP8 float8_e8m0fnu scale and float8_* data; NVFP4 S = amax / 2688, float8_e4m3fn "
               "block scale (bamax / 6) / S, float4_e2m1fn data x / (sf * S)";
  md.nvfp4 = true;
  md.nvfp4_order = Nvfp4Order::kMlDtypesCast;
  md.nvfp4_nan_scale = true;
  md.mx_order = MxOrder::kMlDtypesCast;
  md.fp8_tensor_amax_full_reduction = false;  // np.max(np.abs(x)) returns the input's NaN, sign cleared
  md.version = 2;                             // 1: MXFP8 and NVFP4 only
  v.push_back(md);

  detail::append_mxfp4_engine_profiles(v);  // triton_kernels, vllm_cutlass, fbgemm, quark (profile_engines.cpp)
  detail::append_gpu_path_profiles(v, ct);  // compressed_tensors_triton (profile_gpu_paths.cpp)
  return v;
}

const std::vector<ProfileRules>& builtin() {
  static const std::vector<ProfileRules> v = make_builtin();
  return v;
}

std::mutex g_variant_mutex;
std::deque<ProfileRules>& variants() {
  static std::deque<ProfileRules> v;  // a deque: references stay valid as variants are added
  return v;
}

const char* yes(bool b) { return b ? "yes" : "no"; }

}  // namespace

std::string_view mx_scale_rule_name(MxScaleRule r) {
  switch (r) {
    case MxScaleRule::kRceil: return "rceil";
    case MxScaleRule::kOcpFloor: return "ocp_floor";
    case MxScaleRule::kCeil: return "ceil";
    case MxScaleRule::kEven: return "even";
    case MxScaleRule::kPow2Round: return "pow2_round";
  }
  return "?";
}

std::string_view fp8_form_name(Fp8Form f) {
  switch (f) {
    case Fp8Form::kTE: return "te: scale = fp8_max / amax, data x * scale, stored 1 / scale";
    case Fp8Form::kInvDiv: return "s = amax / fp8_max, data x / s, stored s";
    case Fp8Form::kInvMulRcp: return "s = amax / fp8_max, data x * (1 / s), stored s";
    case Fp8Form::kRcpMaxDiv: return "s = amax * RN(1 / fp8_max), data x / s, stored s";
    case Fp8Form::kRcpMaxMulRcp:
      return "s = amax * rcp(fp8_max), data x * rcp(s), rcp = sm_90's rcp.approx.f32 (RN(1 / s) +- 1 ulp by its measured "
             "table; Triton's float32 `/` is div.full.f32 = a * rcp.approx(b)), stored s";
    case Fp8Form::kCast:
      return "cast: scale = fp8_max / amax unguarded (0 -> Inf, Inf -> 0), data the library's float8 cast of x * scale "
             "(not saturating), stored 1 / scale";
  }
  return "?";
}

std::span<const ProfileRules> all_profiles() { return builtin(); }

std::string_view nvfp4_order_text(Nvfp4Order o) {
  switch (o) {
    case Nvfp4Order::kTE: return "te: sf = e4m3(bamax * (S_enc * RN(1/6))), data x * (1 / (sf * S_dec))";
    case Nvfp4Order::kTorchAO:
      return "torchao: f32; sf = e4m3(clamp((bamax / 6) / (amax / 2688), 2^-6, 448)), data clamp(x * ((1 / (amax / 2688)) / sf), -6, 6)";
    case Nvfp4Order::kModelOpt:
      return "modelopt: f32; S = amax / 2688; sf = e4m3(clamp(bamax / (6 * S), 2^-9, 448)); data x / (sf * S), "
             "E2M1 by searchsorted (-0.0 -> 0x0, NaN -> 0x7)";
    case Nvfp4Order::kJax:
      return "jax: XLA CPU f32 with denormals flushed; xs = x * RN(1 / (amax / 2688)); sf = e4m3(clip(max|xs| / 6, 0, 448)) "
             "(BF16 / F16 x: max|xs| * RN(1/6)); "
             "data XLA E2M1 of clip(xs * RN(1 / sf), -6, 6) (NaN -> 0x8; a zero block is 0 * Inf); tensors of >= 4096 "
             "elements (any input dtype: x / global_scale is float32): block amax by XLA's 8-lane maxps reduction";
    case Nvfp4Order::kVllm:
      return "vllm: gs = T(T(1 / amax) * 2688) in the input dtype T; sf = e4m3(clamp(gs * (bamax * RN(1/6)), +-448)); data "
             "x * rcp(sf * rcp(gs)), rcp(0) = 1e-8; clamp +-6; value buckets (-0.0 -> 0x0, NaN -> 0x8)";
    case Nvfp4Order::kCompressedTensors:
      return "compressed_tensors: gs = T(T(1 / max(amax, tiny_T)) * 2688) in the input dtype T (NaN, Inf -> 1; amax Inf -> "
             "0); sf = e4m3(clamp(gs * T(bpos / 6), +-448)), 0 -> 0.125 (0x20); data clamp(x / (sf / gs) + 0, +-6) by value "
             "buckets, sign from signbit (a negative rounding to 0 -> 0x8, -0.0 -> 0x0; NaN -> 0x0, BF16 input 0x8)";
    case Nvfp4Order::kMlDtypesCast:
      return "ml_dtypes_cast: f32; S = amax / 2688; sf = float8_e4m3fn((bamax / 6) / S) (past 464: NaN); data "
             "float4_e2m1fn(x / (float(sf) * S)) (RN-even, saturating; NaN -> 0x8, negative NaN -> 0x0)";
    case Nvfp4Order::kCompressedTensorsTriton: return detail::gpu_path_nvfp4_order_text();  // profile_gpu_paths.cpp
  }
  return "?";
}

std::string_view mx_order_text(MxOrder o) {
  switch (o) {
    case MxOrder::kTE: return "te: E8M0 from bamax * RN(1/elem_max); data x * 2^(127-e), satfinite";
    case MxOrder::kTorchAO:
      return "torchao to_mx: rceil ceil(log2f(bamax / elem_max)), data x * 2^(127-e) (1.0 for e=0); floor/ceil/even from "
             "bamax's bits, data x / max(2^(e-127), 2^-126); clamp +-elem_max";
    case MxOrder::kModelOpt:
      return "modelopt: e = ceil(log2f(bamax / 448)) if > 0 else -127, clamp [-127, 127]; data clamp(x * 2^(127-e), +-448)";
    case MxOrder::kJax:
      return "jax: in the input dtype T, E8M0 rounded up from T(bamax / elem_max) (F16: T(bamax * T(1 / elem_max))), a NaN "
             "-> 0x00; data T(x * T(1 / T(2^(e-127)))) (e = 0: 2^-127, F16 2^-15), clip +-elem_max; XLA CPU flushes denormals; "
             "F32 tensors of >= 4096 elements: block amax by XLA's 8-lane maxps reduction (a NaN drops its lane's earlier "
             "values, one reaching the last step gives -Inf: 0xFF)";
    case MxOrder::kCompressedTensors:
      return "compressed_tensors: in the input dtype T, scale rule pow2_round: bpos rounded to a power of two on its bits "
             "(mantissa >= 0.75 up), e = clamp(127 + floor(log2) - emax_elem, 0, 255), scale T(2^(e-127)), 0 -> 1, stored "
             "127 + floor(log2(scale)); data T(x / scale) + 0, clamp +-elem_max, PyTorch's cast (E2M1: value buckets)";
    case MxOrder::kTorchCast:
      return "torch_cast: f32; e = torch float8_e8m0fnu cast of bamax / elem_max (up iff mantissa bit 22 set and the value is "
             "normal or has lower bits; sign dropped; NaN/Inf -> 0xFF); data float8(x / float(e)), float(0x00) = 2^-127, "
             "float(0xFF) NaN; non-saturating cast";
    case MxOrder::kMlDtypesCast:
      return "ml_dtypes_cast: f32; e = ml_dtypes float8_e8m0fnu cast of bamax / elem_max (as torch for normals; subnormals to "
             "the nearest of 2^-127, 2^-126; zero, NaN -> 0xFF); data float8(x / float(e)); non-saturating cast, E5M2 NaN 0x7E|s";
    case MxOrder::kTritonKernels:
    case MxOrder::kVllmCutlass:
    case MxOrder::kFbgemm:
    case MxOrder::kQuark: return detail::engine_mx_order_text(o);  // profile_engines.cpp
    case MxOrder::kCompressedTensorsTriton: return detail::gpu_path_mx_order_text();
  }
  return "?";
}

const ProfileRules& profile_rules(Profile p) {
  const auto i = static_cast<size_t>(p);
  if (i < builtin().size()) return builtin()[i];
  std::lock_guard<std::mutex> lock(g_variant_mutex);
  const size_t vi = i - builtin().size();
  QTC_CHECK(vi < variants().size(), "unknown profile id ", i);
  return variants()[vi];
}

Profile profile_from_name(std::string_view name) {
  for (const auto& p : builtin())
    if (p.name == name) return p.id;
  {
    std::lock_guard<std::mutex> lock(g_variant_mutex);
    for (const auto& p : variants())
      if (p.name == name) return p.id;
  }
  QTC_FAIL("metadata key 'profile': unknown value '", std::string(name), "' (expected one of: ", profile_names(), ")");
}

std::string profile_names() {
  std::string s;
  for (const auto& p : builtin()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

Profile register_profile_variant(const ProfileRules& rules) {
  std::lock_guard<std::mutex> lock(g_variant_mutex);
  for (const auto& p : builtin()) QTC_CHECK(p.name != rules.name, "profile variant '", rules.name, "' takes a built-in name");
  for (const auto& p : variants())
    if (p.name == rules.name) return p.id;  // the same variant registered again (identify, file after file)
  const size_t id = builtin().size() + variants().size();
  QTC_CHECK(id < 256, "too many profile variants");
  variants().push_back(rules);
  variants().back().id = static_cast<Profile>(id);
  return variants().back().id;
}

std::vector<std::pair<std::string, std::string>> ProfileRules::describe() const {
  std::vector<std::pair<std::string, std::string>> d;
  std::string kinds;
  for (auto [on, n] : {std::pair{nvfp4, "nvfp4"}, {mxfp8, "mxfp8"}, {fp8_block, "fp8_block"}, {fp8_tensor, "fp8_tensor"},
                       {mxfp4, "mxfp4"}})
    if (on) kinds += (kinds.empty() ? "" : ", ") + std::string(n);
  d.emplace_back("recipes", kinds);
  if (nvfp4 || fp8_block || fp8_tensor)
    d.emplace_back("nan_amax", nan_amax ? "propagate (a NaN makes the NVFP4/FP8 block and tensor amax NaN)" : "ignore (maxNum)");
  if (nvfp4) {
    d.emplace_back("nvfp4.order", std::string(nvfp4_order_text(nvfp4_order)));
    d.emplace_back("nvfp4.zero_and_tiny_block_scale",
                   nvfp4_order == Nvfp4Order::kModelOpt
                       ? "zero -> 1.0 (0x38), tiny clamped up to 2^-9 (0x01); all-zero tensor: NaN (0xFF)"
                   : nvfp4_order == Nvfp4Order::kJax ? "0x00, data 0 * (1 / 0) (NaN, code 0x8)"
                   : nvfp4_order == Nvfp4Order::kVllm ? "0x00, data multiplier 1 / (1e8 * ...)"
                   : nvfp4_order == Nvfp4Order::kCompressedTensors ? "a scale that rounds to 0 -> 0.125 (0x20); global scale 0 (amax Inf) -> every scale 0x20, data 0"
                   : nvfp4_order == Nvfp4Order::kCompressedTensorsTriton ? "a scale that rounds to 0 -> 0.125 (0x20); global scale 0 (amax Inf) -> scale 0x20 (a block holding Inf: 0 * Inf, 0x7F), data 0 (Inf: NaN -> 0xF)"
                   : nvfp4_order == Nvfp4Order::kMlDtypesCast ? "0x00, data x / 0 (a zero block: 0 / 0, code 0x0; tiny: Inf, 0x7)"
                       : (nvfp4_tiny_block_floor ? "clamped up to 2^-6 (0x08)" : "0x00 below E4M3's range"));
    d.emplace_back("nvfp4.nan_scale", nvfp4_nan_scale ? "0x7F" : "fminf drops it (NaN amax -> S_enc = FLT_MAX)");
    d.emplace_back("nvfp4.neg_zero", !nvfp4_neg_zero_positive ? "-0.0 -> 0x8"
                                     : nvfp4_order == Nvfp4Order::kCompressedTensorsTriton ? "-0.0 -> 0x0, NaN data -> 0xF"
                                                                                           : "-0.0 -> 0x0, NaN data -> 0x0");
    d.emplace_back("nvfp4.single_level", yes(nvfp4_single_level));
    d.emplace_back("nvfp4.stochastic_rounding", nvfp4_stochastic ? "defined" : "not defined");
  }
  if (mxfp8) {
    std::string rules;
    for (MxScaleRule r : mx_scale_rules) rules += (rules.empty() ? "" : ", ") + std::string(mx_scale_rule_name(r));
    d.emplace_back("mxfp8.scale_rules", rules);
    d.emplace_back("mxfp8.order", std::string(mx_order_text(mx_order)));
    d.emplace_back("mxfp8.nonfinite_block",
                   mx_order == MxOrder::kTorchAO
                       ? "NaN -> 0xFF and NaN data; Inf -> finite scale (rceil 0xFE), Inf -> +-elem_max"
                       : mx_order == MxOrder::kModelOpt
                             ? "NaN -> 0x00, data of the other elements x * 2^127 clamped to +-448; Inf -> 0xFE"
                       : mx_order == MxOrder::kTorchCast || mx_order == MxOrder::kMlDtypesCast
                             ? "NaN or Inf -> 0xFF, data x / NaN (NaN)"
                       : mx_order == MxOrder::kJax
                             ? "NaN -> 0x00 (data x * (1 / 2^-127) = x * Inf: +-elem_max, 0 * Inf NaN); Inf -> 0xFF (data x * 0)"
                       : mx_order == MxOrder::kCompressedTensors
                             ? "NaN in PyTorch's vector lanes -> scale 2^-127 (0x00; F16 1.0, 0x7F), in the remainder and Inf -> "
                               "scale Inf, stored 0x7F, data x / Inf = 0; NaN data 0x7F (BF16) or 0x7F | sign"
                       : mx_order == MxOrder::kCompressedTensorsTriton
                             ? "NaN -> scale 2^-127 (0x00; F16 1.0, 0x7F), data +-448; Inf -> scale Inf, stored 0x7E, data 0; a NaN "
                               "datum and Inf / Inf -> -448 (0xFE)"
                             : (mx_nonfinite == MxNonFinite::kNaN ? "NaN propagates; NaN or Inf -> 0xFF, NaN data"
                                                                  : "NaN ignored (maxNum), Inf -> 0xFE (satfinite)"));
    d.emplace_back("mxfp8.zero_block_scale", mx_order == MxOrder::kTorchAO ? "0x00 (data divided by 2^-126; rceil: by 1)"
                                             : mx_order == MxOrder::kModelOpt ? "0x00 (data multiplied by 2^127)"
                                             : mx_order == MxOrder::kTorchCast ? "0x00 (data 0 / 2^-127 = 0)"
                                             : mx_order == MxOrder::kMlDtypesCast ? "0xFF (ml_dtypes casts 0 to NaN; data NaN)"
                                             : mx_order == MxOrder::kJax ? "0x00 (data 0 * (1 / 2^-127): NaN under XLA CPU's denormal flush; F16 0)"
                                             : mx_order == MxOrder::kCompressedTensors || mx_order == MxOrder::kCompressedTensorsTriton
                                                 ? "0x00 (scale 2^-127; F16: 2^-127 is 0 there -> 1.0, 0x7F)"
                                                                             : "0x00");
  }
  if (fp8_block || fp8_tensor) {
    d.emplace_back("fp8.inf_amax_scale", fp8_inf_amax_scale_zero ? "0" : "1");
    d.emplace_back("fp8.scale_order", fp8_scale_reciprocal ? "fp8_max * (1 / amax)" : "fp8_max / amax");
    d.emplace_back("fp8.cast_overflow", fp8_satfinite ? "saturate to +-max (satfinite)" : "NaN (E4M3) / Inf (E5M2)");
    d.emplace_back("fp8.eps", "recipe parameter eps (amax clamped to at least eps)");
    d.emplace_back("fp8.form", fp8_form_name(fp8_form));
    if (fp8_tensor_form != fp8_form) d.emplace_back("fp8.tensor_form", fp8_form_name(fp8_tensor_form));
    if (fp8_form != Fp8Form::kTE) {
      d.emplace_back("fp8.arith_dtype", !fp8_input_dtype_arith ? "float32"
                                        : fp8_data_f32       ? "input dtype for s (BF16/F16 results rounded to it)"
                                                             : "input dtype (BF16/F16 results rounded to it)");
      if (fp8_input_dtype_arith)  // where s is in the input dtype: is x / s too?
        d.emplace_back("fp8.data_dtype", fp8_data_f32 ? "float32: div_rn(x.f32, s.f32), not rounded to the input dtype"
                                                      : "as fp8.arith_dtype");
      d.emplace_back("fp8.pow2", fp8_pow2 == Fp8Pow2::kCeilBits   ? "ceil_to_ue8m0: exponent + (mantissa != 0), clamped to [1, 254]"
                                 : fp8_pow2 == Fp8Pow2::kCeilLog2 ? "exp2(ceil(log2f(s)))"
                                                                  : "not defined");
      d.emplace_back("fp8.zero_scale", fp8_zero_scale == Fp8ZeroScale::kKeep ? "0 (data 0/0 = NaN)" : "finfo(input dtype).eps");
      d.emplace_back("fp8.scale_min", fp8_scale_min > 0.0f ? std::to_string(fp8_scale_min) : "none");
      d.emplace_back("fp8.zero_point_add", fp8_zero_point_add ? "x / s + 0: -0.0 -> +0" : "no");
      if (fp8_clamp_nan != Fp8ClampNaN::kNaN)
        d.emplace_back("fp8.clamp_nan", fp8_clamp_nan == Fp8ClampNaN::kPlusMax ? "NaN -> +fp8_max" : "NaN -> -fp8_max");
    }
    d.emplace_back("fp8.nan", !fp8_torch_nan ? "NaN code 0x7F"
                              : fp8_cuda_nan ? "PyTorch's CUDA NaNs: a NaN scale is CUDA's canonical NaN, 0x7FFFFFFF as float32 "
                                               "(BF16 input: 0x7FFF0000, its bits widened)"
                              : std::string("PyTorch's CPU NaNs; a NaN code keeps its sign") +
                                    (fp8_block_amax_nan_lanes ? "; block amax NaN 0xFFFFFFFF in torch.maximum's vector chunks" : "") +
                                    (fp8_bf16_nan_positive ? "; BF16 input: 0x7F (codes cast to BF16 and back)" : "") +
                                    (fp8_tensor_amax_full_reduction ? "; F32 tensor amax NaN 0xFFFFFFFF" : ""));
  }
  if (mxfp4) {
    std::string rules;
    for (MxScaleRule r : mxfp4_scale_rules) rules += (rules.empty() ? "" : ", ") + std::string(mx_scale_rule_name(r));
    d.emplace_back("mxfp4.scale_rules", rules);
    const std::string_view engine_nonfinite = detail::engine_mx4_nonfinite_text(mx_order, mxfp4_te_reference);
    d.emplace_back("mxfp4.order", mx_order == MxOrder::kCompressedTensors || mx_order == MxOrder::kCompressedTensorsTriton ||
                                          !engine_nonfinite.empty()
                                      ? std::string(mxfp4_te_reference ? detail::te_reference_mx4_order_text()
                                                                       : mx_order_text(mx_order))
                                  : mx_order == MxOrder::kTE
                                      ? "te: rceil E8M0 up from bamax * RN(1/6), ocp_floor floor(log2 bamax) - 2; data x * 2^(127-e); "
                                        "E2M1 RN-even satfinite, NaN -> 0x7, -0 -> 0x8"
                                      : "torchao to_mx: rceil ceil(log2f(bamax / 6)), data clamp(x * 2^(127-e) (1.0 for e=0), +-6); "
                                        "floor/ceil/even from bamax's bits, data x / max(2^(e-127), 2^-126); torchao's E2M1 cast");
    d.emplace_back("mxfp4.nonfinite_block", mx_order == MxOrder::kCompressedTensors
                                                ? "as MXFP8 (the pow2_round scale of a NaN block by lane); NaN data 0x0, BF16 0x8"
                                                : mx_order == MxOrder::kCompressedTensorsTriton
                                                ? "as MXFP8 (NaN -> 0x00, data +-6; Inf -> 0x7E, data 0); NaN data -> -6 (0xF)"
                                                : mx_order == MxOrder::kTorchAO
                                                ? "NaN -> 0xFF (rceil: codes of the NaN product), Inf -> finite scale, Inf -> +-6"
                                                : !engine_nonfinite.empty() ? std::string(engine_nonfinite)
                                                : (mx_nonfinite == MxNonFinite::kNaN ? "NaN propagates; NaN or Inf -> 0xFF, codes 0x7"
                                                                                     : "NaN ignored (maxNum), Inf -> 0xFE, Inf -> +-6"));
  }
  d.emplace_back("neg_zero_fp8", "-0.0 -> 0x80 (sign kept)");
  return d;
}

}  // namespace qtc
