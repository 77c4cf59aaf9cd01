/// \file testing_vector.hpp
/// \brief What conforms() of testing.cpp (host buffers) and of testing_device.cpp (device buffers) share (internal):
///        the vector their arguments make, checked alike, and the assertion a verdict gives.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qtc/testing.hpp"
#include "qtc/verify.hpp"

namespace qtc::testing::detail {

/// One tensor of that vector: its VECTORS.md name, dtype and shape (the layout's) and the caller's bytes.
struct GivenTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

/// The vector conforms() checks: the recipe's metadata with the layout's keys, x, then every non-empty buffer of
/// `out`. Throws qtc::Error naming the broken rule (x without data or of another dtype, a negative dimension,
/// strict_padding on compact buffers, a layout the recipe has not, a buffer of the wrong size, no buffer at all).
struct GivenVector {
  std::map<std::string, std::string> metadata;
  std::vector<GivenTensor> tensors;
};
GivenVector given_vector(const MatrixView& x, const Recipe& r, const Outputs& out);

/// Success for a pass (and for EQUIVALENT when `accept_equal_values`); otherwise a failure holding `qtc verify`'s
/// line and detail lines.
::testing::AssertionResult assertion_for(const conformance::FileResult& res, bool accept_equal_values);

/// A message without QTC_CHECK's " [check ...]" suffix.
std::string rule(std::string m);

}  // namespace qtc::testing::detail
