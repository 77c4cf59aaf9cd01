/// \file footprint.hpp
/// \brief One size arithmetic and one memory precheck for every command that quantizes an input of [M, K]
///        (`qtc quantize`, `qtc verify`, `qtc conform`, the Python module): the bytes of the input and of every
///        output of the recipe's planes (VECTORS.md shapes, from describe_tensor: nothing recomputes a shape),
///        each product checked so that nothing wraps, and the total checked against the memory this process
///        may use, before anything is allocated. A shape whose sizes do not fit a 64-bit count, or whose
///        buffers do not fit in memory, is a qtc::Error naming the rule (exit status 2 for the CLI), never a
///        crash or a std::bad_alloc.
#pragma once
#include <cstdint>
#include <string>

#include "qtc/recipe.hpp"
#include "qtc/tensor.hpp"

namespace qtc {

/// Bytes held by one quantize of x [M, K] with recipe r (its rowwise / columnwise flags).
struct Footprint {
  int64_t input = 0;        ///< x: M * K * element size of `input`
  int64_t outputs = 0;      ///< every output tensor of the planes produced (data, scales, amax, scale_inv), compact
  int64_t dequantized = 0;  ///< dequantized_<plane> [M, K] F32, when asked for
  int64_t total() const;    ///< the sum (checked)
};

/// The footprint, every size checked: qtc::Error "rule 'size-overflow'" naming the tensor whose size does not fit
/// int64. `M`, `K` >= 0 (else rule 'input-shape').
Footprint quantize_footprint(const Recipe& r, DType input, int64_t M, int64_t K, bool with_dequantized);

/// Bytes this process may hold: the smallest of the machine's physical memory, RLIMIT_AS / RLIMIT_DATA and the
/// environment variable QTC_MEMORY_LIMIT_BYTES (0 when none is known).
uint64_t memory_limit_bytes();

/// Throws qtc::Error "rule 'memory'" (a resource limit, not a wrong answer) when `copies` times `bytes` that `what`
/// asks to hold exceed memory_limit_bytes(); `copies` counts the buffers that exist at once (e.g. 2 when a file
/// is serialized from the buffers).
void check_memory(int64_t bytes, int copies, const std::string& what);

/// quantize_footprint() and check_memory() of its total (input included, times `copies`): what every command
/// calls before it makes x or quantizes it. Returns the footprint.
Footprint check_quantize_resources(const Recipe& r, DType input, int64_t M, int64_t K, bool with_dequantized,
                                   int copies = 1);

}  // namespace qtc
