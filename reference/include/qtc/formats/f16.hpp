/// \file f16.hpp
/// \brief IEEE binary16 and bfloat16 as QuantFormat traits (inputs and dequantized outputs).
#pragma once
#include "qtc/formats/format_traits.hpp"

namespace qtc::fmt {

struct F16 {
  static constexpr int kExpBits = 5;
  static constexpr int kManBits = 10;
  static constexpr int kBias = 15;
  static constexpr bool kSigned = true;
  static constexpr NanInfEncoding kEncoding = NanInfEncoding::kIeee754;
};
struct BF16 {
  static constexpr int kExpBits = 8;
  static constexpr int kManBits = 7;
  static constexpr int kBias = 127;
  static constexpr bool kSigned = true;
  static constexpr NanInfEncoding kEncoding = NanInfEncoding::kIeee754;
};

static_assert(Limits<F16>::kMax == 65504.0, "F16 max");
static_assert(Limits<BF16>::kMax == 3.3895313892515355e38, "BF16 max 0x1.FEp127");

}  // namespace qtc::fmt
