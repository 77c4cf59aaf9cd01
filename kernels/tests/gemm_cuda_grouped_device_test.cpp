/// \file gemm_cuda_grouped_device_test.cpp
/// \brief GPU device-driven grouped row-scaled NVFP4 GEMM (group sizes on the device only) against the per-group reference.
///
/// | grouped GEMM, device sizes | fprop F32/BF16/F16, bias, cached or per-call weights; wgrad F32/BF16 x every amax mix: eager + CUDA graph replayed with 3 size sets; fprop random K = 1024 within bound |
/// | rejections              | beta, N % 8, missing sizes, weight count: named, nothing written |
/// Shared helpers, the exact-input rule and the GPU gate: gemm_cuda_test_util.hpp.
#include "gemm_cuda_test_util.hpp"

namespace qtc::cuda {
namespace {

using namespace gemm_test;

// ------------------------------------------------------------------------------------------------
// Device-driven grouped row-scaled NVFP4 GEMM: group sizes on the device only, captured in a CUDA graph once and
// replayed with other sizes; every replay bitwise the per-group reference (exact inputs)


TEST(GemmCudaGroupedDevice, FpropGraphReplayWithDifferentDeviceSizesEqualsPerGroupReference) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 40);
  // N, K not multiples of the 128/64 tile; 6 groups, capacity 640
  const int64_t N = 200, K = 272, cap = 640, G = 6;
  QuantizedTensor x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
  make_row_scaled(x, g);
  x.columnwise.reset();
  x.recipe.columnwise = false;
  std::vector<QuantizedTensor> wq;
  for (int64_t i = 0; i < G; ++i) {
    QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f * std::ldexp(1.0f, static_cast<int>(i % 5) - 2), 1.0f);
    w.columnwise.reset();
    w.recipe.columnwise = false;
    wq.push_back(w);
  }
  std::vector<float> bias(static_cast<size_t>(G * N));
  for (auto& b : bias) b = static_cast<float>(static_cast<int>(g() % 9) - 4) * 0.25f;
  const DeviceQuantized dx = from_host(x, st);
  std::vector<DeviceQuantized> dw;
  std::vector<const DeviceQuantized*> dwp;
  for (const auto& w : wq) dw.push_back(from_host(w, st));
  for (const auto& w : dw) dwp.push_back(&w);
  GroupedWeightsBf16 cache = allocate_grouped_weights(G, N, K, st);
  dequantize_grouped_weights_into(ctx, dwp, cache);
  // uneven sizes (not multiples of 16: row-scaled rows are independent), empty groups, gaps, fewer rows than cap
  const std::vector<std::vector<int64_t>> size_sets{
      {37, 0, 128, 16, 201, 64}, {0, 300, 1, 0, 95, 144}, {100, 100, 100, 0, 0, 3}};
  const std::vector<int64_t> gaps{8, 0, 40};
  DeviceSizes ds(G, st);
  GroupedRowsOnDevice rows;
  rows.groups = G;
  rows.capacity = cap;
  rows.first_dims = ds.fd.as<int64_t>();
  rows.row_offsets = ds.off.as<int64_t>();
  struct Case {
    DType out;
    bool cached;
    bool with_bias;
  };
  for (const Case c : {Case{DType::kF32, true, false}, Case{DType::kBF16, false, true}, Case{DType::kF16, true, true},
                       Case{DType::kBF16, true, false}}) {
    SCOPED_TRACE(std::string(dtype_name(c.out)) + (c.cached ? " cached weights" : " weights per call") +
                 (c.with_bias ? " + bias" : ""));
    DeviceGemmArgs args = DeviceGemmArgs::of(ref::GemmKind::kFprop, c.out);
    HostMatrix bias_h(c.out, G, N);
    for (int64_t i = 0; i < G * N; ++i) bias_h.set(i / N, i % N, bias[static_cast<size_t>(i)]);
    std::optional<DeviceArray> dbias;
    if (c.with_bias) {
      dbias.emplace(bias_h, st);
      args.bias = dbias->buf.data();
    }
    // the bias the reference sees: the output-dtype values, widened
    std::vector<float> bias_ref(static_cast<size_t>(G * N));
    for (int64_t i = 0; i < G * N; ++i) bias_ref[static_cast<size_t>(i)] = static_cast<float>(at(bias_h, i));
    DeviceBuffer d(static_cast<size_t>(cap * N) * dtype_size(c.out), st);
    auto call = [&] {
      if (c.cached)
        gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, cache, dx, rows, args, d.data());
      else
        gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, dwp, dx, rows, args, d.data());
    };
    auto check = [&](size_t si, const char* how) {
      const auto offs = offsets_with_gaps(size_sets[si], gaps[si]);
      QTC_CUDA_CHECK(cudaStreamSynchronize(st));
      const HostMatrix got = download(d, c.out, cap, N);
      const HostMatrix want = grouped_fprop_reference(wq, x, size_sets[si], offs, c.out, c.with_bias ? &bias_ref : nullptr, N);
      EXPECT_TRUE(bitwise_equal(got, want)) << how << " size set " << si;  // padding rows: the sentinel, untouched
    };
    // eager with the first size set (also sizes the context's scratch outside capture)
    ds.set(size_sets[0], offsets_with_gaps(size_sets[0], gaps[0]), st);
    QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
    call();
    check(0, "eager");
    // captured once, replayed with every size set (sizes and offsets rewritten in the same device arrays)
    const CapturedGraph graph(st, [&] { call(); });
    for (size_t si = 0; si < size_sets.size(); ++si) {
      ds.set(size_sets[si], offsets_with_gaps(size_sets[si], gaps[si]), st);
      QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
      graph.launch();
      check(si, "graph replay");
    }
  }
}

