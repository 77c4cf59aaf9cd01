/// \file mxfp4_codec.hpp
/// \brief The scalar steps of MXFP4 (OCP MX v1.0 FP4: E2M1 elements, one E8M0 scale per 32 elements, no
///        per-tensor scale): the E8M0 scale of a block from its absolute maximum and the E2M1 code of one element,
///        under each profile's order (profile.hpp: mx_order, mx_nonfinite) and each scale rule. Host and device
///        (QTC_HD): the CUDA kernels call these same functions, so the two paths cannot drift.
///
///  * te / ocp order (MxOrder::kTE), TE's MX arithmetic with E2M1's constants: rceil = float_to_e8m0(bamax *
///    RN(1/6)) (TE_FORMATS.md §0.4, Quantized_Limits<fp4e2m1>::max_norm_rcp = 0x3E2AAAAB); ocp_floor =
///    2^(floor(log2 bamax) - 2), exact from the bits (NaN -> 0xFF, Inf -> 0xFE, 0 -> 0x00); with
///    MxNonFinite::kNaN (OCP) a NaN or Inf block gets 0xFF. Data: E2M1 RN-even satfinite of x * 2^(127-e)
///    (TE `exp2f_rcp`; NaN -> 0x7, -0 -> 0x8, §0.3); a 0xFF block therefore holds codes 0x7 (its value is NaN).
///  * torchao order (MxOrder::kTorchAO): torchao 0.18.0 `to_mx(x, torch.float4_e2m1fn_x2, 32, mode)`, float32
///    throughout, NaN payloads as PyTorch's CPU kernels produce them (torchao_codec.hpp): RCEIL descale =
///    bamax / 6, e = clamp(ceil(log2f(descale)), -127, 127) + 127 (NaN -> 0xFF, Inf -> 0xFE), data
///    clamp(x * rcp, -6, 6) with rcp = descale (0xFF), 2^-127 (0xFE), 1.0 (0x00), else 2^(127-e); FLOOR / CEIL
///    / EVEN from bamax's bits with F4_E2M1_MAX_POW2 = 2 (EVEN first rounds bamax to 1 mantissa bit: + 2^21,
///    masked), unbiased exponent clamped to [-127, 128], NaN -> 0xFF; data x / max(2^(e-127), 2^-126), no clamp
///    (the E2M1 cast saturates); the cast is torchao's `f32_to_f4_unpacked` (torchao::f32_to_e2m1).
///  * triton_kernels order (MxOrder::kTritonKernels): triton_kernels' `_downcast_to_mxfp` Triton kernel (the one
///    vLLM's gpt-oss MoE path calls through `downcast_to_mxfp`), as read from its code, sm_90 path: the block amax
///    is tl.max of |x| (max.f32: a NaN is ignored unless the whole block is NaN); DEQUANT_SCALE_ROUNDING_MODE
///    ROUND_UP (rule rceil): ds = amax / 6, byte = ((bits(ds) + 0x7FFFFF) & 0x7F800000) >> 23; ROUND_DOWN (rule
///    ocp_floor): ds = amax / 4, byte = (bits(ds) & 0x7F800000) >> 23 (so a NaN amax gives 0x00 under ROUND_UP and
///    0xFF under ROUND_DOWN, Inf 0xFF, a subnormal ds 0x01 / 0x00). Data: q = x * qs with qs = 0 where the rounded
///    scale 2^(byte-127) reads as 0 (byte 0x00) and 1 / 2^(byte-127) otherwise (0 for 0xFF: 1 / Inf), so byte 0x00
///    and 0xFF blocks hold +-0 codes; the E2M1 code by the kernel's bit arithmetic, which is RN-even (guard, sticky
///    and lsb; the FP32-source sticky of the current kernel) saturating at 6 with the sign kept, a NaN q (the GPU's
///    canonical NaN, positive) -> 0x7. Triton's fp32 `/` is div.full.f32 = a * rcp.approx(b) (fp8.form's
///    note in profile.hpp); sm_90's measured rcp.approx (qtc/rcp_approx.hpp) gives RN(1/6) for 6 and is exact for
///    powers of two, so ds = amax * RN(1/6), amax / 4 and 1 / 2^(e-127) are exact models.
///  * vllm_cutlass order (MxOrder::kVllmCutlass): vLLM's CUDA FP4 quantizer with UE8M0 scales (csrc
///    quantization/fp4/nvfp4_utils.cuh `cvt_warp_fp16_to_fp4<..., UE8M0_SF = true>`, as fixed by vLLM PR 43557; the
///    MXFP4 W4A4 MoE CUTLASS path), as read: amax by __hmax2 of |x| (a NaN ignored unless the block is all NaN,
///    then the canonical NaN); the "threshold" scale rule (qtc `even`): rounded = (bits(amax) + 2^21) & 0xFF800000
///    (mantissa >= 0.75 rounds up), byte = clamp(exponent(rounded) - 2, 0, 254), an all-NaN block 0x00; data
///    x * (1 / 2^(byte-127)), 0 for byte 0x00; E2M1 by cvt.rn.satfinite.e2m1x2.f32 (RN-even, saturating, NaN -> 0x7).
///  * fbgemm order (MxOrder::kFbgemm): FBGEMM's MX4 reference `py_quantize_mx4` (fbgemm_gpu/triton/quantize_ref.py at
///    3cbb3e9b), float32: amax = torch.max(|x|) (NaN propagates), 0 -> 2^-126; e = clamp(ceil(torch.log2(amax)) - 2,
///    -127, 125), byte e + 127 (torch's float32 log2 modelled as the correctly rounded one: it then gives k, not k + 1,
///    for the same 3654 of the 16192 values 2^k (1 + j 2^-23), |k| <= 126, j <= 64, as torch 2.11 measured); data
///    x / 2^e, then its bit arithmetic in int8 (exponent wrap included): 3 significant bits, + 1, >> 1 (ties and above
///    round away from zero, no sticky bit: 0.25 -> 0.5, 1.25 -> 1.5, 2.5 -> 3, 5 -> 6), saturating at 6; Inf -> +-0
///    (its exponent field wraps). A NaN block (FBGEMM converts the NaN exponent to int8: undefined) is qtc's choice:
///    byte 0xFF, codes 0x0.
///  * quark order (MxOrder::kQuark): amd-quark's `qdq_mxfp4` (quark/torch/kernel/hw_emulation/csrc/mxfp4/fake_kernels.cuh
///    `qdq_mxfp4_kernel`, amd-quark 0.13, CUDA build: one warp per block of 32 consecutive elements; vLLM's Quark OCP MX
///    scheme calls it with scale_calculation_mode "even"), a quantize-dequantize in the input's 16-bit type T (BF16, F16;
///    F32 input is qtc's extension with T = F32): amax = __hmax over |x| (a NaN ignored unless the block is all NaN, then
///    T's canonical NaN); rounded on T's bits, (bits + 2^(mbits-2)) & sign_exponent_mask (mantissa >= 0.75 rounds up;
///    T's largest binade can round to Inf; the canonical NaN carries into the sign: -0; an F16 subnormal becomes 0 or
///    2^-14); byte = max(0, 127 + min(int_rn(floor(hlog2(r))) - 2, 127)): a power of two 2^k -> clamp(k + 125, 0, 254),
///    Inf -> 254 (int_rn saturates to INT_MAX), and 0 -> 254 as well: floor(hlog2(0)) = -Inf saturates to INT_MIN and
///    INT_MIN - 2 wraps to INT_MAX - 1 (undefined in C++; nvcc 13.0 -O3 emits add.s32 -2, min.s32 127, add.s32 127,
///    max.s32 0 for sm_90, which wraps: zero blocks, all-NaN blocks and blocks whose max rounds to 0 get 254); data
///    elem = x / T(2^(e-127)) in T, E2M1 by fp16_to_fp4_simulate (RN-even, saturating at 6, sign kept, the GPU's NaN
///    -> +6: code 0x7); the kernel outputs elem * T(2^(e-127)). For BF16 every 2^(e-127) is exact in T and the output is
///    qtc's decode (an all-NaN block: 6 * 2^127 = Inf); for F16, whose bytes are 111..140 and 254, the scale of 254 is
///    Inf (x / Inf: +-0, Inf / Inf and NaN -> +6), so there the kernel outputs 0 * Inf = NaN and 6 * Inf = Inf, not the
///    decode (0 and 6 * 2^127): F16 zero blocks come out of qdq_mxfp4 as NaN.
///  * TE's PyTorch reference (ProfileRules::mxfp4_te_reference, profile te_pyref): TransformerEngine's only MXFP4 rule,
///    `NVFP4QuantizerRef(pow_2_scales=True, quant_tile_shape=(1, 32))` (transformer_engine/pytorch/custom_recipes/
///    quantization_ref_nvfp4.py in 2.16-2.18, reference_nvfp4.py after; experimental/ in 2.8-2.9; its CUDA kernel
///    refuses pow2_scale): vec_max = torch.amax(|x|) (NaN propagates), decode_scale = cast_to_e8(vec_max / 6) =
///    2^clamp(ceil(log2(.)), -127, 127) in float32 torch ops, which is torchao's RCEIL byte (scale_torchao); data
///    clamp(x * (1 / decode_scale), -6, 6) by cast_to_fp4x2's value buckets: RN-even, -0.0 and NaN -> 0x0, a negative
///    value above -0.25 -> 0x8 (encode_e2m1 kPositiveZero); a NaN scale (0xFF) makes every product NaN: codes 0x0.
#pragma once
#include <cstdint>

