/// \file gemm_grouped.cpp
/// \brief Grouped row-scaled NVFP4 GEMMs on the GPU (qtc/cuda/gemm.hpp; TE_FORMATS.md §7.5 grouped): fprop with one
///        contiguous row-scaled x (one dequantization of all tokens, per-group neutralised GEMMs on concurrent
///        lanes into an FP32 scratch, one epilogue that reads every group's real row count from device memory),
///        the listed per-group fallback, and wgrad.
///
/// NOTES: Hopper with cuBLAS 13.1 has no cuBLASLt grouped GEMM (gating row gemm.grouped: cuBLAS >= 13.4), so
/// the groups are a host loop of cuBLASLt calls, as TE's general_grouped_gemm loops over row-scaled groups
/// with host m_splits. One expert of ~512 tokens is a GEMM of only 4 x 16 output tiles of 128 x 256, half a
/// wave on 132 SMs, and its weight must first be dequantized to BF16 (a memory-bound pass). On one stream
/// these alternate and leave the SMs half idle (the first measurement: 0.43 of the dense GEMM). So group g
/// runs on lane g % L (own stream, own cuBLASLt workspace, own BF16 weight buffer): the dequantization of one
/// expert overlaps the GEMMs of others, and up to L small GEMMs share the SMs. Stream order within a lane keeps
/// GEMM g reading its weight buffer before the dequantization of group g + L overwrites it.
/// Measured on the H200 (bench_gemm_cuda BM_GroupedRowScaled, 64 experts, 32768 tokens, N = K = 4096): 3.3 ms per
/// call against 1.52 ms for the dense emulated GEMM (frac_of_dense 0.44-0.46; 0.43 on one stream). Alone, the 64
/// weight dequantizations take 1.16 ms and the 64 per-group BF16 GEMMs into FP32 1.95 ms (one GEMM of all tokens:
/// 1.40 ms): the lanes barely overlap them (cuBLASLt's kernels fill the SMs), so the sum stays. What would reach
/// 0.75 on Hopper: no per-call BF16 copy of every weight (a GEMM that reads E2M1 + E4M3 directly, or weights
/// dequantized once and cached across calls), and a grouped GEMM (cuBLAS >= 13.4) instead of 64 small ones.
#include <algorithm>

#include "gemm_internal.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/gemm.hpp"

