/// \file gemm_grouped.cpp
/// \brief Grouped row-scaled NVFP4 GEMMs on the GPU (qtc/cuda/gemm.hpp; TE_FORMATS.md §7.5 grouped). Two paths:
///        * device-driven (group sizes in device memory only, graph-capturable): fprop and wgrad through one CUTLASS
///          sm_90a grouped GEMM launch (grouped_gemm_sm90.hpp) whose epilogue applies §7.5's neutralised alpha,
///          post-scale and bias in FP32 in TE's order; the host-m_splits fprop is a thin wrapper over it;
///        * per-group (a build without QTC_CUTLASS, N or K not a multiple of 8, the listed fallback, the listed
///          wgrad): a host loop of neutralised per-tensor GEMMs into an FP32 scratch on up to 4 lanes, then one
///          epilogue that reads every group's real row count from device memory.
///
/// NOTES: why a grouped GEMM of our own. Hopper with cuBLAS 13.1 has no cuBLASLt grouped GEMM (gating row
/// gemm.grouped: cuBLAS >= 13.4; cublasGemmGroupedBatchedEx takes host sizes), and a host loop needs host sizes,
/// i.e. a sync in a MoE layer that keeps its routing on the device, and one small GEMM per expert (0.46 of the
/// dense GEMM at 64 experts, 2026-11-29). CUTLASS 3.x's ptr-array kernel with the grouped persistent scheduler
/// reads each group's (M, N, K) from device memory, so a small kernel writes shapes and pointers from the device
/// sizes and one launch covers every group: no host sync, one graph node, and the tiles of all experts share the
/// SMs. Fusing §7.5 steps 2-4 into its epilogue removes the FP32 scratch round trip (0.5 GB at 32768 x 4096).
/// The operands stay the exact BF16 emulation of NVFP4 (code·sf is exact in BF16): the experts' weights are
/// dequantized either once into a GroupedWeightsBf16 the caller owns (per optimizer step) or on every call (only
/// groups with tokens, decided on the device); that per-call pass is what keeps the per-call variant under the
/// dense GEMM's speed (reports/h200/gemm.md). A GEMM that decodes E2M1 + E4M3 inside the mainloop (CUTLASS's
/// mixed-input collectives scale per 64+ K elements, NVFP4 per 16) was not attempted.
#include <algorithm>

#include "gemm_internal.hpp"
#include "grouped_gemm_sm90.hpp"
#include "grouped_routing.hpp"
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

/// Weight g of a grouped GEMM: per-tensor NVFP4 with a rowwise plane, K columns, weight 0's E4M3 max, and the output
/// width *N of the others (set from the first weight when *N < 0).
void check_weight(const std::vector<const DeviceQuantized*>& w, size_t g, int64_t K, int64_t* N) {
  QTC_CHECK(w[g] != nullptr, "grouped GEMM: weight ", g, " is null");
  const DeviceQuantized& wg = *w[g];
  QTC_CHECK(wg.recipe.nvfp4_or_null() != nullptr && !wg.recipe.nvfp4_row_scaled() && wg.rowwise.has_value() &&
                wg.rowwise->amax_count == 1,
            "grouped GEMM: weight ", g, " must be per-tensor NVFP4 with a rowwise plane");
  QTC_CHECK(wg.cols == K, "grouped GEMM: weight ", g, " has K = ", wg.cols, ", x has ", K);
  QTC_CHECK(wg.recipe.nvfp4().e4m3_max == w[0]->recipe.nvfp4().e4m3_max, "grouped GEMM: one E4M3 max for all weights, weight ", g,
            " has ", wg.recipe.nvfp4().e4m3_max, ", weight 0 ", w[0]->recipe.nvfp4().e4m3_max);
  if (*N < 0) *N = wg.rows;
  QTC_CHECK(wg.rows == *N, "grouped GEMM: group ", g, " has output width ", wg.rows, ", group 0 has ", *N,
            " (groups whose output widths differ are rejected before any GEMM)");
}