#include "qtc/host_device.hpp"
#include "qtc/numeric.hpp"
#include "qtc/recipe.hpp"
#include "qtc/torchao_codec.hpp"

namespace qtc::mxfp4 {

inline constexpr int kE2M1Emax = 2;       ///< floor(log2(6)): OCP's emax_elem for E2M1
inline constexpr float kE2M1Max = 6.0f;

/// The E8M0 scale byte of a block with absolute maximum `bamax` under the te / ocp order. `nonfinite_nan`: a
/// NaN or Inf block gets 0xFF (OCP); rules other than rceil take the floor rule (validation admits only those
/// two under this order).
QTC_HD uint8_t scale_te(float bamax, MxScaleRule rule, bool nonfinite_nan) {
  if (nonfinite_nan && !(fabsf(bamax) <= kFltMax)) return 0xFF;
  if (rule == MxScaleRule::kRceil) return encode_e8m0(bamax * kNvfp4Rcp6, E8m0Rounding::kUp);
  if (bamax != bamax) return 0xFF;
  if (is_inf(bamax)) return 0xFE;
  if (bamax == 0.0f) return 0x00;
  const int e = floor_log2(bamax) - kE2M1Emax;
  return static_cast<uint8_t>((e < -127 ? -127 : e) + 127);
}

/// The E2M1 code of element x in a block with scale byte e under the te / ocp order.
QTC_HD uint8_t code_te(float x, uint8_t e) { return encode_e2m1(x * e8m0_reciprocal(e)); }

/// `to_mx`'s E8M0 scale byte of an FP4 block with float32 absolute maximum `bamax` (NaN-propagating amax).
QTC_HD uint8_t scale_torchao(float bamax, MxScaleRule rule) {
  if (rule == MxScaleRule::kRceil) {
    const float descale = torchao::div(bamax, kE2M1Max);
    if (descale != descale) return 0xFF;
    if (is_inf(descale)) return 0xFE;
    const float e = fminf(fmaxf(torchao::ceil_log2f(descale), -127.0f), 127.0f);
    return static_cast<uint8_t>(static_cast<int>(e) + 127);
  }
  if (bamax != bamax) return 0xFF;
  uint32_t bits = f32_bits(bamax);
  if (rule == MxScaleRule::kEven) bits = (bits + (1u << (23 - 1 - 1))) & 0xFF800000u;  // round to E2M1's 1 mantissa bit
  int extracted = static_cast<int>((bits >> 23) & 0xFFu) - 127;
  if (rule == MxScaleRule::kCeil && (bits & 0x7FFFFFu) != 0) ++extracted;
  const int d = extracted - kE2M1Emax;
  const int unbiased = d < -127 ? -127 : (d > 128 ? 128 : d);
  return static_cast<uint8_t>(unbiased + 127);
}

/// `to_mx`'s E2M1 code of element x in an FP4 block with scale byte e.
QTC_HD uint8_t code_torchao(float x, uint8_t e, MxScaleRule rule) {
  if (rule == MxScaleRule::kRceil) {
    // rcp: the NaN descale (the block amax's NaN 0x7FC00000 / 6) for 0xFF, 2^-127 for 0xFE, 1.0 for 0x00,
    // else 2^(127 - e); then data_hp * rcp clamped to +-6 (a NaN passes the clamp)
    const float rcp = e == 0xFF ? bits_f32(0x7FC00000u)
                                : (e == 0xFE ? 0x1p-127f : (e == 0 ? 1.0f : bits_f32(static_cast<uint32_t>(254 - e) << 23)));
    return torchao::f32_to_e2m1(torchao::clamp(torchao::mul(x, rcp), -kE2M1Max, kE2M1Max));
  }
  // scale_fp32 = (e << 23) as float (0xFF -> +Inf), clamped to at least 2^-126; data_hp / scale_fp32, cast
  const float s = fmaxf(bits_f32(static_cast<uint32_t>(e) << 23), 0x1p-126f);
  return torchao::f32_to_e2m1(torchao::div(x, s));
}

/// triton_kernels' block amax step: fmaxf (max.f32), started from NaN so that an all-NaN block keeps a NaN amax
/// while any other NaN is ignored.
QTC_HD float amax_step_triton(float acc, float v) { return fmaxf(acc, fabsf(v)); }
inline constexpr uint32_t kTritonAmaxStart = 0x7FC00000u;  ///< the NaN the fold starts from (bits)

/// triton_kernels' E8M0 scale byte of a block with amax `bamax` (ROUND_UP = rceil, ROUND_DOWN = ocp_floor).
QTC_HD uint8_t scale_triton(float bamax, MxScaleRule rule) {
  if (rule == MxScaleRule::kRceil) {
    const uint32_t b = f32_bits(bamax * kNvfp4Rcp6);
    return static_cast<uint8_t>(((b + 0x007FFFFFu) & 0x7F800000u) >> 23);
  }
  return static_cast<uint8_t>((f32_bits(bamax * 0.25f) & 0x7F800000u) >> 23);
}

/// triton_kernels' E2M1 code of x in a block with scale byte e: encode_e2m1 (RN-even, satfinite, sign kept, NaN
/// -> 0x7) of x * qs, qs = 0 for e = 0x00 and 0xFF, else 2^(127-e) (exact; e = 254 cannot occur: ROUND_UP reaches 253, ROUND_DOWN 252).
QTC_HD float quant_scale_triton(uint8_t e) {
  return (e == 0 || e == 0xFF) ? 0.0f : (e == 254 ? 0x1p-127f : bits_f32(static_cast<uint32_t>(254 - e) << 23));
}
QTC_HD uint8_t code_triton(float x, uint8_t e) { return encode_e2m1(x * quant_scale_triton(e)); }

/// vLLM's UE8M0 scale byte of a block with amax `bamax` (the threshold rule; a NaN amax is the all-NaN block's
/// canonical NaN, whose carry leaves exponent 0).
QTC_HD uint8_t scale_vllm_cutlass(float bamax) {
  if (bamax != bamax) return 0;
  const uint32_t biased = ((f32_bits(bamax) + (1u << 21)) & 0xFF800000u) >> 23 & 0xFFu;
  const uint32_t e = biased > 2u ? biased - 2u : 0u;
  return static_cast<uint8_t>(e < 254u ? e : 254u);
}

/// FBGEMM MX4's scale byte e + 127 of a block with amax `bamax` (NaN-propagating amax).
QTC_HD uint8_t scale_fbgemm(float bamax) {
  if (bamax != bamax) return 0xFF;  // qtc's choice (FBGEMM: a NaN converted to int8)
  const float m = bamax == 0.0f ? 0x1p-126f : bamax;
  const float l = static_cast<float>(log2(static_cast<double>(m)));  // torch.log2 (float32), correctly rounded
  const float e = fminf(fmaxf(ceilf(l) - 2.0f, -127.0f), 125.0f);   // Inf -> 125
  return static_cast<uint8_t>(static_cast<int>(e) + 127);
}

/// FBGEMM MX4's E2M1 code of x in a block with scale byte e (<= 252, or 0xFF for a NaN block).
QTC_HD uint8_t code_fbgemm(float x, uint8_t e) {
  if (e == 0xFF) return 0x0;
  const uint32_t a = f32_bits(x * bits_f32(static_cast<uint32_t>(254 - e) << 23));  // x / 2^(e-127), exact as the division
  if ((a & 0x7FFFFFFFu) > 0x7F800000u) return 0x0;  // a NaN (only from a NaN element, whose block is NaN)
  const int sign = static_cast<int>(a >> 31);
  const int biased = static_cast<int>((a >> 23) & 0xFFu);
  const auto i8 = [](int v) { return static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(v & 0xFF))); };
  int nbe = i8(biased - 126);                          // int8(biased) - 127 + 1, int8 arithmetic
  int exp_diff = nbe <= 0 ? i8(1 - nbe) : 0;           // Inf: int8(128) = -128
  exp_diff = exp_diff < 24 ? exp_diff : 24;
  const bool subnorm = biased == 0;
  const int64_t mant = subnorm ? (a & 0x7FFFFFu) : ((a & 0x7FFFFFu) + (1u << 23));
  const int shift = (subnorm ? 23 : 24) + exp_diff - 3;  // torch: a negative or >= 31 shift gives a >> 31 (0 here)
  int m = (shift < 0 || shift >= 31) ? 0 : i8(static_cast<int>(mant >> shift));
  m = i8(m + 1) >> 1;
  const bool overflow = m >= 4;
  if (overflow && !subnorm) m >>= 1;
  if (nbe <= 0 && m == 2) nbe = 1;
  m &= 1;
  if (overflow) nbe = i8(nbe + 1);
  if (nbe >= 4) m = 1;
  nbe = nbe < 0 ? 0 : (nbe > 3 ? 3 : nbe);
  return static_cast<uint8_t>((sign << 3) | (nbe << 1) | m);
}

