/// \file gemm_cuda_grouped_test.cpp
/// \brief GPU grouped row-scaled NVFP4 GEMM with host group sizes (the per-group and listed paths) against the reference.
///
/// | grouped row-scaled NVFP4| uneven/empty groups, capacity padding, F32/BF16 vs ref grouped |
/// | grouped GEMM named cases| widths differ / explicit beta / listed row-scaled rejected before any write; mixed list per-group; 70 groups, K = 80; wgrad |
/// Shared helpers, the exact-input rule and the GPU gate: gemm_cuda_test_util.hpp.
#include "gemm_cuda_test_util.hpp"

namespace qtc::cuda {
namespace {

using namespace gemm_test;

// ------------------------------------------------------------------------------------------------
// Grouped row-scaled NVFP4 fprop (MoE)

TEST(GemmCudaGrouped, Nvfp4RowScaledFpropEqualsPerGroupReference) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmGroupedNvfp4RowScaled);
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmNvfp4Emulated);
  GemmContext ctx;
  std::mt19937_64 g(seed() + 20);
  const int64_t N = 128, K = 256, cap = 256;
  // uneven groups, an empty one, gaps between groups (capacity padding), sizes summing to fewer rows
  ref::GroupedRows rows;
  rows.first_dims = {32, 0, 48, 16, 64};
  rows.tensor_offsets = {0, 40 * K, 40 * K, 96 * K, 160 * K};
  rows.last_dim = K;
  rows.capacity = cap;
  QuantizedTensor x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
  make_row_scaled(x, g);
  x.columnwise.reset();
  x.recipe.columnwise = false;
  std::vector<QuantizedTensor> wq, xq;
  for (int64_t i = 0; i < rows.groups(); ++i) {
    QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f * std::ldexp(1.0f, static_cast<int>(i) - 2), 1.0f);
    w.columnwise.reset();
    wq.push_back(w);
    xq.push_back(slice_rows(x, rows.row_offset(i), rows.first_dims[static_cast<size_t>(i)]));
  }
  for (DType out : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(out == DType::kF32 ? "F32" : "BF16");
    HostMatrix want(out, cap, N);
    std::fill(want.bytes.begin(), want.bytes.end(), 0x3F);  // sentinel in the padding rows
    ref::GemmArgs args = ref::GemmArgs::of(ref::GemmKind::kFprop, out);
    ref::gemm_nvfp4_row_scaled_grouped_fprop(wq, xq, rows, args, want);

    const DeviceQuantized dx = from_host(x, ctx.stream());
    std::vector<DeviceQuantized> dw;
    std::vector<const DeviceQuantized*> dwp;
    for (const auto& w : wq) dw.push_back(from_host(w, ctx.stream()));
    for (const auto& w : dw) dwp.push_back(&w);
    GroupedRowsDevice gr;
    gr.first_dims = rows.first_dims;
    for (int64_t i = 0; i < rows.groups(); ++i) gr.row_offsets.push_back(rows.row_offset(i));
    gr.capacity = cap;
    DeviceBuffer d_fd(8 * gr.first_dims.size(), ctx.stream()), d_off(8 * gr.row_offsets.size(), ctx.stream());
    QTC_CUDA_CHECK(cudaMemcpy(d_fd.data(), gr.first_dims.data(), d_fd.bytes(), cudaMemcpyHostToDevice));
    QTC_CUDA_CHECK(cudaMemcpy(d_off.data(), gr.row_offsets.data(), d_off.bytes(), cudaMemcpyHostToDevice));
    gr.d_first_dims = d_fd.as<int64_t>();
    gr.d_row_offsets = d_off.as<int64_t>();
    DeviceBuffer d(want.bytes.size(), ctx.stream());
    QTC_CUDA_CHECK(cudaMemset(d.data(), 0x3F, d.bytes()));
    gemm_nvfp4_row_scaled_grouped_fprop(ctx, dwp, dx, gr, out, d.data());
    QTC_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    const HostMatrix got = download(d, out, cap, N);
    EXPECT_TRUE(bitwise_equal(got, want));  // padding rows: the sentinel, untouched
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isfinite(at(got, i))) << "output " << i << " not finite";
  }
}

// ------------------------------------------------------------------------------------------------
// Grouped GEMM: the named cases (rejections before any work, listed/mixed fallback, > 64 groups, wgrad)

