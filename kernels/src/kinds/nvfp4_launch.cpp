/// \file nvfp4_launch.cpp
/// \brief The NVFP4 module of the kernels (TE_FORMATS.md §1): the global (or per-row) amax passes, then the NVFP4
///        kernels (nvfp4.cu: generic, full and fast).
#include "kind_launch.hpp"
#include "qtc/kind.hpp"

namespace qtc::cuda::detail {
namespace nvfp4_launch {  // named, not anonymous: the unity build shares anonymous namespaces

void quantize(const QuantizeArgs& a, DeviceQuantized&, const float* host_amax, cudaStream_t s) {
  const int64_t M = a.M, K = a.K;
  QTC_CHECK(M % 16 == 0, "quantize: the CUDA NVFP4 kernels need M % 16 == 0, got M = ", M,
            " (torchao's rowwise-only plane of a ragged M runs on the CPU reference)");
  if (a.nvfp4.row_scaled) {
    QTC_CHECK(host_amax == nullptr, "quantize_with_amax: row-scaled NVFP4 computes its own per-row amax (§1.11)");
    AmaxParams p = amax_over(a);
    p.per_row = a.amax_row;
    p.per_col = a.columnwise ? a.amax_col : nullptr;
    launch_amax(p, s);
  } else if (host_amax != nullptr) {
    launch_fill(a.amax_row, 1, host_amax[0], s);
    launch_fill(a.amax_col, 1, host_amax[1], s);
  } else {
    const bool rht_col = a.nvfp4.rht && a.columnwise;
    AmaxParams p = amax_over(a);
    p.global = a.amax_row;
    p.rht_global = rht_col ? a.amax_col : nullptr;
    p.rht_sign_mask = a.nvfp4.rht_sign_mask;
    launch_amax(p, s);
    if (M * K == 0 && rht_col) launch_fill(a.amax_col, 1, 0.0f, s);
    if (!rht_col) copy_f32(a.amax_col, a.amax_row, s);
  }
  launch_nvfp4(a, s);
}

std::string unsupported(const Recipe&, int64_t rows) {
  if (rows % 16 != 0)
    return "the CUDA NVFP4 kernels need M % 16 == 0 (torchao's rowwise-only plane of a ragged M runs on the CPU reference)";
  return {};
}

void gating_features(const Recipe& r, std::vector<gating::Feature>& out) {
  out.push_back(gating::Feature::kQuantizeNvfp4);
  if (r.nvfp4_row_scaled()) out.push_back(gating::Feature::kQuantizeNvfp4RowScaled);
  if (r.nvfp4_rht()) out.push_back(gating::Feature::kQuantizeNvfp4Rht);
}

}  // namespace nvfp4_launch

const CudaKindModule kNvfp4Launch = {.kind = kind_of_options<Nvfp4Options>,
                                     .quantize = nvfp4_launch::quantize,
                                     .unsupported = nvfp4_launch::unsupported,
                                     .gating_features = nvfp4_launch::gating_features,
                                     .dequantize = launch_dequantize_nvfp4};

}  // namespace qtc::cuda::detail