/// TE's PyTorch reference's E2M1 code of x in a block with scale byte e (its scale is scale_torchao's rceil byte):
/// x * (1 / 2^(e-127)) (exact: 2^127 for 0x00, 2^-127 for 0xFE) by value buckets; 0xFF (NaN) -> 0x0.
QTC_HD uint8_t code_te_reference(float x, uint8_t e) {
  if (e == 0xFF) return 0x0;
  return encode_e2m1(x * e8m0_reciprocal(e), NegZero::kPositiveZero);
}

/// amd-quark qdq_mxfp4's scale byte of a block with NaN-ignoring amax `bamax` (NaN only for an all-NaN block) and
/// input type T = BF16 or F32 (`f16` false) or F16. bamax is a value of T, so T's bit rounding is the float32 one: the
/// mantissa bits of BF16 and F16 are the top bits of float32's, BF16 shares its exponent range; F16 differs only past
/// its range (2^16 -> Inf) and below its normals (bits m of a subnormal: (m + 0x100) & 0xFC00 is 2^-14 or 0).
QTC_HD uint8_t scale_quark(float bamax, bool f16) {
  if (bamax != bamax) return 254;  // T's canonical NaN 0x7FFF rounds to 0x8000 (-0): as a zero block
  uint32_t biased;
  if (f16 && bamax < 0x1p-14f)
    biased = bamax >= 0x1.8p-15f ? 127u - 14u : 0u;
  else
    biased = ((f32_bits(bamax) + (1u << 21)) & 0x7F800000u) >> 23;
  if (f16 && biased >= 127u + 16u) biased = 0xFFu;  // F16 has no 2^16: Inf
  if (biased == 0xFFu) return 254;                 // Inf: int(floor(log2 Inf)) = INT_MAX, min(INT_MAX - 2, 127) = 127
  if (biased == 0u) return 254;                    // 0 (and -0): INT_MIN - 2 wraps to INT_MAX - 1 in the compiled code
  const int e = static_cast<int>(biased) - 127 - kE2M1Emax + 127;
  return static_cast<uint8_t>(e < 0 ? 0 : (e > 254 ? 254 : e));
}