struct GroupedFixture {
  GemmContext ctx;
  ref::GroupedRows rows;
  QuantizedTensor x;                       ///< contiguous row-scaled [cap, K]
  std::vector<QuantizedTensor> wq, xq;     ///< host weights, per-group slices of x
  DeviceQuantized dx;
  std::vector<DeviceQuantized> dw;
  std::vector<const DeviceQuantized*> dwp;
  GroupedRowsDevice gr;
  DeviceBuffer d_fd, d_off;

  GroupedFixture(std::vector<int64_t> sizes, std::vector<int64_t> offs, int64_t cap, int64_t N, int64_t K, uint64_t s) {
    std::mt19937_64 g(s);
    rows.first_dims = sizes;
    for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
    rows.last_dim = K;
    rows.capacity = cap;
    x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
    make_row_scaled(x, g);
    x.columnwise.reset();
    x.recipe.columnwise = false;
    for (int64_t i = 0; i < rows.groups(); ++i) {
      QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f * std::ldexp(1.0f, static_cast<int>(i % 5) - 2), 1.0f);
      w.columnwise.reset();
      wq.push_back(w);
      xq.push_back(slice_rows(x, rows.row_offset(i), rows.first_dims[static_cast<size_t>(i)]));
    }
    dx = from_host(x, ctx.stream());
    for (const auto& w : wq) dw.push_back(from_host(w, ctx.stream()));
    for (const auto& w : dw) dwp.push_back(&w);
    gr.first_dims = rows.first_dims;
    for (int64_t i = 0; i < rows.groups(); ++i) gr.row_offsets.push_back(rows.row_offset(i));
    gr.capacity = cap;
    d_fd = DeviceBuffer(8 * gr.first_dims.size(), ctx.stream());
    d_off = DeviceBuffer(8 * gr.row_offsets.size(), ctx.stream());
    QTC_CUDA_CHECK(cudaMemcpy(d_fd.data(), gr.first_dims.data(), d_fd.bytes(), cudaMemcpyHostToDevice));
    QTC_CUDA_CHECK(cudaMemcpy(d_off.data(), gr.row_offsets.data(), d_off.bytes(), cudaMemcpyHostToDevice));
    gr.d_first_dims = d_fd.as<int64_t>();
    gr.d_row_offsets = d_off.as<int64_t>();
  }
};

#define QTC_REQUIRE_GROUPED_GEMM()                                                                                  \
  do {                                                                                                              \
    QTC_REQUIRE_FEATURE(gating::Feature::kGemmGroupedNvfp4RowScaled);                                               \
    QTC_REQUIRE_FEATURE(gating::Feature::kGemmNvfp4Emulated);                                                       \
  } while (0)

/// The output filled with a sentinel; returns whether a call threw a qtc::Error containing `needle` and left
/// every byte of the output as it was.
void expect_rejected_untouched(const std::function<void(void*)>& call, size_t bytes, const std::string& needle) {
  DeviceBuffer d(bytes, nullptr);
  QTC_CUDA_CHECK(cudaMemset(d.data(), 0x11, bytes));
  try {
    call(d.data());
    ADD_FAILURE() << "accepted; expected a rejection naming \"" << needle << "\"";
  } catch (const qtc::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  QTC_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> h(bytes);
  QTC_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), bytes, cudaMemcpyDeviceToHost));
  int64_t changed = 0;
  for (uint8_t b : h) changed += b != 0x11;
  EXPECT_EQ(changed, 0) << "a rejected call wrote into the output";
}

TEST(GemmCudaGrouped, OutputWidthsDifferRejectedBeforeGemm) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t N = 64, K = 128, cap = 256;
  GroupedFixture f({32, 0, 48, 16, 64}, {0, 40, 40, 96, 160}, cap, N, K, seed() + 40);
  std::mt19937_64 g(seed() + 41);
  QuantizedTensor w4 = exact_nvfp4(N + 32, K, g, 2688.0f, 1.0f);  // expert 4: 96 outputs
  w4.columnwise.reset();
  const DeviceQuantized dw4 = from_host(w4, f.ctx.stream());
  f.dwp[4] = &dw4;
  expect_rejected_untouched(
      [&](void* d) { gemm_nvfp4_row_scaled_grouped_fprop(f.ctx, f.dwp, f.dx, f.gr, DType::kBF16, d); },
      static_cast<size_t>(cap * N) * 2, "output width");
}

