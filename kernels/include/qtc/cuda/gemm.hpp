/// \file gemm.hpp
/// \brief GPU GEMMs on quantized device operands, with the semantics of qtc::ref::gemm_exact
///        (reference/include/qtc/gemm.hpp, TE_FORMATS.md §7): the same A/B conventions, planes and alpha.
///
/// Paths, each behind one row of the gating table (qtc/gating.hpp):
///   FP8 per-tensor      cuBLASLt, SCALAR_32F scale pointers (the operands' device scale_inv), TN   gemm.fp8_tensor
///   FP8 block           cuBLASLt VEC128_32F (1x128) / BLK128x128_32F (128x128), padded scales       gemm.fp8_block
///   MXFP8               cuBLASLt VEC32_UE8M0, swizzled scales                                       gemm.mxfp8
///   NVFP4 (SM >= 10)    cuBLASLt VEC16_UE4M3, swizzled scales, device alpha (§7.4)                  gemm.nvfp4
///   NVFP4 (SM 9.x)      exact emulation: every operand element code·sf is exact in BF16, so both   gemm.nvfp4_emulated_bf16
///                       planes are dequantized to BF16 (global scale left out) and one cuBLASLt BF16
///                       GEMM with FP32 accumulation runs with the device alpha of §7.4
///   row-scaled NVFP4    §7.5: neutralised NVFP4 GEMM into an FP32 scratch, then the row/column       gemm.nvfp4_row_scaled
///                       post-scale, bias and cast on the device
/// An unsupported call throws qtc::Error carrying the gating reason. Nothing here synchronizes with the
/// host; the alpha of NVFP4 is computed on the device from the device amaxes.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qtc/cuda/quantize.hpp"
#include "qtc/gating.hpp"
#include "qtc/gemm.hpp"

namespace qtc::cuda {

/// The card and the cuBLASLt this process loaded (cc 0.0 when there is no device).
gating::Capability device_capability();
/// gating::query for this device; "no CUDA device" when there is none.
gating::Support device_supports(gating::Feature f);

/// What the GEMM computes besides A and B (device pointers).
struct DeviceGemmArgs {
  bool transa = true;
  bool transb = false;
  float alpha = 1.0f;
  float beta = 0.0f;              ///< non-zero needs c (the row-scaled GEMM: only 1, meaning accumulate)
  const void* c = nullptr;        ///< [n, m] in the output type
  const void* bias = nullptr;     ///< [m] in the output type; FP8 paths with F32 output take a BF16 bias
                                  ///< (cuBLASLt's FP8 table)
  DType out = DType::kF32;
  bool fast_accum = false;        ///< FP8 per-tensor only: CUBLASLT_MATMUL_DESC_FAST_ACCUM (TE: !use_split_accumulator)

