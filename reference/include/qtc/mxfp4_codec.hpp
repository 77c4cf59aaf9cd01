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

/// The dequantized value of code c in a block with scale byte e: 2^(e-127) * E2M1(c) (0x00 -> 2^-127, 0xFF ->
/// NaN), what TE's MX dequantize and torchao's `to_dtype` (pow(2, e - 127) times the E2M1 value, float32) give.
QTC_HD float decode(uint8_t c, uint8_t e) { return decode_e8m0(e) * decode_e2m1(c); }

}  // namespace qtc::mxfp4
