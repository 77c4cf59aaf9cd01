/// \file nvfp4.cu
/// \brief NVFP4 quantization (TE_FORMATS.md §1): host launcher and the kPlain / k2D specializations
///        (nvfp4_kernel.cuh holds the kernel; nvfp4_full.cu the kFull one).
#include <cstdlib>
#include <string_view>

#include "nvfp4_kernel.cuh"

namespace qtc::cuda {
namespace nvfp4 {
namespace {

using namespace dev;


/// Which kernel runs a call both can serve (1x16/16x16 RN, te/ocp, optionally row-scaled, BF16/F16, M and K
/// multiples of 16, aligned): the fast kernel (nvfp4_fast.cu), always. QTC_NVFP4_KERNEL=generic forces the
/// generic kernel instead (a diagnostic and test override: the GPU run checks both on every NVFP4 case).
bool use_fast() {
  const char* k = std::getenv("QTC_NVFP4_KERNEL");
  return k == nullptr || std::string_view(k) != "generic";
}

template <typename In>
void run(const detail::Nvfp4Params& h, cudaStream_t s) {
  KParams p{};
  p.x = h.x;
  p.M = h.M;
  p.K = h.K;
  p.rowwise = h.rowwise;
  p.columnwise = h.columnwise;
  p.tile2d = h.tile2d;
  p.row_scaled = h.row_scaled;
  p.rht = h.rht;
  p.vec_ok = (reinterpret_cast<uintptr_t>(h.x) % 16 == 0) && ((h.K * sizeof(In)) % 16 == 0);
  p.cfg = Nvfp4Cfg{h.pyref, h.torchao, h.stochastic, h.fourover6, h.mse, h.e4m3_max, 6.0f * h.e4m3_max, h.seed};
  p.cfg.ao_two_level = h.torchao_two_level;
  p.cfg.ao_bf16 = h.dtype == DType::kBF16;
  p.rht_mask = h.rht_sign_mask;
  p.amax_row = h.amax_row;
  p.amax_col = h.amax_col;
  p.row_data = h.row_data;
  p.row_scale = to_scale_out(h.row_scale);
  p.col_data = h.col_data;
  p.col_scale = to_scale_out(h.col_scale);
  if (h.M == 0 || h.K == 0) return;
  const int64_t n_tiles = ((h.K + kTC - 1) / kTC) * ((h.M + kTR - 1) / kTR);
  const bool full = h.fourover6 || h.stochastic || h.rht || h.torchao || h.pyref;
  if (use_fast() && fast_eligible(p, h.dtype, full))
    launch_fast(p, h.dtype, s);
  else if (full)
    launch_full(p, n_tiles, h.dtype, s);
  else if (h.tile2d)
    launch_persistent(nvfp4_kernel<In, k2D>, n_tiles, p, s);
  else
    launch_persistent(nvfp4_kernel<In, kPlain>, n_tiles, p, s);
}

}  // namespace
}  // namespace nvfp4

namespace detail {
void launch_nvfp4(const Nvfp4Params& p, cudaStream_t s) {
  dev::dispatch_input(p.dtype, "nvfp4", [&](auto in) { nvfp4::run<typename decltype(in)::type>(p, s); });
}
}  // namespace detail

}  // namespace qtc::cuda
