/// \file e2m1.hpp
/// \brief E2M1: bit layout and limits, checked against the table of TE_FORMATS.md §0.
#pragma once
#include "qtc/formats/format_traits.hpp"

namespace qtc::fmt {

struct E2M1 {
  static constexpr int kExpBits = 2;
  static constexpr int kManBits = 1;
  static constexpr int kBias = 1;
  static constexpr bool kSigned = true;
  static constexpr NanInfEncoding kEncoding = NanInfEncoding::kNone;
};

static_assert(Limits<E2M1>::kMax == 6.0, "E2M1 max finite value");
static_assert(Limits<E2M1>::kMinNormal == 1.0, "E2M1 min normal");
static_assert(Limits<E2M1>::kMinSubnormal == 0.5, "E2M1 min subnormal");

}  // namespace qtc::fmt
