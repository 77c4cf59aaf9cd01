/// \file grouped.hpp
/// \brief Grouped (MoE) tensors in the reference: a row partition of one [capacity, last_dim] buffer into
///        groups (TE GroupedTensor `first_dims` / `tensor_offsets`, TE_FORMATS.md §1.13, §7.6), grouped
///        quantization (each group == quantizing it alone) and the grouped row-scaled NVFP4 GEMM (§7.5).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "qtc/gemm.hpp"
#include "qtc/quantized.hpp"

namespace qtc::ref {

/// Group g holds rows [row_offset(g), row_offset(g) + first_dims[g]) of a [capacity, last_dim] buffer.
/// Uniform or uneven sizes, empty groups allowed; rows outside every group (capacity padding, or group
/// sizes summing to fewer rows than the buffer) belong to no group and are never read or written.
struct GroupedRows {
  std::vector<int64_t> first_dims;      ///< rows of each group
  std::vector<int64_t> tensor_offsets;  ///< element offset of each group (TE); empty: packed prefix sums
  int64_t last_dim = 0;
  int64_t capacity = 0;                 ///< rows of the buffer (>= every group's end)

  int64_t groups() const { return static_cast<int64_t>(first_dims.size()); }
  int64_t row_offset(int64_t g) const;
  /// Throws qtc::Error naming the rule: negative sizes, offsets not multiples of last_dim, overlapping or
  /// out-of-capacity groups, tensor_offsets of the wrong length.
  void validate() const;
  /// Packed groups of these sizes (offsets = prefix sums), capacity = the sum unless given larger.
  static GroupedRows packed(std::vector<int64_t> sizes, int64_t last_dim, int64_t capacity = -1);
};

/// Quantizes every group as an independent tensor (own amax, own scales): result[g] is exactly
/// quantize(rows of group g). Empty groups give a 0-row tensor (no planes' data).
std::vector<QuantizedTensor> quantize_grouped(const MatrixView& x, const GroupedRows& rows, const Recipe& r);

/// Grouped row-scaled NVFP4 fprop (MoE): for each group g with rows, out rows [row_offset(g), +first_dims[g])
/// = gemm_nvfp4_row_scaled(w[g], x[g]) (D = X_g·W_gᵀ, post-scaled per row with X_g's amax). Rows of `out`
/// outside every group are left untouched. Every w[g] must have the same output width (out.cols): groups
/// whose widths differ are rejected before any GEMM. args.beta must be 0 (an explicit beta is rejected);
/// a group whose x is per-tensor (not row-scaled) runs the same per-group path (a scalar row scale).
void gemm_nvfp4_row_scaled_grouped_fprop(std::span<const QuantizedTensor> w, std::span<const QuantizedTensor> x,
                                         const GroupedRows& rows, const GemmArgs& args, HostMatrix& out);

/// Grouped row-scaled NVFP4 wgrad: result[g] = gemm_nvfp4_row_scaled(x[g], dy[g]) with wgrad (NT) layout,
/// D_g = dY_gᵀ·X_g [N, K], post-scaled per output column with X_g's columnwise amax. Empty groups give
/// an all-zero [N, K] (no tokens contribute).
std::vector<HostMatrix> gemm_nvfp4_row_scaled_grouped_wgrad(std::span<const QuantizedTensor> x,
                                                            std::span<const QuantizedTensor> dy, DType out);

}  // namespace qtc::ref
