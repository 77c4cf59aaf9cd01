/// \file nvfp4_fast_check.cu
/// \brief Test hook of the fast NVFP4 kernel: its packed E2M1 encoder (nvfp4_fast.cuh) against the scalar one on
///        every float (launch.hpp's e2m1x2_exhaustive_mismatches).
#include "launch.hpp"
#include "nvfp4_fast.cuh"
#include "qtc/cuda/check.hpp"
#include "qtc/numeric.hpp"

namespace qtc::cuda::nvfp4 {
namespace {

using dev::encode8;

/// Every float in every one of encode8's 8 slots against the scalar encoder: slot k holds bits(i * m[k]) for
/// odd m[k] (each a permutation of the 2^32 patterns, m[0] = 1), so each float is checked in each slot, next to
/// varied partners.
__global__ void encode8_check_kernel(unsigned long long* bad) {
  constexpr uint32_t kMul[8] = {1u, 2654435761u, 2246822519u, 3266489917u, 668265263u, 374761393u, 3432918353u,
                                461845907u};
  unsigned long long local = 0;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (uint64_t{1} << 32); i += stride) {
    float y[8];
    uint32_t want = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      y[k] = __uint_as_float(static_cast<uint32_t>(i) * kMul[k]);
      want |= encode_e2m1_rn(y[k]) << (4 * k);
    }
    local += encode8(y) != want;
  }
  if (local != 0) atomicAdd(bad, local);
}

}  // namespace
}  // namespace qtc::cuda::nvfp4

namespace qtc::cuda::detail {
int64_t e2m1x2_exhaustive_mismatches() {
  unsigned long long* d = nullptr;
  QTC_CUDA_CHECK(cudaMalloc(&d, sizeof(unsigned long long)));
  QTC_CUDA_CHECK(cudaMemset(d, 0, sizeof(unsigned long long)));
  nvfp4::encode8_check_kernel<<<4096, 256>>>(d);
  QTC_CUDA_CHECK_LAUNCH();
  unsigned long long h = 0;
  const cudaError_t e = cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost);
  QTC_CUDA_CHECK(cudaFree(d));
  QTC_CUDA_CHECK(e);
  return static_cast<int64_t>(h);
}
}  // namespace qtc::cuda::detail
