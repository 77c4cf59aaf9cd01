/// \file cases.hpp
/// \brief The generated cases of `qtc conform`: every recipe variant and profile, on inputs built to reach the
///        formats' edge cases, written as VECTORS.md vectors; and the dequantize-after-quantize error bounds.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/backend.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::conformance {

/// Input families (Wycheproof-style: each names the bug classes it is for).
enum class InputClass { kNormal, kHeavy, kZeroBlocks, kTiny, kHuge, kTies, kSpecial };
const std::vector<InputClass>& all_input_classes();
std::string_view input_class_name(InputClass c);
/// Why the family exists (the vector's `comment`).
std::string_view input_class_comment(InputClass c);
/// Bug classes it maps to (the vector's `flags`).
std::string_view input_class_flags(InputClass c);

/// A deterministic input of the family: element (i, j) depends only on (seed, family, i, j), then rounds
/// RN-even to the dtype.
HostMatrix make_input(InputClass c, DType dtype, int64_t rows, int64_t cols, uint64_t seed);

/// Every recipe variant of recipe.hpp under every profile it is defined for, each passing validate().
/// (Row-scaled 4over6 is rowwise-only, as TE defines it.)
std::vector<Recipe> all_recipe_variants();

/// One generated case.
struct Case {
  std::string id;  ///< stable: <recipe name>_<family>_<dtype>_<M>x<K>
  Recipe recipe;
  InputClass input = InputClass::kNormal;
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0;
};
/// The generated cases for the given recipes (families, input types and shapes each recipe accepts).
std::vector<Case> generated_cases(const std::vector<Recipe>& recipes);

/// The VECTORS.md vector of a case: x, every output of the planes q holds (fp8_tensor: rowwise_data, the
/// transposed columnwise_data [K, M] when q has it, scale_inv and amax), and the dequantized planes, with the recipe metadata, the case id, comment, flags
/// and the seed.
io::File make_vector(const Case& c, const HostMatrix& x, const QuantizedTensor& q, QuantizeBackend& cpu, uint64_t seed);

/// dequantize(quantize(x)) against x, per element, for finite planes: |deq - x| <= the bound of error_bound.hpp with
/// the scales of q (the quantization of x that was dequantized).
struct BoundResult {
  int64_t checked = 0;
  int64_t violations = 0;
  std::string first;  ///< the first violation, with the bound and the block
  std::string not_checked;  ///< why elements were left out (checked == 0: why nothing was)
};
BoundResult check_error_bound(const QuantizedTensor& q, PlaneKind plane, const MatrixView& x, const HostMatrix& deq);

}  // namespace qtc::conformance
