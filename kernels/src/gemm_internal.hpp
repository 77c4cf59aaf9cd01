/// \file gemm_internal.hpp
/// \brief Launchers of gemm_kernels.cu, called by gemm_cublaslt.cpp (not part of the public API).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qtc/tensor.hpp"

namespace qtc::cuda {
class GemmContext;
}

namespace qtc::cuda::detail {

// ---- Concurrent lanes of a GemmContext (gemm_cublaslt.cpp), for the per-group GEMMs of grouped calls ----
// Lane i has its own non-blocking stream and cuBLASLt workspace; fork makes every lane wait for the work
// queued so far on the context's stream, join makes the context's stream wait for every lane (events only:
// graph-capturable, no host synchronisation).

/// Creates (once) and returns the number of lanes, at most `want` (>= 1).
int gemm_lanes(GemmContext& ctx, int want);
cudaStream_t lane_stream(GemmContext& ctx, int lane);
void lanes_fork(GemmContext& ctx, int lanes);
void lanes_join(GemmContext& ctx, int lanes);
/// gemm_bf16 (gemm.hpp) on lane `lane`'s stream and workspace; host alpha.
void gemm_bf16_lane(GemmContext& ctx, int lane, const void* a, const void* b, int64_t m, int64_t n, int64_t k,
                    DType out, void* d, float alpha);

/// out[i] = *ptrs[i] for i < n (device floats gathered in one launch per 256 pointers).
void launch_gather_scalars(const float* const* ptrs, int64_t n, float* out, cudaStream_t stream);

/// layout: 0 compact, 1 padded (scale_cols = padded column count), 2 swizzled.
/// max_blocks > 0 caps the grid (grid-stride loop), so the pass leaves SMs to GEMMs running beside it.
void launch_nvfp4_to_bf16(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t k, int layout,
                          int64_t scale_cols, void* out, cudaStream_t stream, int max_blocks = 0);
/// out[0] = alpha (§7.4, amax pointers may be null = 1), out[1] = beta.
void launch_nvfp4_alpha(const float* amax_a, const float* amax_b, float alpha_in, float factor, float beta,
                        float* out, cudaStream_t stream);
void launch_row_scaled_epilogue(const float* scratch, int64_t n, int64_t m, const float* row_scales, int64_t n_row,
                                const float* col_scales, int64_t n_col, const void* bias, const void* c, DType out,
                                void* d, cudaStream_t stream);

/// blockIdx.y = group; reads each group's rows and first row from device memory (max_rows bounds the grid).
void launch_grouped_row_scaled_epilogue(const float* scratch, int64_t n_cols, int64_t groups, int64_t max_rows,
                                        const int64_t* first_dims, const int64_t* row_offsets,
                                        const float* row_scales, int64_t n_row, const float* col_scales,
                                        const void* bias, DType out, void* d, cudaStream_t stream);

}  // namespace qtc::cuda::detail