TEST(GemmCudaGroupedDevice, FpropRandomInputsWithinBound) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 41);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  const int64_t N = 256, K = 1024, cap = 384, G = 4;
  const std::vector<int64_t> sizes{96, 0, 160, 112}, offs{0, 96, 96, 272};
  auto input = [&](int64_t r, int64_t c) {
    HostMatrix m(DType::kBF16, r, c);
    for (int64_t i = 0; i < r * c; ++i) m.as<uint16_t>()[i] = f32_to_bf16(dn(g) * (1.0f + static_cast<float>(i % 13)));
    return m;
  };
  Recipe rx = Recipe::of(Nvfp4Options{.row_scaled = true}), rw;
  rx.columnwise = rw.columnwise = false;
  const QuantizedTensor x = ref::quantize(input(cap, K).view(), rx);
  std::vector<QuantizedTensor> wq;
  for (int64_t i = 0; i < G; ++i) wq.push_back(ref::quantize(input(N, K).view(), rw));
  const DeviceQuantized dx = from_host(x, st);
  std::vector<DeviceQuantized> dw;
  std::vector<const DeviceQuantized*> dwp;
  for (const auto& w : wq) dw.push_back(from_host(w, st));
  for (const auto& w : dw) dwp.push_back(&w);
  DeviceSizes ds(G, st);
  ds.set(sizes, offs, st);
  GroupedRowsOnDevice rows{G, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
  const DType out = DType::kF32;
  DeviceBuffer d(static_cast<size_t>(cap * N) * 4, st);
  gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, dwp, dx, rows, DeviceGemmArgs::of(ref::GemmKind::kFprop, out), d.data());
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  const HostMatrix got = download(d, out, cap, N);
  const HostMatrix want = grouped_fprop_reference(wq, x, sizes, offs, out, nullptr, N);
  // Bound (FP32 accumulation in any order, then alpha and the post-scale factor: 3 roundings):
  // |gpu - exact| <= ulp + (K·2^-24 + 3·2^-24)·S, S = Σ_k |x_deq·w_deq| (dequantized values carry every scale).
  const HostMatrix xd = ref::dequantize(x, PlaneKind::kRowwise);
  double worst = 0, worst_bound = 0;
  int64_t bad = 0;
  for (size_t gi = 0; gi < sizes.size(); ++gi) {
    if (sizes[gi] == 0) continue;
    const HostMatrix wd = ref::dequantize(wq[gi], PlaneKind::kRowwise);
    for (int64_t i = offs[gi]; i < offs[gi] + sizes[gi]; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sabs = 0;
        for (int64_t k = 0; k < K; ++k) sabs += std::fabs(static_cast<double>(xd.as<float>()[i * K + k]) * wd.as<float>()[j * K + k]);
        const double w = at(want, i * N + j), y = at(got, i * N + j);
        const double bound = ref::ulp_of(out, std::max(std::fabs(w), std::fabs(y))) + (static_cast<double>(K) + 3) * 0x1p-24 * sabs;
        const double ulp_s = ref::ulp_of(out, std::max(sabs, std::fabs(w)));
        if (std::fabs(w - y) / ulp_s >= worst) {  // >=: with no error at all, the bound at the last output
          worst = std::fabs(w - y) / ulp_s;
          worst_bound = bound / ulp_s;
        }
        if (std::fabs(w - y) > bound && bad++ < 4)
          ADD_FAILURE() << "(" << i << ", " << j << ") gpu " << y << " exact " << w << " > bound " << bound;
      }
  }
  EXPECT_EQ(bad, 0);
  std::printf("GEMMERR path=grouped_device layout=fprop out=F32 k=%lld worst_ulps_of_S=%.3f bound_ulps_of_S=%.3f\n",
              static_cast<long long>(K), worst, worst_bound);
}

