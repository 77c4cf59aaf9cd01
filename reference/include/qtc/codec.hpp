/// \file codec.hpp
/// \brief Scalar codecs: encode a float to E2M1, E4M3, E5M2, E8M0, BF16, F16 with an explicit rounding and
///        overflow policy, and decode. Pure functions, no global state.
///
/// Two implementations live here and are cross-checked by the tests:
///  * `round_pack<F>`: a generic bit-level encoder for any QuantFormat (decompose, round on the exact
///    value in double, pack), slow and obviously right;
///  * the per-format functions `encode_e4m3` etc.: branch-light bit manipulation on the float's bits, used
///    on the hot paths of the quantizers.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "qtc/formats/e2m1.hpp"
#include "qtc/formats/e4m3.hpp"
#include "qtc/formats/e5m2.hpp"
#include "qtc/formats/f16.hpp"
#include "qtc/formats/ue4m3.hpp"
#include "qtc/formats/ue8m0.hpp"

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

inline uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float bits_f32(uint32_t u) { return std::bit_cast<float>(u); }

// ---------------------------------------------------------------------------------------------------
// Generic encoder: the slow, obviously-right path.

/// Encodes `x` (any double; float inputs are exact) into format F. `rbits` are used only for
/// Rounding::kStochastic: the value rounds up iff frac + rbits / 2^32 >= 1, computed exactly.
/// NaN input gives the canonical positive NaN (E4M3/E5M2 0x7F; F16 0x7E00; BF16 0x7FC0); E2M1 has no NaN
/// and gives +max (0x7), as CUDA's conversion does.
template <fmt::QuantFormat F>
uint32_t round_pack(double x, Rounding rounding = Rounding::kNearestEven, Overflow overflow = Overflow::kSatFinite,
                    uint32_t rbits = 0) {
  using L = fmt::Limits<F>;
  constexpr int kMan = F::kManBits;
  constexpr uint32_t kSignBit = F::kSigned ? (1u << (F::kExpBits + F::kManBits)) : 0u;
  const uint32_t max_code = (static_cast<uint32_t>(L::kMaxBiasedExp) << kMan) | static_cast<uint32_t>(L::kMaxManAtTop);
  auto nan_code = [&]() -> uint32_t {
    if constexpr (F::kEncoding == fmt::NanInfEncoding::kIeee754)
      return (((1u << F::kExpBits) - 1) << kMan) | (kMan == 2 ? 0x3u : (1u << (kMan - 1)));  // E5M2 0x7F, F16 0x7E00, BF16 0x7FC0
    else if constexpr (F::kEncoding == fmt::NanInfEncoding::kCanonicalOnly)
      return (1u << (F::kExpBits + kMan)) - 1;
    else if constexpr (F::kEncoding == fmt::NanInfEncoding::kUnsignedNanOnly)
      return 0xFFu;
    else
      return max_code;  // E2M1: NaN -> +max
  };
  if (std::isnan(x)) return nan_code();
  const bool neg = std::signbit(x);
  if (neg && !F::kSigned) return nan_code();
  const uint32_t sign = neg ? kSignBit : 0u;
  const double a = std::fabs(x);
  auto overflowed = [&]() -> uint32_t {
    if (overflow == Overflow::kSatFinite || F::kEncoding == fmt::NanInfEncoding::kNone) return sign | max_code;
    if constexpr (F::kEncoding == fmt::NanInfEncoding::kIeee754)
      return sign | (((1u << F::kExpBits) - 1) << kMan);
    else
      return sign | nan_code();
  };
  if (std::isinf(a)) return overflowed();
  if (a == 0.0) return sign;
  int e2 = 0;
  (void)std::frexp(a, &e2);
  int exp = std::max(e2 - 1, L::kEminNormal);
  const double quantum = std::ldexp(1.0, exp - kMan);
  const double scaled = a / quantum;  // exact: a division by a power of two
  double n = std::floor(scaled);
  const double frac = scaled - n;     // exact
  switch (rounding) {
    case Rounding::kNearestEven:
      if (frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) != 0.0)) n += 1.0;
      break;
    case Rounding::kTowardZero:
      break;
    case Rounding::kStochastic:
      if (frac + static_cast<double>(rbits) * 0x1p-32 >= 1.0) n += 1.0;
      break;
  }
  if (n == 0.0) return sign;
  if (n >= std::ldexp(1.0, kMan + 1)) {  // carried into the next binade
    n /= 2.0;
    ++exp;
  }
  if (n < std::ldexp(1.0, kMan)) return sign | static_cast<uint32_t>(n);  // subnormal (exp == emin)
  const int biased = exp + F::kBias;
  const uint32_t man = static_cast<uint32_t>(n) - (1u << kMan);
  const uint32_t code = (static_cast<uint32_t>(biased) << kMan) | man;
  if (biased > L::kMaxBiasedExp || code > max_code) return overflowed();
  return sign | code;
}

