/// \file cuda_backend_test.cpp
/// \brief Linking qtc::cuda from the installed package: the CUDA backend runs an NVFP4 quantization bit-exact to
///        the reference when a GPU is present, and says why not otherwise.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <qtc/cuda/backend.hpp>
#include <qtc/quantize.hpp>
#include <qtc/testing_device.hpp>

#include <vector>

TEST(InstalledCuda, BackendMatchesTheReferenceOrSaysWhyNot) {
  auto cuda = qtc::make_cuda_backend();
  EXPECT_EQ(cuda->name(), "cuda");
  if (const std::string why = cuda->unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  std::vector<float> x(64 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 97) - 48) / 7.0f;
  const qtc::MatrixView v{x.data(), qtc::DType::kF32, 64, 64};
  qtc::Recipe r;  // NVFP4 1x16, both planes
  const qtc::QuantizedTensor got = cuda->quantize(v, r), want = qtc::ref::quantize(v, r);
  EXPECT_EQ(got.rowwise->data, want.rowwise->data);
  EXPECT_EQ(got.rowwise->scale.bytes, want.rowwise->scale.bytes);
  EXPECT_EQ(got.columnwise->data, want.columnwise->data);
}

/// conforms() on device memory: the reference's own outputs, copied to the device, pass; one flipped scale fails.
TEST(InstalledCuda, ConformsTakesDevicePointers) {
  if (const std::string why = qtc::make_cuda_backend()->unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  std::vector<float> x(48 * 40);  // ragged: 40 is not a multiple of the 16-element block's 4-scale group
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 89) - 44) / 5.0f;
  qtc::Recipe r;
  r.columnwise = false;
  const qtc::QuantizedTensor want = qtc::ref::quantize({x.data(), qtc::DType::kF32, 48, 40}, r);
  std::vector<uint8_t> scales = want.rowwise->scale.bytes;
  void *dx = nullptr, *dd = nullptr, *ds = nullptr, *da = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dd, want.rowwise->data.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ds, scales.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&da, 4), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dd, want.rowwise->data.data(), want.rowwise->data.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(ds, scales.data(), scales.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(da, want.rowwise->amax.data(), 4, cudaMemcpyHostToDevice);
  qtc::testing::Outputs out;
  out.rowwise_data = {dd, want.rowwise->data.size()};
  out.rowwise_scale_inv = {ds, scales.size()};
  out.amax_rowwise = {da, size_t{4}};
  cudaStream_t s = nullptr;
  EXPECT_TRUE(qtc::testing::conforms(qtc::testing::on_stream(s), {dx, qtc::DType::kF32, 48, 40}, r, out));
  scales[5] ^= 0x01;
  cudaMemcpy(ds, scales.data(), scales.size(), cudaMemcpyHostToDevice);
  const ::testing::AssertionResult bad = qtc::testing::conforms(qtc::testing::on_device, {dx, qtc::DType::kF32, 48, 40}, r, out);
  EXPECT_FALSE(bad);
  EXPECT_NE(std::string(bad.message()).find("rowwise_scale_inv: 1 of"), std::string::npos) << bad.message();
  cudaFree(dx), cudaFree(dd), cudaFree(ds), cudaFree(da);
}
