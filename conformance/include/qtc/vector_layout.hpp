/// \file vector_layout.hpp
/// \brief The `layout` metadata of VECTORS.md for callers that hold a vector in memory (qtc::testing, the Python
///        module): the shape each output tensor has in a layout, and the conversion of a `layout=te` vector
///        (padded, TE's transposed FP8 block 1x128 scales, optionally cuBLAS-swizzled) to the compact layout that
///        verify_vector compares. Padding is dropped, never compared.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "qtc/recipe.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::conformance {

/// A vector's layout (VECTORS.md, Native layouts).
struct VectorLayout {
  bool te = false;        ///< `layout` = `te` (else `compact`)
  bool swizzled = false;  ///< `swizzled` = `1` (te only; NVFP4 and MXFP8 scales)

  /// Reads the metadata keys `layout` and `swizzled`; throws qtc::Error naming the key for another value or for
  /// swizzled without layout=te, or for a recipe that has no swizzled scales.
  static VectorLayout from_metadata(const std::map<std::string, std::string>& md, const Recipe& r);
  /// Writes them (removes both keys for compact).
  void to_metadata(std::map<std::string, std::string>& md) const;
  /// "compact", "te" or "te (swizzled)".
  std::string name() const;
};

/// Shape of output tensor `name` (a VECTORS.md name) for x of shape [M, K] in `layout`; throws qtc::Error naming
/// the tensor when it is not an output of this recipe.
std::vector<int64_t> output_shape(const std::string& name, const Recipe& r, int64_t M, int64_t K, const VectorLayout& layout);

/// Rewrites the scale tensors of `f` from its metadata's layout to compact and sets `layout` to compact. Throws
/// qtc::Error naming the tensor and the expected shape when a buffer has the wrong one. A compact file is left as it is.
void convert_to_compact(io::File& f);

}  // namespace qtc::conformance