/// Generic decoder for any QuantFormat (E8M0 included).
template <fmt::QuantFormat F>
double decode_generic(uint32_t code) {
  constexpr int kMan = F::kManBits;
  if constexpr (F::kEncoding == fmt::NanInfEncoding::kUnsignedNanOnly) {
    if (code == 0xFF) return std::nan("");
    return std::ldexp(1.0, static_cast<int>(code) - F::kBias);
  } else {
    const bool neg = F::kSigned && ((code >> (F::kExpBits + kMan)) & 1u);
    const uint32_t e = (code >> kMan) & ((1u << F::kExpBits) - 1);
    const uint32_t m = code & ((1u << kMan) - 1);
    double v;
    if constexpr (F::kEncoding == fmt::NanInfEncoding::kIeee754) {
      if (e == (1u << F::kExpBits) - 1) {
        v = m == 0 ? INFINITY : std::nan("");
        return neg ? -v : v;
      }
    }
    if constexpr (F::kEncoding == fmt::NanInfEncoding::kCanonicalOnly) {
      if (e == (1u << F::kExpBits) - 1 && m == (1u << kMan) - 1) return std::nan("");
    }
    if (e == 0)
      v = std::ldexp(static_cast<double>(m), 1 - F::kBias - kMan);
    else
      v = std::ldexp(static_cast<double>(m | (1u << kMan)), static_cast<int>(e) - F::kBias - kMan);
    return neg ? -v : v;
  }
}

// ---------------------------------------------------------------------------------------------------
// BF16 and F16

inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }

/// float -> bf16, RN-even; NaN stays NaN (quiet, sign kept).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// double -> bf16 with one rounding (RN-even), used where an exact sum is rounded once (RHT).
inline uint16_t f64_to_bf16(double d) {
  if (std::isnan(d)) return std::signbit(d) ? 0xFFC0 : 0x7FC0;
  return static_cast<uint16_t>(round_pack<fmt::BF16>(d, Rounding::kNearestEven, Overflow::kNaN));
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0x1F) return bits_f32(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    const float v = static_cast<float>(m) * 0x1p-24f;  // exact
    return bits_f32(sign | f32_bits(v));
  }
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}
uint16_t f32_to_f16(float f);

// ---------------------------------------------------------------------------------------------------
// FP8 (hot path, bit manipulation; equal to round_pack, which the tests check for every input class)

namespace detail {
/// RN-even of a positive normal float's bits to `man` mantissa bits, re-biased by (127 - bias).
template <int kMan, int kBias>
inline uint32_t round_normal_bits(uint32_t u) {
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
inline uint8_t encode_e4m3(float x, Overflow overflow = Overflow::kSatFinite) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x43E80000u) {  // >= 464 (the tie between 448 and the NaN slot rounds to 448)
    if (a == 0x43E80000u) return static_cast<uint8_t>(sign | 0x7Eu);
    return static_cast<uint8_t>(overflow == Overflow::kSatFinite ? (sign | 0x7Eu) : (sign | 0x7Fu));
  }
  if (a < 0x3C800000u) {  // below 2^-6: subnormal grid of 2^-9
    const float q = std::nearbyint(bits_f32(a) * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(q));
  }
  return static_cast<uint8_t>(sign | detail::round_normal_bits<3, 7>(a));
}

/// float -> E5M2. satfinite: |x| >= 61440 and ±Inf give ±57344; kNaN: they give ±Inf. NaN -> 0x7F.
inline uint8_t encode_e5m2(float x, Overflow overflow = Overflow::kSatFinite) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x47700000u)  // >= 61440: rounds to 2^16, beyond max
    return static_cast<uint8_t>(overflow == Overflow::kSatFinite ? (sign | 0x7Bu) : (sign | 0x7Cu));
  if (a < 0x38800000u) {  // below 2^-14: subnormal grid of 2^-16
    const float q = std::nearbyint(bits_f32(a) * 65536.0f);
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(q));
  }
  return static_cast<uint8_t>(sign | detail::round_normal_bits<2, 15>(a));
}

