/// \file dequantize.cuh
/// \brief Internal: the dequantize pass shared by every kind (TE_FORMATS.md §1.14, §2.3, §3.3, §4.2): one plane to a
///        [M, K] matrix in x's orientation, each element decoded by its kind's functor (float v = decode(p, i, j),
///        defined beside the kind's quantize kernels: kinds/<kind>.cu) and rounded once (RN-even) to the output type.
///        A kind's module (kind_launch.hpp) names its launcher, so no code here knows the kinds.
#pragma once
#include <algorithm>

#include "device_util.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"

namespace qtc::cuda::dev {

template <typename Decode>
__global__ void dequant_kernel(detail::DequantizeArgs p, Decode decode) {
  const int64_t n = p.M * p.K;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = decode(p, idx / p.K, idx % p.K);
    if (p.out == DType::kF32)
      static_cast<float*>(p.y)[idx] = v;
    else if (p.out == DType::kBF16)
      static_cast<uint16_t*>(p.y)[idx] = f32_to_bf16(v);
    else
      static_cast<uint16_t*>(p.y)[idx] = f32_to_f16(v);
  }
}

/// Launches the pass with the kind's decoder on stream s (nothing for an empty plane).
template <typename Decode>
void launch_dequantize_with(const detail::DequantizeArgs& p, Decode decode, cudaStream_t s) {
  QTC_CHECK(p.out == DType::kF32 || p.out == DType::kBF16 || p.out == DType::kF16,
            "dequantize: output must be F32, BF16 or F16");
  const int64_t n = p.M * p.K;
  if (n == 0) return;
  const int grid = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65536));
  dequant_kernel<<<grid, 256, 0, s>>>(p, decode);
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace qtc::cuda::dev
