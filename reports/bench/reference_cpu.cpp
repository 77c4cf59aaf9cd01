/// \file reference_cpu.cpp
/// \brief Google Benchmark suite of the CPU reference (issue 2, "Speed and memory"): every recipe quantizes and
///        dequantizes a 4096x4096 BF16 tensor; real time (the reference runs on all hardware threads).
///
/// | recipe                          | planes               | quantize | dequantize (both planes, to BF16) |
/// |---------------------------------|----------------------|----------|-----------------------------------|
/// | nvfp4_1x16                      | rowwise + columnwise | yes      | yes                               |
/// | nvfp4_16x16                     | rowwise + columnwise | yes      | yes                               |
/// | nvfp4_1x16_rowscaled            | rowwise + columnwise | yes      | yes                               |
/// | nvfp4_1x16_rht                  | rowwise + columnwise | yes      | yes                               |
/// | nvfp4_1x16_4over6mae256         | rowwise + columnwise | yes      | yes                               |
/// | nvfp4_1x16_sr                   | rowwise + columnwise | yes      | yes                               |
/// | mxfp8_e4m3_rceil / _ocpfloor    | rowwise + columnwise | yes      | yes                               |
/// | fp8block_1x128 / _128x128 e4m3  | rowwise + columnwise | yes      | yes                               |
/// | fp8tensor_e4m3                  | rowwise + columnwise | yes      | yes                               |
///
/// `copy/bf16_4096x4096` (memcpy of the input on the same threads) is the suite's bandwidth reference.
/// Counters per benchmark: `seconds` (per operation), `GB/s` (bytes read + written per second),
/// `cpu_s_all_threads` (process CPU seconds per operation, all threads: robust to other load on the machine;
/// the same figure is the entry's cpu_time, through MeasureProcessCPUTime, so compare.py tests it too),
/// `peak_extra_x_input` and `peak_extra_MiB`: the peak of heap bytes allocated during one call above what
/// was live before it (outputs and scratch, not the input), as a multiple of the BF16 input's size.
/// NOTES: the heap is measured by replacing the global operator new/delete of this binary (the reference
/// allocates through std::vector), so memory from malloc directly would not be seen; the reference has none.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <string>
#include <vector>

#include "qtc/bench_context.hpp"
#include "qtc/cpu_path.hpp"
#include "qtc/quantize.hpp"