extern const std::array<float, 256> kE4M3Table;  ///< decoded value of every E4M3 byte
extern const std::array<float, 256> kE5M2Table;  ///< decoded value of every E5M2 byte
inline float decode_e4m3(uint8_t c) { return kE4M3Table[c]; }
inline float decode_e5m2(uint8_t c) { return kE5M2Table[c]; }

// ---------------------------------------------------------------------------------------------------
// E2M1 (FP4)

inline constexpr float kE2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
inline float decode_e2m1(uint8_t c) { return kE2M1Values[c & 0xF]; }

/// float -> E2M1 code (low 4 bits), RN-even, satfinite (TE_FORMATS.md §0.3). NaN -> 0x7 (+6) with
/// kKeepSign (CUDA), 0x0 with kPositiveZero (TE's PyTorch reference).
inline uint8_t encode_e2m1(float x, NegZero neg_zero = NegZero::kKeepSign) {
  if (std::isnan(x)) return neg_zero == NegZero::kKeepSign ? 0x7 : 0x0;
  const float a = std::fabs(x);
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) + static_cast<uint32_t>(a > 5.0f);
  const bool neg = neg_zero == NegZero::kKeepSign ? std::signbit(x) : (x < 0.0f);
  return static_cast<uint8_t>(c | (neg ? 0x8u : 0u));
}

/// Stochastic E2M1 rounding, TE's software emulation (`ptx::stochastic_round_fp4_e2m1`): `rbyte` is the
/// 8-bit random value for this element. NaN -> +6.
inline uint8_t encode_e2m1_stochastic(float v, uint8_t rbyte) {
  const float u = static_cast<float>(rbyte) * (1.0f / 256.0f);
  const float a = std::fabs(v);
  const float step = a >= 4.0f ? 2.0f : (a >= 2.0f ? 1.0f : 0.5f);
  const float t = std::fmaf(u, step, a);
  const float step_t = t >= 4.0f ? 2.0f : (t >= 2.0f ? 1.0f : 0.5f);
  const float inv = t >= 4.0f ? 0.5f : (t >= 2.0f ? 1.0f : 2.0f);
  const float q = std::fmin(std::floor(t * inv) * step_t, 6.0f);
  const float r = std::copysign(q, std::isnan(v) ? 1.0f : v);
  return encode_e2m1(r);  // r is on the grid (or NaN-free): exact
}

// ---------------------------------------------------------------------------------------------------
// E8M0 (MX scales)

/// How a positive float becomes a power of two.
enum class E8m0Rounding {
  kUp,       ///< ceil(log2 v): TE `float_to_e8m0`, cuBLAS `cvt.rp.satfinite.ue8m0x2` (v <= 2^-127 -> 0x00)
  kDown,     ///< floor(log2 v), exact from the bits (OCP); values below 2^-127 -> 0x00
  kNearest,  ///< nearest power of two on the linear scale, ties (1.5 * 2^e) to the even code
};

/// float -> E8M0. NaN and negative values -> 0xFF; +Inf -> 0xFE (satfinite, TE); 0 -> 0x00.
uint8_t encode_e8m0(float v, E8m0Rounding rounding = E8m0Rounding::kUp);
/// floor(log2 |v|) of a finite non-zero float, exact from the bits (subnormals included).
int floor_log2(float v);
/// E8M0 -> float: 2^(e-127); 0x00 -> 2^-127 (a subnormal float); 0xFF -> NaN.
inline float decode_e8m0(uint8_t e) {
  if (e == 0xFF) return bits_f32(0x7FFFFFFFu);
  if (e == 0) return bits_f32(0x00400000u);
  return bits_f32(static_cast<uint32_t>(e) << 23);
}
/// TE `ptx::exp2f_rcp`: the reciprocal of an E8M0 scale as float: 2^(127-e); e==254 -> 2^-127; 255 -> NaN.
inline float e8m0_reciprocal(uint8_t e) {
  if (e == 0xFF) return bits_f32(0x7FFFFFFFu);
  if (e == 254) return bits_f32(0x00400000u);
  return bits_f32(static_cast<uint32_t>(254 - e) << 23);
}

}  // namespace qtc