namespace qtc::cuda {
namespace {

constexpr int kLanes = 4;

void check_args(const DeviceGemmArgs& args) {
  QTC_CHECK(args.beta == 0.0f, "grouped row-scaled NVFP4 GEMM: an explicit beta (", args.beta,
            ") is not supported; the grouped output is written, not accumulated (TE_FORMATS.md §7.5)");
  QTC_CHECK(args.alpha == 1.0f, "grouped row-scaled NVFP4 GEMM takes alpha = 1 (TE_FORMATS.md §7.5), got ", args.alpha);
  QTC_CHECK(args.transa && !args.transb, "grouped row-scaled NVFP4 fprop is TN (transa = T, transb = N)");
}

void check_gating(GemmContext& ctx) {
  const gating::Support s = gating::query(gating::Feature::kGemmGroupedNvfp4RowScaled, ctx.capability());
  QTC_CHECK(s.supported, s.reason);
}

/// Checks the weights (per-tensor NVFP4, one K, one output width) and the row partition; returns N.
int64_t check_weights_and_rows(const std::vector<const DeviceQuantized*>& w, const GroupedRowsDevice& rows, int64_t K,
                               int64_t* max_rows) {
  const auto G = static_cast<int64_t>(w.size());
  QTC_CHECK(static_cast<int64_t>(rows.first_dims.size()) == G && static_cast<int64_t>(rows.row_offsets.size()) == G,
            "grouped GEMM: ", G, " weights, ", rows.first_dims.size(), " group sizes, ", rows.row_offsets.size(), " offsets");
  int64_t N = -1, mr = 0, prev_end = 0;
  for (int64_t g = 0; g < G; ++g) {
    QTC_CHECK(w[static_cast<size_t>(g)] != nullptr, "grouped GEMM: weight ", g, " is null");
    const DeviceQuantized& wg = *w[static_cast<size_t>(g)];
    QTC_CHECK(wg.recipe.kind == RecipeKind::kNVFP4 && !wg.recipe.row_scaled && wg.rowwise.has_value() &&
                  wg.rowwise->amax_count == 1,
              "grouped GEMM: weight ", g, " must be per-tensor NVFP4 with a rowwise plane");
    QTC_CHECK(wg.cols == K, "grouped GEMM: weight ", g, " has K = ", wg.cols, ", x has ", K);
    QTC_CHECK(wg.recipe.e4m3_max == w[0]->recipe.e4m3_max, "grouped GEMM: one E4M3 max for all weights, weight ", g,
              " has ", wg.recipe.e4m3_max, ", weight 0 ", w[0]->recipe.e4m3_max);
    if (N < 0) N = wg.rows;
    QTC_CHECK(wg.rows == N, "grouped GEMM: group ", g, " has output width ", wg.rows, ", group 0 has ", N,
              " (groups whose output widths differ are rejected before any GEMM)");
    const int64_t n = rows.first_dims[static_cast<size_t>(g)], off = rows.row_offsets[static_cast<size_t>(g)];
    QTC_CHECK(n >= 0 && off >= prev_end && off + n <= rows.capacity, "grouped GEMM: group ", g, " rows [", off, ", ",
              off + n, ") overlap the previous group or exceed capacity ", rows.capacity);
    prev_end = off + n;
    mr = std::max(mr, n);
  }
  if (max_rows != nullptr) *max_rows = mr;
  return N;
}

}  // namespace

void gemm_nvfp4_row_scaled_grouped_fprop(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                         const DeviceQuantized& x, const GroupedRowsDevice& rows, DType out, void* d,
                                         const void* bias) {
  DeviceGemmArgs a = DeviceGemmArgs::of(ref::GemmKind::kFprop, out);
  a.bias = bias;
  gemm_nvfp4_row_scaled_grouped_fprop(ctx, w, x, rows, a, d);
}

void gemm_nvfp4_row_scaled_grouped_fprop(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                         const DeviceQuantized& x, const GroupedRowsDevice& rows,
                                         const DeviceGemmArgs& args, void* d) {
  check_gating(ctx);
  const gating::Support emu = gating::query(gating::Feature::kGemmNvfp4Emulated, ctx.capability());
  QTC_CHECK(emu.supported, "grouped row-scaled NVFP4 GEMM runs through the BF16 emulation only; ", emu.reason);
  check_args(args);
  QTC_CHECK(rows.d_first_dims != nullptr && rows.d_row_offsets != nullptr, "grouped GEMM: device group sizes missing");
  QTC_CHECK(x.recipe.kind == RecipeKind::kNVFP4 && x.rowwise.has_value(),
            "grouped row-scaled GEMM: x must be NVFP4 with a rowwise plane, got ", x.recipe.name());
  QTC_CHECK(x.rows == rows.capacity, "grouped GEMM: x has ", x.rows, " rows, the groups span ", rows.capacity);
  QTC_CHECK(x.recipe.e4m3_max == 448, "grouped GEMM: x must use E4M3 max 448, got ", x.recipe.e4m3_max);
  const int64_t K = x.cols;
  QTC_CHECK(K % 16 == 0, "NVFP4 GEMM needs K % 16 == 0, got ", K);
  const int64_t n_row = x.rowwise->amax_count;
  QTC_CHECK(n_row == 1 || n_row == x.rows, "x has ", n_row, " amaxes for ", x.rows, " rows");
  QTC_CHECK(args.out == DType::kF32 || args.out == DType::kBF16 || args.out == DType::kF16,
            "grouped row-scaled GEMM output must be F32, BF16 or F16");
  int64_t max_rows = 0;
  const auto G = static_cast<int64_t>(w.size());
  const int64_t N = check_weights_and_rows(w, rows, K, &max_rows);  // every check before any work
  if (G == 0) return;
  const cudaStream_t st = ctx.stream();
  // All tokens once (rows in no group are dequantized too but feed no GEMM).
  void* x16 = ctx.scratch(5, static_cast<size_t>(x.rows * K) * 2);
  nvfp4_plane_to_bf16(*x.rowwise, x.rows, K, x16, st);
  auto* acc = static_cast<float*>(ctx.scratch(7, static_cast<size_t>(x.rows * N) * sizeof(float)));
  auto* col_scales = static_cast<float*>(ctx.scratch(8, static_cast<size_t>(G) * sizeof(float)));
  std::vector<const float*> amax_ptrs(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) amax_ptrs[static_cast<size_t>(g)] = w[static_cast<size_t>(g)]->rowwise->amax.as<float>();
  detail::launch_gather_scalars(amax_ptrs.data(), G, col_scales, st);
  const float alpha = 1.0f / static_cast<float>(36 * 448 * w[0]->recipe.e4m3_max);  // neutralised (§7.5 step 2)
  int64_t live = 0;
  for (int64_t g = 0; g < G; ++g) live += rows.first_dims[static_cast<size_t>(g)] > 0 ? 1 : 0;
  const int lanes = detail::gemm_lanes(ctx, static_cast<int>(std::min<int64_t>(kLanes, std::max<int64_t>(live, 1))));
  std::vector<void*> w16(static_cast<size_t>(lanes));
  for (int l = 0; l < lanes; ++l) w16[static_cast<size_t>(l)] = ctx.scratch(10 + l, static_cast<size_t>(N * K) * 2);
  // Weight dequantization grid: uncapped. Capping it at one block per SM (to leave room for the other lanes'
  // GEMMs) measured slower on the H200 (3.42 ms against 3.32 ms per call), so it stays full-width.
  const int dequant_blocks = 0;
  detail::lanes_fork(ctx, lanes);  // after x16, the scratch allocations and the gather on the context's stream
  int next = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t n = rows.first_dims[static_cast<size_t>(g)];
    if (n == 0) continue;  // zero-token groups are skipped (TE general_grouped_gemm)
    const int l = next++ % lanes;
    const int64_t off = rows.row_offsets[static_cast<size_t>(g)];
    const DevicePlane& p = *w[static_cast<size_t>(g)]->rowwise;
    const int layout = p.scale_layout == ScaleLayout::kSwizzled ? 2 : (p.scale_layout == ScaleLayout::kPadded ? 1 : 0);
    detail::launch_nvfp4_to_bf16(p.data.as<uint8_t>(), p.scale.as<uint8_t>(), N, K, layout, p.scale_cols,
                                 w16[static_cast<size_t>(l)], detail::lane_stream(ctx, l), dequant_blocks);
    detail::gemm_bf16_lane(ctx, l, w16[static_cast<size_t>(l)], static_cast<const uint8_t*>(x16) + off * K * 2, N, n, K,
                           DType::kF32, acc + off * N, alpha);
  }
  detail::lanes_join(ctx, lanes);
  detail::launch_grouped_row_scaled_epilogue(acc, N, G, max_rows, rows.d_first_dims, rows.d_row_offsets,
                                             x.rowwise->amax.as<float>(), n_row, col_scales, args.bias, args.out, d, st);
}

