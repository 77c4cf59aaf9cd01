/// \file grouped.hpp
/// \brief Grouped (MoE) quantization on the GPU: one launch sequence over a [capacity, K] buffer whose group
///        sizes and offsets live in device memory (TE GroupedTensor first_dims / offsets, TE_FORMATS.md §1.13).
///        Nothing reads the sizes on the host, so the sequence can be captured in a CUDA graph once and replayed
///        with other group sizes written into the same device arrays. Each group equals quantizing it alone
///        (qtc::ref::quantize_grouped).
///
/// Recipes (rowwise plane, TE profile; grouped_unsupported_reason says why anything else is refused):
///   NVFP4 1x16   per-tensor (one amax per group) or row-scaled (one per row)   compact or swizzled scales
///   MXFP8 1x32   E4M3/E5M2, RCEIL or OCP floor rule                             compact or swizzled scales
///   FP8 block    1x128, F32 scale_inv per block (pow2 / eps as the recipe)     compact
///   FP8 tensor   one amax and one scale_inv per group                          (no scale matrix)
/// Not grouped: columnwise planes (a columnwise block spans 16/32/128 tokens and would mix two groups unless
/// every size is aligned, which TE's grouped kernels demand of the caller), 2D blocks (TE's split_quantize
/// rejects 2D NVFP4; 128x128 FP8 blocks and 32x32 MXFP8 blocks span tokens too), RHT (columnwise; grouped RHT
/// is SM 100-110), 4over6 and stochastic rounding. Rows in no group are neither read nor written.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "qtc/cuda/quantize.hpp"

namespace qtc::cuda {

/// Outputs of a grouped quantization, rowwise plane of every group.
struct DeviceGroupedQuantized {
  Recipe recipe;
  DType input_dtype = DType::kF32;
  int64_t capacity = 0;    ///< rows of the buffer
  int64_t cols = 0;        ///< K
  int64_t groups = 0;
  ScaleLayout scale_layout = ScaleLayout::kCompact;
  int64_t scale_cols = 0;  ///< compact: k-blocks per row; swizzled: k-blocks rounded up to 4
  float value_for_inf = 0; ///< FP8 block: the scale used when max/amax overflows (the input type's max)
  DeviceBuffer data;       ///< [capacity, K/2] E2M1 or [capacity, K] FP8; row r of the buffer = row r here
  /// compact: [capacity, scale_cols] (E4M3/E8M0 bytes, F32 for FP8 block), row r of the buffer = row r here;
  /// swizzled: group g's own tiles ([roundup(rows_g, 128), scale_cols], §6 swizzle, zero padding) start at
  /// element scale_offsets[g] (GroupedTensor layout, TE_FORMATS.md §7.6). FP8 per-tensor: empty.
  DeviceBuffer scale;
  DeviceBuffer scale_offsets;  ///< swizzled: [groups] int64, written on the device by every quantize
  DeviceBuffer amax;       ///< NVFP4: [groups] or [capacity] (row-scaled); FP8 per-tensor: [groups]
  DeviceBuffer scale_inv;  ///< FP8 per-tensor: [groups] F32
  /// [2·groups] int64: the routing as the kernels read it, rewritten from the caller's sizes and offsets by every
  /// quantize (a group that is negative, overlaps the previous kept group or passes the capacity reads as empty;
  /// kernels/src/grouped/grouped_routing.hpp), so hostile device sizes cannot make a kernel leave the buffers.
  DeviceBuffer routing;
};

/// Empty when grouped quantization supports (recipe, K, layout); otherwise the rules it breaks.
std::string grouped_unsupported_reason(const Recipe& r, int64_t cols, ScaleLayout layout);

/// Allocates the outputs (throws qtc::Error with grouped_unsupported_reason's text for refused recipes).
DeviceGroupedQuantized allocate_grouped(const Recipe& r, DType input, int64_t capacity, int64_t cols, int64_t groups,
                                        ScaleLayout layout, cudaStream_t stream);

/// Caller contract (the sizes are on the device, so nothing can check it without a host sync): NVFP4 groups
/// have a multiple of 16 rows (TE_FORMATS.md §1.1, M % 16), as TE's grouped NVFP4 quantization requires; groups
/// are ordered and disjoint inside [0, capacity). A group breaking the second rule (negative size, overlapping the
/// previous kept group, past the capacity) is quantized as empty: nothing of it is written, no buffer is left.
/// Quantizes every group of x ([capacity, K]) as out.recipe: group g is rows [row_offsets[g·stride],
/// + first_dims[g·stride]) (device int64 arrays; `stride` (elements, >= 1) reads a strided view of them, e.g. one
/// column of a [groups, 2] tensor, one of the cases TE's grouped work had to fix). Each group equals quantizing it
/// alone (qtc::ref::quantize_grouped; swizzled: convert_layout of that result). Stream-ordered, no host
/// synchronization, no allocation: capturable in a CUDA graph and replayable with other sizes.
void quantize_grouped_into(const DeviceMatrixView& x, const int64_t* d_first_dims, const int64_t* d_row_offsets,
                           DeviceGroupedQuantized& out, cudaStream_t stream, int64_t stride = 1);

}  // namespace qtc::cuda
