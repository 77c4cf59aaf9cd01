/// \file gemm_cuda_grouped_poison_test.cpp
/// \brief Hostile inputs on every grouped GPU path (issue 28): rows outside every group (capacity rows, gaps, the
///        tail) and the operands of experts without tokens filled with NaN / ±Inf / the largest finite value /
///        random bits must change no byte of any output; output buffers filled with a sentinel before the call
///        keep it wherever nothing may be written; a CUDA graph captured with one routing and replayed after the
///        routing (group sizes and offsets) was rewritten on the device gives the bytes of an eager call with the
///        new routing. Experts with zero rows, capacities and sizes that are not multiples of 128 throughout.
///
/// | path                                   | poisoned                                  | checked bytes                  |
/// |----------------------------------------|-------------------------------------------|--------------------------------|
/// | grouped quantize, every grouped recipe, F32 and BF16 input, compact and swizzled scales | input rows in no group | data, scales, scale offsets, amax, scale_inv: clean run == poisoned run == graph replay after re-routing == eager; reference per group; sentinel in data rows, compact scale rows and row amaxes of rows in no group |
/// | device-driven grouped fprop (cached and per-call weights, F32 / BF16 / F16) | x's codes, E4M3 scales (NaN) and row amaxes (NaN, Inf) of rows in no group; every operand of an expert without tokens | output: clean == poisoned == reference (sentinel rows untouched); graph replay after re-routing == eager == reference |
/// | device-driven grouped wgrad            | codes and scales of tokens in no group    | output: clean == poisoned, finite; re-routed replay == eager |
/// | hostile routing (quantize, fprop, wgrad): negative size and offset, 2^62 rows, overlap, past the capacity | — | those groups read as empty (grouped_routing.hpp): bytes of the call with only the kept groups; nothing outside the buffers (memcheck) |
#include <cfloat>
#include <limits>

#include "gemm_cuda_test_util.hpp"

