/// \file numeric.hpp
/// \brief The numeric core, one copy for the host and the device (TE_FORMATS.md §0-§3): the scalar codecs
///        (E2M1, E4M3, E5M2, E8M0 encode and decode; BF16), the block-scale
///        formulas of every recipe and the constants of the profiles. The CPU reference (codec.hpp, the
///        quantizers) and the CUDA kernels (kernels/src) both call these functions, so the two cannot drift.
///
/// Arithmetic is plain IEEE binary32 with round-to-nearest-even: the host is built with -ffp-contract=off and
/// the device with --fmad=false -prec-div=true, so `a * b + c` is two roundings on both and `a / b` is the
/// correctly rounded quotient. Nothing here includes a CUDA header (nvcc declares the intrinsics used under
/// __CUDA_ARCH__ itself). The exhaustive tests (reference/tests/test_codec.cpp) check every function here
/// against an independent brute-force encoder and the generic encoder of codec.hpp.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "qtc/host_device.hpp"
#include "qtc/layout.hpp"  // the scale layouts' offsets (swizzled_offset, ScaleGeometry), shared with the kernels

namespace qtc {

/// Rounding of a value onto a format's grid.
enum class Rounding {
  kNearestEven,  ///< RN: round to nearest, ties to even (IEEE default, `cvt.rn`)
  kTowardZero,   ///< RZ: truncate
  kStochastic,   ///< SR: round up with probability equal to the fractional position (random bits supplied)
};

/// What happens to a finite value beyond the format's largest finite value (and to ±Inf).
enum class Overflow {
  kSatFinite,  ///< clamp to ±max finite (`__NV_SATFINITE`, `.satfinite`)
  kNaN,        ///< Inf where the format has one (E5M2, F16, BF16), NaN otherwise (E4M3); E2M1 has neither and saturates
};

/// NVFP4 sign handling of results that round to zero: TE's kernels keep the sign (-0.0 -> 0x8), TE's
/// PyTorch reference tests `x >= 0` and so maps -0.0 to 0x0.
enum class NegZero { kKeepSign, kPositiveZero };

/// How a positive float becomes a power of two.
enum class E8m0Rounding {
  kUp,       ///< ceil(log2 v): TE `float_to_e8m0`, cuBLAS `cvt.rp.satfinite.ue8m0x2` (v <= 2^-127 -> 0x00)
  kDown,     ///< floor(log2 v), exact from the bits (OCP); values below 2^-127 -> 0x00
  kNearest,  ///< nearest power of two on the linear scale, ties (1.5 * 2^e) to the even code
};

// ---------------------------------------------------------------------------------------------------
// Constants

inline constexpr float kFltMax = 3.402823466e+38f;
inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;
inline constexpr float kE2M1Max = 6.0f;
/// RN(1/6): TE's fp4_max_inv, the NVFP4 block-scale multiplier (§1.4).
inline constexpr float kNvfp4Rcp6 = 0x1.555556p-3f;
/// RN(1/448) and RN(1/57344): the reciprocals TE's MXFP8 rceil scale multiplies by (§2.2; bits 0x3B124925, 0x37924925).
inline constexpr float kMxRcpE4M3 = 0x1.24924ap-9f;
inline constexpr float kMxRcpE5M2 = 0x1.24924ap-16f;
/// The largest unbiased exponent of an E4M3 / E5M2 value (OCP's emax_elem of the MX floor rule).
inline constexpr int kE4M3Emax = 8;
inline constexpr int kE5M2Emax = 15;
/// torchao's NVFP4 per-tensor scale divisor: F8E4M3_MAX * F4_E2M1_MAX (per_tensor_amax_to_scale).
inline constexpr float kTorchAOPerTensorDivisor = 2688.0f;
/// torchao's NVFP4 block-scale floor: torch.finfo(float8_e4m3fn).tiny, E4M3's smallest normal.
inline constexpr float kTorchAOBlockScaleMin = 0x1p-6f;

// ---------------------------------------------------------------------------------------------------
// Bits

QTC_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return __builtin_bit_cast(uint32_t, f);  // std::bit_cast is C++20: this header also compiles as C++17
#endif
}
QTC_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}
QTC_HD int count_leading_zeros(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __clz(static_cast<int>(u));
#else
  return u == 0 ? 32 : __builtin_clz(u);
#endif
}
QTC_HD bool is_nan(float f) { return (f32_bits(f) & 0x7FFFFFFFu) > 0x7F800000u; }
QTC_HD bool is_inf(float f) { return (f32_bits(f) & 0x7FFFFFFFu) == 0x7F800000u; }

