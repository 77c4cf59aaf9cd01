/// \file format_traits.hpp
/// \brief Constexpr traits of the small floating-point formats: one source of truth per format.
///
/// Each format header (e2m1.hpp, e4m3.hpp, e5m2.hpp, ue8m0.hpp, ue4m3.hpp) defines kExpBits, kManBits,
/// kBias, kSigned and the NaN/Inf encoding; the limits below are derived from those, and every header
/// checks them with static_assert against the hand-written table of TE_FORMATS.md.
#pragma once
#include <cstdint>
#include <type_traits>

namespace qtc::fmt {

enum class NanInfEncoding {
  kIeee754,        ///< all-ones exponent: Inf (mantissa 0) and NaN (E5M2, F16, BF16, F32)
  kCanonicalOnly,  ///< only the all-ones pattern S.1111.111 is NaN; no Inf (E4M3 "fn")
  kNone,           ///< no NaN, no Inf (E2M1)
  kUnsignedNanOnly ///< unsigned exponent-only format whose 0xFF is NaN (E8M0)
};

/// Whether F is a format traits type: kExpBits, kManBits, kBias (int), kSigned (bool) and kEncoding. A C++17
/// detection trait, so that the headers qtc/testing.hpp includes compile as C++17 (and under nvcc -std=c++17):
/// the templates below are constrained with it through enable_if, the same declaration in every language mode.
template <typename F, typename = void>
inline constexpr bool kIsQuantFormat = false;
template <typename F>
inline constexpr bool kIsQuantFormat<F, std::void_t<decltype(F::kExpBits), decltype(F::kManBits), decltype(F::kBias),
                                                    decltype(F::kSigned), decltype(F::kEncoding)>> =
    std::is_convertible_v<decltype(F::kExpBits), int> && std::is_convertible_v<decltype(F::kManBits), int> &&
    std::is_convertible_v<decltype(F::kBias), int> && std::is_convertible_v<decltype(F::kSigned), bool> &&
    std::is_convertible_v<decltype(F::kEncoding), NanInfEncoding>;
/// The constraint of every template over a format: `template <typename F, fmt::IfQuantFormat<F> = 0>`.
template <typename F>
using IfQuantFormat = std::enable_if_t<kIsQuantFormat<F>, int>;
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// The same as a C++20 concept, for code of its own (qtc's templates use IfQuantFormat, valid in both modes).
template <typename F>
concept QuantFormat = kIsQuantFormat<F>;
#endif

constexpr double pow2(int e) {
  double r = 1.0;
  if (e >= 0)
    for (int i = 0; i < e; ++i) r *= 2.0;
  else
    for (int i = 0; i < -e; ++i) r /= 2.0;
  return r;
}

/// Limits derived from the bit layout alone.
template <typename F, IfQuantFormat<F> = 0>
struct Limits {
  static constexpr int kBits = (F::kSigned ? 1 : 0) + F::kExpBits + F::kManBits;
  static constexpr int kMaxBiasedExp = (1 << F::kExpBits) - 1 -
      (F::kEncoding == NanInfEncoding::kIeee754 ? 1 : 0);
  /// Largest mantissa field at the largest exponent (E4M3 reserves 111 there for NaN).
  static constexpr int kMaxManAtTop = (1 << F::kManBits) - 1 -
      (F::kEncoding == NanInfEncoding::kCanonicalOnly ? 1 : 0);
  static constexpr int kEmax = kMaxBiasedExp - F::kBias;
  static constexpr int kEminNormal = 1 - F::kBias;
  static constexpr double kMax =
      pow2(kEmax) * (1.0 + static_cast<double>(kMaxManAtTop) / static_cast<double>(1 << F::kManBits));
  static constexpr double kMinNormal = pow2(kEminNormal);
  static constexpr double kMinSubnormal = pow2(kEminNormal - F::kManBits);
};

}  // namespace qtc::fmt
