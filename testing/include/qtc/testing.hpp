/// \file testing.hpp
/// \brief GoogleTest assertions for a kernel's own test suite (library qtc::testing):
///
///   * conforms(x, recipe, outputs): quantizes x with the CPU reference and compares the caller's buffers (data,
///     scales in the compact, TE-padded or swizzled layout, amax, scale_inv, dequantized) bit for bit. On failure
///     the message is the line `qtc verify` prints for the same tensors in a vector file.
///   * within_error_bound(x, recipe, dequantized): every element of a dequantized output lies within the format's
///     rounding bound around x (below).
///
///   TEST(MyKernel, Nvfp4) {
///     const qtc::Recipe r = qtc::testing::recipe({{"recipe", "nvfp4"}});
///     qtc::testing::Outputs out;
///     out.layout = qtc::testing::Layout::kPadded;          // TE's padded scale buffers
///     out.rowwise_data = my_data;                          // any contiguous container, a span or {pointer, bytes}
///     out.rowwise_scale_inv = my_scales;
///     EXPECT_TRUE(qtc::testing::conforms(x, r, out));      // x: qtc::MatrixView{pointer, DType::kBF16, M, K}
///   }
///
/// The error bound of within_error_bound is qtc/error_bound.hpp's, the one `qtc conform` checks its round trips
/// with: per element, half the element format's spacing at |x| / s times the effective block scale s (the full spacing
/// under stochastic rounding), plus saturation beyond the format's largest value, 2^-20 |x| for the fp32 scaling and
/// half an ulp of the output type. Elements whose x or block scale is not finite are not checked (how NaN and Inf
/// encode is a profile rule: conforms() checks it bit for bit). The RHT columnwise plane lives in the Hadamard domain,
/// not in x's: it is refused.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qtc/quantized.hpp"
#include "qtc/layout.hpp"
#include "qtc/recipe.hpp"
#include "qtc/tensor.hpp"

namespace qtc::testing {

/// A caller's buffer: contiguous bytes in the shape the recipe and the layout give (VECTORS.md). Not owned.
struct Buffer {
  const void* data = nullptr;
  size_t size_bytes = 0;

  Buffer() = default;
  Buffer(const void* d, size_t n) : data(d), size_bytes(n) {}
  /// Any contiguous container with data() and size(): std::vector, std::array, std::span, ...
  template <typename C, typename P = decltype(std::declval<const C&>().data()),
            typename = decltype(std::declval<const C&>().size()), std::enable_if_t<std::is_pointer_v<P>, int> = 0>
  Buffer(const C& c) : data(c.data()), size_bytes(c.size() * sizeof(*c.data())) {}
  bool empty() const { return data == nullptr; }
};

/// How the caller's scale buffers are laid out: qtc::Layout (qtc/layout.hpp), the one layout value: kCompact
/// (VECTORS.md shapes), kPadded (TransformerEngine's buffers: padded scales, FP8 block 1x128 scales transposed),
/// kSwizzled (cuBLAS 128x4), kSwizzled8x4 (FlashInfer / TensorRT-LLM), kDeepGemmPackedUe8m0, kFbgemmMx4 (FBGEMM's
/// MX4 rows, MXFP4: `rowwise_data` / `columnwise_data` hold the packed rows, codes and exponent bytes, and the
/// `*_scale_inv` buffers stay empty; a scale buffer given beside them fails naming rule 'layout-fbgemm_mx4').
using Layout = ::qtc::Layout;

/// The outputs to check; an empty buffer is not checked (at least one must be given).
struct Outputs {
  Layout layout = Layout::kCompact;
  bool strict_padding = false;  ///< not kCompact: padding entries must be zero (`qtc verify --strict-padding`)
  /// Issue 26: bytes that differ from the reference's but decode to the same values (verdict EQUIVALENT, e.g. -0.0
  /// codes, another scale of an all-zero block, a block at half range under half the scale) pass.
  bool accept_equal_values = false;
  /// Issue 26: NVFP4 with stochastic rounding: judge admissibility (neighbour codes, exact scales and amax, unbiased at
  /// false-alarm rate 1e-6: qtc/stochastic_rounding.hpp) instead of bit equality with qtc's random numbers.
  bool stochastic_admissible = false;
  Buffer rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv;
  Buffer amax_rowwise, amax_columnwise;   ///< NVFP4: F32 [1], or [M] / [K] when row-scaled
  Buffer scale_inv, amax;                 ///< FP8 tensor: F32 [1]
  Buffer dequantized_rowwise, dequantized_columnwise;  ///< F32 [M, K]
};

/// A recipe from VECTORS.md metadata, e.g. {{"recipe", "mxfp8"}, {"scale_rule", "rceil"}}; throws qtc::Error
/// naming the key for an unknown recipe or value.
Recipe recipe(const std::map<std::string, std::string>& metadata);

/// Quantizes x with the reference and compares every non-empty buffer of `out` bit for bit (padding of TE buffers
/// is not compared unless strict_padding). Failure message: "FAIL <name> [cpu]: <tensor>: N of T elements differ;
/// first at [i, j]: expected ..., got ...; block x[...] = {...}" exactly as `qtc verify` prints it for a vector file
/// holding the same buffers (layout=te: coordinates in the buffer, then the compact ones); `name` defaults to the
/// recipe's name. A buffer of the wrong size fails naming the expected shape.
::testing::AssertionResult conforms(const MatrixView& x, const Recipe& r, const Outputs& out, const std::string& name = "");

/// Checks that `dequantized` ([M, K] in x's orientation, F32 / BF16 / F16) lies within the error bound above around
/// x, for the given plane's blocks. The message names the count, the first element outside, its bound and block scale.
::testing::AssertionResult within_error_bound(const MatrixView& x, const Recipe& r, const MatrixView& dequantized,
                                              PlaneKind plane = PlaneKind::kRowwise);

/// The bound above for one element x of a block with effective scale `block_scale`, the recipe's element format and
/// a dequantized value of type `out` (`dequantized` enters through the output rounding term only).
double element_error_bound(const Recipe& r, float x, double block_scale, DType out = DType::kF32, float dequantized = 0.0f);

/// Issue 26: a model checkpoint (a .safetensors file or a folder with config.json / an index) whose quantized tensors
/// are consistent in their convention (ModelOpt, compressed-tensors, DeepSeek-V3: qtc/checkpoint_conventions.hpp);
/// `reference` (optional) holds the high-precision weights, `profile` (optional) the qtc profile whose bits they must be.
::testing::AssertionResult checkpoint_consistent(const std::string& path, const std::string& reference = "",
                                                 const std::string& profile = "");

}  // namespace qtc::testing