/// amd-quark qdq_mxfp4's E2M1 code of x in a block with scale byte e: the code of elem = x / T(2^(e-127)). Where
/// T(2^(e-127)) is exact (every byte for BF16 and F32; F16 input reaches bytes 0x00, 111..140 and 254 only, the middle
/// ones exact) the division is exact and this is code_te; F16's bytes 0x00 and 254 divide by 0 and Inf (IEEE, as
/// __hdiv's rcp.approx.ftz: the GPU's NaN is positive, -> +6; F16 input never gets byte 0x00).
QTC_HD uint8_t code_quark(float x, uint8_t e, bool f16) {
  if (!f16 || (e != 0 && e != 254)) return code_te(x, e);
  const uint8_t sign = (f32_bits(x) >> 31) != 0 ? 0x8 : 0x0;
  if (x != x) return 0x7;
  if (e == 0) return x == 0.0f ? 0x7 : static_cast<uint8_t>(0x7 | sign);  // 0 / 0 = NaN, x / 0 = +-Inf: +-6
  return is_inf(x) ? 0x7 : sign;                                           // Inf / Inf = NaN, x / Inf = +-0
}

/// The dequantized value of code c in a block with scale byte e: 2^(e-127) * E2M1(c) (0x00 -> 2^-127, 0xFF ->
/// NaN), what TE's MX dequantize and torchao's `to_dtype` (pow(2, e - 127) times the E2M1 value, float32) give.
QTC_HD float decode(uint8_t c, uint8_t e) { return decode_e8m0(e) * decode_e2m1(c); }

}  // namespace qtc::mxfp4
