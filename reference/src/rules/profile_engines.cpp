/// \file profile_engines.cpp
/// \brief The profile records of the inference engines' MXFP4 quantizers (issue 24), read from their code:
///        triton_kernels' _downcast_to_mxfp, vLLM's UE8M0 FP4 quantizer, FBGEMM's MX4 reference, amd-quark's qdq_mxfp4.
///        Their arithmetic is mxfp4_codec.hpp's (orders kTritonKernels, kVllmCutlass, kFbgemm, kQuark); profile.cpp
///        appends them to the built-ins.
#include <string_view>
#include <vector>

#include "qtc/profile.hpp"

namespace qtc::detail {

void append_mxfp4_engine_profiles(std::vector<ProfileRules>& v) {
  // triton_kernels' MX quantizer (issue 24): `downcast_to_mxfp(x, torch.uint8, axis)`, the `_downcast_to_mxfp`
  // Triton kernel that vLLM's gpt-oss MoE path runs; MXFP4 only (mxfp4_codec.hpp: the order, read from the code).
  ProfileRules tk;
  tk.id = Profile::kTritonKernels;
  tk.name = "triton_kernels";
  tk.follows = "triton_kernels (triton-lang/triton python/triton_kernels) numerics_details/mxfp.py downcast_to_mxfp, "
               "_downcast_to_mxfp kernel, sm_90 path (E2M1 by bit arithmetic, FP32-source sticky bit); read, not run";
  tk.nvfp4 = tk.mxfp8 = tk.fp8_block = tk.fp8_tensor = false;
  tk.mx_scale_rules.clear();
  tk.nvfp4_stochastic = false;
  tk.mx_order = MxOrder::kTritonKernels;
  tk.mx_nonfinite = MxNonFinite::kSatFinite;  // tl.max (max.f32) ignores a NaN unless the whole block is NaN
  tk.mxfp4_scale_rules = {MxScaleRule::kRceil, MxScaleRule::kOcpFloor};  // DEQUANT_SCALE_ROUNDING_MODE ROUND_UP, ROUND_DOWN
  v.push_back(tk);

  // vLLM's CUDA FP4 quantizer with UE8M0 scales (issue 24): the MXFP4 W4A4 MoE CUTLASS path's activation quantizer,
  // the "threshold" scale rule of vLLM PR 43557 (mxfp4_codec.hpp, read from the code; GPU only, sm_100).
  ProfileRules vc = tk;
  vc.id = Profile::kVllmCutlass;
  vc.name = "vllm_cutlass";
  vc.follows = "vLLM csrc quantization/fp4/nvfp4_utils.cuh cvt_warp_fp16_to_fp4 with UE8M0_SF (after PR 43557; BF16/F16 "
               "input, sm_100); read, not run";
  vc.mx_order = MxOrder::kVllmCutlass;
  vc.mxfp4_scale_rules = {MxScaleRule::kEven};  // the threshold rule: torchao's EVEN on the bits, clamped to [0, 254]
  v.push_back(vc);

  // FBGEMM's MX4 (issue 24): the scale and element rules of its reference py_quantize_mx4 (mxfp4_codec.hpp), in qtc's
  // planes and scale layouts (FBGEMM's own packed rows, each group's exponent after its 16 bytes, are not a layout here).
  ProfileRules fb = tk;
  fb.id = Profile::kFbgemm;
  fb.name = "fbgemm";
  fb.follows = "FBGEMM fbgemm_gpu/triton/quantize_ref.py py_quantize_mx4 (at 3cbb3e9b; float32, torch's log2), scale and "
               "element rules; read, not run";
  fb.mx_order = MxOrder::kFbgemm;
  fb.mx_nonfinite = MxNonFinite::kNaN;  // torch.max propagates NaN
  fb.mxfp4_scale_rules = {MxScaleRule::kCeil};
  v.push_back(fb);

  // amd-quark's qdq_mxfp4 (issue 24): the quantize-dequantize kernel that vLLM's Quark OCP MX scheme (mxfp4_utils
  // quant_dequant_mxfp4) calls with scale_calculation_mode "even"; its scale byte and E2M1 codes are the kernel's
  // scale_exp and elem_fp4 (mxfp4_codec.hpp: the order, read from the code; GPU only, BF16 / F16 input).
  ProfileRules qk = tk;
  qk.id = Profile::kQuark;
  qk.name = "quark";
  qk.follows = "amd-quark 0.13 quark/torch/kernel/hw_emulation/csrc/mxfp4/fake_kernels.cuh qdq_mxfp4_kernel (mx.qdq_mxfp4, "
               "QUARK_MXFP4_IMPL hip, CUDA build; BF16 / F16 input, F32 is qtc's extension); read, not run";
  qk.mx_order = MxOrder::kQuark;
  qk.mx_nonfinite = MxNonFinite::kSatFinite;  // __hmax ignores a NaN unless the whole block is NaN
  qk.mxfp4_scale_rules = {MxScaleRule::kEven};  // scale_calculation_mode "even", the only one its HIP/CUDA kernel takes
  v.push_back(qk);
}

std::string_view engine_mx_order_text(MxOrder o) {
  switch (o) {
    case MxOrder::kTritonKernels:
      return "triton_kernels: amax by max.f32 (NaN ignored unless the block is all NaN); rceil (ROUND_UP) byte of "
             "(bits(bamax * RN(1/6)) + 0x7FFFFF) & 0x7F800000, ocp_floor (ROUND_DOWN) of bits(bamax / 4) & 0x7F800000; data "
             "x * (1 / 2^(e-127)), 0 for e = 0x00 and 0xFF; E2M1 by bit arithmetic: RN-even, saturating, sign kept, NaN -> 0x7";
    case MxOrder::kVllmCutlass:
      return "vllm_cutlass: amax by __hmax2 (NaN ignored unless the block is all NaN: byte 0x00); even (the threshold "
             "rule) byte = clamp(exponent((bits(bamax) + 2^21) & 0xFF800000) - 2, 0, 254); data x * (1 / 2^(e-127)), 0 "
             "for e = 0x00; cvt.rn.satfinite.e2m1x2: RN-even, saturating, NaN -> 0x7";
    case MxOrder::kFbgemm:
      return "fbgemm: amax by torch.max (NaN propagates), 0 -> 2^-126; ceil e = clamp(ceil(log2f(bamax)) - 2, -127, 125) "
             "(correctly rounded float32 log2); data x / 2^e on 3 significant bits + 1 >> 1 (half away from zero, no sticky), "
             "saturating at 6, Inf -> +-0; a NaN block 0xFF, codes 0x0 (qtc's choice)";
    case MxOrder::kQuark:
      return "quark: in the input's 16-bit type T, amax by __hmax (NaN ignored unless the block is all NaN); even byte = "
             "clamp(floor(log2((bits(bamax) + 2^(mbits-2)) & sign_exponent_mask)) - 2 + 127, 0, 254) on T's bits (T's "
             "largest binade can round to Inf: 254; 0 -> 254 as nvcc compiles its INT_MIN - 2); data x / T(2^(e-127)) in T "
             "(F16: Inf for 254), "
             "E2M1 RN-even saturating, NaN -> 0x7; qdq output elem * T(2^(e-127))";
    default: return "?";
  }
}

std::string_view te_reference_mx4_order_text() {
  return "te_pyref: TE's NVFP4QuantizerRef with pow_2_scales (1x32), float32 torch ops: scale 2^clamp(ceil(log2(bamax / "
         "6)), -127, 127) (torchao's RCEIL byte: NaN -> 0xFF, Inf -> 0xFE); data clamp(x * (1 / scale), -6, 6) by value "
         "buckets (RN-even; -0.0 and NaN -> 0x0)";
}

std::string_view engine_mx4_nonfinite_text(MxOrder o, bool te_reference) {
  if (te_reference)
    return "NaN propagates (torch.amax): 0xFF, codes 0x0 (x * NaN takes no bucket); Inf -> 0xFE, Inf -> +-6; -0.0 -> 0x0";
  switch (o) {
    case MxOrder::kTritonKernels:
      return "NaN ignored unless the block is all NaN (then rceil 0x00, ocp_floor 0xFF); Inf -> 0xFF; a 0x00 or 0xFF "
             "block's codes are +-0, NaN -> 0x7";
    case MxOrder::kVllmCutlass:
      return "NaN ignored unless the block is all NaN (then 0x00); Inf -> 253; a 0x00 block's codes are +-0, NaN -> 0x7";
    case MxOrder::kFbgemm: return "NaN propagates: 0xFF, codes 0x0 (qtc's choice); Inf -> 252, Inf elements +-0";
    case MxOrder::kQuark:
      return "NaN ignored unless the block is all NaN (T's NaN rounds to -0: 254, as a zero block, int(-Inf) - 2 wrapping "
             "in the compiled code); Inf -> 254, Inf -> +-6, NaN -> 0x7; F16's byte 254 divides by Inf: x -> +-0, Inf and "
             "NaN -> 0x7 (the kernel's output there is NaN / Inf)";
    default: return "";
  }
}

}  // namespace qtc::detail
