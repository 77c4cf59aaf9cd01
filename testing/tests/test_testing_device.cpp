/// \file test_testing_device.cpp
/// \brief conforms() on device pointers (qtc/testing_device.hpp): checked on the GPU by verify_on_device with the
///        host conforms()' verdict and message (tag [cuda] for [cpu]), the value-equivalence tier included
///        (accept_equal_values); pageable host pointers and a recipe the kernels do not run take the host path
///        (tag [cpu]). Label gpu: skips without a device, fails under QTC_REQUIRE_GPU=1.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "qtc/cuda/quantize.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/quantize.hpp"
#include "qtc/test_support.hpp"
#include "qtc/testing.hpp"
#include "qtc/testing_device.hpp"

namespace {

using qtc::testing::Outputs;

std::string gpu_reason() { return qtc::cuda::device_count() > 0 ? std::string() : std::string("no CUDA device"); }

/// Device copies of host buffers, freed at the end of the test.
class Device {
 public:
  ~Device() {
    for (void* p : ptrs_) cudaFree(p);
  }
  const void* put(const void* h, size_t n) {
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, n == 0 ? 1 : n), cudaSuccess);
    if (n > 0) {
      EXPECT_EQ(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice), cudaSuccess);
    }
    ptrs_.push_back(d);
    return d;
  }
  /// The same Outputs with every buffer on the device.
  Outputs put(const Outputs& host) {
    Outputs d = host;
    for (qtc::testing::Buffer* b : {&d.rowwise_data, &d.rowwise_scale_inv, &d.columnwise_data, &d.columnwise_scale_inv,
                                    &d.amax_rowwise, &d.amax_columnwise, &d.scale_inv, &d.amax})
      if (!b->empty()) *b = qtc::testing::Buffer(put(b->data, b->size_bytes), b->size_bytes);
    return d;
  }

 private:
  std::vector<void*> ptrs_;
};

/// The outputs of a reference quantization in `layout`, owned by `keep`.
Outputs outputs_of(const qtc::QuantizedTensor& q, qtc::Layout layout, std::vector<std::vector<uint8_t>>& keep) {
  Outputs o;
  o.layout = layout;
  keep.reserve(16);
  auto hold = [&](const std::string& name, std::vector<uint8_t> compact) {
    const auto lo = qtc::ref::OutputLayout::find(name, q.recipe, q.rows, q.cols, layout);
    keep.push_back(lo ? lo->from_compact(compact) : std::move(compact));
    return qtc::testing::Buffer(keep.back().data(), keep.back().size());
  };
  auto f32 = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  if (q.rowwise) {
    o.rowwise_data = hold("rowwise_data", q.rowwise->data);
    // FP8 per tensor: the plane's scale is the tensor's one scale_inv (below), not a rowwise_scale_inv.
    if (!q.rowwise->scale.bytes.empty() && q.recipe.fp8_tensor_or_null() == nullptr)
      o.rowwise_scale_inv = hold("rowwise_scale_inv", q.rowwise->scale.bytes);
    if (q.recipe.nvfp4_or_null() != nullptr) o.amax_rowwise = hold("amax_rowwise", f32(q.rowwise->amax));
  }
  if (q.columnwise) {
    o.columnwise_data = hold("columnwise_data", q.columnwise->data);
    if (!q.columnwise->scale.bytes.empty() && q.recipe.fp8_tensor_or_null() == nullptr)
      o.columnwise_scale_inv = hold("columnwise_scale_inv", q.columnwise->scale.bytes);
    if (q.recipe.nvfp4_or_null() != nullptr) o.amax_columnwise = hold("amax_columnwise", f32(q.columnwise->amax));
  }
  if (q.recipe.fp8_tensor_or_null() != nullptr) {
    o.scale_inv = hold("scale_inv", f32({q.scale_inv}));
    o.amax = hold("amax", f32({q.rowwise ? q.rowwise->amax.at(0) : q.columnwise->amax.at(0)}));
  }
  return o;
}

/// x [64, 128]: varied values, and row 0's first 64 columns zero (an all-zero block for every recipe's row blocks).
std::vector<float> input() {
  std::vector<float> x(64 * 128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 128 < 64 && i < 128) ? 0.0f : std::sin(0.37f * static_cast<float>(i)) * 9.0f;
  return x;
}

std::string as_cuda(std::string m) {
  const auto at = m.find(" [cpu]");
  if (at != std::string::npos) m.replace(at, 6, " [cuda]");
  return m;
}

struct Case {
  const char* name;
  std::map<std::string, std::string> md;
  qtc::Layout layout;
};

