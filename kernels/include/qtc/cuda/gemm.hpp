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
///   grouped row-scaled  §7.5 per expert with device group sizes: one CUTLASS sm_90a grouped BF16    gemm.grouped_nvfp4_
///   NVFP4, device sizes GEMM (exact emulation) whose epilogue does the post-scale and bias in FP32;   row_scaled_sm90
///                       graph-capturable (gating::grouped_row_scaled_path says which engine a card gets)
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

/// The NVFP4 emulation's first step on its own: plane -> BF16 [rows, k] of code·sf (exact). k % 16 == 0, out_bf16
/// 16-byte aligned (throws otherwise, before any work); compact scales take a bandwidth-bound linear kernel.
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

/// Group sizes of a grouped [capacity, ...] buffer that live in device memory only: group g is rows
/// [row_offsets[g·stride], + first_dims[g·stride]) (device int64; TE GroupedTensor first_dims / offsets in rows).
/// Nothing reads them on the host, so a call taking them can be captured in a CUDA graph once and replayed with
/// other sizes written into the same arrays. Caller contract: groups in order, not overlapping, inside
/// [0, capacity). It cannot be checked on the host without a sync; on the device every call first rewrites the
/// routing (kernels/src/grouped/grouped_routing.hpp): a group with a negative size, overlapping the previous kept group or
/// passing the capacity is computed as empty (fprop: its rows untouched; wgrad: zeros), so hostile sizes never
/// make a kernel read or write outside the buffers.
struct GroupedRowsOnDevice {
  int64_t groups = 0;
  int64_t capacity = 0;
  const int64_t* first_dims = nullptr;
  const int64_t* row_offsets = nullptr;
  int64_t stride = 1;  ///< elements between consecutive groups' entries (a strided view, e.g. one column of [G, 2])
};

/// The experts' NVFP4 weights dequantized once for the device-driven grouped fprop: BF16 [G, N, K] of code·sf (exact,
/// the global amax left out, §7.5 neutralisation) and the G per-tensor amaxes. Owned by the caller and reused for as
/// long as the weights do not change (every micro-batch of a step); rebuilt with dequantize_grouped_weights_into.
struct GroupedWeightsBf16 {
  int64_t groups = 0;
  int64_t n = 0;            ///< output width (weight rows)
  int64_t k = 0;
  float e4m3_max = 448;     ///< the weights' E4M3 max (all equal)
  DeviceBuffer bf16;        ///< [G, N, K]
  DeviceBuffer amax;        ///< [G] F32
};

GroupedWeightsBf16 allocate_grouped_weights(int64_t groups, int64_t n, int64_t k, cudaStream_t stream);
/// Dequantizes every weight (per-tensor NVFP4, rowwise plane, one N and K) into out and gathers their amaxes.
/// Stream-ordered on the context's stream, no host synchronisation.
void dequantize_grouped_weights_into(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                     GroupedWeightsBf16& out);

/// Device-driven grouped row-scaled NVFP4 fprop (§7.5, MoE), the semantics of gemm_nvfp4_row_scaled_grouped_fprop
/// below with group sizes on the device only: no host synchronisation, no allocation once the context has run the
/// shape, capturable in a CUDA graph and replayable with other device group sizes. x: row-scaled (or per-tensor)
/// NVFP4 [capacity, K] with a rowwise plane; d [capacity, N] in args.out (F32, BF16, F16); rows in no group are
/// neither read into any output nor written. args: TN, alpha 1, beta 0, bias [G, N] in args.out or null.
/// Engine: the gating table's grouped path (gating::grouped_row_scaled_path): on SM 9.0 qtc's CUTLASS sm_90a
/// grouped BF16 GEMM whose epilogue applies alpha, the fused row·column factor and the bias in FP32 as TE's torch
/// ops do (bitwise the per-group path), one launch for all groups. Throws with the table's reason elsewhere.
void gemm_nvfp4_row_scaled_grouped_fprop_device(GemmContext& ctx, const GroupedWeightsBf16& w, const DeviceQuantized& x,
                                                const GroupedRowsOnDevice& rows, const DeviceGemmArgs& args, void* d);
/// Same with the weights as NVFP4 tensors: each call dequantizes the weights of the groups that have rows (decided
/// on the device) into the context's scratch ([G, N, K] BF16).
void gemm_nvfp4_row_scaled_grouped_fprop_device(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                                const DeviceQuantized& x, const GroupedRowsOnDevice& rows,
                                                const DeviceGemmArgs& args, void* d);

/// The columnwise planes of a grouped NVFP4 tensor x [capacity, cols] (tokens x features), as wgrad reads them:
/// data [cols, capacity/2] (E2M1, tokens along a row), compact E4M3 scales [cols, capacity/16]; group g's tokens are
/// columns [o_g, o_g + t_g) of every row, each group quantized alone (t_g and o_g multiples of 16, so no 16-token
/// block spans two groups); amax [G] (per-tensor groups) or [G, cols] (row-scaled: one per feature and group).
struct DeviceGroupedColumnwise {
  int64_t capacity = 0;
  int64_t cols = 0;
  int64_t groups = 0;
  bool row_scaled = false;
  float e4m3_max = 448;
  DeviceBuffer data;
  DeviceBuffer scale;
  DeviceBuffer amax;
};

/// Device-driven grouped row-scaled NVFP4 wgrad (§7.5, wgrad NT): d[g] ([N, K] row-major in `out`, F32 or BF16,
/// d = [G, N, K]) = dY_gᵀ·X_g with each group's own columnwise amaxes as the row (dY) and column (x) post-scales,
/// the rules of gemm_nvfp4_row_scaled (one fused factor when a side is per-tensor, else two roundings); a group
/// without tokens gets zeros, a group whose size or offset is not a multiple of 16 tokens (the caller contract)
/// gets NaN. No host synchronisation, graph-capturable like the fprop.
void gemm_nvfp4_row_scaled_grouped_wgrad_device(GemmContext& ctx, const DeviceGroupedColumnwise& x,
                                                const DeviceGroupedColumnwise& dy, const GroupedRowsOnDevice& rows,
                                                DType out, void* d);

/// Grouped row-scaled NVFP4 fprop (§7.5, MoE): x is one row-scaled NVFP4 tensor [capacity, K] (rowwise plane,
/// one amax per row: row-scaled quantization is row-independent, so this equals quantizing each group alone),
/// w[g] the per-tensor NVFP4 weight [N, K] of group g. For each group: outer scales neutralised, the
/// per-tensor GEMM into an FP32 scratch [capacity, N]; then one epilogue over all groups post-scales every
/// live row by x's row amax · w[g]'s amax (one fused factor), adds bias[g] ([G, N] in the output type, or
/// null) in FP32 and casts into d [capacity, N]. Rows outside every group are left untouched.
/// Equals qtc::ref::gemm_nvfp4_row_scaled_grouped_fprop. A thin wrapper: the host sizes are checked, then the
/// device-driven call above runs on rows.d_first_dims / d_row_offsets when the gating table gives this card one
/// (no per-group loop); otherwise (a build without QTC_CUTLASS) the per-group path: BF16 emulation per group, the
/// GEMMs on up to 4 concurrent lanes of the context (own stream and workspace each, event fork/join).
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