namespace qtc::cuda {
namespace {

using namespace gemm_test;

/// Bytes of every output buffer of a grouped quantization (data, scale, scale_offsets, amax, scale_inv).
std::vector<std::vector<uint8_t>> snapshot(const DeviceGroupedQuantized& o, cudaStream_t st) {
  std::vector<std::vector<uint8_t>> v;
  for (const DeviceBuffer* b : {&o.data, &o.scale, &o.scale_offsets, &o.amax, &o.scale_inv}) v.push_back(to_host_vec<uint8_t>(*b, st));
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  return v;
}

void fill_outputs(DeviceGroupedQuantized& o, uint8_t sentinel, cudaStream_t st) {
  for (DeviceBuffer* b : {&o.data, &o.scale, &o.scale_offsets, &o.amax, &o.scale_inv})
    if (b->bytes() > 0) QTC_CUDA_CHECK(cudaMemsetAsync(b->data(), sentinel, b->bytes(), st));
}

const char* kBufferNames[] = {"data", "scale", "scale_offsets", "amax", "scale_inv"};

/// First differing buffer and byte of two snapshots, or empty.
std::string first_difference(const std::vector<std::vector<uint8_t>>& a, const std::vector<std::vector<uint8_t>>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return std::string(kBufferNames[i]) + ": sizes differ";
    for (size_t j = 0; j < a[i].size(); ++j)
      if (a[i][j] != b[i][j])
        return std::string(kBufferNames[i]) + " byte " + std::to_string(j) + ": " + std::to_string(a[i][j]) + " vs " +
               std::to_string(b[i][j]);
  }
  return {};
}

/// Whether row r of [0, cap) is in a group.
std::vector<uint8_t> live_rows(const std::vector<int64_t>& sizes, const std::vector<int64_t>& offs, int64_t cap) {
  std::vector<uint8_t> live(static_cast<size_t>(cap), 0);
  for (size_t g = 0; g < sizes.size(); ++g)
    for (int64_t i = 0; i < sizes[g]; ++i) live[static_cast<size_t>(offs[g] + i)] = 1;
  return live;
}

/// x with every element of a row outside `live` replaced by NaN, +Inf, -Inf, the largest finite value or random bits.
HostMatrix poison_rows(const HostMatrix& x, const std::vector<uint8_t>& live, std::mt19937_64& g) {
  HostMatrix p = x;
  const size_t es = dtype_size(x.dtype);
  for (int64_t r = 0; r < x.rows; ++r) {
    if (live[static_cast<size_t>(r)]) continue;
    for (int64_t c = 0; c < x.cols; ++c) {
      uint8_t* at = p.bytes.data() + static_cast<size_t>(r * x.cols + c) * es;
      switch ((r + c) % 5) {
        case 0: p.set(r, c, std::numeric_limits<float>::quiet_NaN()); break;
        case 1: p.set(r, c, std::numeric_limits<float>::infinity()); break;
        case 2: p.set(r, c, -std::numeric_limits<float>::infinity()); break;
        case 3: p.set(r, c, x.dtype == DType::kF32 ? FLT_MAX : -0x1.fep127f); break;  // BF16: its largest finite
        default: {
          const uint64_t bits = g();
          std::memcpy(at, &bits, es);
        }
      }
    }
  }
  return p;
}

/// Offsets with `gap` rows after each group (gap odd: groups start anywhere).
std::vector<int64_t> offs_of(const std::vector<int64_t>& sizes, int64_t gap) { return offsets_with_gaps(sizes, gap); }

TEST(GroupedPoison, QuantizeEveryRecipeIgnoresRowsInNoGroupAndReplaysReRouted) {
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t cap = 700, K = 160, G = 6, gap = 7;  // neither a multiple of 128; K: a partial FP8 block
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  for (const DType dt : {DType::kBF16, DType::kF32}) {
    for (const GroupCase& c : grouped_recipes()) {
      SCOPED_TRACE(std::string(c.name) + ", " + std::string(dtype_name(dt)) + " input");
      const bool nv = c.r.kind() == RecipeKind::kNVFP4;
      // routing A and B: zero-row experts, sizes not multiples of 128 (NVFP4: multiples of 16, its contract)
      const std::vector<int64_t> sa = nv ? std::vector<int64_t>{48, 0, 112, 16, 0, 208} : std::vector<int64_t>{37, 0, 101, 5, 0, 200};
      const std::vector<int64_t> sb = nv ? std::vector<int64_t>{0, 160, 32, 0, 304, 16} : std::vector<int64_t>{0, 129, 1, 0, 255, 64};
      const std::vector<int64_t> oa = offs_of(sa, gap), ob = offs_of(sb, gap + 2);
      std::vector<uint8_t> live = live_rows(sa, oa, cap);
      const std::vector<uint8_t> live_b = live_rows(sb, ob, cap);
      for (size_t r = 0; r < live.size(); ++r) live[r] |= live_b[r];
      std::mt19937_64 g(seed() + 60);
      const HostMatrix x = random_input(dt, cap, K, g);
      const HostMatrix xp = poison_rows(x, live, g);  // rows in neither routing
      const HostMatrix xpa = poison_rows(x, live_rows(sa, oa, cap), g);  // every row outside routing A
      DeviceBuffer dx(x.bytes.size(), st), dxpa(x.bytes.size(), st), dxp(x.bytes.size(), st);
      QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(dxpa.data(), xpa.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(dxp.data(), xp.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
      DeviceSizes ds(G, st), route_a(G, st), route_b(G, st);  // the graph reads ds; A and B are copied into it
      route_a.set(sa, oa, st);
      route_b.set(sb, ob, st);
      auto route = [&](const DeviceSizes& from) {  // re-routing on the device (device-to-device copies)
        QTC_CUDA_CHECK(cudaMemcpyAsync(ds.fd.data(), from.fd.data(), G * 8, cudaMemcpyDeviceToDevice, st));
        QTC_CUDA_CHECK(cudaMemcpyAsync(ds.off.data(), from.off.data(), G * 8, cudaMemcpyDeviceToDevice, st));
      };
      DeviceGroupedQuantized out = allocate_grouped(c.r, dt, cap, K, G, c.layout, st);
      auto run = [&](const DeviceBuffer& in) {
        quantize_grouped_into({in.data(), dt, cap, K}, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), out, st);
      };
      const uint8_t sentinel = 0xA5;
      // 1. routing A, clean input: each group equals quantizing it alone; rows in no group keep the sentinel
      route(route_a);
      fill_outputs(out, sentinel, st);
      run(dx);
      expect_groups_equal(c, x, sa, oa, out, sentinel, st);
      const auto clean = snapshot(out, st);
      {
        const std::vector<uint8_t> la = live_rows(sa, oa, cap);
        if (c.layout == ScaleLayout::kCompact && c.r.kind() != RecipeKind::kFP8Tensor) {
          const size_t row_bytes = clean[1].size() / static_cast<size_t>(cap);
          int64_t touched = 0;
          for (int64_t r = 0; r < cap; ++r)
            if (!la[static_cast<size_t>(r)])
              for (size_t j = 0; j < row_bytes; ++j) touched += clean[1][static_cast<size_t>(r) * row_bytes + j] != sentinel;
          EXPECT_EQ(touched, 0) << "compact scale bytes of rows in no group were written";
        }
        if (nv && c.r.nvfp4_row_scaled()) {
          int64_t touched = 0;
          for (int64_t r = 0; r < cap; ++r)
            if (!la[static_cast<size_t>(r)])
              for (int b = 0; b < 4; ++b) touched += clean[3][static_cast<size_t>(r * 4 + b)] != sentinel;
          EXPECT_EQ(touched, 0) << "row amaxes of rows in no group were written";
        }
      }
      // 2. the same routing with every row outside it poisoned: every output byte as with the clean input
      fill_outputs(out, sentinel, st);
      run(dxpa);
      const std::string d1 = first_difference(snapshot(out, st), clean);
      EXPECT_TRUE(d1.empty()) << "poisoned rows outside the groups changed " << d1;
      // 3. captured with routing A, replayed after re-routing to B on the device == eager with B == reference
      const CapturedGraph graph(st, [&] { run(dxp); });
      route(route_b);
      fill_outputs(out, sentinel, st);
      graph.launch();
      const auto replay = snapshot(out, st);
      expect_groups_equal(c, x, sb, ob, out, sentinel, st);
      fill_outputs(out, sentinel, st);
      run(dxp);
      const std::string d2 = first_difference(replay, snapshot(out, st));
      EXPECT_TRUE(d2.empty()) << "re-routed graph replay differs from the eager call: " << d2;
      // 4. back to A by replay: the bytes of step 1
      route(route_a);
      fill_outputs(out, sentinel, st);
      graph.launch();
      const std::string d3 = first_difference(snapshot(out, st), clean);
      EXPECT_TRUE(d3.empty()) << "replay re-routed back to A differs from the clean eager call: " << d3;
    }
  }
}

/// x ([cap, K] row-scaled NVFP4, rowwise) with rows outside `live` poisoned: random codes, E4M3 NaN scales (0x7F,
/// 0xFF), row amaxes NaN / +Inf / 0.
QuantizedTensor poison_x(QuantizedTensor x, const std::vector<uint8_t>& live, std::mt19937_64& g) {
  Plane& p = *x.rowwise;
  for (int64_t r = 0; r < x.rows; ++r) {
    if (live[static_cast<size_t>(r)]) continue;
    for (int64_t j = 0; j < p.data_cols; ++j) p.data[static_cast<size_t>(r * p.data_cols + j)] = static_cast<uint8_t>(g());
    for (int64_t j = 0; j < p.scale.cols; ++j) p.scale.bytes[static_cast<size_t>(r * p.scale.cols + j)] = (j % 2) ? 0x7F : 0xFF;
    p.amax[static_cast<size_t>(r)] = r % 3 == 0 ? std::numeric_limits<float>::quiet_NaN()
                                                : (r % 3 == 1 ? std::numeric_limits<float>::infinity() : 0.0f);
  }
  return x;
}

/// A weight whose every byte is hostile: random codes, NaN scales, NaN amax (an expert that gets no tokens).
QuantizedTensor poison_weight(QuantizedTensor w, std::mt19937_64& g) {
  Plane& p = *w.rowwise;
  for (auto& b : p.data) b = static_cast<uint8_t>(g());
  for (auto& b : p.scale.bytes) b = 0x7F;
  for (auto& a : p.amax) a = std::numeric_limits<float>::quiet_NaN();
  return w;
}

TEST(GroupedPoison, DeviceFpropIgnoresRowsInNoGroupAndIdleExperts) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 61);
  const int64_t N = 136, K = 272, cap = 608, G = 5, idle = 3;  // expert 3 has no tokens in either routing
  const std::vector<int64_t> sa{37, 0, 129, 0, 90}, sb{0, 200, 1, 0, 255};
  const std::vector<int64_t> oa = offsets_with_gaps(sa, 11), ob = offsets_with_gaps(sb, 5);
  std::vector<uint8_t> live = live_rows(sa, oa, cap);
  const std::vector<uint8_t> live_b = live_rows(sb, ob, cap);
  for (size_t r = 0; r < live.size(); ++r) live[r] |= live_b[r];
  QuantizedTensor x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
  make_row_scaled(x, g);
  x.columnwise.reset();
  x.recipe.columnwise = false;
  const QuantizedTensor xp = poison_x(x, live, g), xpa = poison_x(x, live_rows(sa, oa, cap), g);
  std::vector<QuantizedTensor> wq, wp;
  for (int64_t i = 0; i < G; ++i) {
    QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f * std::ldexp(1.0f, static_cast<int>(i) - 2), 1.0f);
    w.columnwise.reset();
    w.recipe.columnwise = false;
    wq.push_back(w);
    wp.push_back(i == idle ? poison_weight(w, g) : w);
  }
  const DeviceQuantized dx = from_host(x, st), dxp = from_host(xp, st), dxpa = from_host(xpa, st);
  std::vector<DeviceQuantized> dw;
  std::vector<const DeviceQuantized*> dwp;
  for (const auto& w : wp) dw.push_back(from_host(w, st));
  for (const auto& w : dw) dwp.push_back(&w);
  GroupedWeightsBf16 cache = allocate_grouped_weights(G, N, K, st);
  dequantize_grouped_weights_into(ctx, dwp, cache);
  DeviceSizes ds(G, st), route_a(G, st), route_b(G, st);
  route_a.set(sa, oa, st);
  route_b.set(sb, ob, st);
  auto route = [&](const DeviceSizes& from) {
    QTC_CUDA_CHECK(cudaMemcpyAsync(ds.fd.data(), from.fd.data(), G * 8, cudaMemcpyDeviceToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(ds.off.data(), from.off.data(), G * 8, cudaMemcpyDeviceToDevice, st));
  };
  const GroupedRowsOnDevice rows{G, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
  for (const auto& [out, cached] : {std::pair{DType::kF32, true}, std::pair{DType::kBF16, false}, std::pair{DType::kF16, true}}) {
    SCOPED_TRACE(std::string(dtype_name(out)) + (cached ? " cached weights" : " weights per call"));
    const DeviceGemmArgs args = DeviceGemmArgs::of(ref::GemmKind::kFprop, out);
    DeviceBuffer d(static_cast<size_t>(cap * N) * dtype_size(out), st);
    auto call = [&](const DeviceQuantized& in) {
      if (cached)
        gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, cache, in, rows, args, d.data());
      else
        gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, dwp, in, rows, args, d.data());
    };
    auto result = [&] {
      QTC_CUDA_CHECK(cudaStreamSynchronize(st));
      return download(d, out, cap, N);
    };
    auto fresh = [&] { QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st)); };
    const HostMatrix want_a = grouped_fprop_reference(wq, x, sa, oa, out, nullptr, N);
    const HostMatrix want_b = grouped_fprop_reference(wq, x, sb, ob, out, nullptr, N);
    route(route_a);
    fresh();
    call(dx);
    EXPECT_TRUE(bitwise_equal(result(), want_a)) << "clean x, routing A";  // rows in no group: the sentinel
    fresh();
    call(dxpa);
    EXPECT_TRUE(bitwise_equal(result(), want_a)) << "x poisoned outside routing A";
    const CapturedGraph graph(st, [&] { call(dxp); });
    route(route_b);
    fresh();
    graph.launch();
    EXPECT_TRUE(bitwise_equal(result(), want_b)) << "captured with A, replayed after re-routing to B";
    fresh();
    call(dxp);
    EXPECT_TRUE(bitwise_equal(result(), want_b)) << "eager with routing B";
  }
}