TEST(GemmCudaGrouped, ExplicitBetaRejected) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t N = 64, K = 128, cap = 256;
  GroupedFixture f({32, 0, 48, 16, 64}, {0, 40, 40, 96, 160}, cap, N, K, seed() + 42);
  DeviceBuffer c(static_cast<size_t>(cap * N) * 4, nullptr);
  DeviceGemmArgs a = DeviceGemmArgs::of(ref::GemmKind::kFprop, DType::kF32);
  a.beta = 0.5f;
  a.c = c.data();
  expect_rejected_untouched([&](void* d) { gemm_nvfp4_row_scaled_grouped_fprop(f.ctx, f.dwp, f.dx, f.gr, a, d); },
                            static_cast<size_t>(cap * N) * 4, "explicit beta");
}

TEST(GemmCudaGrouped, ListedRowScaledOperandsRejected) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t N = 64, K = 128, cap = 256;
  GroupedFixture f({32, 0, 48, 16, 64}, {0, 40, 40, 96, 160}, cap, N, K, seed() + 43);
  std::vector<DeviceQuantized> dxs;
  for (const auto& q : f.xq) dxs.push_back(q.rows > 0 ? from_host(q, f.ctx.stream()) : DeviceQuantized{});
  for (size_t i = 0; i < dxs.size(); ++i) {
    dxs[i].recipe = f.xq[i].recipe;
    dxs[i].cols = K;
  }
  std::vector<const DeviceQuantized*> xp;
  for (const auto& q : dxs) xp.push_back(&q);
  const DeviceGemmArgs a = DeviceGemmArgs::of(ref::GemmKind::kFprop, DType::kF32);
  expect_rejected_untouched(
      [&](void* d) { gemm_nvfp4_row_scaled_grouped_fprop_listed(f.ctx, f.dwp, xp, f.gr, a, d); },
      static_cast<size_t>(cap * N) * 4, "listed (non-contiguous) row-scaled");
}

