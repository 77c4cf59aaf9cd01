/// \file grouped.hpp
/// \brief Grouped (MoE) quantization on the GPU: one launch sequence over a [capacity, K] buffer whose group
///        sizes and offsets live in device memory (TE GroupedTensor first_dims / offsets, TE_FORMATS.md §1.13).
///        Nothing reads the sizes on the host, so the sequence can be captured in a CUDA graph once and replayed
///        with other group sizes written into the same device arrays. Each group equals quantizing it alone
///        (qtc::ref::quantize_grouped).
///
/// Scope: NVFP4 1x16, rowwise plane, TE profile, per-tensor (one amax per group) or row-scaled (one per row);
/// compact scales. Rows in no group are neither read nor written.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qtc/cuda/quantize.hpp"

namespace qtc::cuda {

/// Outputs of a grouped NVFP4 quantization (rowwise plane of every group, in the buffer's row order).
struct DeviceGroupedNvfp4 {
  int64_t capacity = 0;   ///< rows of the buffer
  int64_t cols = 0;       ///< K
  int64_t groups = 0;
  bool row_scaled = false;
  DeviceBuffer data;      ///< [capacity, K/2] packed E2M1 (row r of the buffer = row r here)
  DeviceBuffer scale;     ///< [capacity, K/16] E4M3, compact
  DeviceBuffer amax;      ///< [groups] per-tensor, or [capacity] row-scaled
};

DeviceGroupedNvfp4 allocate_grouped_nvfp4(int64_t capacity, int64_t cols, int64_t groups, bool row_scaled,
                                          cudaStream_t stream);

/// Quantizes every group of x ([capacity, K], F32/BF16/F16): group g is rows [row_offsets[g·stride],
/// + first_dims[g·stride]), both device int64 arrays; `stride` (elements, >= 1) reads a strided view of them,
/// e.g. one column of a [groups, 2] tensor (one of the cases TE's grouped work had to fix). Stream-ordered, no
/// host synchronization, no allocation.
void quantize_grouped_nvfp4_into(const DeviceMatrixView& x, const int64_t* d_first_dims, const int64_t* d_row_offsets,
                                 DeviceGroupedNvfp4& out, cudaStream_t stream, int64_t stride = 1);

}  // namespace qtc::cuda