TEST(TestingDevice, DevicePointersGiveTheHostVerdictAndMessageFromTheGpu) {
  QTC_GPU_GATE(gpu_reason());
  const std::vector<float> xs = input();
  const qtc::MatrixView x{xs.data(), qtc::DType::kF32, 64, 128};
  const Case cases[] = {{"nvfp4", {{"recipe", "nvfp4"}}, qtc::Layout::kCompact},
                        {"nvfp4 swizzled", {{"recipe", "nvfp4"}}, qtc::Layout::kSwizzled},
                        {"mxfp8 te", {{"recipe", "mxfp8"}}, qtc::Layout::kPadded},
                        {"fp8_block 1x128 te", {{"recipe", "fp8_block"}, {"tile", "1x128"}}, qtc::Layout::kPadded},
                        {"fp8_tensor", {{"recipe", "fp8_tensor"}}, qtc::Layout::kCompact}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const qtc::Recipe r = qtc::testing::recipe(c.md);
    std::vector<std::vector<uint8_t>> keep;
    Outputs host = outputs_of(qtc::ref::quantize(x, r), c.layout, keep);
    Device dev;
    const void* dx = dev.put(xs.data(), xs.size() * 4);
    EXPECT_TRUE(qtc::testing::conforms(x, r, host));
    EXPECT_TRUE(qtc::testing::conforms(qtc::testing::on_device, {dx, qtc::DType::kF32, 64, 128}, r, dev.put(host)));

    // A value that differs: the same failure, found on the GPU.
    std::vector<uint8_t>& data = keep[0];  // rowwise_data
    data[300] ^= 0x11;
    const ::testing::AssertionResult h = qtc::testing::conforms(x, r, host);
    const ::testing::AssertionResult d = qtc::testing::conforms(qtc::testing::on_device, {dx, qtc::DType::kF32, 64, 128}, r, dev.put(host));
    ASSERT_FALSE(h);
    ASSERT_FALSE(d);
    EXPECT_NE(std::string(h.message()).find("FAIL"), std::string::npos) << h.message();
    EXPECT_EQ(std::string(d.message()), as_cuda(h.message()));
    data[300] ^= 0x11;

    // -0 for +0 (a zero of row 0's zero columns): bytes differ, values equal (EQUIVALENT), on the GPU as on the host.
    const auto zero = std::find(data.begin(), data.end(), uint8_t{0});
    ASSERT_NE(zero, data.end());
    *zero = 0x80;
    const ::testing::AssertionResult he = qtc::testing::conforms(x, r, host);
    const Outputs dh = dev.put(host);
    const ::testing::AssertionResult de = qtc::testing::conforms(qtc::testing::on_device, {dx, qtc::DType::kF32, 64, 128}, r, dh);
    ASSERT_FALSE(he);
    EXPECT_EQ(std::string(he.message()).rfind("EQUIVALENT", 0), 0u) << he.message();
    EXPECT_EQ(std::string(de.message()), as_cuda(he.message()));
    Outputs accept = dh;
    accept.accept_equal_values = true;
    EXPECT_TRUE(qtc::testing::conforms(qtc::testing::on_device, {dx, qtc::DType::kF32, 64, 128}, r, accept));
    *zero = 0;
  }
}

TEST(TestingDevice, PageableHostPointersAndRecipesTheKernelsLackTakeTheHostPath) {
  QTC_GPU_GATE(gpu_reason());
  const std::vector<float> xs = input();
  const qtc::MatrixView x{xs.data(), qtc::DType::kF32, 64, 128};
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "mxfp8"}});
  std::vector<std::vector<uint8_t>> keep;
  Outputs host = outputs_of(qtc::ref::quantize(x, r), qtc::Layout::kCompact, keep);
  keep[0][5] ^= 0x40;
  const ::testing::AssertionResult p = qtc::testing::conforms(qtc::testing::on_device, x, r, host);  // malloc'ed memory
  ASSERT_FALSE(p);
  EXPECT_EQ(std::string(p.message()), std::string(qtc::testing::conforms(x, r, host).message()));
  EXPECT_NE(std::string(p.message()).find("[cpu]"), std::string::npos) << p.message();

  // torchao's rowwise NVFP4 plane of M = 40: the CPU reference's (the CUDA kernels need M % 16 == 0).
  const std::vector<float> x40(xs.begin(), xs.begin() + 40 * 128);
  const qtc::MatrixView v40{x40.data(), qtc::DType::kF32, 40, 128};
  const qtc::Recipe t = qtc::testing::recipe({{"recipe", "nvfp4"}, {"profile", "torchao"}, {"columnwise", "0"}});
  std::vector<std::vector<uint8_t>> keep40;
  Outputs h40 = outputs_of(qtc::ref::quantize(v40, t), qtc::Layout::kCompact, keep40);
  Device dev;
  const void* dx = dev.put(x40.data(), x40.size() * 4);
  EXPECT_TRUE(qtc::testing::conforms(qtc::testing::on_device, {dx, qtc::DType::kF32, 40, 128}, t, dev.put(h40)));
  keep40[0][9] ^= 0x22;
  const ::testing::AssertionResult b = qtc::testing::conforms(qtc::testing::on_device, {dx, qtc::DType::kF32, 40, 128}, t, dev.put(h40));
  ASSERT_FALSE(b);
  EXPECT_EQ(std::string(b.message()), std::string(qtc::testing::conforms(v40, t, h40).message()));
}

}  // namespace
