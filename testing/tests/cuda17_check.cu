/// \file cuda17_check.cu
/// \brief Compiled by nvcc as CUDA C++17 (an object library of the build, never run): the public testing headers
///        in a .cu file next to a kernel, as TransformerEngine's tests/cpp use them, with on_stream() enabled by
///        including <cuda_runtime.h> first.
#include <cuda_runtime.h>

#include <qtc/testing.hpp>
#include <qtc/testing_device.hpp>
#include <qtc/testing_gmock.hpp>

#include <cstdint>

#if __cplusplus != 201703L
#error "this translation unit must be compiled as C++17"
#endif

namespace qtc_cuda17_check {

__global__ void fill(uint8_t* p, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) p[i] = qtc::encode_e4m3(1.0f);
}

::testing::AssertionResult check(cudaStream_t s, const float* d_x, uint8_t* d_data, uint8_t* d_scales) {
  fill<<<1, 32, 0, s>>>(d_data, 32);
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "mxfp8"}});
  qtc::testing::Outputs out;
  out.rowwise_data = {d_data, size_t{32}};
  out.rowwise_scale_inv = {d_scales, size_t{1}};
  return qtc::testing::conforms(qtc::testing::on_stream(s), {d_x, qtc::DType::kF32, 1, 32}, r, out);
}

}  // namespace qtc_cuda17_check
