/// \file nvfp4_full.cu
/// \brief The kFull NVFP4 kernel (4over6, stochastic rounding, RHT, torchao), in its own translation unit.
#include "nvfp4_kernel.cuh"

namespace qtc::cuda::nvfp4 {

void launch_full(const KParams& p, int64_t n_tiles, DType t, cudaStream_t s) {
  switch (t) {
    case DType::kF32: dev::launch_persistent(nvfp4_kernel<float, kFull>, n_tiles, p, s); break;
    case DType::kBF16: dev::launch_persistent(nvfp4_kernel<__nv_bfloat16, kFull>, n_tiles, p, s); break;
    case DType::kF16: dev::launch_persistent(nvfp4_kernel<__half, kFull>, n_tiles, p, s); break;
    default: QTC_FAIL("nvfp4: input must be F32, BF16 or F16");
  }
}

}  // namespace qtc::cuda::nvfp4
