/// \file gemm_cuda_grouped_quantize_test.cpp
/// \brief GPU grouped quantization (device group sizes, graph-capturable) against quantizing each group alone.
///
/// | grouped NVFP4 quantize  | device group sizes, CUDA graph captured once, replayed with two size sets |
/// | grouped NVFP4 quantize  | strided (stride-2) view of the device group-size array; stride 0 rejected |
/// | every grouped recipe (NVFP4 compact/swizzled/row-scaled, MXFP8, FP8 tensor, FP8 1x128) | graph-captured replay; 70 groups with K = 80 |
/// Shared helpers, the exact-input rule and the GPU gate: gemm_cuda_test_util.hpp.
#include "gemm_cuda_test_util.hpp"

namespace qtc::cuda {
namespace {

using namespace gemm_test;

// ------------------------------------------------------------------------------------------------
// Grouped NVFP4 quantization with device group sizes, captured once in a CUDA graph and replayed

TEST(GroupedQuantizeCuda, GraphCapturedReplayWithDifferentGroupSizes) {
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t cap = 512, K = 128, G = 5;
  std::mt19937_64 g(seed() + 30);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  HostMatrix x(DType::kBF16, cap, K);
  for (int64_t i = 0; i < cap * K; ++i) x.as<uint16_t>()[i] = f32_to_bf16(dn(g) * (1.0f + static_cast<float>(i % 7)));
  // The stream outlives every buffer made on it: a DeviceBuffer frees with cudaFreeAsync on its stream, and
  // freeing on a destroyed stream (buffers declared after a raw stream, destroyed after cudaStreamDestroy at
  // the end of the scope) was the segmentation fault of the first H200 run.
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  DeviceBuffer dx(x.bytes.size(), st), d_fd(G * 8, st), d_off(G * 8, st);
  QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
  for (bool row_scaled : {false, true}) {
    SCOPED_TRACE(row_scaled ? "row-scaled" : "per-tensor per group");
    Recipe r = Recipe::of(Nvfp4Options{.row_scaled = row_scaled});
    r.columnwise = false;
    DeviceGroupedQuantized out = allocate_grouped(r, DType::kBF16, cap, K, G, ScaleLayout::kCompact, st);
    const CapturedGraph graph(st, [&] { quantize_grouped_into({dx.data(), DType::kBF16, cap, K}, d_fd.as<int64_t>(), d_off.as<int64_t>(), out, st); });
    // two replays with different sizes: uneven + empty + fewer rows than the buffer, then others
    const std::vector<std::vector<int64_t>> size_sets{{32, 0, 96, 16, 64}, {128, 64, 0, 160, 32}};
    for (const auto& sizes : size_sets) {
      std::vector<int64_t> offs(G);
      for (int64_t i = 0, o = 0; i < G; o += sizes[static_cast<size_t>(i)] + 16, ++i) offs[static_cast<size_t>(i)] = o;  // gaps of 16 rows
      QTC_CUDA_CHECK(cudaMemcpyAsync(d_fd.data(), sizes.data(), G * 8, cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(d_off.data(), offs.data(), G * 8, cudaMemcpyHostToDevice, st));
      graph.launch();
      std::vector<uint8_t> data(out.data.bytes()), scale(out.scale.bytes());
      std::vector<float> amax(out.amax.bytes() / 4);
      QTC_CUDA_CHECK(cudaMemcpyAsync(data.data(), out.data.data(), data.size(), cudaMemcpyDeviceToHost, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(scale.data(), out.scale.data(), scale.size(), cudaMemcpyDeviceToHost, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(amax.data(), out.amax.data(), amax.size() * 4, cudaMemcpyDeviceToHost, st));
      QTC_CUDA_CHECK(cudaStreamSynchronize(st));
      ref::GroupedRows rows;
      rows.first_dims = sizes;
      for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
      rows.last_dim = K;
      rows.capacity = cap;
      const auto want = ref::quantize_grouped(x.view(), rows, r);
      for (int64_t gi = 0; gi < G; ++gi) {
        const int64_t n = sizes[static_cast<size_t>(gi)], o = offs[static_cast<size_t>(gi)];
        if (n == 0) continue;
        const Plane& p = *want[static_cast<size_t>(gi)].rowwise;
        EXPECT_EQ(std::memcmp(data.data() + o * K / 2, p.data.data(), p.data.size()), 0) << "group " << gi << " data";
        EXPECT_EQ(std::memcmp(scale.data() + o * K / 16, p.scale.bytes.data(), p.scale.bytes.size()), 0)
            << "group " << gi << " scales";
        for (int64_t i = 0; i < static_cast<int64_t>(p.amax.size()); ++i)
          EXPECT_EQ(amax[static_cast<size_t>(row_scaled ? o + i : gi)], p.amax[static_cast<size_t>(i)]) << "group " << gi << " amax " << i;
      }
    }
  }
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
}

TEST(GroupedQuantizeCuda, StridedViewOfTheGroupSizeArray) {
  // sizes and offsets interleaved in one [G, 2] int64 tensor: each is a stride-2 view
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t cap = 256, K = 64, G = 4;
  std::mt19937_64 g(seed() + 31);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  HostMatrix x(DType::kF32, cap, K);
  for (int64_t i = 0; i < cap * K; ++i) x.as<float>()[i] = dn(g);
  const std::vector<int64_t> sizes{48, 0, 16, 96}, offs{0, 48, 64, 96};
  std::vector<int64_t> inter;
  for (int64_t i = 0; i < G; ++i) inter.insert(inter.end(), {sizes[static_cast<size_t>(i)], offs[static_cast<size_t>(i)]});
  DeviceBuffer dx(x.bytes.size(), nullptr), dint(inter.size() * 8, nullptr);
  QTC_CUDA_CHECK(cudaMemcpy(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice));
  QTC_CUDA_CHECK(cudaMemcpy(dint.data(), inter.data(), dint.bytes(), cudaMemcpyHostToDevice));
  Recipe r = Recipe::of(Nvfp4Options{});
  r.columnwise = false;
  DeviceGroupedQuantized out = allocate_grouped(r, DType::kF32, cap, K, G, ScaleLayout::kCompact, nullptr);
  quantize_grouped_into({dx.data(), DType::kF32, cap, K}, dint.as<int64_t>(), dint.as<int64_t>() + 1, out, nullptr, 2);
  std::vector<uint8_t> data(out.data.bytes());
  std::vector<float> amax(G);
  QTC_CUDA_CHECK(cudaMemcpy(data.data(), out.data.data(), data.size(), cudaMemcpyDeviceToHost));
  QTC_CUDA_CHECK(cudaMemcpy(amax.data(), out.amax.data(), G * 4, cudaMemcpyDeviceToHost));
  ref::GroupedRows rows = ref::GroupedRows::packed(sizes, K, cap);
  for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);  // the offsets the device read (not packed)
  const auto want = ref::quantize_grouped(x.view(), rows, r);
  for (int64_t gi = 0; gi < G; ++gi) {
    if (sizes[static_cast<size_t>(gi)] == 0) continue;
    const Plane& p = *want[static_cast<size_t>(gi)].rowwise;
    EXPECT_EQ(std::memcmp(data.data() + offs[static_cast<size_t>(gi)] * K / 2, p.data.data(), p.data.size()), 0) << "group " << gi;
    EXPECT_EQ(amax[static_cast<size_t>(gi)], p.amax[0]) << "group " << gi;
  }
  EXPECT_THROW(quantize_grouped_into({dx.data(), DType::kF32, cap, K}, dint.as<int64_t>(), dint.as<int64_t>() + 1, out,
                                     nullptr, 0),
               qtc::Error);
}

// ------------------------------------------------------------------------------------------------
// Grouped quantization, every grouped recipe (quantize_grouped_into), captured in a CUDA graph

TEST(GroupedQuantizeCuda, EveryGroupedRecipeEqualsEachGroupAloneUnderGraphReplay) {
  // Captured once per recipe, replayed with two size sets (uneven, empty, gaps, fewer rows than the buffer);
  // K = 160: not a multiple of 128 (a partial FP8 block), two scale columns of padding in the swizzled NVFP4 tiles.
  // Sizes are multiples of 16 (NVFP4's M % 16, a caller contract: the sizes live on the device); odd sizes for
  // the other recipes are in MoreThan64GroupsAndLastDimNotMultipleOf128.
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t cap = 512, K = 160, G = 5;
  std::mt19937_64 g(seed() + 32);
  const HostMatrix x = random_input(DType::kBF16, cap, K, g);
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  DeviceBuffer dx(x.bytes.size(), st), d_fd(G * 8, st), d_off(G * 8, st);
  QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
  const std::vector<std::vector<int64_t>> size_sets{{32, 0, 96, 16, 64}, {128, 64, 0, 144, 32}};
  for (const GroupCase& c : grouped_recipes()) {
    SCOPED_TRACE(c.name);
    DeviceGroupedQuantized out = allocate_grouped(c.r, DType::kBF16, cap, K, G, c.layout, st);
    QTC_CUDA_CHECK(cudaMemsetAsync(out.data.data(), 0xA5, out.data.bytes(), st));
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    const CapturedGraph graph(st, [&] { quantize_grouped_into({dx.data(), DType::kBF16, cap, K}, d_fd.as<int64_t>(), d_off.as<int64_t>(), out, st); });
    for (const auto& sizes : size_sets) {
      std::vector<int64_t> offs(G);
      for (int64_t i = 0, o = 0; i < G; o += sizes[static_cast<size_t>(i)] + 16, ++i) offs[static_cast<size_t>(i)] = o;
      QTC_CUDA_CHECK(cudaMemcpyAsync(d_fd.data(), sizes.data(), G * 8, cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(d_off.data(), offs.data(), G * 8, cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemsetAsync(out.data.data(), 0xA5, out.data.bytes(), st));
      graph.launch();
      expect_groups_equal(c, x, sizes, offs, out, 0xA5, st);
    }
  }
}

TEST(GroupedQuantizeCuda, MoreThan64GroupsAndLastDimNotMultipleOf128) {
  // TE's fused grouped kernels take <= 64 tensors and K % 128 (§1.13); here 70 groups and K = 80 (a partial
  // MXFP8 block, a partial FP8 block) must give the per-group result.
  // Sizes 0..12 rows (odd ones included) for MXFP8 and FP8; 16x that for NVFP4 (M % 16).
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t G = 70, K = 80;
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  for (const GroupCase& c : grouped_recipes()) {
    SCOPED_TRACE(c.name);
    const int64_t mult = c.r.kind() == RecipeKind::kNVFP4 ? 16 : 1;
    std::vector<int64_t> sizes(G), offs(G);
    int64_t cap = 0;
    for (int64_t i = 0; i < G; ++i) {
      sizes[static_cast<size_t>(i)] = mult * ((i * 7) % 13);  // several empty
      offs[static_cast<size_t>(i)] = cap;
      cap += sizes[static_cast<size_t>(i)];
    }
    std::mt19937_64 g(seed() + 33);
    const HostMatrix x = random_input(DType::kF32, cap, K, g);
    DeviceBuffer dx(x.bytes.size(), st), d_fd(G * 8, st), d_off(G * 8, st);
    QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(d_fd.data(), sizes.data(), G * 8, cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(d_off.data(), offs.data(), G * 8, cudaMemcpyHostToDevice, st));
    DeviceGroupedQuantized out = allocate_grouped(c.r, DType::kF32, cap, K, G, c.layout, st);
    quantize_grouped_into({dx.data(), DType::kF32, cap, K}, d_fd.as<int64_t>(), d_off.as<int64_t>(), out, st);
    expect_groups_equal(c, x, sizes, offs, out, 0, st);
  }
}

TEST(GroupedQuantizeCuda, RefusedRecipesNameTheRule) {
  Recipe r;
  r.set_options(Nvfp4Options{});  // columnwise by default
  EXPECT_NE(grouped_unsupported_reason(r, 128, ScaleLayout::kCompact).find("rowwise plane only"), std::string::npos);
  r.columnwise = false;
  EXPECT_EQ(grouped_unsupported_reason(r, 128, ScaleLayout::kCompact), "");
  EXPECT_NE(grouped_unsupported_reason(r, 120, ScaleLayout::kCompact).find("multiple of 16"), std::string::npos);
  r.set_options(Fp8BlockOptions{});
  r.fp8_block().tile_2d = true;
  EXPECT_NE(grouped_unsupported_reason(r, 128, ScaleLayout::kCompact).find("128x128"), std::string::npos);
}

}  // namespace
}  // namespace qtc::cuda
