/// \file codec.hpp
/// \brief Scalar codecs: encode a float to E2M1, E4M3, E5M2, E8M0, BF16, F16 with an explicit rounding and
///        overflow policy, and decode. Pure functions, no global state.
///
/// Two implementations live here and are cross-checked by the tests:
///  * `round_pack<F>`: a generic bit-level encoder for any QuantFormat (decompose, round on the exact
///    value in double, pack), slow and obviously right;
///  * the per-format functions `encode_e4m3` etc. (numeric.hpp, shared with the CUDA kernels): branch-light
///    bit manipulation on the float's bits, used on the hot paths of the quantizers.
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
#include "qtc/numeric.hpp"

namespace qtc {

// ---------------------------------------------------------------------------------------------------
// Generic encoder: the slow, obviously-right path.

/// Encodes `x` (any double; float inputs are exact) into format F. `rbits` are used only for
/// Rounding::kStochastic: the value rounds up iff frac + rbits / 2^32 >= 1, computed exactly.
/// NaN input gives the canonical positive NaN (E4M3/E5M2 0x7F; F16 0x7E00; BF16 0x7FC0); E2M1 has no NaN
/// and gives +max (0x7), as CUDA's conversion does.
template <typename F, fmt::IfQuantFormat<F> = 0>
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
template <typename F, fmt::IfQuantFormat<F> = 0>
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
// FP8: encode_e4m3, encode_e5m2, decode_e4m3, decode_e5m2 live in numeric.hpp (host and device).

extern const std::array<float, 256> kE4M3Table;  ///< decoded value of every E4M3 byte (decode_generic)
extern const std::array<float, 256> kE5M2Table;  ///< decoded value of every E5M2 byte (decode_generic)

// ---------------------------------------------------------------------------------------------------
// E2M1 (FP4)

inline constexpr float kE2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
// encode_e2m1, encode_e2m1_rn, encode_e2m1_stochastic, decode_e2m1: numeric.hpp.

// E8M0 (encode_e8m0, floor_log2, decode_e8m0, e8m0_reciprocal): numeric.hpp.

}  // namespace qtc