namespace {

// ---- heap accounting -------------------------------------------------------------------------------
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void note_alloc(void* p) {
  if (p == nullptr) return;
  const int64_t n = static_cast<int64_t>(malloc_usable_size(p));
  const int64_t now = g_live.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
void note_free(void* p) {
  if (p != nullptr) g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}
void* counted_alloc(std::size_t n, std::size_t align) {
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n == 0 ? 1 : n)
                                               : std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  note_alloc(p);
  return p;
}
void counted_free(void* p) {
  note_free(p);
  std::free(p);
}

/// Peak heap growth (bytes) of one call of fn above what was live when it started.
template <typename F>
int64_t peak_extra_bytes(F&& fn) {
  const int64_t base = g_live.load();
  g_peak.store(base);
  fn();
  return g_peak.load() - base;
}

}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n, 0); }
void* operator new[](std::size_t n) { return counted_alloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try { return counted_alloc(n, 0); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try { return counted_alloc(n, 0); } catch (...) { return nullptr; }
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }

namespace {

constexpr int64_t kRows = 4096;  // M
constexpr int64_t kCols = 4096;  // K

/// A (kRows, kCols) BF16 matrix of roughly normal values with a few outliers, from a fixed seed.
const qtc::HostMatrix& input() {
  static const qtc::HostMatrix x = [] {
    qtc::HostMatrix m(qtc::DType::kBF16, kRows, kCols);  // (M,K)
    uint64_t s = 0x9E3779B97F4A7C15ull;
    auto next = [&s] {  // splitmix64: deterministic, independent of the reference's rng
      uint64_t z = (s += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    };
    uint16_t* p = m.as<uint16_t>();
    for (int64_t i = 0; i < m.numel(); ++i) {
      const double u1 = (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53;
      const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
      double v = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      if ((i % 997) == 0) v *= 64.0;  // outliers, so block scales differ
      p[i] = static_cast<uint16_t>(qtc::float_to_dtype_bits(static_cast<float>(v), qtc::DType::kBF16));
    }
    return m;
  }();
  return x;
}

struct Case {
  std::string name;
  qtc::Recipe recipe;
};

std::vector<Case> cases() {
  using qtc::Recipe;
  using qtc::RecipeKind;
  std::vector<Case> out;
  auto add = [&out](Recipe r) { out.push_back({r.name(), r}); };
  Recipe nv;  // NVFP4 1x16, rowwise + columnwise, profile te
  add(nv);
  { Recipe r = nv; r.nvfp4().tile_2d = true; add(r); }
  { Recipe r = nv; r.nvfp4().row_scaled = true; add(r); }
  { Recipe r = nv; r.nvfp4().rht = true; add(r); }
  { Recipe r = nv; r.nvfp4().fourover6 = true; r.nvfp4().e4m3_max = 256; add(r); }
  { Recipe r = nv; r.nvfp4().stochastic = true; r.nvfp4().seed = 1234; add(r); }
  Recipe mx; mx.set_options(qtc::Mxfp8Options{});
  add(mx);
  { Recipe r = mx; r.mxfp8().scale_rule = qtc::MxScaleRule::kOcpFloor; r.profile = qtc::Profile::kOCP; add(r); }
  Recipe fb; fb.set_options(qtc::Fp8BlockOptions{});
  add(fb);
  { Recipe r = fb; r.fp8_block().tile_2d = true; add(r); }
  Recipe ft; ft.set_options(qtc::Fp8TensorOptions{});
  add(ft);
  return out;
}

size_t quantized_bytes(const qtc::QuantizedTensor& q) {
  size_t n = 0;
  for (const auto* p : {&q.rowwise, &q.columnwise})
    if (p->has_value()) n += (*p)->data.size() + (*p)->scale.bytes.size() + (*p)->amax.size() * sizeof(float);
  return n;
}

/// CPU seconds of the whole process (all threads), user + system.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// Adds `cpu_s_all_threads`: CPU seconds per operation summed over the reference's threads. On a loaded
/// machine (other builds) real time grows with the load; this stays close to what the work costs, and on an
/// idle machine with T threads real time is about cpu_s_all_threads / T.
void set_cpu_counter(benchmark::State& st, double cpu_before) {
  const double n = static_cast<double>(std::max<benchmark::IterationCount>(st.iterations(), 1));
  st.counters["cpu_s_all_threads"] = (process_cpu_seconds() - cpu_before) / n;
}

void set_counters(benchmark::State& st, double bytes_moved, int64_t extra) {
  const double in_bytes = static_cast<double>(input().bytes.size());
  st.counters["seconds"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  st.counters["GB/s"] = benchmark::Counter(bytes_moved / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["peak_extra_x_input"] = static_cast<double>(extra) / in_bytes;
  st.counters["peak_extra_MiB"] = static_cast<double>(extra) / (1024.0 * 1024.0);
}

void bm_quantize(benchmark::State& st, const qtc::Recipe& r) {
  const qtc::MatrixView x = input().view();
  size_t out_bytes = 0;
  const int64_t extra = peak_extra_bytes([&] { out_bytes = quantized_bytes(qtc::ref::quantize(x, r)); });
  const double cpu0 = process_cpu_seconds();
  for (auto _ : st) {
    qtc::QuantizedTensor q = qtc::ref::quantize(x, r);
    benchmark::DoNotOptimize(q.rowwise->data.data());
  }
  set_cpu_counter(st, cpu0);
  set_counters(st, static_cast<double>(input().bytes.size() + out_bytes), extra);
}

void bm_dequantize(benchmark::State& st, const qtc::Recipe& r) {
  const qtc::QuantizedTensor q = qtc::ref::quantize(input().view(), r);
  auto both = [&q] {
    size_t n = 0;
    for (auto pk : {qtc::PlaneKind::kRowwise, qtc::PlaneKind::kColumnwise}) {
      qtc::HostMatrix y = qtc::ref::dequantize(q, pk, qtc::DType::kBF16);
      benchmark::DoNotOptimize(y.bytes.data());
      n += y.bytes.size();
    }
    return n;
  };
  size_t out_bytes = 0;
  const int64_t extra = peak_extra_bytes([&] { out_bytes = both(); });
  const double cpu0 = process_cpu_seconds();
  for (auto _ : st) benchmark::DoNotOptimize(both());
  set_cpu_counter(st, cpu0);
  set_counters(st, static_cast<double>(quantized_bytes(q) + out_bytes), extra);
}

/// The copy rate the kernels are compared with: the input copied into a preallocated buffer by as many
/// threads as the reference uses (bytes read + written, like the kernels' GB/s).
void bm_copy(benchmark::State& st) {
  const qtc::HostMatrix& x = input();
  std::vector<uint8_t> dst(x.bytes.size());
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t chunk = (x.bytes.size() + threads - 1) / threads;
  auto run = [&] {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      const size_t b = std::min(x.bytes.size(), t * chunk), e = std::min(x.bytes.size(), b + chunk);
      pool.emplace_back([&, b, e] { std::memcpy(dst.data() + b, x.bytes.data() + b, e - b); });
    }
    for (auto& th : pool) th.join();
  };
  const int64_t extra = peak_extra_bytes(run);
  const double cpu0 = process_cpu_seconds();
  for (auto _ : st) {
    run();
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_cpu_counter(st, cpu0);
  set_counters(st, 2.0 * static_cast<double>(x.bytes.size()), extra);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  qtc::bench::add_bench_context();
  qtc::bench::add_context("qtc_suite", "reference_cpu");
  qtc::bench::add_context("shape", "4096x4096 bf16");
  // The reference's path: the vectorized one on this instruction set, or scalar (QTC_SCALAR=1).
  qtc::bench::add_context("cpu_path", qtc::ref::cpu_path() == qtc::ref::CpuPath::kScalar ? "scalar" : "simd " + qtc::ref::simd_target());
  (void)input();  // build the input before any benchmark so its allocation is not counted as extra
  benchmark::RegisterBenchmark("copy/bf16_4096x4096", bm_copy)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
  for (const Case& c : cases()) {
    benchmark::RegisterBenchmark(("quantize/" + c.name).c_str(), bm_quantize, c.recipe)
        ->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("dequantize/" + c.name).c_str(), bm_dequantize, c.recipe)
        ->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
