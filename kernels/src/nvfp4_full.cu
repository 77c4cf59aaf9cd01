/// \file nvfp4_full.cu
/// \brief The kFull NVFP4 kernel (4over6, stochastic rounding, RHT, torchao), in its own translation unit.
#include "nvfp4_kernel.cuh"

namespace qtc::cuda::nvfp4 {

void launch_full(const KParams& p, int64_t n_tiles, DType t, cudaStream_t s) {
  dev::dispatch_input(t, "nvfp4", [&](auto in) {
    dev::launch_persistent(nvfp4_kernel<typename decltype(in)::type, kFull>, n_tiles, p, s);
  });
}

}  // namespace qtc::cuda::nvfp4