/// IEEE minNum / maxNum (C fminf / fmaxf): a NaN operand is ignored.
QTC_HD float min_num(float a, float b) {
  if (a != a) return b;
  if (b != b) return a;
  return a < b ? a : b;
}
QTC_HD float max_num(float a, float b) {
  if (a != a) return b;
  if (b != b) return a;
  return a > b ? a : b;
}

// ---------------------------------------------------------------------------------------------------
// BF16

QTC_HD float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

/// float -> bf16, RN-even; NaN stays NaN (quiet, sign kept).
QTC_HD uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// ---------------------------------------------------------------------------------------------------
// FP8 (E4M3, E5M2): bit manipulation, equal to codec.hpp's round_pack for every float (tested exhaustively
// over BF16 and F16 and on random floats)

namespace detail {
/// RN-even of a positive normal float's bits to `man` mantissa bits, re-biased by (127 - bias).
template <int kMan, int kBias>
QTC_HD uint32_t round_normal_bits(uint32_t u) {
  constexpr int kShift = 23 - kMan;
  constexpr uint32_t kHalf = 1u << (kShift - 1);
  const uint32_t rebased = u - (static_cast<uint32_t>(127 - kBias) << 23);
  const uint32_t rem = rebased & ((1u << kShift) - 1);
  uint32_t code = rebased >> kShift;
  if (rem > kHalf || (rem == kHalf && (code & 1u))) ++code;
  return code;
}
}  // namespace detail

/// float -> E4M3. satfinite: |x| >= 464 and ±Inf give ±448; kNaN: they give NaN. NaN -> 0x7F.
QTC_HD uint8_t encode_e4m3(float x, Overflow overflow = Overflow::kSatFinite) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x43E80000u) {  // >= 464 (the tie between 448 and the NaN slot rounds to 448)
    if (a == 0x43E80000u || overflow == Overflow::kSatFinite) return static_cast<uint8_t>(sign | 0x7Eu);
    return static_cast<uint8_t>(sign | 0x7Fu);
  }
  if (a < 0x3C800000u) {  // below 2^-6: subnormal grid of 2^-9 (the product is exact)
    const float q = rintf(bits_f32(a) * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(q));
  }
  return static_cast<uint8_t>(sign | detail::round_normal_bits<3, 7>(a));
}

/// float -> E5M2. satfinite: |x| >= 61440 and ±Inf give ±57344; kNaN: they give ±Inf. NaN -> 0x7F.
QTC_HD uint8_t encode_e5m2(float x, Overflow overflow = Overflow::kSatFinite) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x47700000u)  // >= 61440: rounds to 2^16, beyond max
    return static_cast<uint8_t>(overflow == Overflow::kSatFinite ? (sign | 0x7Bu) : (sign | 0x7Cu));
  if (a < 0x38800000u) {  // below 2^-14: subnormal grid of 2^-16
    const float q = rintf(bits_f32(a) * 65536.0f);
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(q));
  }
  return static_cast<uint8_t>(sign | detail::round_normal_bits<2, 15>(a));
}

QTC_HD uint8_t encode_fp8(float x, bool e5m2, Overflow overflow = Overflow::kSatFinite) {
  return e5m2 ? encode_e5m2(x, overflow) : encode_e4m3(x, overflow);
}

