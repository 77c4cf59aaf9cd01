/// \file value_equivalence.hpp
/// \brief The verdict between pass and fail (issue 26): the bytes differ, the decoded values are equal. Some blocks
///        have two encodings of the same values: an all-zero block (every scale gives the same zeros), -0.0 and +0.0
///        (codes 0x8 and 0x0 of E2M1, 0x80 and 0x00 of FP8), two NaN encodings, and a block whose values lie on the
///        grids of two scales a power of two apart (its largest magnitude rounds onto a power-of-two boundary, so the
///        codes under the larger scale all have a free low mantissa bit). `qtc verify` reports such a file as
///        EQUIVALENT with the count of differing elements, the first differing block and which of these reasons holds.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "qtc/quantized.hpp"

namespace qtc::conformance {

struct Equivalence {
  bool equal = false;           ///< every decoded value of the planes compared is equal (any NaN equals any NaN)
  int64_t differing_bytes = 0;  ///< data bytes + scale entries + amax values that differ
  std::string first;            ///< the first differing block and why two encodings exist there
  std::string message;          ///< one line: "bytes differ, decoded values equal: ..." (or where the values differ)
};

/// Compares two quantizations of the same recipe and shape (same planes) plane by plane: bytes, then the values
/// ref::dequantize gives (F32). `planes` says which planes to compare.
Equivalence compare_values(const QuantizedTensor& want, const QuantizedTensor& got, const std::vector<PlaneKind>& planes);

}  // namespace qtc::conformance
