/// \file grouped_quantize.cu
/// \brief Grouped NVFP4 quantization with device-resident group sizes (qtc/cuda/grouped.hpp): the grid covers
///        every group at its largest possible size (blockIdx.y = group) and each block reads its group's real
///        row count and first row from device memory, so the launches are graph-capturable.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "nvfp4_common.cuh"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/grouped.hpp"

namespace qtc::cuda {
namespace {

using dev::InputTraits;

/// Per-group amax (per-tensor) or per-row amax (row-scaled), NaN ignored (§0.5). One warp per row.
template <typename T>
__global__ void grouped_amax_kernel(const T* __restrict__ x, int64_t K, const int64_t* __restrict__ first_dims,
                                    const int64_t* __restrict__ row_offsets, int64_t stride, bool row_scaled,
                                    float* __restrict__ amax) {
  const int64_t g = blockIdx.y;
  const int64_t rows = first_dims[g * stride], r0 = row_offsets[g * stride];
  const int warps = blockDim.x / 32, lane = threadIdx.x % 32;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(warps) + threadIdx.x / 32; i < rows;
       i += static_cast<int64_t>(gridDim.x) * warps) {
    const T* row = x + (r0 + i) * K;
    float m = 0.0f;
    for (int64_t j = lane; j < K; j += 32) m = fmaxf(m, fabsf(InputTraits<T>::to_f32(row[j])));
    m = dev::warp_max(m, false);
    if (lane == 0) {
      if (row_scaled)
        amax[r0 + i] = m;
      else
        dev::atomic_max_nonneg(amax + g, m);
    }
  }
}

/// One thread per 16-element block of a live row: §1.4 with the group's (or the row's) S_enc.
template <typename T>
__global__ void grouped_nvfp4_kernel(const T* __restrict__ x, int64_t K, const int64_t* __restrict__ first_dims,
                                     const int64_t* __restrict__ row_offsets, int64_t stride, bool row_scaled,
                                     const float* __restrict__ amax, uint8_t* __restrict__ data,
                                     uint8_t* __restrict__ scale) {
  const int64_t g = blockIdx.y;
  const int64_t rows = first_dims[g * stride], r0 = row_offsets[g * stride];
  const int64_t nkb = K / 16;
  const dev::Nvfp4Cfg cfg{false, false, false, false, false, 448.0f, 2688.0f, 0};
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * nkb;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = r0 + t / nkb, kb = t % nkb;
    const float a = row_scaled ? amax[r] : amax[g];
    const float s_enc = dev::nvfp4_s_enc(a, 448.0f, false);
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = InputTraits<T>::to_f32(x[r * K + kb * 16 + i]);
    uint32_t sf = 0;
    const uint2 codes = dev::nvfp4_block_1d(v, s_enc, a, cfg, 0, 0, sf);
    *reinterpret_cast<uint2*>(data + r * (K / 2) + kb * 8) = codes;
    scale[r * nkb + kb] = static_cast<uint8_t>(sf);
  }
}

template <typename T>
void launch(const DeviceMatrixView& x, const int64_t* fd, const int64_t* off, int64_t stride, DeviceGroupedNvfp4& o,
            cudaStream_t s) {
  const T* px = static_cast<const T*>(x.data);
  auto* amax = o.amax.as<float>();
  if (!o.row_scaled) QTC_CUDA_CHECK(cudaMemsetAsync(amax, 0, static_cast<size_t>(o.groups) * sizeof(float), s));
  // grids sized for a group as large as the whole buffer: the real sizes are only known on the device
  const dim3 ga(static_cast<unsigned>(std::min<int64_t>((o.capacity + 7) / 8, 4096)), static_cast<unsigned>(o.groups));
  grouped_amax_kernel<T><<<ga, 256, 0, s>>>(px, o.cols, fd, off, stride, o.row_scaled, amax);
  QTC_CUDA_CHECK_LAUNCH();
  const int64_t blocks = o.capacity * (o.cols / 16);
  const dim3 gq(static_cast<unsigned>(std::min<int64_t>((blocks + 255) / 256, 4096)), static_cast<unsigned>(o.groups));
  grouped_nvfp4_kernel<T><<<gq, 256, 0, s>>>(px, o.cols, fd, off, stride, o.row_scaled, amax, o.data.as<uint8_t>(),
                                              o.scale.as<uint8_t>());
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace

DeviceGroupedNvfp4 allocate_grouped_nvfp4(int64_t capacity, int64_t cols, int64_t groups, bool row_scaled,
                                          cudaStream_t stream) {
  QTC_CHECK(cols % 16 == 0, "grouped NVFP4: K must be a multiple of 16, got ", cols);
  QTC_CHECK(groups > 0 && groups < 65536, "grouped NVFP4: 1..65535 groups, got ", groups);
  DeviceGroupedNvfp4 o;
  o.capacity = capacity;
  o.cols = cols;
  o.groups = groups;
  o.row_scaled = row_scaled;
  o.data = DeviceBuffer(static_cast<size_t>(capacity * cols / 2), stream);
  o.scale = DeviceBuffer(static_cast<size_t>(capacity * cols / 16), stream);
  o.amax = DeviceBuffer(static_cast<size_t>(row_scaled ? capacity : groups) * sizeof(float), stream);
  return o;
}

void quantize_grouped_nvfp4_into(const DeviceMatrixView& x, const int64_t* d_first_dims, const int64_t* d_row_offsets,
                                 DeviceGroupedNvfp4& out, cudaStream_t stream, int64_t stride) {
  QTC_CHECK(stride >= 1, "grouped NVFP4: the group-size stride must be >= 1 element, got ", stride);
  QTC_CHECK(x.rows == out.capacity && x.cols == out.cols, "grouped NVFP4: input ", x.rows, "x", x.cols,
            ", outputs for ", out.capacity, "x", out.cols);
  switch (x.dtype) {
    case DType::kF32: launch<float>(x, d_first_dims, d_row_offsets, stride, out, stream); break;
    case DType::kBF16: launch<__nv_bfloat16>(x, d_first_dims, d_row_offsets, stride, out, stream); break;
    case DType::kF16: launch<__half>(x, d_first_dims, d_row_offsets, stride, out, stream); break;
    default: QTC_FAIL("grouped NVFP4: input must be F32, BF16 or F16");
  }
}

}  // namespace qtc::cuda