/// E4M3 byte -> float. 0x7F and 0xFF -> the canonical NaN 0x7FC00000.
QTC_HD float decode_e4m3(uint32_t c) {
  const uint32_t s = (c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xFu, m = c & 7u;
  if ((c & 0x7Fu) == 0x7Fu) return bits_f32(0x7FC00000u);
  if (e == 0) return bits_f32(s | f32_bits(static_cast<float>(m) * 0x1p-9f));  // exact
  return bits_f32(s | ((e + 120u) << 23) | (m << 20));
}

/// E5M2 byte -> float (IEEE-like: ±Inf, NaN with the code's sign).
QTC_HD float decode_e5m2(uint32_t c) {
  const uint32_t s = (c & 0x80u) << 24;
  const uint32_t e = (c >> 2) & 0x1Fu, m = c & 3u;
  if (e == 0x1F) return bits_f32(s | (m == 0 ? 0x7F800000u : 0x7FC00000u));
  if (e == 0) return bits_f32(s | f32_bits(static_cast<float>(m) * 0x1p-16f));  // exact
  return bits_f32(s | ((e + 112u) << 23) | (m << 21));
}

QTC_HD float decode_fp8(uint32_t c, bool e5m2) { return e5m2 ? decode_e5m2(c) : decode_e4m3(c); }

// ---------------------------------------------------------------------------------------------------
// E2M1 (FP4)

/// float -> E2M1 code (low 4 bits), RN-even, satfinite (TE_FORMATS.md §0.3). NaN -> 0x7 (+6) with
/// kKeepSign (CUDA), 0x0 with kPositiveZero (TE's PyTorch reference); kPositiveZero also takes the sign from
/// `x < 0`, so -0.0 gives 0x0.
QTC_HD uint8_t encode_e2m1(float x, NegZero neg_zero = NegZero::kKeepSign) {
  if (x != x) return neg_zero == NegZero::kKeepSign ? 0x7 : 0x0;
  const float a = fabsf(x);
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) + static_cast<uint32_t>(a > 5.0f);
  const bool neg = neg_zero == NegZero::kKeepSign ? (f32_bits(x) >> 31) != 0 : (x < 0.0f);
  return static_cast<uint8_t>(c | (neg ? 0x8u : 0u));
}

/// The same encoding (kKeepSign) for every non-NaN float and for positive NaNs, branch-free: E2M1 rounds to a
/// quantum of 0.5 below 2, 1 in [2, 4) and 2 above, so code = rint(a * s) + o with (s, o) = (2, 0), (1, 2),
/// (0.5, 4), saturated at 7. One FMA computes a * s + (1.5 * 2^23 + o) rounded once (RN-even at the integer
/// quantum; o is even, so ties stay even) and the code is read off the low bits. NaN and Inf give 7 with the
/// sign bit of x (GPU arithmetic never produces a negative NaN; the tests cover every float).
QTC_HD uint32_t encode_e2m1_rn(float x) {
  const float a = fabsf(x);
  const bool lt2 = a < 2.0f, lt4 = a < 4.0f;
  const float s = lt2 ? 2.0f : (lt4 ? 1.0f : 0.5f);
  const float o = lt2 ? 12582912.0f : (lt4 ? 12582914.0f : 12582916.0f);
  const uint32_t q0 = f32_bits(fmaf(a, s, o)) - 0x4B400000u;
  const uint32_t q = q0 < 7u ? q0 : 7u;
  return q | ((f32_bits(x) >> 28) & 8u);
}

/// Stochastic E2M1 rounding, TE's software emulation (`ptx::stochastic_round_fp4_e2m1`): `rbyte` is the
/// 8-bit random value for this element. NaN -> +6.
QTC_HD uint8_t encode_e2m1_stochastic(float v, uint32_t rbyte) {
  const float u = static_cast<float>(rbyte) * (1.0f / 256.0f);
  const float a = fabsf(v);
  const float step = a >= 4.0f ? 2.0f : (a >= 2.0f ? 1.0f : 0.5f);
  const float t = fmaf(u, step, a);
  const float step_t = t >= 4.0f ? 2.0f : (t >= 2.0f ? 1.0f : 0.5f);
  const float inv = t >= 4.0f ? 0.5f : (t >= 2.0f ? 1.0f : 2.0f);
  const float q = fminf(floorf(t * inv) * step_t, 6.0f);
  const float r = copysignf(q, v != v ? 1.0f : v);
  return encode_e2m1(r);  // r is on the grid (or NaN-free): exact
}

/// E2M1 code -> float, without a table (a table indexed at run time would live in a GPU's local memory).
QTC_HD float decode_e2m1(uint32_t c) {
  const uint32_t m = c & 7u;
  const float v = m < 2u ? 0.5f * static_cast<float>(m) : bits_f32((((m >> 1) + 126u) << 23) | ((m & 1u) << 22));
  return (c & 8u) ? -v : v;
}

// ---------------------------------------------------------------------------------------------------
// E8M0 (MX scales)

/// floor(log2 |v|) of a finite non-zero float, exact from the bits (subnormals included).
QTC_HD int floor_log2(float v) {
  const uint32_t a = f32_bits(v) & 0x7FFFFFFFu;
  const int e = static_cast<int>(a >> 23);
  if (e != 0) return e - 127;
  return (31 - count_leading_zeros(a)) - 149;  // subnormal: value = m * 2^-149
}

