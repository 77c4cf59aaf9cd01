/// \file ue4m3.hpp
/// \brief UE4M3: bit layout and limits, checked against the table of TE_FORMATS.md §0.
#pragma once
#include "qtc/formats/format_traits.hpp"

namespace qtc::fmt {

struct UE4M3 {
  static constexpr int kExpBits = 4;
  static constexpr int kManBits = 3;
  static constexpr int kBias = 7;
  static constexpr bool kSigned = false;
  static constexpr NanInfEncoding kEncoding = NanInfEncoding::kCanonicalOnly;
};

static_assert(Limits<UE4M3>::kMax == 448.0, "UE4M3 max finite value");
static_assert(Limits<UE4M3>::kMinNormal == 0.015625, "UE4M3 min normal");
static_assert(Limits<UE4M3>::kMinSubnormal == 0.001953125, "UE4M3 min subnormal");

}  // namespace qtc::fmt
