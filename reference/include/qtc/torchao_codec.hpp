/// \file torchao_codec.hpp
/// \brief The scalar steps of torchao 0.18.0's quantizers, each with torchao's dtype and operation order
///        (profile `torchao`, profile.hpp): `to_mx`'s four E8M0 scale modes and its data scaling, the
///        `nvfp4_quantize` block scale and data scaling, PyTorch's float8 casts and torchao's bit-twiddling
///        E2M1 cast (`_f32_to_floatx_unpacked`). Every input is the float32 value torchao computes on
///        (to_mx and nvfp4_quantize convert the input to float32 before any arithmetic; amax of BF16/F16
///        values is exact in either dtype). Host and device (QTC_HD): the CUDA kernels of profile torchao call
///        these same functions (kernels/src/common/torchao_device.cuh adapts their argument types), so the two
///        paths cannot drift. Every NaN is chosen explicitly, so a GPU's canonical NaN results never leak.
#pragma once
#include <cmath>
#include <cstdint>

#include "qtc/codec.hpp"
#include "qtc/host_device.hpp"
#include "qtc/numeric.hpp"
#include "qtc/recipe.hpp"

namespace qtc::torchao {

// NaN payloads reach torchao's E2M1 cast (a bit-twiddling function of the float's bits), so every step
// below reproduces which NaN PyTorch's CPU kernels (x86) return, as measured on torch 2.15:
//  * an invalid operation (0/0, Inf/Inf, 0*Inf) gives x86's default NaN 0xFFC00000;
//  * one NaN operand: that NaN, quieted; two: the second operand for `*`, the first for `/`;
//  * torch.amax / torch.max of a block or tensor with a NaN give 0x7FC00000 (the qtc amax's NaN);
//  * torch.clamp passes a NaN through unchanged; float8 -> float32 of a NaN code gives 0x7FF00000 (E4M3)
//    with the code's sign; float32 -> float8 keeps the sign of a NaN.

inline constexpr uint32_t kDefaultNaN = 0xFFC00000u;

QTC_HD float quiet(float v) { return bits_f32(f32_bits(v) | 0x00400000u); }

/// The result r = a op b with PyTorch's NaN choice (`first` selects the first operand when both are NaN).
QTC_HD float nan_choice(float a, float b, float r, bool first) {
  const bool na = a != a, nb = b != b;
  if (na && nb) return quiet(first ? a : b);
  if (na) return quiet(a);
  if (nb) return quiet(b);
  if (r != r) return bits_f32(kDefaultNaN);
  return r;
}
/// float32 a * b as torch's CPU kernel computes it (NaN payload included).
QTC_HD float mul(float a, float b) { return nan_choice(a, b, a * b, false); }
/// float32 a / b as torch's CPU kernel computes it (NaN payload included).
QTC_HD float div(float a, float b) { return nan_choice(a, b, a / b, true); }

/// The per-tensor amax torchao's callers compute, torch.max(torch.abs(x)).to(float32), when x holds a NaN:
/// the float32 full reduction returns the all-ones NaN 0xFFFFFFFF, the bfloat16 one 0x7FC0 (-> 0x7FC00000).
/// F16 inputs reach torchao upcast to float32 (torchao rejects F16), so they follow F32.
QTC_HD float tensor_amax(float amax, DType input) {
  if (amax == amax) return amax;
  return bits_f32(input == DType::kBF16 ? 0x7FC00000u : 0xFFFFFFFFu);
}

/// float8_e4m3fn -> float32 as PyTorch converts it: a NaN code gives 0x7FF00000 with the code's sign.
QTC_HD float decode_e4m3(uint8_t c) {
  if ((c & 0x7Fu) == 0x7Fu) return bits_f32(0x7FF00000u | (static_cast<uint32_t>(c & 0x80u) << 24));
  return qtc::decode_e4m3(c);
}

/// torch.clamp(v, lo, hi) on float32: NaN passes through unchanged.
QTC_HD float clamp(float v, float lo, float hi) {
  if (v != v) return v;
  return v < lo ? lo : (v > hi ? hi : v);
}

/// PyTorch's float32 -> float8_e4m3fn / float8_e5m2 cast (c10): RN-even, a NaN keeps its sign bit (0x7F | s).
/// Callers clamp to the finite range first, as torchao does, so the non-saturating overflow never occurs.
QTC_HD uint8_t cast_fp8(float v, Fp8Type t) {
  if (v != v) return static_cast<uint8_t>(0x7Fu | ((f32_bits(v) >> 24) & 0x80u));
  return t == Fp8Type::kE4M3 ? encode_e4m3(v) : encode_e5m2(v);
}

/// torchao `_f32_to_floatx_unpacked(x, ebits=2, mbits=1)`, bit for bit (RN-even, saturating, sign kept;
/// a NaN goes through the normal branch: +NaN 0x7FC00000 -> 0x3).
QTC_HD uint8_t f32_to_e2m1(float v) {
  const uint32_t u = f32_bits(v);
  const uint32_t sign = u & 0x80000000u;
  const uint32_t a = u ^ sign;
  const float x = bits_f32(a);
  uint8_t code;
  if (x >= 6.0f) {
    code = 7;
  } else if (x < 1.0f) {
    // denormal branch: x + 2^22 rounds to a multiple of 0.5, minus the magic's bits (149 << 23)
    code = static_cast<uint8_t>(f32_bits(x + 0x1p22f) - (149u << 23));
  } else {
    int32_t n = static_cast<int32_t>(a);
    const int32_t mant_odd = (n >> 22) & 1;
    n = static_cast<int32_t>(static_cast<uint32_t>(n) + static_cast<uint32_t>(((1 - 127) * (1 << 23)) + ((1 << 21) - 1)));
    n = static_cast<int32_t>(static_cast<uint32_t>(n) + static_cast<uint32_t>(mant_odd));
    code = static_cast<uint8_t>(n >> 22);
  }
  return static_cast<uint8_t>(code | ((sign >> 28) & 0x8u));
}

/// float32 ceil(log2f(v)) as torch.log2 computes it on float32 (the log rounded to float32 once, then ceil):
/// a value just above 2^k with |k| >= 2 rounds to k.
QTC_HD float ceil_log2f(float v) {
  if (v == 0.0f) return -INFINITY;
  return ceilf(static_cast<float>(log2(static_cast<double>(v))));
}

/// `to_mx`'s E8M0 scale byte of a block with float32 absolute maximum `bamax` (NaN-propagating amax).
QTC_HD uint8_t mx_scale(float bamax, MxScaleRule rule, Fp8Type t) {
  const bool e4 = t == Fp8Type::kE4M3;
  if (rule == MxScaleRule::kRceil) {
    const float descale = div(bamax, e4 ? 448.0f : 57344.0f);
    if (descale != descale) return 0xFF;
    if (is_inf(descale)) return 0xFE;
    const float e = fminf(fmaxf(ceil_log2f(descale), -127.0f), 127.0f);
    return static_cast<uint8_t>(static_cast<int>(e) + 127);
  }
  if (bamax != bamax) return 0xFF;
  const int target_max_pow2 = e4 ? 8 : 15;
  const int mbits = e4 ? 3 : 2;
  uint32_t bits = f32_bits(bamax);
  if (rule == MxScaleRule::kEven) bits = (bits + (1u << (23 - mbits - 1))) & 0xFF800000u;  // round to mbits
  int extracted = static_cast<int>((bits >> 23) & 0xFFu) - 127;
  if (rule == MxScaleRule::kCeil && (bits & 0x7FFFFFu) != 0) ++extracted;
  const int d = extracted - target_max_pow2;
  const int unbiased = d < -127 ? -127 : (d > 128 ? 128 : d);
  return static_cast<uint8_t>(unbiased + 127);
}

/// `to_mx`'s data code of element x in a block with scale byte e.
QTC_HD uint8_t mx_code(float x, uint8_t e, MxScaleRule rule, Fp8Type t) {
  const float max_pos = t == Fp8Type::kE4M3 ? 448.0f : 57344.0f;
  float v;
  if (rule == MxScaleRule::kRceil) {
    // rcp: NaN for 0xFF, 2^-127 for 0xFE, 1.0 for 0x00, else 2^(127 - e); data_hp * rcp
    // 0xFF: rcp is descale itself, the block amax's NaN 0x7FC00000 / elem_max (x * rcp keeps rcp's NaN)
    const float rcp = e == 0xFF ? bits_f32(0x7FC00000u)
                                : (e == 0xFE ? 0x1p-127f : (e == 0 ? 1.0f : bits_f32(static_cast<uint32_t>(254 - e) << 23)));
    v = mul(x, rcp);
  } else {
    // scale_fp32 = (e << 23) as float (0xFF -> +Inf), clamped to at least 2^-126; data_hp / scale_fp32
    const float s = fmaxf(bits_f32(static_cast<uint32_t>(e) << 23), 0x1p-126f);
    v = div(x, s);
  }
  return cast_fp8(clamp(v, -max_pos, max_pos), t);
}

/// nvfp4_quantize's E4M3 block-scale byte: with a per-tensor scale pts = float32(amax) / 2688,
/// e4m3(clamp((bamax / 6) / pts, 2^-6, 448)); without, e4m3(clamp(bamax / 6, 2^-6, 448)).
QTC_HD uint8_t nvfp4_scale(float bamax, bool two_level, float pts, bool tiny_floor) {
  float s = div(bamax, 6.0f);
  if (two_level) s = div(s, pts);
  return cast_fp8(clamp(s, tiny_floor ? 0x1p-6f : 0.0f, 448.0f), Fp8Type::kE4M3);
}

/// nvfp4_quantize's data multiplier of a block with scale byte sf: (1 / pts) / sf, or 1 / sf.
QTC_HD float nvfp4_multiplier(uint8_t sf, bool two_level, float pts) {
  const float s = decode_e4m3(sf);
  return two_level ? div(div(1.0f, pts), s) : div(1.0f, s);
}

/// nvfp4_quantize's E2M1 code of element x: torchao's cast of clamp(x * multiplier, -6, 6).
QTC_HD uint8_t nvfp4_code(float x, float multiplier) {
  return f32_to_e2m1(clamp(mul(x, multiplier), -6.0f, 6.0f));
}

}  // namespace qtc::torchao
