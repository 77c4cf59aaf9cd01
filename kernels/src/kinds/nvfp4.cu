/// \file nvfp4.cu
/// \brief NVFP4 quantization (TE_FORMATS.md §1): host launcher and the kPlain / k2D specializations
///        (nvfp4_kernel.cuh holds the kernel; nvfp4_full.cu the kFull one; nvfp4_fast.cu the fast kernel).
#include "dequantize.cuh"
#include "nvfp4_kernel.cuh"

namespace qtc::cuda {
namespace nvfp4 {
namespace {

using namespace dev;

/// Which kernel runs the call (QuantizeArgs::launch.nvfp4_kernel): auto takes the fast kernel (nvfp4_fast.cu) for
/// every call it can serve (1x16/16x16 RN, te's rules, optionally row-scaled, BF16/F16, M and K multiples of 16,
/// aligned) and the generic kernel for the others; generic always the generic one; fast the fast one or an error
/// naming why it cannot serve the call. Every choice gives the same bytes (the GPU tests run each).
template <typename In>
void run(const QuantizeArgs& p, cudaStream_t s) {
  if (p.M == 0 || p.K == 0) return;
  if (p.launch.nvfp4_kernel != Nvfp4Kernel::kGeneric) {
    const char* why = fast_refusal(p);
    if (why == nullptr) {
      launch_fast(p, s);
      return;
    }
    QTC_CHECK(p.launch.nvfp4_kernel != Nvfp4Kernel::kFast, "quantize: LaunchOptions.nvfp4_kernel = fast: the fast NVFP4 kernel ",
              "cannot serve this call (", why, ")");
  }
  const int64_t n_tiles = ((p.K + kTC - 1) / kTC) * ((p.M + kTR - 1) / kTR);
  if (needs_full(p))
    launch_full(p, n_tiles, s);
  else if (p.nvfp4.tile_2d)
    launch_persistent(nvfp4_kernel<In, k2D>, n_tiles, p, s);
  else
    launch_persistent(nvfp4_kernel<In, kPlain>, n_tiles, p, s);
}

}  // namespace
}  // namespace nvfp4

namespace detail {
void launch_nvfp4(const QuantizeArgs& a, cudaStream_t s) {
  dev::dispatch_input(a.dtype, "nvfp4", [&](auto in) { nvfp4::run<typename decltype(in)::type>(a, s); });
}
}  // namespace detail

namespace nvfp4 {
/// One NVFP4 element: (sf * amax) * 1/(6 * E4M3_MAX) times its E2M1 value (§1.14); under rule nvfp4.order torchao
/// (amax / 2688) * sf, or sf alone without a per-tensor scale.
struct Dequant {
  float factor;  ///< 1 / (6 * E4M3_MAX), rounded once on the host (IEEE division, as __fdiv_rn)
  __device__ float operator()(const detail::DequantizeArgs& p, int64_t i, int64_t j) const {
    const int64_t a = p.columnwise ? j : i, b = p.columnwise ? i : j, len = p.columnwise ? p.M : p.K;
    const uint32_t code = (p.data[a * (len / 2) + b / 2] >> (4 * (b & 1))) & 0xFu;
    const float sf = qtc::decode_e4m3(p.scale[scale_index(p.scale_layout, a, b / 16)]);
    const float am = p.amax[p.per_row_amax ? a : 0];
    float fs;
    if (p.nvfp4_order == Nvfp4Order::kTorchAO)
      fs = p.nvfp4.per_tensor_scale ? __fmul_rn(__fdiv_rn(am, qtc::kTorchAOPerTensorDivisor), sf) : sf;
    else
      fs = __fmul_rn(__fmul_rn(sf, am), factor);
    return __fmul_rn(qtc::decode_e2m1(code), fs);
  }
};
}  // namespace nvfp4

namespace detail {
void launch_dequantize_nvfp4(const DequantizeArgs& a, cudaStream_t s) {
  dev::launch_dequantize_with(a, nvfp4::Dequant{.factor = 1.0f / (6.0f * static_cast<float>(a.nvfp4.e4m3_max))}, s);
}
}  // namespace detail

}  // namespace qtc::cuda