/// Group g's tokens [o, o + t) of a grouped columnwise plane [cols, cap] as the columnwise plane [cols, t] of a
/// per-group tensor [t, cols] (the rowwise plane left empty), with the group's amax.
QuantizedTensor columnwise_group(const Plane& full, int64_t cols, int64_t cap, int64_t o, int64_t t,
                                 std::vector<float> amax, bool row_scaled) {
  QuantizedTensor q;
  q.recipe.set_options(Nvfp4Options{});
  q.recipe.nvfp4().row_scaled = row_scaled;
  q.recipe.rowwise = false;
  q.rows = t;
  q.cols = cols;
  if (t == 0) return q;
  Plane p;
  p.data_rows = cols;
  p.data_cols = t / 2;
  p.scale.type = ScaleType::kE4M3;
  p.scale.rows = cols;
  p.scale.cols = t / 16;
  for (int64_t r = 0; r < cols; ++r) {
    p.data.insert(p.data.end(), full.data.begin() + r * (cap / 2) + o / 2, full.data.begin() + r * (cap / 2) + (o + t) / 2);
    p.scale.bytes.insert(p.scale.bytes.end(), full.scale.bytes.begin() + r * (cap / 16) + o / 16,
                         full.scale.bytes.begin() + r * (cap / 16) + (o + t) / 16);
  }
  p.amax = std::move(amax);
  q.columnwise = p;
  return q;
}