TEST(GroupedPoison, DeviceWgradIgnoresTokensInNoGroup) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 62);
  const int64_t N = 136, K = 200, cap = 432, G = 4;  // 16-token blocks: sizes and gaps multiples of 16
  const std::vector<int64_t> sa{64, 0, 160, 32}, sb{0, 112, 16, 208};
  const std::vector<int64_t> oa = offsets_with_gaps(sa, 32), ob = offsets_with_gaps(sb, 16);
  std::vector<uint8_t> live = live_rows(sa, oa, cap);
  const std::vector<uint8_t> live_b = live_rows(sb, ob, cap);
  for (size_t r = 0; r < live.size(); ++r) live[r] |= live_b[r];
  const Plane px = nvfp4_plane(K, cap, g, 1.0f), pdy = nvfp4_plane(N, cap, g, 1.0f);
  auto poison = [&](Plane p, int64_t cols, const std::vector<uint8_t>& lv) {  // tokens are columns here
    for (int64_t r = 0; r < cols; ++r)
      for (int64_t t = 0; t < cap; ++t) {
        if (lv[static_cast<size_t>(t)]) continue;
        p.data[static_cast<size_t>(r * (cap / 2) + t / 2)] = static_cast<uint8_t>(g());
        p.scale.bytes[static_cast<size_t>(r * (cap / 16) + t / 16)] = 0x7F;
      }
    return p;
  };
  auto upload = [&](const Plane& p, int64_t cols) {
    DeviceGroupedColumnwise c;
    c.capacity = cap;
    c.cols = cols;
    c.groups = G;
    c.data = DeviceBuffer(p.data.size(), st);
    c.scale = DeviceBuffer(p.scale.bytes.size(), st);
    c.amax = DeviceBuffer(static_cast<size_t>(G) * 4, st);
    const std::vector<float> amax(static_cast<size_t>(G), 2688.0f);
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.data.data(), p.data.data(), p.data.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.scale.data(), p.scale.bytes.data(), p.scale.bytes.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.amax.data(), amax.data(), amax.size() * 4, cudaMemcpyHostToDevice, st));
    return c;
  };
  const DeviceGroupedColumnwise dx = upload(px, K), ddy = upload(pdy, N);
  const DeviceGroupedColumnwise dxpa = upload(poison(px, K, live_rows(sa, oa, cap)), K),
                                ddypa = upload(poison(pdy, N, live_rows(sa, oa, cap)), N);
  const DeviceGroupedColumnwise dxp = upload(poison(px, K, live), K), ddyp = upload(poison(pdy, N, live), N);
  DeviceSizes ds(G, st), route_a(G, st), route_b(G, st);
  route_a.set(sa, oa, st);
  route_b.set(sb, ob, st);
  auto route = [&](const DeviceSizes& from) {
    QTC_CUDA_CHECK(cudaMemcpyAsync(ds.fd.data(), from.fd.data(), G * 8, cudaMemcpyDeviceToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(ds.off.data(), from.off.data(), G * 8, cudaMemcpyDeviceToDevice, st));
  };
  const GroupedRowsOnDevice rows{G, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
  DeviceBuffer d(static_cast<size_t>(G * N * K) * 4, st);
  auto run = [&](const DeviceGroupedColumnwise& a, const DeviceGroupedColumnwise& b) {
    QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
    gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, a, b, rows, DType::kF32, d.data());
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    return download(d, DType::kF32, G * N, K);
  };
  route(route_a);
  const HostMatrix clean = run(dx, ddy);
  for (int64_t i = 0; i < clean.numel(); ++i) ASSERT_TRUE(std::isfinite(at(clean, i))) << "clean output " << i;
  EXPECT_TRUE(bitwise_equal(run(dxpa, ddypa), clean)) << "tokens poisoned outside routing A";
  route(route_b);
  const HostMatrix eager_b = run(dxp, ddyp);
  for (int64_t i = 0; i < eager_b.numel(); ++i) ASSERT_TRUE(std::isfinite(at(eager_b, i))) << "routing B output " << i;
  EXPECT_TRUE(bitwise_equal(eager_b, run(dx, ddy))) << "routing B: poisoned vs clean";
  route(route_a);
  QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
  const CapturedGraph graph(st, [&] { gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, dxp, ddyp, rows, DType::kF32, d.data()); });
  route(route_b);
  QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
  graph.launch();
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  EXPECT_TRUE(bitwise_equal(download(d, DType::kF32, G * N, K), eager_b)) << "captured with A, replayed after re-routing to B";
}

