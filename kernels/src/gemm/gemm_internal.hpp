/// \file gemm_internal.hpp
/// \brief Launchers of gemm_kernels.cu, called by gemm_cublaslt.cpp (not part of the public API).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qtc/cuda/quantize.hpp"
#include "qtc/layout.hpp"
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

/// The scale geometry of an NVFP4 plane [rows, k] (compact [rows, k/16]) in its layout; the padded extents are the
/// plane's scale_rows / scale_cols.
inline ScaleGeometry nvfp4_scale_geometry(const DevicePlane& p, int64_t rows, int64_t k) {
  return make_scale_geometry(p.scale_layout, rows, (k + 15) / 16, p.scale_rows, p.scale_cols, false);
}
/// Scale entry (r, kb) at element sg.offset(r, kb) of `scale` (layout.hpp).
/// max_blocks > 0 caps the grid (grid-stride loop), so the pass leaves SMs to GEMMs running beside it.
void launch_nvfp4_to_bf16(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t k, const ScaleGeometry& sg,
                          void* out, cudaStream_t stream, int max_blocks = 0);
/// One NVFP4 plane with compact scales, read as a linear stream: element e is nibble e of `data` (low nibble first)
/// scaled by E4M3 byte scale[e / 16]; `elems` (a multiple of 16) BF16 values -> out (exact).
struct Nvfp4Linear {
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
  int64_t elems = 0;
  void* out = nullptr;
};
/// Whether a [rows, k] plane with scale geometry sg can take the linear path: compact scales, k % 16 == 0, data
/// 4-byte and out 16-byte aligned.
bool nvfp4_linear_ok(const uint8_t* data, const ScaleGeometry& sg, int64_t k, const void* out);
/// The NVFP4 GEMM's device alpha/beta (§7.4): out[0] = alpha_in·amax_a·amax_b·factor (null amax = 1), out[1] = beta.
struct Nvfp4AlphaArgs {
  const float* amax_a = nullptr;
  const float* amax_b = nullptr;
  float alpha_in = 1.0f, factor = 1.0f, beta = 0.0f;
  float* out = nullptr;
};
/// Planes -> BF16 in one launch per 4 planes (the emulated GEMM's two operands together); bandwidth-bound: 4 code
/// bytes per thread per step, 16-byte coalesced stores. launch_nvfp4_to_bf16 takes it by itself where it applies.
/// `alpha` (at most 4 planes): the same launch also writes the GEMM's alpha/beta.
void launch_nvfp4_to_bf16_linear(const Nvfp4Linear* planes, int n, cudaStream_t stream,
                                 const Nvfp4AlphaArgs* alpha = nullptr);
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
                                        const void* bias, DType out, void* d, cudaStream_t stream,
                                        int64_t stride = 1);

// ---- The device-driven grouped path (gemm_grouped.cpp): every size read on the device ----
/// Weights [rows, k] of groups 0..groups-1 -> out [groups, rows, k] BF16 (exact); a group whose device size
/// sizes[g·stride] is 0 is skipped (sizes == nullptr: none skipped). All weights share layout and scale_cols.
void launch_nvfp4_to_bf16_grouped(const uint8_t* const* data, const uint8_t* const* scale, int groups,
                                  const int64_t* sizes, int64_t stride, int64_t rows, int64_t k, const ScaleGeometry& sg,
                                  void* out, cudaStream_t stream);
/// s[r] = row_scales[n_row == 1 ? 0 : r] · col_scales[g] for the rows of every group.
void launch_grouped_row_factors(const int64_t* sizes, const int64_t* offsets, int64_t stride, int64_t groups,
                                const float* row_scales, int64_t n_row, const float* col_scales, float* s,
                                cudaStream_t stream);
/// out[g·len + i] = a[g·a_g + i·a_i] (· b[g·b_g + i·b_i] if b), for g < groups, i < len.
void launch_scale_product(const float* a, int64_t a_g, int64_t a_i, const float* b, int64_t b_g, int64_t b_i,
                          int64_t groups, int64_t len, float* out, cudaStream_t stream);
void launch_fill_f32(float* out, int64_t n, float v, cudaStream_t stream);
/// F32/BF16/F16 -> F32 (exact).
void launch_to_f32(const void* in, DType dtype, int64_t n, float* out, cudaStream_t stream);
/// Wgrad outputs [groups, elems]: zeros for a group without tokens, NaN for one whose offset or size is not a
/// multiple of 8 (the grouped GEMM skipped it); other groups untouched.
void launch_grouped_fill_skipped(const int64_t* sizes, const int64_t* offsets, int64_t stride, int64_t groups,
                                 int64_t elems, DType out, void* d, cudaStream_t stream);

}  // namespace qtc::cuda::detail