/// Checks the weights (per-tensor NVFP4, one K, one output width) and the row partition; returns N.
int64_t check_weights_and_rows(const std::vector<const DeviceQuantized*>& w, const GroupedRowsDevice& rows, int64_t K,
                               int64_t* max_rows) {
  const auto G = static_cast<int64_t>(w.size());
  QTC_CHECK(static_cast<int64_t>(rows.first_dims.size()) == G && static_cast<int64_t>(rows.row_offsets.size()) == G,
            "grouped GEMM: ", G, " weights, ", rows.first_dims.size(), " group sizes, ", rows.row_offsets.size(), " offsets");
  int64_t N = -1, mr = 0, prev_end = 0;
  for (int64_t g = 0; g < G; ++g) {
    check_weight(w, static_cast<size_t>(g), K, &N);
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
  const int64_t n0 = w.empty() || w[0] == nullptr ? 0 : w[0]->rows;
  const gating::GroupedPath gp = gating::grouped_row_scaled_path(ctx.capability());
  if (gp.engine == gating::Feature::kGemmGroupedRowScaledSm90 && !w.empty() && n0 % 8 == 0 && x.cols % 8 == 0) {
    // Thin wrapper: the host sizes are checked here (the device-driven call cannot), then the device copies drive it.
    check_args(args);
    QTC_CHECK(rows.d_first_dims != nullptr && rows.d_row_offsets != nullptr, "grouped GEMM: device group sizes missing");
    QTC_CHECK(x.rows == rows.capacity, "grouped GEMM: x has ", x.rows, " rows, the groups span ", rows.capacity);
    check_weights_and_rows(w, rows, x.cols, nullptr);
    GroupedRowsOnDevice dr;
    dr.groups = static_cast<int64_t>(w.size());
    dr.capacity = rows.capacity;
    dr.first_dims = rows.d_first_dims;
    dr.row_offsets = rows.d_row_offsets;
    gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, w, x, dr, args, d);
    return;
  }
  const gating::Support emu = gating::query(gating::Feature::kGemmNvfp4Emulated, ctx.capability());
  QTC_CHECK(emu.supported, "grouped row-scaled NVFP4 GEMM runs through the BF16 emulation only; ", emu.reason);
  check_args(args);
  QTC_CHECK(rows.d_first_dims != nullptr && rows.d_row_offsets != nullptr, "grouped GEMM: device group sizes missing");
  QTC_CHECK(x.recipe.nvfp4_or_null() != nullptr && x.rowwise.has_value(),
            "grouped row-scaled GEMM: x must be NVFP4 with a rowwise plane, got ", x.recipe.name());
  QTC_CHECK(x.rows == rows.capacity, "grouped GEMM: x has ", x.rows, " rows, the groups span ", rows.capacity);
  QTC_CHECK(x.recipe.nvfp4().e4m3_max == 448, "grouped GEMM: x must use E4M3 max 448, got ", x.recipe.nvfp4().e4m3_max);
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
  const float alpha = 1.0f / static_cast<float>(36 * 448 * w[0]->recipe.nvfp4().e4m3_max);  // neutralised (§7.5 step 2)
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
    detail::launch_nvfp4_to_bf16(p.data.as<uint8_t>(), p.scale.as<uint8_t>(), N, K, detail::nvfp4_scale_geometry(p, N, K),
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
    QTC_CHECK(xg->recipe.nvfp4_or_null() != nullptr && xg->rowwise.has_value() && xg->cols == K,
              "grouped GEMM: input ", g, " must be NVFP4 [", n, ", ", K, "] with a rowwise plane");
    ++live;
    row_scaled += xg->recipe.nvfp4_row_scaled() ? 1 : 0;
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
    QTC_CHECK(x[g]->recipe.nvfp4_or_null() != nullptr && dy[g]->recipe.nvfp4_or_null() != nullptr &&
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


// ------------------------------------------------------------------------------------------------
// Device-driven grouped path (group sizes on the device only)
// ------------------------------------------------------------------------------------------------
namespace {

// Context scratch slots of this path (gemm_cublaslt.cpp uses 0-13).
enum Slot : int { kX16 = 20, kW16 = 21, kRowFactor = 22, kVectors = 23, kEngine = 24, kF32Out = 25, kWAmax = 26,
                  kDy16 = 27, kWgradVec = 28, kRouting = 29 };

/// The routing every kernel of a device-driven call reads: the caller's sizes and offsets rewritten on the device
/// by the rule of grouped_routing.hpp (hostile sizes read as empty groups, never as rows outside the buffers), in
/// the context's scratch, stride 1. One launch per call, before any other kernel of it.
GroupedRowsOnDevice sanitized(GemmContext& ctx, const GroupedRowsOnDevice& rows) {
  GroupedRowsOnDevice s = rows;
  if (rows.groups == 0) return s;
  auto* out = static_cast<int64_t*>(ctx.scratch(kRouting, static_cast<size_t>(2 * rows.groups) * sizeof(int64_t)));
  detail::launch_sanitize_routing(rows.first_dims, rows.row_offsets, rows.stride, rows.groups, rows.capacity, out,
                                  ctx.stream());
  s.first_dims = out;
  s.row_offsets = out + rows.groups;
  s.stride = 1;
  return s;
}

/// The engine of the device-driven path on this context's card (the gating table's choice), or a throw with why.
void require_device_engine(GemmContext& ctx) {
  const gating::GroupedPath gp = gating::grouped_row_scaled_path(ctx.capability());
  QTC_CHECK(gp.engine.has_value(), "grouped row-scaled NVFP4 GEMM with device group sizes: no engine on this card: ",
            gp.why);
  QTC_CHECK(*gp.engine == gating::Feature::kGemmGroupedRowScaledSm90,
            "grouped row-scaled NVFP4 GEMM with device group sizes: the table picks ", gating::feature_name(*gp.engine),
            ", which qtc does not implement yet (no cuBLASLt >= 13.4 headers to compile the call against)");
}

void check_rows_on_device(const GroupedRowsOnDevice& rows) {
  QTC_CHECK(rows.groups >= 0 && rows.capacity >= 0, "grouped GEMM: negative group count or capacity");
  QTC_CHECK(rows.groups == 0 || (rows.first_dims != nullptr && rows.row_offsets != nullptr),
            "grouped GEMM: device group sizes missing");
  QTC_CHECK(rows.stride >= 1, "grouped GEMM: group-size stride must be >= 1, got ", rows.stride);
  QTC_CHECK(rows.groups <= 65535, "grouped GEMM: ", rows.groups, " groups (at most 65535: one grid row per group)");
}

void check_weights_list(const std::vector<const DeviceQuantized*>& w, int64_t K, int64_t* n_out) {
  int64_t N = -1;
  for (size_t g = 0; g < w.size(); ++g) {
    check_weight(w, g, K, &N);
    const DeviceQuantized& wg = *w[g];
    QTC_CHECK(wg.rowwise->scale_layout == w[0]->rowwise->scale_layout &&
                  wg.rowwise->scale_cols == w[0]->rowwise->scale_cols,
              "grouped GEMM: weight ", g, " has another scale layout than weight 0");
  }
  *n_out = N;
  QTC_CHECK(N % 8 == 0 && K % 8 == 0, "grouped GEMM with device group sizes needs N and K multiples of 8 (16-byte "
            "TMA rows of the BF16 operands), got N = ", N, ", K = ", K);
}

/// The whole fprop after the weights are BF16 ([G, N, K] at w16) with their amaxes at w_amax; rows: the sanitised routing.
void fprop_device_core(GemmContext& ctx, const void* w16, const float* w_amax, float w_e4m3_max, int64_t N,
                       const DeviceQuantized& x, const GroupedRowsOnDevice& rows, const DeviceGemmArgs& args, void* d) {
  const cudaStream_t st = ctx.stream();
  const int64_t K = x.cols, G = rows.groups, cap = rows.capacity;
  const int64_t n_row = x.rowwise->amax_count;
  // x: all tokens once (rows in no group feed no output).
  void* x16 = ctx.scratch(kX16, static_cast<size_t>(std::max<int64_t>(cap * K, 1)) * 2);
  nvfp4_plane_to_bf16(*x.rowwise, cap, K, x16, st);
  // The fused §7.5 factor of every live row: row amax · its group's weight amax.
  auto* s = static_cast<float*>(ctx.scratch(kRowFactor, static_cast<size_t>(std::max<int64_t>(cap, 1)) * 4));
  detail::launch_grouped_row_factors(rows.first_dims, rows.row_offsets, rows.stride, G, x.rowwise->amax.as<float>(),
                                     n_row, w_amax, s, st);
  // Epilogue vectors: ones [N] (the column factor is fused into s), -0 [N] or the bias in FP32 [G, N].
  const int64_t n_ones = std::max(N, G);  // also the per-group factor 1 of the F16 cast below
  auto* vec = static_cast<float*>(ctx.scratch(kVectors, static_cast<size_t>(n_ones + (args.bias ? G * N : N)) * 4));
  float* ones = vec;
  float* add = vec + n_ones;
  detail::launch_fill_f32(ones, n_ones, 1.0f, st);
  if (args.bias != nullptr)
    detail::launch_to_f32(args.bias, args.out, G * N, add, st);
  else
    detail::launch_fill_f32(add, N, -0.0f, st);
  detail::GroupedGemmProblem p;
  p.groups = static_cast<int>(G);
  p.sizes = rows.first_dims;
  p.offsets = rows.row_offsets;
  p.stride = rows.stride;
  p.n = N;
  p.k = K;
  p.lda = K;
  p.ldb = K;
  p.ldd = N;
  p.a = {x16, K, 0};
  p.b = {w16, 0, N * K};
  p.alpha = 1.0f / static_cast<float>(36 * 448 * w_e4m3_max);  // neutralised (§7.5 step 2), x's max is 448
  p.col = {s, 1, 0};
  p.row_mul = {ones, 0, 0};
  p.row_add = args.bias != nullptr ? detail::GroupedPtr{add, 0, N} : detail::GroupedPtr{add, 0, 0};
  void* engine = ctx.scratch(kEngine, detail::sm90_grouped_scratch_bytes(p.groups));
  if (args.out == DType::kF16) {  // FP32 values, then one cast per live row (the grouped epilogue with factor 1)
    auto* f32 = static_cast<float*>(ctx.scratch(kF32Out, static_cast<size_t>(cap * N) * 4));
    p.d = {f32, N, 0};
    detail::run_sm90_grouped(p, engine, st);
    detail::launch_grouped_row_scaled_epilogue(f32, N, G, cap, rows.first_dims, rows.row_offsets, ones, 1, ones,
                                               nullptr, DType::kF16, d, st, rows.stride);
    return;
  }
  p.d = {d, N, 0};
  p.d_bf16 = args.out == DType::kBF16;
  detail::run_sm90_grouped(p, engine, st);
}

void check_fprop_device(GemmContext& ctx, const DeviceQuantized& x, const GroupedRowsOnDevice& rows,
                        const DeviceGemmArgs& args) {
  check_gating(ctx);
  require_device_engine(ctx);
  check_args(args);
  check_rows_on_device(rows);
  QTC_CHECK(x.recipe.nvfp4_or_null() != nullptr && x.rowwise.has_value(),
            "grouped row-scaled GEMM: x must be NVFP4 with a rowwise plane, got ", x.recipe.name());
  QTC_CHECK(x.rows == rows.capacity, "grouped GEMM: x has ", x.rows, " rows, the groups span ", rows.capacity);
  QTC_CHECK(x.recipe.nvfp4().e4m3_max == 448, "grouped GEMM: x must use E4M3 max 448, got ", x.recipe.nvfp4().e4m3_max);
  QTC_CHECK(x.cols % 16 == 0, "NVFP4 GEMM needs K % 16 == 0, got ", x.cols);
  const int64_t n_row = x.rowwise->amax_count;
  QTC_CHECK(n_row == 1 || n_row == x.rows, "x has ", n_row, " amaxes for ", x.rows, " rows");
  QTC_CHECK(args.out == DType::kF32 || args.out == DType::kBF16 || args.out == DType::kF16,
            "grouped row-scaled GEMM output must be F32, BF16 or F16");
}

}  // namespace

GroupedWeightsBf16 allocate_grouped_weights(int64_t groups, int64_t n, int64_t k, cudaStream_t stream) {
  QTC_CHECK(groups >= 0 && n >= 0 && k >= 0 && k % 16 == 0, "grouped weights: bad shape [", groups, ", ", n, ", ", k,
            "] (K % 16 == 0)");
  GroupedWeightsBf16 w;
  w.groups = groups;
  w.n = n;
  w.k = k;
  w.bf16 = DeviceBuffer(static_cast<size_t>(std::max<int64_t>(groups * n * k, 1)) * 2, stream);
  w.amax = DeviceBuffer(static_cast<size_t>(std::max<int64_t>(groups, 1)) * 4, stream);
  return w;
}

void dequantize_grouped_weights_into(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                     GroupedWeightsBf16& out) {
  QTC_CHECK(static_cast<int64_t>(w.size()) == out.groups, "grouped weights: ", w.size(), " weights for a cache of ",
            out.groups, " groups");
  if (w.empty()) return;
  int64_t N = 0;
  check_weights_list(w, out.k, &N);
  QTC_CHECK(N == out.n, "grouped weights: the weights have ", N, " rows, the cache ", out.n);
  std::vector<const uint8_t*> data(w.size()), scale(w.size());
  std::vector<const float*> amax(w.size());
  for (size_t g = 0; g < w.size(); ++g) {
    data[g] = w[g]->rowwise->data.as<uint8_t>();
    scale[g] = w[g]->rowwise->scale.as<uint8_t>();
    amax[g] = w[g]->rowwise->amax.as<float>();
  }
  out.e4m3_max = w[0]->recipe.nvfp4().e4m3_max;
  detail::launch_nvfp4_to_bf16_grouped(data.data(), scale.data(), static_cast<int>(w.size()), nullptr, 1, N, out.k,
                                       detail::nvfp4_scale_geometry(*w[0]->rowwise, N, out.k), out.bf16.data(),
                                       ctx.stream());
  detail::launch_gather_scalars(amax.data(), static_cast<int64_t>(w.size()), out.amax.as<float>(), ctx.stream());
}

void gemm_nvfp4_row_scaled_grouped_fprop_device(GemmContext& ctx, const GroupedWeightsBf16& w, const DeviceQuantized& x,
                                                const GroupedRowsOnDevice& rows, const DeviceGemmArgs& args, void* d) {
  check_fprop_device(ctx, x, rows, args);
  QTC_CHECK(w.groups == rows.groups, "grouped GEMM: ", w.groups, " cached weights for ", rows.groups, " groups");
  QTC_CHECK(w.k == x.cols, "grouped GEMM: cached weights have K = ", w.k, ", x has ", x.cols);
  QTC_CHECK(w.bf16.bytes() >= static_cast<size_t>(w.groups * w.n * w.k) * 2 && w.amax.bytes() >= static_cast<size_t>(w.groups) * 4,
            "grouped GEMM: the weight cache's buffers are smaller than [", w.groups, ", ", w.n, ", ", w.k,
            "] BF16 and [", w.groups, "] amaxes (allocate_grouped_weights)");
  QTC_CHECK(w.n % 8 == 0 && w.k % 8 == 0, "grouped GEMM with device group sizes needs N and K multiples of 8 (16-byte "
            "TMA rows of the BF16 operands), got N = ", w.n, ", K = ", w.k);
  if (rows.groups == 0) return;
  fprop_device_core(ctx, w.bf16.data(), w.amax.as<float>(), w.e4m3_max, w.n, x, sanitized(ctx, rows), args, d);
}

void gemm_nvfp4_row_scaled_grouped_fprop_device(GemmContext& ctx, const std::vector<const DeviceQuantized*>& w,
                                                const DeviceQuantized& x, const GroupedRowsOnDevice& rows_in,
                                                const DeviceGemmArgs& args, void* d) {
  check_fprop_device(ctx, x, rows_in, args);
  QTC_CHECK(static_cast<int64_t>(w.size()) == rows_in.groups, "grouped GEMM: ", w.size(), " weights for ", rows_in.groups,
            " groups");
  if (w.empty()) return;
  int64_t N = 0;
  check_weights_list(w, x.cols, &N);
  const int64_t G = rows_in.groups, K = x.cols;
  const GroupedRowsOnDevice rows = sanitized(ctx, rows_in);
  void* w16 = ctx.scratch(kW16, static_cast<size_t>(std::max<int64_t>(G * N * K, 1)) * 2);
  auto* amax = static_cast<float*>(ctx.scratch(kWAmax, static_cast<size_t>(G) * 4));
  std::vector<const uint8_t*> data(w.size()), scale(w.size());
  std::vector<const float*> amax_ptrs(w.size());
  for (size_t g = 0; g < w.size(); ++g) {
    data[g] = w[g]->rowwise->data.as<uint8_t>();
    scale[g] = w[g]->rowwise->scale.as<uint8_t>();
    amax_ptrs[g] = w[g]->rowwise->amax.as<float>();
  }
  // Only the weights of groups with rows (decided on the device).
  detail::launch_nvfp4_to_bf16_grouped(data.data(), scale.data(), static_cast<int>(G), rows.first_dims, rows.stride, N,
                                       K, detail::nvfp4_scale_geometry(*w[0]->rowwise, N, K), w16,
                                       ctx.stream());
  detail::launch_gather_scalars(amax_ptrs.data(), G, amax, ctx.stream());
  fprop_device_core(ctx, w16, amax, w[0]->recipe.nvfp4().e4m3_max, N, x, rows, args, d);
}

void gemm_nvfp4_row_scaled_grouped_wgrad_device(GemmContext& ctx, const DeviceGroupedColumnwise& x,
                                                const DeviceGroupedColumnwise& dy, const GroupedRowsOnDevice& rows,
                                                DType out, void* d) {
  check_gating(ctx);
  require_device_engine(ctx);
  check_rows_on_device(rows);
  QTC_CHECK(out == DType::kF32 || out == DType::kBF16, "grouped wgrad output must be F32 or BF16 (FP4 GEMM), got ",
            dtype_name(out));
  QTC_CHECK(x.groups == rows.groups && dy.groups == rows.groups, "grouped wgrad: x has ", x.groups, " groups, dY ",
            dy.groups, ", the group sizes ", rows.groups);
  QTC_CHECK(x.capacity == rows.capacity && dy.capacity == rows.capacity, "grouped wgrad: x spans ", x.capacity,
            " tokens, dY ", dy.capacity, ", the group sizes ", rows.capacity);
  QTC_CHECK(rows.capacity % 16 == 0, "grouped wgrad: capacity ", rows.capacity,
            " must be a multiple of 16 (16-token columnwise blocks)");
  QTC_CHECK(x.cols % 8 == 0 && dy.cols % 8 == 0 && x.cols > 0 && dy.cols > 0, "grouped wgrad: K = ", x.cols, " and N = ",
            dy.cols, " must be positive multiples of 8");
  const int64_t G = rows.groups, K = x.cols, N = dy.cols, cap = rows.capacity;
  for (const auto* t : {&x, &dy}) {
    const char* which = t == &x ? "x" : "dY";
    QTC_CHECK(t->data.bytes() >= static_cast<size_t>(t->cols * cap / 2) &&
                  t->scale.bytes() >= static_cast<size_t>(t->cols * cap / 16) &&
                  t->amax.bytes() >= static_cast<size_t>((t->row_scaled ? G * t->cols : G) * 4),
              "grouped wgrad: ", which, "'s buffers are smaller than its shape: data [", t->cols, ", ", cap / 2,
              "] bytes, scales [", t->cols, ", ", cap / 16, "], amax [", t->row_scaled ? G * t->cols : G, "] floats");
  }
  if (G == 0) return;
  const cudaStream_t st = ctx.stream();
  const GroupedRowsOnDevice routed = sanitized(ctx, rows);  // what the kernels read (rows: checked as given)
  // Columnwise planes -> BF16 [K, capacity] and [N, capacity] (compact scales, blocks of 16 tokens).
  void* x16 = ctx.scratch(kX16, static_cast<size_t>(std::max<int64_t>(K * cap, 1)) * 2);
  void* dy16 = ctx.scratch(kDy16, static_cast<size_t>(std::max<int64_t>(N * cap, 1)) * 2);
  const ScaleGeometry xg = make_scale_geometry(Layout::kCompact, K, cap / 16, K, cap / 16, false);
  const ScaleGeometry dyg = make_scale_geometry(Layout::kCompact, N, cap / 16, N, cap / 16, false);
  detail::launch_nvfp4_to_bf16(x.data.as<uint8_t>(), x.scale.as<uint8_t>(), K, cap, xg, x16, st);
  detail::launch_nvfp4_to_bf16(dy.data.as<uint8_t>(), dy.scale.as<uint8_t>(), N, cap, dyg, dy16, st);
  // Post-scale vectors (§7.5 step 3, gemm_nvfp4_row_scaled's rules): D rows = dY features (row scales r), D columns
  // = x features (column scales c). One side per-tensor: one fused factor on the other; else r then c.
  auto* vec = static_cast<float*>(ctx.scratch(kWgradVec, static_cast<size_t>(G * (N + K) + N + K) * 4));
  float* col = vec;              // [G, N]
  float* row_mul = vec + G * N;  // [G, K]
  float* add = row_mul + G * K;  // [max(N, K)] of -0
  const float* r = dy.amax.as<float>();
  const float* c = x.amax.as<float>();
  if (!x.row_scaled) {  // column scale scalar: f_i = r_i · c
    detail::launch_scale_product(r, dy.row_scaled ? N : 1, dy.row_scaled ? 1 : 0, c, 1, 0, G, N, col, st);
    detail::launch_fill_f32(row_mul, G * K, 1.0f, st);
  } else if (!dy.row_scaled) {  // row scale scalar: f_j = c_j · r
    detail::launch_fill_f32(col, G * N, 1.0f, st);
    detail::launch_scale_product(c, K, 1, r, 1, 0, G, K, row_mul, st);
  } else {
    detail::launch_scale_product(r, N, 1, nullptr, 0, 0, G, N, col, st);
    detail::launch_scale_product(c, K, 1, nullptr, 0, 0, G, K, row_mul, st);
  }
  detail::launch_fill_f32(add, std::max(N, K), -0.0f, st);
  detail::launch_grouped_fill_skipped(routed.first_dims, routed.row_offsets, routed.stride, G, N * K, out, d, st);
  detail::GroupedGemmProblem p;
  p.wgrad = true;
  p.groups = static_cast<int>(G);
  p.sizes = routed.first_dims;
  p.offsets = routed.row_offsets;
  p.stride = routed.stride;
  p.n = N;
  p.k = K;
  p.lda = cap;
  p.ldb = cap;
  p.ldd = K;
  p.a = {dy16, 1, 0};
  p.b = {x16, 1, 0};
  p.d = {d, 0, N * K};
  p.d_bf16 = out == DType::kBF16;
  p.alpha = 1.0f / static_cast<float>(36 * x.e4m3_max * dy.e4m3_max);
  p.col = {col, 0, N};
  p.row_mul = {row_mul, 0, K};
  p.row_add = {add, 0, 0};
  detail::run_sm90_grouped(p, ctx.scratch(kEngine, detail::sm90_grouped_scratch_bytes(p.groups)), st);
}

}  // namespace qtc::cuda
