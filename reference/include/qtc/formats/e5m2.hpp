/// \file e5m2.hpp
/// \brief E5M2: bit layout and limits, checked against the table of TE_FORMATS.md §0.
#pragma once
#include "qtc/formats/format_traits.hpp"

namespace qtc::fmt {

struct E5M2 {
  static constexpr int kExpBits = 5;
  static constexpr int kManBits = 2;
  static constexpr int kBias = 15;
  static constexpr bool kSigned = true;
  static constexpr NanInfEncoding kEncoding = NanInfEncoding::kIeee754;
};

static_assert(Limits<E5M2>::kMax == 57344.0, "E5M2 max finite value");
static_assert(Limits<E5M2>::kMinNormal == 6.103515625e-05, "E5M2 min normal");
static_assert(Limits<E5M2>::kMinSubnormal == 1.52587890625e-05, "E5M2 min subnormal");

}  // namespace qtc::fmt