  static DeviceGemmArgs of(ref::GemmKind k, DType out = DType::kF32) {
    DeviceGemmArgs a;
    a.transa = ref::gemm_trans(k).transa;
    a.transb = ref::gemm_trans(k).transb;
    a.out = out;
    return a;
  }
};

/// cuBLASLt handle, workspace, scratch for the emulated and row-scaled paths, and a cache of the chosen
/// algorithms (so repeated calls pay no heuristic query). One per stream/thread.
class GemmContext {
 public:
  explicit GemmContext(cudaStream_t stream = nullptr);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  cudaStream_t stream() const;
  const gating::Capability& capability() const;
  /// Scratch of at least `bytes`, reused across calls (grows outside graph capture only).
  void* scratch(int slot, size_t bytes);

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// D ([n, m] row-major, args.out) = alpha·Σ b·a (+ beta·C) (+ bias), as ref::gemm_exact up to the
/// accumulation order. Throws qtc::Error with the gating reason or the pair rule that refuses the call.
void gemm(GemmContext& ctx, const DeviceQuantized& A, const DeviceQuantized& B, const DeviceGemmArgs& args, void* d);

/// Row-scaled NVFP4 (§7.5), either side row-scaled or per-tensor. Scratch FP32 [n, m] from the context.
void gemm_nvfp4_row_scaled(GemmContext& ctx, const DeviceQuantized& A, const DeviceQuantized& B,
                           const DeviceGemmArgs& args, void* d);

/// A plain cuBLASLt BF16 GEMM (TN, FP32 accumulation): D[n, m] = alpha·B·Aᵀ, A [m, k], B [n, k] BF16 —
/// the baseline of the benchmarks and the engine of the NVFP4 emulation.
void gemm_bf16(GemmContext& ctx, const void* a, const void* b, int64_t m, int64_t n, int64_t k, DType out, void* d,
               const float* alpha_device = nullptr, float alpha_host = 1.0f);

/// The NVFP4 emulation's first step on its own: plane -> BF16 [rows, k] of code·sf (exact).
void nvfp4_plane_to_bf16(const DevicePlane& p, int64_t rows, int64_t k, void* out_bf16, cudaStream_t stream);

}  // namespace qtc::cuda

namespace qtc::cuda {

/// The row partition of a grouped device buffer (TE GroupedTensor first_dims / offsets in rows): host copies
/// for the per-group GEMM loop (TE's m_splits are host values too) and device copies, which the epilogue
/// reads, so that it never needs the host to tell it a group's real row count.
struct GroupedRowsDevice {
  std::vector<int64_t> first_dims;   ///< host: rows per group (0 allowed)
  std::vector<int64_t> row_offsets;  ///< host: first row of each group
  int64_t capacity = 0;              ///< rows of the buffer; rows in no group are never read or written
  const int64_t* d_first_dims = nullptr;   ///< device copy of first_dims
  const int64_t* d_row_offsets = nullptr;  ///< device copy of row_offsets
};

/// Grouped row-scaled NVFP4 fprop (§7.5, MoE): x is one row-scaled NVFP4 tensor [capacity, K] (rowwise plane,
/// one amax per row: row-scaled quantization is row-independent, so this equals quantizing each group alone),
/// w[g] the per-tensor NVFP4 weight [N, K] of group g. For each group: outer scales neutralised, the
/// per-tensor GEMM into an FP32 scratch [capacity, N]; then one epilogue over all groups post-scales every
/// live row by x's row amax · w[g]'s amax (one fused factor), adds bias[g] ([G, N] in the output type, or
/// null) in FP32 and casts into d [capacity, N]. Rows outside every group are left untouched.
/// Equals qtc::ref::gemm_nvfp4_row_scaled_grouped_fprop. Hopper: BF16 emulation per group; the per-group GEMMs
/// run on up to 4 concurrent lanes of the context (own stream and workspace each, event fork/join: still
/// stream-ordered and graph-capturable once the context has run the same shapes outside capture).
/// Every check (widths, shapes, overlap, beta) runs before any work: a rejected call writes nothing.
void gemm_nvfp4_row_scaled_grouped_fprop(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                         const DeviceQuantized& x, const GroupedRowsDevice& rows, DType out, void* d,
                                         const void* bias = nullptr);
/// Same with explicit GEMM arguments: TN only, alpha = 1, and beta must be 0 — an explicit beta is rejected
/// (the grouped output is written, not accumulated; TE's grouped row-scaled path has no beta either);
/// args.bias is [G, N] in the output type, args.c is ignored.
void gemm_nvfp4_row_scaled_grouped_fprop(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                         const DeviceQuantized& x, const GroupedRowsDevice& rows,
                                         const DeviceGemmArgs& args, void* d);

/// The per-group path with x given as a list (one tensor per group, x[g] has first_dims[g] rows, empty
/// groups may be 0-row tensors): each group runs gemm_nvfp4_row_scaled(w[g], x[g]) alone into its rows of d,
/// reading only its own amaxes, so a list that mixes row-scaled and per-tensor groups (a group quantized
/// per-tensor, §7.5 grouped fallback) never touches a neighbour's amax. A list whose groups are all
/// row-scaled is rejected with the rule: listed (non-contiguous) row-scaled operands are not a grouped
/// row-scaled input — the grouped path takes one contiguous row-scaled [capacity, K] tensor (per-row amax
/// vector over the whole buffer, e.g. from quantize_grouped_into). Same argument rules as above.
void gemm_nvfp4_row_scaled_grouped_fprop_listed(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                                const std::vector<const DeviceQuantized*>& x,
                                                const GroupedRowsDevice& rows, const DeviceGemmArgs& args, void* d);

/// Grouped row-scaled NVFP4 wgrad (MoE): d[g] ([N, K] row-major, `out`) = dY_gᵀ·X_g through
/// gemm_nvfp4_row_scaled (wgrad NT: x[g]'s columnwise plane, per-column amax post-scale with each group's own
/// rows), for every group; a group with no tokens (x[g]->rows == 0) gets zeros. Equals
/// qtc::ref::gemm_nvfp4_row_scaled_grouped_wgrad. All shapes checked before any work.
void gemm_nvfp4_row_scaled_grouped_wgrad(GemmContext& ctx, const std::vector<const DeviceQuantized*>& x,
                                         const std::vector<const DeviceQuantized*>& dy, DType out,
                                         const std::vector<void*>& d);

}  // namespace qtc::cuda