// A routing no caller should produce (a stale or corrupted device buffer): the kept groups are 0 and 4; 1 has a
// negative size, 2 overlaps group 0, 3 has 2^62 rows, 5 passes the capacity, 6 starts before the last kept end.
const std::vector<int64_t> kHostileSizes{32, -16, 48, int64_t{1} << 62, 16, 64, 16};
const std::vector<int64_t> kHostileOffsets{0, 40, 16, 100, 120, 290, -32};
const std::vector<int64_t> kKeptSizes{32, 0, 0, 0, 16, 0, 0};
const std::vector<int64_t> kKeptOffsets{0, 32, 32, 32, 120, 136, 136};

TEST(GroupedPoison, HostileRoutingQuantizesOnlyTheValidGroups) {
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t cap = 300, K = 160, G = 7;
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  std::mt19937_64 g(seed() + 63);
  const HostMatrix x = random_input(DType::kBF16, cap, K, g);
  DeviceBuffer dx(x.bytes.size(), st);
  QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
  DeviceSizes hostile(G, st), kept(G, st);
  hostile.set(kHostileSizes, kHostileOffsets, st);
  kept.set(kKeptSizes, kKeptOffsets, st);
  for (const GroupCase& c : grouped_recipes()) {
    SCOPED_TRACE(c.name);
    DeviceGroupedQuantized out = allocate_grouped(c.r, DType::kBF16, cap, K, G, c.layout, st);
    fill_outputs(out, 0xA5, st);
    quantize_grouped_into({dx.data(), DType::kBF16, cap, K}, hostile.fd.as<int64_t>(), hostile.off.as<int64_t>(), out, st);
    expect_groups_equal(c, x, kKeptSizes, kKeptOffsets, out, 0xA5, st);
    const auto got = snapshot(out, st);
    fill_outputs(out, 0xA5, st);
    quantize_grouped_into({dx.data(), DType::kBF16, cap, K}, kept.fd.as<int64_t>(), kept.off.as<int64_t>(), out, st);
    const std::string diff = first_difference(got, snapshot(out, st));
    EXPECT_TRUE(diff.empty()) << "hostile routing differs from the routing of its valid groups: " << diff;
  }
}