void gemm_nvfp4_row_scaled_grouped_fprop_listed(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                                const std::vector<const DeviceQuantized*>& x,
                                                const GroupedRowsDevice& rows, const DeviceGemmArgs& args, void* d) {
  check_gating(ctx);
  check_args(args);
  const auto G = static_cast<int64_t>(w.size());
  QTC_CHECK(static_cast<int64_t>(x.size()) == G, "grouped GEMM: ", G, " weights and ", x.size(), " inputs");
  QTC_CHECK(G > 0, "grouped GEMM: no groups");
  const int64_t K = w[0] != nullptr ? w[0]->cols : 0;
  const int64_t N = check_weights_and_rows(w, rows, K, nullptr);
  int64_t row_scaled = 0, live = 0;
  for (int64_t g = 0; g < G; ++g) {
    const DeviceQuantized* xg = x[static_cast<size_t>(g)];
    const int64_t n = rows.first_dims[static_cast<size_t>(g)];
    QTC_CHECK(xg != nullptr, "grouped GEMM: input ", g, " is null");
    QTC_CHECK(xg->rows == n, "grouped GEMM: group ", g, " input has ", xg->rows, " rows, first_dims says ", n);
    if (n == 0) continue;
    QTC_CHECK(xg->recipe.kind == RecipeKind::kNVFP4 && xg->rowwise.has_value() && xg->cols == K,
              "grouped GEMM: input ", g, " must be NVFP4 [", n, ", ", K, "] with a rowwise plane");
    ++live;
    row_scaled += xg->recipe.row_scaled ? 1 : 0;
  }
  QTC_CHECK(live == 0 || row_scaled < live,
            "grouped row-scaled NVFP4 GEMM: listed (non-contiguous) row-scaled inputs are rejected; pass one contiguous "
            "row-scaled [capacity, K] tensor (quantize_grouped_into) to gemm_nvfp4_row_scaled_grouped_fprop. Only a "
            "list that mixes row-scaled and per-tensor groups takes the per-group path");
  const size_t es = dtype_size(args.out);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t n = rows.first_dims[static_cast<size_t>(g)];
    if (n == 0) continue;
    DeviceGemmArgs a = DeviceGemmArgs::of(ref::GemmKind::kFprop, args.out);
    a.bias = args.bias != nullptr ? static_cast<const uint8_t*>(args.bias) + static_cast<size_t>(g * N) * es : nullptr;
    gemm_nvfp4_row_scaled(ctx, *w[static_cast<size_t>(g)], *x[static_cast<size_t>(g)], a,
                          static_cast<uint8_t*>(d) + static_cast<size_t>(rows.row_offsets[static_cast<size_t>(g)] * N) * es);
  }
}