TEST(GemmCudaGrouped, MixedRowScaledAndPerTensorGroupsFallBackPerGroup) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t N = 64, K = 128, cap = 256;
  GroupedFixture f({32, 0, 48, 16, 64}, {0, 40, 40, 96, 160}, cap, N, K, seed() + 44);
  std::mt19937_64 g(seed() + 45);
  // group 2 quantized per-tensor (one amax), its neighbours row-scaled
  QuantizedTensor x2 = exact_nvfp4(48, K, g, 2688.0f, 1.0f);
  x2.columnwise.reset();
  x2.recipe.columnwise = false;
  f.xq[2] = x2;
  std::vector<DeviceQuantized> dxs;
  for (const auto& q : f.xq) {
    DeviceQuantized d = q.rows > 0 ? from_host(q, f.ctx.stream()) : DeviceQuantized{};
    d.recipe = q.recipe;
    d.cols = K;
    dxs.push_back(std::move(d));
  }
  std::vector<const DeviceQuantized*> xp;
  for (const auto& q : dxs) xp.push_back(&q);
  const std::vector<float> amax3_before = f.xq[3].rowwise->amax;
  for (DType out : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(out == DType::kF32 ? "F32" : "BF16");
    HostMatrix want(out, cap, N);
    std::fill(want.bytes.begin(), want.bytes.end(), 0x3F);
    ref::gemm_nvfp4_row_scaled_grouped_fprop(f.wq, f.xq, f.rows, ref::GemmArgs::of(ref::GemmKind::kFprop, out), want);
    DeviceBuffer d(want.bytes.size(), nullptr);
    QTC_CUDA_CHECK(cudaMemset(d.data(), 0x3F, d.bytes()));
    gemm_nvfp4_row_scaled_grouped_fprop_listed(f.ctx, f.dwp, xp, f.gr, DeviceGemmArgs::of(ref::GemmKind::kFprop, out),
                                               d.data());
    QTC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(bitwise_equal(download(d, out, cap, N), want));
  }
  std::vector<float> amax3(amax3_before.size());
  QTC_CUDA_CHECK(cudaMemcpy(amax3.data(), dxs[3].rowwise->amax.data(), amax3.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(amax3, amax3_before) << "the neighbour's (group 3's) amax was written";
  float amax2 = 0;
  QTC_CUDA_CHECK(cudaMemcpy(&amax2, dxs[2].rowwise->amax.data(), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(amax2, 2688.0f) << "the per-tensor group's own amax was written";
}

TEST(GemmCudaGrouped, MoreThan64GroupsAndKNotMultipleOf128) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t G = 70, N = 64, K = 80;
  std::vector<int64_t> sizes(G), offs(G);
  int64_t cap = 0;
  for (int64_t i = 0; i < G; ++i) {
    sizes[static_cast<size_t>(i)] = (i * 7) % 13;
    offs[static_cast<size_t>(i)] = cap + (i % 3 == 0 ? 2 : 0);  // some padding rows between groups
    cap = offs[static_cast<size_t>(i)] + sizes[static_cast<size_t>(i)];
  }
  cap += 5;
  GroupedFixture f(sizes, offs, cap, N, K, seed() + 46);
  HostMatrix want(DType::kBF16, cap, N);
  std::fill(want.bytes.begin(), want.bytes.end(), 0x3F);
  ref::gemm_nvfp4_row_scaled_grouped_fprop(f.wq, f.xq, f.rows, ref::GemmArgs::of(ref::GemmKind::kFprop, DType::kBF16), want);
  DeviceBuffer d(want.bytes.size(), nullptr);
  QTC_CUDA_CHECK(cudaMemset(d.data(), 0x3F, d.bytes()));
  gemm_nvfp4_row_scaled_grouped_fprop(f.ctx, f.dwp, f.dx, f.gr, DType::kBF16, d.data());
  QTC_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(bitwise_equal(download(d, DType::kBF16, cap, N), want));
}

TEST(GemmCudaGrouped, WgradEqualsPerGroupReference) {
  QTC_REQUIRE_GROUPED_GEMM();
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmNvfp4RowScaled);
  GemmContext ctx;
  std::mt19937_64 g(seed() + 47);
  const int64_t N = 96, K = 128;
  const std::vector<int64_t> sizes{32, 0, 64, 16};
  std::vector<QuantizedTensor> x, dy;
  for (int64_t n : sizes) {
    if (n == 0) {
      QuantizedTensor ex, ed;
      ex.recipe = Recipe::of(Nvfp4Options{.row_scaled = true});
      ex.cols = K;
      ed.cols = N;
      x.push_back(ex);
      dy.push_back(ed);
      continue;
    }
    QuantizedTensor xa = exact_nvfp4(n, K, g, 1.0f, 1.0f);
    make_row_scaled(xa, g);  // per-token amax rowwise, per-column amax columnwise
    x.push_back(xa);
    dy.push_back(exact_nvfp4(n, N, g, 2688.0f, 2688.0f));
  }
  for (DType out : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(out == DType::kF32 ? "F32" : "BF16");
    const auto want = ref::gemm_nvfp4_row_scaled_grouped_wgrad(x, dy, out);
    std::vector<DeviceQuantized> dx, ddy;
    for (size_t i = 0; i < x.size(); ++i) {
      DeviceQuantized a = x[i].rows > 0 ? from_host(x[i], ctx.stream()) : DeviceQuantized{};
      DeviceQuantized b = dy[i].rows > 0 ? from_host(dy[i], ctx.stream()) : DeviceQuantized{};
      a.recipe = x[i].recipe;
      a.cols = K;
      b.recipe = dy[i].recipe;
      b.cols = N;
      dx.push_back(std::move(a));
      ddy.push_back(std::move(b));
    }
    std::vector<const DeviceQuantized*> xp, dyp;
    std::vector<DeviceBuffer> outs;
    std::vector<void*> dp;
    for (size_t i = 0; i < x.size(); ++i) {
      xp.push_back(&dx[i]);
      dyp.push_back(&ddy[i]);
      outs.emplace_back(static_cast<size_t>(N * K) * dtype_size(out), nullptr);
      QTC_CUDA_CHECK(cudaMemset(outs.back().data(), 0x5A, outs.back().bytes()));  // the empty group must be zeroed
      dp.push_back(outs.back().data());
    }
    gemm_nvfp4_row_scaled_grouped_wgrad(ctx, xp, dyp, out, dp);
    QTC_CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < x.size(); ++i) {
      SCOPED_TRACE("group " + std::to_string(i));
      EXPECT_TRUE(bitwise_equal(download(outs[i], out, N, K), want[i]));
    }
  }
}

}  // namespace
}  // namespace qtc::cuda