/// float -> E8M0. NaN and negative values -> 0xFF; +Inf -> 0xFE (satfinite, TE); ±0 -> 0x00.
QTC_HD uint8_t encode_e8m0(float v, E8m0Rounding rounding = E8m0Rounding::kUp) {
  if (v != v || v < 0.0f) return 0xFF;
  if (is_inf(v)) return 0xFE;
  if (v == 0.0f) return 0x00;
  const uint32_t u = f32_bits(v);
  if (rounding == E8m0Rounding::kUp) {
    uint32_t e = u >> 23;
    const uint32_t m = u & 0x7FFFFFu;
    if ((m > 0 && e != 0xFE) && !(e == 0 && m <= 0x400000u)) ++e;
    return static_cast<uint8_t>(e);
  }
  const int fl = floor_log2(v);
  if (fl < -127) return 0x00;  // below 2^-127: the smallest code (kNearest: 0 is not representable either)
  if (rounding == E8m0Rounding::kDown) return static_cast<uint8_t>(fl + 127);
  // kNearest: 2^fl and the midpoint 1.5 * 2^fl are exact floats (fl >= -127)
  const float lo = fl == -127 ? bits_f32(0x00400000u) : bits_f32(static_cast<uint32_t>(fl + 127) << 23);
  const float mid = lo * 1.5f;
  int e = fl;
  if (v > mid || (v == mid && ((fl + 127) & 1))) ++e;
  if (e + 127 > 254) return 0xFE;
  return static_cast<uint8_t>(e + 127);
}

/// E8M0 -> float: 2^(e-127); 0x00 -> 2^-127 (a subnormal float); 0xFF -> NaN.
QTC_HD float decode_e8m0(uint32_t e) {
  if (e == 0xFF) return bits_f32(0x7FFFFFFFu);
  if (e == 0) return bits_f32(0x00400000u);
  return bits_f32(e << 23);
}
/// A power-of-two scale as its UE8M0 byte (FP8 block scales stored with scale_dtype=ue8m0, the exponent field as
/// DeepGEMM's `pack_ue8m0_to_int` and TE's block-scaling-to-MXFP8 conversion take it): 2^-127 (subnormal) and
/// 0 -> 0x00, NaN, Inf and negative values -> 0xFF (UE8M0 has no Inf). Other values are not powers of two in
/// UE8M0's range: the caller checks that (e8m0_is_pow2) before storing.
QTC_HD uint8_t e8m0_of_pow2(float v) {
  if (v != v || is_inf(v) || v < 0.0f) return 0xFF;
  return static_cast<uint8_t>(f32_bits(v) >> 23);
}
/// Whether v is exactly representable as a UE8M0 scale (a power of two in [2^-127, 2^127]; NaN counts: 0xFF).
QTC_HD bool e8m0_is_pow2(float v) {
  if (v != v) return true;
  const uint32_t u = f32_bits(v);
  return u == 0x00400000u || ((u >> 31) == 0 && (u & 0x7FFFFFu) == 0 && (u >> 23) != 0 && (u >> 23) != 0xFF);
}

/// TE `ptx::exp2f_rcp`: the reciprocal of an E8M0 scale as float: 2^(127-e); e==254 -> 2^-127; 255 -> NaN.
QTC_HD float e8m0_reciprocal(uint32_t e) {
  if (e == 0xFF) return bits_f32(0x7FFFFFFFu);
  if (e == 254) return bits_f32(0x00400000u);
  return bits_f32((254u - e) << 23);
}

// ---------------------------------------------------------------------------------------------------
// Scale layouts

// The layouts' offsets (the cuBLAS 128x4 swizzle, the 8x4 one, ScaleGeometry::offset) are layout.hpp's.

// ---------------------------------------------------------------------------------------------------
// Block-scale formulas

/// NVFP4 global encode scale S_enc (§1.3): RN(e4m3_max * 6 / amax). te: fminf drops a NaN (-> FLT_MAX), amax 0
/// and an underflow give 1. te_pyref (`nan_scale`): torch.div and torch.min propagate a NaN, then 0 -> 1.
QTC_HD float nvfp4_global_encode_scale(float amax, float e4m3_max, bool nan_scale) {
  const float s = e4m3_max * 6.0f / amax;
  if (nan_scale) {
    if (s != s) return s;
    const float c = s < kFltMax ? s : kFltMax;
    return c == 0.0f ? 1.0f : c;
  }
  const float c = min_num(s, kFltMax);
  if (amax == 0.0f || c == 0.0f) return 1.0f;
  return c;
}