TEST(GemmCudaGroupedDevice, WgradGraphReplayWithDifferentDeviceSizesEqualsPerGroupReference) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 42);
  const int64_t N = 136, K = 200, cap = 512, G = 5;
  // grouped columnwise planes of x [cap, K] and dY [cap, N]: codes and power-of-two scales over every token
  const Plane px = nvfp4_plane(K, cap, g, 1.0f), pdy = nvfp4_plane(N, cap, g, 1.0f);
  auto amaxes = [&](int64_t n) {
    std::vector<float> a(static_cast<size_t>(n));
    for (auto& v : a) v = 2688.0f * std::ldexp(1.0f, static_cast<int>(g() % 7) - 3) * (1.0f + 0.125f * (g() % 8));
    return a;
  };
  const std::vector<std::vector<int64_t>> size_sets{{64, 0, 160, 16, 96}, {0, 256, 32, 0, 176}, {112, 112, 112, 112, 0}};
  const std::vector<int64_t> gaps{16, 0, 16};
  for (const auto& [x_rs, dy_rs] : {std::pair{true, true}, std::pair{false, true}, std::pair{true, false}}) {
    SCOPED_TRACE(std::string("x ") + (x_rs ? "row-scaled" : "per-tensor") + ", dY " + (dy_rs ? "row-scaled" : "per-tensor"));
    const std::vector<float> ax = amaxes(x_rs ? G * K : G), ady = amaxes(dy_rs ? G * N : G);
    auto upload = [&](const Plane& p, int64_t cols, bool rs, const std::vector<float>& a) {
      DeviceGroupedColumnwise c;
      c.capacity = cap;
      c.cols = cols;
      c.groups = G;
      c.row_scaled = rs;
      c.data = DeviceBuffer(p.data.size(), st);
      c.scale = DeviceBuffer(p.scale.bytes.size(), st);
      c.amax = DeviceBuffer(a.size() * 4, st);
      QTC_CUDA_CHECK(cudaMemcpyAsync(c.data.data(), p.data.data(), p.data.size(), cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(c.scale.data(), p.scale.bytes.data(), p.scale.bytes.size(), cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(c.amax.data(), a.data(), a.size() * 4, cudaMemcpyHostToDevice, st));
      return c;
    };
    const DeviceGroupedColumnwise dx = upload(px, K, x_rs, ax), ddy = upload(pdy, N, dy_rs, ady);
    DeviceSizes ds(G, st);
    GroupedRowsOnDevice rows{G, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
    for (DType out : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(dtype_name(out));
      DeviceBuffer d(static_cast<size_t>(G * N * K) * dtype_size(out), st);
      auto check = [&](size_t si, const char* how) {
        const auto offs = offsets_with_gaps(size_sets[si], gaps[si]);
        std::vector<QuantizedTensor> xq, dyq;
        for (int64_t gi = 0; gi < G; ++gi) {
          const int64_t t = size_sets[si][static_cast<size_t>(gi)], o = offs[static_cast<size_t>(gi)];
          auto part = [&](const std::vector<float>& a, int64_t n, bool rs) {
            return rs ? std::vector<float>(a.begin() + gi * n, a.begin() + (gi + 1) * n) : std::vector<float>{a[static_cast<size_t>(gi)]};
          };
          xq.push_back(columnwise_group(px, K, cap, o, t, part(ax, K, x_rs), x_rs));
          dyq.push_back(columnwise_group(pdy, N, cap, o, t, part(ady, N, dy_rs), dy_rs));
        }
        const std::vector<HostMatrix> want = ref::gemm_nvfp4_row_scaled_grouped_wgrad(xq, dyq, out);
        QTC_CUDA_CHECK(cudaStreamSynchronize(st));
        const HostMatrix got = download(d, out, G * N, K);
        for (int64_t gi = 0; gi < G; ++gi) {
          HostMatrix part(out, N, K);
          std::memcpy(part.bytes.data(), got.bytes.data() + part.bytes.size() * static_cast<size_t>(gi), part.bytes.size());
          EXPECT_TRUE(bitwise_equal(part, want[static_cast<size_t>(gi)])) << how << " size set " << si << " group " << gi;
        }
      };
      ds.set(size_sets[0], offsets_with_gaps(size_sets[0], gaps[0]), st);
      QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
      gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, dx, ddy, rows, out, d.data());
      check(0, "eager");
      const CapturedGraph graph(st, [&] { gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, dx, ddy, rows, out, d.data()); });
      for (size_t si = 0; si < size_sets.size(); ++si) {
        ds.set(size_sets[si], offsets_with_gaps(size_sets[si], gaps[si]), st);
        QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
        graph.launch();
        check(si, "graph replay");
      }
    }
  }
}