TEST(GroupedPoison, HostileRoutingGemmComputesOnlyTheValidGroups) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 64);
  const int64_t N = 64, K = 64, cap = 304, G = 7;
  QuantizedTensor x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
  make_row_scaled(x, g);
  x.columnwise.reset();
  x.recipe.columnwise = false;
  std::vector<QuantizedTensor> wq;
  for (int64_t i = 0; i < G; ++i) {
    QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f, 1.0f);
    w.columnwise.reset();
    w.recipe.columnwise = false;
    wq.push_back(w);
  }
  const DeviceQuantized dx = from_host(x, st);
  std::vector<DeviceQuantized> dw;
  std::vector<const DeviceQuantized*> dwp;
  for (const auto& w : wq) dw.push_back(from_host(w, st));
  for (const auto& w : dw) dwp.push_back(&w);
  DeviceSizes hostile(G, st);
  hostile.set(kHostileSizes, kHostileOffsets, st);
  const GroupedRowsOnDevice rows{G, cap, hostile.fd.as<int64_t>(), hostile.off.as<int64_t>(), 1};
  // fprop, per-call weights: the rows of the kept groups, the sentinel everywhere else
  DeviceBuffer d(static_cast<size_t>(cap * N) * 4, st);
  QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
  gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, dwp, dx, rows, DeviceGemmArgs::of(ref::GemmKind::kFprop, DType::kF32), d.data());
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  EXPECT_TRUE(bitwise_equal(download(d, DType::kF32, cap, N),
                            grouped_fprop_reference(wq, x, kKeptSizes, kKeptOffsets, DType::kF32, nullptr, N)));
  // wgrad (16-token planes [cols, cap]): the kept groups' products, zeros for the dropped ones
  const Plane px = nvfp4_plane(K, cap, g, 1.0f), pdy = nvfp4_plane(N, cap, g, 1.0f);
  auto upload = [&](const Plane& p, int64_t cols) {
    DeviceGroupedColumnwise c;
    c.capacity = cap;
    c.cols = cols;
    c.groups = G;
    c.data = DeviceBuffer(p.data.size(), st);
    c.scale = DeviceBuffer(p.scale.bytes.size(), st);
    c.amax = DeviceBuffer(static_cast<size_t>(G) * 4, st);
    const std::vector<float> amax(static_cast<size_t>(G), 2688.0f);
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.data.data(), p.data.data(), p.data.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.scale.data(), p.scale.bytes.data(), p.scale.bytes.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.amax.data(), amax.data(), amax.size() * 4, cudaMemcpyHostToDevice, st));
    return c;
  };
  const DeviceGroupedColumnwise cx = upload(px, K), cdy = upload(pdy, N);
  DeviceSizes kept(G, st);
  kept.set(kKeptSizes, kKeptOffsets, st);
  DeviceBuffer dw1(static_cast<size_t>(G * N * K) * 4, st), dw2(static_cast<size_t>(G * N * K) * 4, st);
  QTC_CUDA_CHECK(cudaMemsetAsync(dw1.data(), 0x3F, dw1.bytes(), st));
  QTC_CUDA_CHECK(cudaMemsetAsync(dw2.data(), 0x3F, dw2.bytes(), st));
  gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, cx, cdy, rows, DType::kF32, dw1.data());
  gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, cx, cdy, {G, cap, kept.fd.as<int64_t>(), kept.off.as<int64_t>(), 1},
                                             DType::kF32, dw2.data());
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  const HostMatrix w1 = download(dw1, DType::kF32, G * N, K), w2 = download(dw2, DType::kF32, G * N, K);
  EXPECT_TRUE(bitwise_equal(w1, w2)) << "wgrad: hostile routing differs from the routing of its valid groups";
  for (int64_t i = N * K; i < 4 * N * K; ++i) ASSERT_EQ(at(w1, i), 0.0) << "dropped group " << i / (N * K) << " not zero";
}

}  // namespace
}  // namespace qtc::cuda
