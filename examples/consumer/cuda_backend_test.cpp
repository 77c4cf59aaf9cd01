/// \file cuda_backend_test.cpp
/// \brief Linking qtc::cuda from the installed package: the CUDA backend runs an NVFP4 quantization bit-exact to
///        the reference when a GPU is present, and says why not otherwise.
#include <gtest/gtest.h>

#include <qtc/cuda/backend.hpp>
#include <qtc/quantize.hpp>

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
