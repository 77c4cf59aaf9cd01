/// \file hybrid_cuda_test.cpp
/// \brief Hybrid planes on the GPU (qtc/cuda/hybrid.hpp) against the CPU reference (ref::quantize_hybrid), bit for
///        bit: both planes and the dequantized rowwise plane the columnwise one is quantized from, for TE's hybrid
///        compositions and its fused grouped MXFP8 requantization (group by group), F32 and BF16 inputs, every input
///        family, shapes that are not multiples of the blocks. Part of test_quantize_cuda (label gpu): skips without a
///        device, fails under QTC_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/hybrid.hpp"

namespace qtc::test {
namespace {

struct HybridCase {
  std::string id;
  HybridRecipe h;
};

std::vector<HybridCase> hybrid_gpu_cases() {
  std::vector<HybridCase> out;
  auto add = [&](std::string id, const RecipeOptions& row, const RecipeOptions& col, ColumnwiseSource src) {
    HybridRecipe h;
    h.rowwise = Recipe::of(row, Profile::kTE, true, false);
    h.columnwise = Recipe::of(col, Profile::kTE, false, true);
    h.source = src;
    out.push_back({std::move(id), h});
  };
  Nvfp4Options rs;
  rs.row_scaled = true;
  add("mxfp8_nvfp4_original", Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kOriginal);
  add("mxfp8_nvfp4_rdq", Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kRowwiseDequantized);
  add("nvfp4_nvfp4_rdq", Nvfp4Options{}, Nvfp4Options{}, ColumnwiseSource::kRowwiseDequantized);
  add("nvfp4rs_mxfp8_rdq", rs, Mxfp8Options{}, ColumnwiseSource::kRowwiseDequantized);
  add("mxfp8_fp8block_rdq", Mxfp8Options{}, Fp8BlockOptions{}, ColumnwiseSource::kRowwiseDequantized);
  add("mxfp8_fp8tensor_original", Mxfp8Options{}, Fp8TensorOptions{}, ColumnwiseSource::kOriginal);
  add("mxfp4_mxfp8_rdq", Mxfp4Options{}, Mxfp8Options{}, ColumnwiseSource::kRowwiseDequantized);
  for (Fp8Type t : {Fp8Type::kE4M3, Fp8Type::kE5M2})
    for (bool fast : {false, true})
      out.push_back({std::string("te_group_requantize_") + (t == Fp8Type::kE4M3 ? "e4m3" : "e5m2") + (fast ? "_fast" : ""),
                     HybridRecipe::te_group_requantize(t, fast, {128, 0, 256})});
  return out;
}

/// The first difference between two planes, or empty.
std::string plane_diff(const std::optional<Plane>& want, const std::optional<Plane>& got, const char* what) {
  if (want.has_value() != got.has_value()) return std::string(what) + ": plane present on one side only";
  if (!want) return {};
  if (want->data != got->data) {
    size_t i = 0;
    while (i < want->data.size() && i < got->data.size() && want->data[i] == got->data[i]) ++i;
    return std::string(what) + " data differs at byte " + std::to_string(i) + " of " + std::to_string(want->data.size()) +
           (i < want->data.size() && i < got->data.size()
                ? ": cpu " + hex(want->data[i], 2) + ", gpu " + hex(got->data[i], 2)
                : std::string(": sizes differ"));
  }
  if (!(want->scale == got->scale)) return std::string(what) + " scales differ";
  if (want->amax.size() != got->amax.size() ||
      std::memcmp(want->amax.data(), got->amax.data(), want->amax.size() * sizeof(float)) != 0)
    return std::string(what) + " amax differs";
  return {};
}

/// The dequantized rowwise plane (the columnwise plane's source): bit for bit, except that a NaN equals any NaN (as
/// verify compares dequantized outputs: NaN payloads of a decode are no rule of any profile).
std::string source_diff(const HostMatrix& want, const HostMatrix& got) {
  if (want.dtype != got.dtype || want.rows != got.rows || want.cols != got.cols || want.bytes.size() != got.bytes.size())
    return "dequantized rowwise plane: shape or dtype differs";
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.rows; ++i)
    for (int64_t j = 0; j < want.cols; ++j) {
      const float a = want.get(i, j), b = got.get(i, j);
      const size_t es = want.bytes.size() / static_cast<size_t>(want.rows * want.cols), at = static_cast<size_t>(i * want.cols + j) * es;
      if (std::memcmp(want.bytes.data() + at, got.bytes.data() + at, es) == 0 || (std::isnan(a) && std::isnan(b))) continue;
      if (bad++ == 0) first = i * want.cols + j;
    }
  return bad == 0 ? std::string() : "dequantized rowwise plane: " + std::to_string(bad) + " elements differ, first at flat index " + std::to_string(first);
}

TEST(HybridCuda, ComposedKernelsMatchReference) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  const uint64_t seed = test_seed();
  QTC_SEED_TRACE(seed);
  cudaStream_t s = nullptr;
  QTC_CUDA_CHECK(cudaStreamCreate(&s));
  int compared = 0;
  for (const HybridCase& c : hybrid_gpu_cases())
    for (DType dt : {DType::kF32, DType::kBF16})
      for (Family fam : qtc::testing::kAllFamilies) {
        const int64_t M = c.h.group_rows.empty() ? 96 : 384, K = c.h.group_rows.empty() ? 160 : 256;
        if (!cuda::unsupported_reason(c.h, dt, M, K).empty()) continue;  // the gating table refuses it on this card
        SCOPED_TRACE(c.id + " " + std::string(dtype_name(dt)) + " family " + std::to_string(static_cast<int>(fam)));
        const HostMatrix x = make_input(fam, dt, M, K, seed);
        cuda::DeviceBuffer dx(x.bytes.size(), s);
        QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, s));
        const std::vector<cuda::DeviceHybrid> dev = cuda::quantize_hybrid_grouped({dx.data(), dt, M, K}, c.h, s);
        const std::vector<HybridQuantized> want = ref::quantize_hybrid_grouped(x.view(), ref::hybrid_groups(c.h, M, K), c.h);
        ASSERT_EQ(dev.size(), want.size());
        for (size_t g = 0; g < dev.size(); ++g) {
          SCOPED_TRACE("group " + std::to_string(g));
          const HybridQuantized got = cuda::to_host(dev[g], s);
          EXPECT_EQ(plane_diff(want[g].rowwise.rowwise, got.rowwise.rowwise, "rowwise"), "");
          EXPECT_EQ(plane_diff(want[g].columnwise.columnwise, got.columnwise.columnwise, "columnwise"), "");
          EXPECT_EQ(want[g].columnwise.scale_inv, got.columnwise.scale_inv);
          ASSERT_EQ(want[g].source.has_value(), got.source.has_value());
          if (want[g].source) EXPECT_EQ(source_diff(*want[g].source, *got.source), "");
          ++compared;
        }
      }
  QTC_CUDA_CHECK(cudaStreamDestroy(s));
  EXPECT_GT(compared, 0) << "no hybrid case ran on this card";
}

}  // namespace
}  // namespace qtc::test
