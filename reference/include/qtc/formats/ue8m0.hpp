/// \file ue8m0.hpp
/// \brief UE8M0 (E8M0): the MX scale format; byte e means 2^(e-127), 0xFF is NaN.
#pragma once
#include "qtc/formats/format_traits.hpp"

namespace qtc::fmt {

struct UE8M0 {
  static constexpr int kExpBits = 8;
  static constexpr int kManBits = 0;
  static constexpr int kBias = 127;
  static constexpr bool kSigned = false;
  static constexpr NanInfEncoding kEncoding = NanInfEncoding::kUnsignedNanOnly;
};

static_assert(Limits<UE8M0>::kBits == 8, "E8M0 is one byte");
static_assert(Limits<UE8M0>::kMinNormal == pow2(-126) && pow2(UE8M0::kBias) == 1.7014118346046923e38,
              "E8M0 range 2^-127 .. 2^127");

}  // namespace qtc::fmt