/// NVFP4 block scale byte (§1.4): e4m3(fminf(bamax * (S_enc * RN(1/6)), FLT_MAX)); with `nan_scale` a NaN
/// product is kept, so the byte is 0x7F.
QTC_HD uint8_t nvfp4_block_scale(float bamax, float s_enc, bool nan_scale) {
  const float v = bamax * (s_enc * kNvfp4Rcp6);
  if (nan_scale && v != v) return 0x7F;
  return encode_e4m3(min_num(v, kFltMax));
}

/// The factor a block's elements are multiplied by before the E2M1 cast (§1.4):
/// fminf(1 / (float(sf) * S_dec), FLT_MAX), a NaN kept (possible only when S_dec or sf is NaN).
QTC_HD float nvfp4_encode_factor(uint32_t sf, float s_dec) {
  const float v = 1.0f / (decode_e4m3(sf) * s_dec);
  return v != v ? v : min_num(v, kFltMax);
}

/// 4over6 (§1.12): the two candidate scale bytes, base = bamax / 6 * S_enc; map-to-4 scales by 1.5.
QTC_HD void nvfp4_4over6_scales(float bamax, float s_enc, uint8_t& sf4, uint8_t& sf6) {
  const float base = bamax / 6.0f * s_enc;
  sf4 = encode_e4m3(fminf(base * 1.5f, 448.0f));
  sf6 = encode_e4m3(fminf(base, 448.0f));
}

/// 4over6 error term of one element: d = RN(RN(RN(q * sf) * amax) / (6 * e4m3_max)) - x; |d| (MAE) or d*d (MSE).
/// `sf_value` is the candidate's decoded scale, decode_e4m3(sf) (decoded once per block by the callers).
QTC_HD float nvfp4_4over6_err(float x, uint32_t code, float sf_value, float amax, float k6max, bool mse) {
  const float t = decode_e2m1(code) * sf_value;
  const float d = (t * amax) / k6max - x;
  return mse ? d * d : fabsf(d);
}

/// MXFP8 E8M0 scale of a block (§2.2) under TE's order: rceil = float_to_e8m0(bamax * RN(1/elem_max)); the OCP
/// floor rule 2^(floor(log2 bamax) - emax_elem) (NaN -> 0xFF, Inf -> 0xFE, 0 -> 0x00). `nonfinite_nan`
/// (OCP MX): a NaN or Inf block gets the NaN scale 0xFF.
QTC_HD uint8_t mx_block_scale(float bamax, bool e5m2, bool floor_rule, bool nonfinite_nan) {
  if (nonfinite_nan && !(fabsf(bamax) <= kFltMax)) return 0xFF;
  if (!floor_rule) return encode_e8m0(bamax * (e5m2 ? kMxRcpE5M2 : kMxRcpE4M3), E8m0Rounding::kUp);
  if (bamax != bamax) return 0xFF;
  if (is_inf(bamax)) return 0xFE;
  if (bamax == 0.0f) return 0x00;
  const int e = floor_log2(bamax) - (e5m2 ? kE5M2Emax : kE4M3Emax);
  return static_cast<uint8_t>((e < -127 ? -127 : e) + 127);
}

/// FP8 scale from an amax (TE compute_scale_from_amax, §3.2): amax raised to eps; NaN, Inf and 0 give 1
/// (`inf_amax_zero`: Inf gives 0, TE's Python/C++ references); RN(max_fp8 / amax) (`reciprocal`:
/// max_fp8 * RN(1 / amax), PyTorch's `fp8_max / amax`); an infinite scale becomes `value_for_inf`; `pow2`
/// keeps only sign and exponent.
QTC_HD float fp8_scale_from_amax(float amax, float max_fp8, bool pow2, float eps, float value_for_inf, bool inf_amax_zero,
                                 bool reciprocal) {
  float a = amax;
  if (a < eps) a = eps;
  if (is_inf(a) && inf_amax_zero) return 0.0f;
  if (is_inf(a) || a == 0.0f || a != a) return 1.0f;
  float scale = reciprocal ? max_fp8 * (1.0f / a) : max_fp8 / a;
  if (is_inf(scale)) scale = value_for_inf;
  if (pow2) scale = bits_f32(f32_bits(scale) & 0xFF800000u);
  return scale;
}

}  // namespace qtc