TEST(GemmCudaGroupedDevice, WgradGroupBreakingThe16TokenContractGetsNaN) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 43);
  const int64_t N = 64, K = 64, cap = 128, G = 2;
  const Plane px = nvfp4_plane(K, cap, g, 1.0f), pdy = nvfp4_plane(N, cap, g, 1.0f);
  auto up = [&](const Plane& p, int64_t cols) {
    DeviceGroupedColumnwise c;
    c.capacity = cap;
    c.cols = cols;
    c.groups = G;
    c.data = DeviceBuffer(p.data.size(), st);
    c.scale = DeviceBuffer(p.scale.bytes.size(), st);
    c.amax = DeviceBuffer(G * 4, st);
    const float ones[2] = {2688.0f, 2688.0f};
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.data.data(), p.data.data(), p.data.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.scale.data(), p.scale.bytes.data(), p.scale.bytes.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.amax.data(), ones, 8, cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    return c;
  };
  const DeviceGroupedColumnwise dx = up(px, K), ddy = up(pdy, N);
  DeviceSizes ds(G, st);
  ds.set({36, 64}, {0, 36}, st);  // group 0: 36 tokens, group 1 starts at 36 (not 8-aligned): both break it
  GroupedRowsOnDevice rows{G, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
  DeviceBuffer d(static_cast<size_t>(G * N * K) * 4, st);
  gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, dx, ddy, rows, DType::kF32, d.data());
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  const HostMatrix got = download(d, DType::kF32, G * N, K);
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isnan(at(got, i))) << "output " << i;
}

TEST(GemmCudaGroupedDevice, RejectedCallsNameTheRuleAndWriteNothing) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 44);
  const int64_t N = 64, K = 64, cap = 64;
  QuantizedTensor x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
  make_row_scaled(x, g);
  x.columnwise.reset();
  QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f, 1.0f);
  w.columnwise.reset();
  QuantizedTensor w_odd = exact_nvfp4(N - 4, K, g, 2688.0f, 1.0f);  // N = 60: not a multiple of 8
  w_odd.columnwise.reset();
  const DeviceQuantized dx = from_host(x, st), dw = from_host(w, st), dw_odd = from_host(w_odd, st);
  DeviceSizes ds(1, st);
  ds.set({cap}, {0}, st);
  GroupedRowsOnDevice rows{1, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
  DeviceBuffer d(static_cast<size_t>(cap * N) * 4, st);
  QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
  auto expect_rule = [&](const std::function<void()>& f, const char* rule) {
    try {
      f();
      ADD_FAILURE() << "accepted; expected: " << rule;
    } catch (const qtc::Error& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  DeviceGemmArgs beta = DeviceGemmArgs::of(ref::GemmKind::kFprop);
  beta.beta = 1.0f;
  expect_rule([&] { gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, {&dw}, dx, rows, beta, d.data()); }, "explicit beta");
  expect_rule([&] { gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, {&dw_odd}, dx, rows, DeviceGemmArgs::of(ref::GemmKind::kFprop), d.data()); },
              "multiples of 8");
  GroupedRowsOnDevice no_sizes = rows;
  no_sizes.first_dims = nullptr;
  expect_rule([&] { gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, {&dw}, dx, no_sizes, DeviceGemmArgs::of(ref::GemmKind::kFprop), d.data()); },
              "device group sizes missing");
  expect_rule([&] { gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, {&dw, &dw}, dx, rows, DeviceGemmArgs::of(ref::GemmKind::kFprop), d.data()); },
              "2 weights for 1 groups");
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  const std::vector<uint8_t> bytes = [&] {
    std::vector<uint8_t> b(d.bytes());
    QTC_CUDA_CHECK(cudaMemcpy(b.data(), d.data(), b.size(), cudaMemcpyDeviceToHost));
    return b;
  }();
  for (uint8_t b : bytes) ASSERT_EQ(b, 0x3F) << "a rejected call wrote the output";
}

}  // namespace
}  // namespace qtc::cuda
