/// \file gemm_grouped.cpp
/// \brief Grouped row-scaled NVFP4 fprop on the GPU (qtc/cuda/gemm.hpp; TE_FORMATS.md §7.5 grouped): one
///        dequantization of all tokens, per-group neutralised GEMMs into an FP32 scratch, one epilogue that
///        reads every group's real row count from device memory.
///
/// NOTES: Hopper with cuBLAS 13.1 has no cuBLASLt grouped GEMM (gating row gemm.grouped: cuBLAS >= 13.4), so
/// the groups are a host loop of cuBLASLt calls, as TE's general_grouped_gemm loops over row-scaled groups
/// with host m_splits. Each expert's weight is dequantized into one reused BF16 buffer right before its GEMM
/// (stream order keeps GEMM g reading it before dequantization g+1 overwrites it).
#include <algorithm>

#include "gemm_internal.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/gemm.hpp"

namespace qtc::cuda {

void gemm_nvfp4_row_scaled_grouped_fprop(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                         const DeviceQuantized& x, const GroupedRowsDevice& rows, DType out, void* d,
                                         const void* bias) {
  const gating::Support s = gating::query(gating::Feature::kGemmGroupedNvfp4RowScaled, ctx.capability());
  QTC_CHECK(s.supported, s.reason);
  const gating::Support emu = gating::query(gating::Feature::kGemmNvfp4Emulated, ctx.capability());
  QTC_CHECK(emu.supported, "grouped row-scaled NVFP4 GEMM runs through the BF16 emulation only; ", emu.reason);
  const auto G = static_cast<int64_t>(w.size());
  QTC_CHECK(static_cast<int64_t>(rows.first_dims.size()) == G && static_cast<int64_t>(rows.row_offsets.size()) == G,
            "grouped GEMM: ", G, " weights, ", rows.first_dims.size(), " group sizes, ", rows.row_offsets.size(), " offsets");
  QTC_CHECK(rows.d_first_dims != nullptr && rows.d_row_offsets != nullptr, "grouped GEMM: device group sizes missing");
  QTC_CHECK(x.recipe.kind == RecipeKind::kNVFP4 && x.rowwise.has_value(),
            "grouped row-scaled GEMM: x must be NVFP4 with a rowwise plane, got ", x.recipe.name());
  QTC_CHECK(x.rows == rows.capacity, "grouped GEMM: x has ", x.rows, " rows, the groups span ", rows.capacity);
  const int64_t K = x.cols;
  QTC_CHECK(K % 16 == 0, "NVFP4 GEMM needs K % 16 == 0, got ", K);
  const int64_t n_row = x.rowwise->amax_count;
  QTC_CHECK(n_row == 1 || n_row == x.rows, "x has ", n_row, " amaxes for ", x.rows, " rows");
  // Every check before any work: widths, shapes, and groups inside the buffer without overlap.
  int64_t N = -1, max_rows = 0, prev_end = 0;
  for (int64_t g = 0; g < G; ++g) {
    const DeviceQuantized& wg = *w[static_cast<size_t>(g)];
    QTC_CHECK(wg.recipe.kind == RecipeKind::kNVFP4 && !wg.recipe.row_scaled && wg.rowwise.has_value() &&
                  wg.rowwise->amax_count == 1,
              "grouped GEMM: weight ", g, " must be per-tensor NVFP4 with a rowwise plane");
    QTC_CHECK(wg.cols == K, "grouped GEMM: weight ", g, " has K = ", wg.cols, ", x has ", K);
    if (N < 0) N = wg.rows;
    QTC_CHECK(wg.rows == N, "grouped GEMM: group ", g, " has output width ", wg.rows, ", group 0 has ", N,
              " (groups whose output widths differ are rejected)");
    const int64_t n = rows.first_dims[static_cast<size_t>(g)], off = rows.row_offsets[static_cast<size_t>(g)];
    QTC_CHECK(n >= 0 && off >= prev_end && off + n <= rows.capacity, "grouped GEMM: group ", g, " rows [", off, ", ",
              off + n, ") overlap the previous group or exceed capacity ", rows.capacity);
    prev_end = off + n;
    max_rows = std::max(max_rows, n);
  }
  if (G == 0) return;
  const cudaStream_t st = ctx.stream();
  // All tokens once (rows in no group are dequantized too but never read: they only feed no GEMM).
  void* x16 = ctx.scratch(5, static_cast<size_t>(x.rows * K) * 2);
  nvfp4_plane_to_bf16(*x.rowwise, x.rows, K, x16, st);
  void* w16 = ctx.scratch(6, static_cast<size_t>(N * K) * 2);
  auto* acc = static_cast<float*>(ctx.scratch(7, static_cast<size_t>(x.rows * N) * sizeof(float)));
  auto* col_scales = static_cast<float*>(ctx.scratch(8, static_cast<size_t>(G) * sizeof(float)));
  const float alpha = 1.0f / static_cast<float>(36 * 448 * w[0]->recipe.e4m3_max);  // neutralised (§7.5 step 2)
  for (int64_t g = 0; g < G; ++g) {
    const DeviceQuantized& wg = *w[static_cast<size_t>(g)];
    QTC_CHECK(wg.recipe.e4m3_max == w[0]->recipe.e4m3_max && x.recipe.e4m3_max == 448,
              "grouped GEMM: one E4M3 max for all groups (448 for x)");
    QTC_CUDA_CHECK(cudaMemcpyAsync(col_scales + g, wg.rowwise->amax.data(), sizeof(float), cudaMemcpyDeviceToDevice, st));
    const int64_t n = rows.first_dims[static_cast<size_t>(g)];
    if (n == 0) continue;  // zero-token groups are skipped (TE general_grouped_gemm)
    const int64_t off = rows.row_offsets[static_cast<size_t>(g)];
    nvfp4_plane_to_bf16(*wg.rowwise, N, K, w16, st);
    gemm_bf16(ctx, w16, static_cast<const uint8_t*>(x16) + off * K * 2, N, n, K, DType::kF32, acc + off * N, nullptr,
              alpha);
  }
  detail::launch_grouped_row_scaled_epilogue(acc, N, G, max_rows, rows.d_first_dims, rows.d_row_offsets,
                                             x.rowwise->amax.as<float>(), n_row, col_scales, bias, out, d, st);
}

}  // namespace qtc::cuda
