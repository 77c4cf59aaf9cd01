/// \file nvfp4_full.cu
/// \brief The kFull NVFP4 kernel (4over6, stochastic rounding, RHT, torchao, the NaN rules), in its own translation unit.
#include "nvfp4_kernel.cuh"

namespace qtc::cuda::nvfp4 {

void launch_full(const QuantizeArgs& p, int64_t n_tiles, cudaStream_t s) {
  dev::dispatch_input(p.dtype, "nvfp4", [&](auto in) {
    dev::launch_persistent(nvfp4_kernel<typename decltype(in)::type, kFull>, n_tiles, p, s);
  });
}

}  // namespace qtc::cuda::nvfp4