void gemm_nvfp4_row_scaled_grouped_wgrad(GemmContext& ctx, const std::vector<const DeviceQuantized*>& x,
                                         const std::vector<const DeviceQuantized*>& dy, DType out,
                                         const std::vector<void*>& d) {
  check_gating(ctx);
  const size_t G = x.size();
  QTC_CHECK(dy.size() == G && d.size() == G, "grouped wgrad: ", G, " inputs, ", dy.size(), " gradients, ", d.size(),
            " outputs");
  QTC_CHECK(out == DType::kF32 || out == DType::kBF16, "grouped wgrad output must be F32 or BF16 (FP4 GEMM), got ",
            dtype_name(out));
  for (size_t g = 0; g < G; ++g) {
    QTC_CHECK(x[g] != nullptr && dy[g] != nullptr && d[g] != nullptr, "grouped wgrad: group ", g, " has a null operand");
    QTC_CHECK(x[g]->rows == dy[g]->rows, "grouped wgrad: group ", g, " has ", x[g]->rows, " rows of x and ", dy[g]->rows,
              " of dY");
    QTC_CHECK(x[g]->cols == x[0]->cols && dy[g]->cols == dy[0]->cols, "grouped wgrad: group ", g, " weight gradient is [",
              dy[g]->cols, ", ", x[g]->cols, "], group 0's is [", dy[0]->cols, ", ", x[0]->cols, "]");
    if (x[g]->rows == 0) continue;
    QTC_CHECK(x[g]->recipe.kind == RecipeKind::kNVFP4 && dy[g]->recipe.kind == RecipeKind::kNVFP4 &&
                  x[g]->columnwise.has_value() && dy[g]->columnwise.has_value(),
              "grouped wgrad: group ", g, " needs NVFP4 x and dY with columnwise planes (wgrad NT, TE_FORMATS.md §7.1)");
  }
  const DeviceGemmArgs a = DeviceGemmArgs::of(ref::GemmKind::kWgrad, out);
  for (size_t g = 0; g < G; ++g) {
    if (x[g]->rows == 0) {  // no token contributes
      QTC_CUDA_CHECK(cudaMemsetAsync(d[g], 0, static_cast<size_t>(dy[g]->cols * x[g]->cols) * dtype_size(out), ctx.stream()));
      continue;
    }
    gemm_nvfp4_row_scaled(ctx, *x[g], *dy[g], a, d[g]);
  }
}

}  // namespace qtc::cuda
