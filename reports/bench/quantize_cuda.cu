/// \file quantize_cuda.cu
/// \brief Google Benchmark of the CUDA quantizers at 16384x16384 (BF16; F32 too for NVFP4 1x16), timed with CUDA
///        events (UseManualTime), against a 4 GiB device-to-device cudaMemcpy timed the same way in this binary.
///
/// Counters: GBps = bytes / time, where bytes = input read once + every output byte written (data, scales, amax),
/// stated in each benchmark's label; the device amax pass that NVFP4 and FP8 tensor need (a second read of
/// the input) is inside the timed region but not in the byte count. frac_of_copy = GBps / copy GBps;
/// frac_of_copy_moved counts that second read too (the bytes actually moved); *_amax_given rows time the
/// cast alone, the amax coming from a producer as in a fused training step.
/// Inputs rotate between two buffers of 8x the 60 MB L2 each, so no iteration reads a cached input.
/// Context: GPU, SM count, driver, CUDA runtime, commit (compile definition QTC_GIT_COMMIT, or env QTC_COMMIT).
///
/// TransformerEngine peer (te_peer.hpp): with QTC_TE_LIB naming TE's core library, the FP8 per-tensor and FP8 block
/// rows also time TE's kernels on the same inputs, the same number of iterations, right after qtc's: counters te_ms,
/// te_frac_of_copy and frac_of_te = TE time / qtc time (above 1: qtc is faster), and te_bytes_equal (1: qtc's output,
/// scales in TE's GEMM-ready layout, equals TE's byte for byte on the first input; else the label says where they
/// differ). Rows TE has no kernel for on this card say so in the label.
#include <benchmark/benchmark.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qtc/cuda/check.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/kind.hpp"
#include "te_peer.hpp"
#ifdef QTC_HAVE_BENCH_CONTEXT
#include "qtc/bench_context.hpp"
#endif

#ifndef QTC_GIT_COMMIT
#define QTC_GIT_COMMIT "unknown"
#endif

namespace {

using namespace qtc;

constexpr int64_t kM = 16384, kK = 16384;

struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    QTC_CUDA_CHECK(cudaEventCreate(&a));
    QTC_CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Events() {
    (void)cudaEventDestroy(a);
    (void)cudaEventDestroy(b);
  }
  double ms() const {
    float t = 0.0f;
    QTC_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    return t;
  }
};

/// Bytes/s of a 4 GiB D2D copy (read + write counted), measured once per process (median of 30 after 10 warm-ups).
double copy_bytes_per_s() {
  static double rate = [] {
    const size_t n = size_t{4} << 30;
    void *src = nullptr, *dst = nullptr;
    QTC_CUDA_CHECK(cudaMalloc(&src, n));
    QTC_CUDA_CHECK(cudaMalloc(&dst, n));
    QTC_CUDA_CHECK(cudaMemset(src, 0x3C, n));
    Events ev;
    std::vector<double> t;
    // 10 warm-up copies (the clocks of an idle card ramp up over the first milliseconds), then the median of 30.
    for (int i = 0; i < 40; ++i) {
      QTC_CUDA_CHECK(cudaEventRecord(ev.a));
      QTC_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice));
      QTC_CUDA_CHECK(cudaEventRecord(ev.b));
      QTC_CUDA_CHECK(cudaEventSynchronize(ev.b));
      if (i >= 10) t.push_back(ev.ms());
    }
    std::sort(t.begin(), t.end());
    QTC_CUDA_CHECK(cudaFree(src));
    QTC_CUDA_CHECK(cudaFree(dst));
    return 2.0 * static_cast<double>(n) / (t[t.size() / 2] * 1e-3);
  }();
  return rate;
}

void BM_Copy4GiB(benchmark::State& state) {
  const size_t n = size_t{4} << 30;
  void *src = nullptr, *dst = nullptr;
  QTC_CUDA_CHECK(cudaMalloc(&src, n));
  QTC_CUDA_CHECK(cudaMalloc(&dst, n));
  QTC_CUDA_CHECK(cudaMemset(src, 0x3C, n));
  Events ev;
  double total = 0.0;
  for (auto _ : state) {
    QTC_CUDA_CHECK(cudaEventRecord(ev.a));
    QTC_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice));
    QTC_CUDA_CHECK(cudaEventRecord(ev.b));
    QTC_CUDA_CHECK(cudaEventSynchronize(ev.b));
    const double s = ev.ms() * 1e-3;
    total += s;
    state.SetIterationTime(s);
  }
  const double bytes = 2.0 * static_cast<double>(n);
  state.SetLabel("bytes: 4 GiB read + 4 GiB written");
  state.counters["GBps"] = bytes * static_cast<double>(state.iterations()) / total / 1e9;
  // Against the process-wide copy rate every other row divides by (a check that the two measurements agree).
  state.counters["frac_of_copy"] = bytes * static_cast<double>(state.iterations()) / total / copy_bytes_per_s();
  state.counters["copy_GBps"] = copy_bytes_per_s() / 1e9;
  QTC_CUDA_CHECK(cudaFree(src));
  QTC_CUDA_CHECK(cudaFree(dst));
}

/// Fills a device buffer with bf16/f32/f16 values of a normal-ish distribution (never zeros).
__global__ void fill_input(void* p, int64_t n, int dtype, uint32_t seed) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float u = (static_cast<float>(h >> 8) + 0.5f) * (1.0f / 16777216.0f);
    const float v = (u - 0.5f) * 8.0f * (1.0f + static_cast<float>((h >> 3) & 7));
    if (dtype == 0) static_cast<float*>(p)[i] = v;
    else if (dtype == 1) {
      uint32_t b = __float_as_uint(v);
      static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
    } else {
      static_cast<__half*>(p)[i] = __float2half_rn(v);
    }
  }
}

size_t plane_bytes(const cuda::DevicePlane& p) { return p.data.bytes() + p.scale.bytes() + p.amax.bytes(); }

/// The TransformerEngine peer's part of a row (see the file comment): times TE's quantizer on the same two inputs
/// for as many iterations as qtc ran (qtc_total seconds), compares the outputs once per recipe, sets the te_*
/// counters and returns the label's TE note ("" without QTC_TE_LIB).
std::string te_peer_row(benchmark::State& state, const Recipe& r, DType t, void* const in[2], float given_amax,
                        double qtc_total, double bytes, double copy_rate, cudaStream_t s) {
  bench::TePeer* te = bench::TePeer::instance();
  if (te == nullptr) return {};
  if (const std::string why = te->unsupported_reason(r, t); !why.empty()) return "; TE: " + why;
  const bool with_amax = given_amax > 0.0f;
  try {
    bench::TeOutput o = te->allocate(r, kM, kK, s);
    if (with_amax) bench::TePeer::store_amax(o, given_amax, s);
    auto run = [&](int i) { te->quantize(r, in[i & 1], t, kM, kK, o, with_amax, s); };
    run(0);
    run(1);
    QTC_CUDA_CHECK(cudaStreamSynchronize(s));
    Events ev;
    double total = 0.0;
    const int64_t n = static_cast<int64_t>(state.iterations());
    for (int64_t i = 0; i < n; ++i) {
      QTC_CUDA_CHECK(cudaEventRecord(ev.a, s));
      run(static_cast<int>(i));
      QTC_CUDA_CHECK(cudaEventRecord(ev.b, s));
      QTC_CUDA_CHECK(cudaEventSynchronize(ev.b));
      total += ev.ms() * 1e-3;
    }
    state.counters["te_ms"] = total / static_cast<double>(n) * 1e3;
    state.counters["te_frac_of_copy"] = bytes * static_cast<double>(n) / total / copy_rate;
    state.counters["frac_of_te"] = total / qtc_total;
    // Byte-for-byte comparison on the first input, once per recipe and amax mode (both results fresh).
    static std::map<std::string, std::string> compared;
    const std::string key = r.name() + (with_amax ? " amax given" : "") + std::string(dtype_name(t));
    auto it = compared.find(key);
    if (it == compared.end()) {
      cuda::DeviceQuantized qp = cuda::allocate_quantized(r, t, kM, kK, ScaleLayout::kPadded, s);
      const cuda::DeviceMatrixView x0{in[0], t, kM, kK};
      if (with_amax)
        cuda::quantize_with_amax_into(x0, qp, given_amax, given_amax, s);
      else
        cuda::quantize_into(x0, qp, s);
      run(0);
      it = compared.emplace(key, bench::compare_with_te(qp, o, s)).first;
    }
    state.counters["te_bytes_equal"] = it->second.empty() ? 1.0 : 0.0;
    QTC_CUDA_CHECK(cudaStreamSynchronize(s));
    return it->second.empty() ? "; TE: outputs byte-identical" : "; TE output differs: " + it->second;
  } catch (const std::exception& e) {
    return std::string("; TE failed: ") + e.what();
  }
}

/// The NVFP4 kernel knobs for A/B timing, the benchmark's own environment variables (the library reads none):
/// QTC_NVFP4_KERNEL=generic|fast|auto, QTC_NVFP4_STAGES=2|3, QTC_NVFP4_STRIP=1..64, and for MXFP8 / FP8 block /
/// FP8 tensor QTC_CAST_KERNEL=register|pipelined|auto (cuda::LaunchOptions).
cuda::LaunchOptions launch_options_from_env() {
  cuda::LaunchOptions o;
  if (const char* k = std::getenv("QTC_NVFP4_KERNEL")) {
    const std::string v(k);
    o.nvfp4_kernel = v == "generic" ? cuda::Nvfp4Kernel::kGeneric : v == "fast" ? cuda::Nvfp4Kernel::kFast : cuda::Nvfp4Kernel::kAuto;
  }
  if (const char* v = std::getenv("QTC_NVFP4_STAGES")) o.nvfp4_stages = std::atoi(v);
  if (const char* v = std::getenv("QTC_NVFP4_STRIP")) o.nvfp4_strip = std::atoi(v);
  if (const char* k = std::getenv("QTC_CAST_KERNEL")) {
    const std::string v(k);
    o.cast_kernel = v == "pipelined" ? cuda::CastKernel::kPipelined : v == "register" ? cuda::CastKernel::kRegister : cuda::CastKernel::kAuto;
  }
  return o;
}

/// given_amax: 0 = the amax pass runs on the device; else quantize_with_amax with that value (1000: a loose bound;
/// 32: the input's exact bound, the value the device pass finds, so the scales are the same as with the pass).
void BM_Quantize(benchmark::State& state, Recipe r, DType t, float given_amax) {
  const bool with_amax = given_amax > 0.0f;
  if (cuda::device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const double copy_rate = copy_bytes_per_s();
  const size_t in_bytes = static_cast<size_t>(kM * kK) * dtype_size(t);
  cudaStream_t s = nullptr;
  QTC_CUDA_CHECK(cudaStreamCreate(&s));
  void* in[2] = {nullptr, nullptr};
  for (auto& p : in) {
    QTC_CUDA_CHECK(cudaMalloc(&p, in_bytes));
    fill_input<<<4096, 256, 0, s>>>(p, kM * kK, t == DType::kF32 ? 0 : (t == DType::kBF16 ? 1 : 2), 0x1234u + (p == in[1]));
    QTC_CUDA_CHECK(cudaGetLastError());
  }
  {
    cuda::DeviceQuantized q = cuda::allocate_quantized(r, t, kM, kK, ScaleLayout::kCompact, s);
    static const cuda::LaunchOptions launch = launch_options_from_env();
    size_t out_bytes = 0;
    if (q.rowwise) out_bytes += plane_bytes(*q.rowwise);
    if (q.columnwise) out_bytes += plane_bytes(*q.columnwise);
    auto run = [&](int i) {
      const cuda::DeviceMatrixView x{in[i & 1], t, kM, kK};
      if (with_amax)
        cuda::quantize_with_amax_into(x, q, given_amax, given_amax, s, launch);
      else
        cuda::quantize_into(x, q, s, launch);
    };
    run(0);
    run(1);
    QTC_CUDA_CHECK(cudaStreamSynchronize(s));
    Events ev;
    double total = 0.0;
    int i = 0;
    for (auto _ : state) {
      QTC_CUDA_CHECK(cudaEventRecord(ev.a, s));
      run(i++);
      QTC_CUDA_CHECK(cudaEventRecord(ev.b, s));
      QTC_CUDA_CHECK(cudaEventSynchronize(ev.b));
      const double sec = ev.ms() * 1e-3;
      total += sec;
      state.SetIterationTime(sec);
    }
    const double bytes = static_cast<double>(in_bytes + out_bytes);
    const double gbps = bytes * static_cast<double>(state.iterations()) / total / 1e9;
    const std::string te_note = te_peer_row(state, r, t, in, given_amax, total, bytes, copy_rate, s);
    char label[512];
    std::snprintf(label, sizeof(label), "%s %s %lldx%lld; bytes: %.1f MiB read + %.1f MiB written%s%s", r.name().c_str(),
                  std::string(dtype_name(t)).c_str(), static_cast<long long>(kM), static_cast<long long>(kK),
                  static_cast<double>(in_bytes) / 1048576.0, static_cast<double>(out_bytes) / 1048576.0,
                  kind_info(r).global_amax && !with_amax
                      ? " (+ device amax pass: input read again, not counted)"
                      : (with_amax ? " (amax given)" : ""),
                  te_note.c_str());
    state.SetLabel(label);
    state.counters["GBps"] = gbps;
    state.counters["frac_of_copy"] = gbps * 1e9 / copy_rate;
    state.counters["copy_GBps"] = copy_rate / 1e9;
    state.counters["bytes"] = bytes;
    // With the amax computed on the device, the input is read twice: the bytes actually moved.
    const bool amax_pass = kind_info(r).global_amax && !with_amax;
    const double moved = bytes + (amax_pass ? static_cast<double>(in_bytes) : 0.0);
    state.counters["frac_of_copy_moved"] = moved * static_cast<double>(state.iterations()) / total / copy_rate;
  }
  QTC_CUDA_CHECK(cudaStreamSynchronize(s));
  for (auto& p : in) QTC_CUDA_CHECK(cudaFree(p));
  QTC_CUDA_CHECK(cudaStreamDestroy(s));
}

Recipe nvfp4(bool tile2d = false) {
  Recipe r = Recipe::of(Nvfp4Options{.tile_2d = tile2d});
  return r;
}

/// The shared context (qtc::bench::add_bench_context: commit, date, machine, GPU, driver, CUDA, cuBLASLt), plus
/// the facts of this suite: SM count, L2 size, compute capability, shape.
void add_context() {
  int dev = 0, drv = 0, rt = 0;
  cudaDeviceProp prop{};
  const bool have = cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess;
  (void)cudaDriverGetVersion(&drv);
  (void)cudaRuntimeGetVersion(&rt);
#ifdef QTC_HAVE_BENCH_CONTEXT
  qtc::bench::GpuContext g;
  if (have) {
    g.gpu = prop.name;
    int clk = 0;
    (void)cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);
    g.sm_clock_mhz = std::to_string(clk / 1000);
  }
  const char* drv_ver = std::getenv("QTC_DRIVER_VERSION");  // nvidia-smi's string, set by scripts/gpu_run.sh
  g.driver = drv_ver != nullptr && *drv_ver ? std::string(drv_ver) : std::to_string(drv);
  g.cuda_runtime = std::to_string(rt);
  g.cublaslt = std::to_string(cublasLtGetVersion());
  g.gpu_count = "1";
  qtc::bench::add_bench_context(g);
#endif
  if (have) {
#ifndef QTC_HAVE_BENCH_CONTEXT
    benchmark::AddCustomContext("gpu", prop.name);
#endif
    benchmark::AddCustomContext("sm_count", std::to_string(prop.multiProcessorCount));
    benchmark::AddCustomContext("l2_bytes", std::to_string(prop.l2CacheSize));
    benchmark::AddCustomContext("compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor));
  }
  benchmark::AddCustomContext("cuda_driver_api", std::to_string(drv));
  const char* env_commit = std::getenv("QTC_COMMIT");
  benchmark::AddCustomContext("commit", env_commit != nullptr && *env_commit ? env_commit : QTC_GIT_COMMIT);
  benchmark::AddCustomContext("shape", "16384x16384");
  if (const bench::TePeer* te = bench::TePeer::instance())
    benchmark::AddCustomContext("te_lib", te->loaded() ? te->description() : "not loaded: " + te->load_error());
}

void register_all() {
  benchmark::RegisterBenchmark("Copy4GiB", BM_Copy4GiB)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);
  struct Item {
    const char* name;
    Recipe r;
    DType t;
    float given_amax;  ///< 0: device amax pass
  };
  std::vector<Item> items;
  items.push_back({"NVFP4_1x16_BF16", nvfp4(), DType::kBF16, 0.0f});
  items.push_back({"NVFP4_1x16_F32", nvfp4(), DType::kF32, 0.0f});
  items.push_back({"NVFP4_1x16_BF16_amax_given", nvfp4(), DType::kBF16, 1000.0f});
  items.push_back({"NVFP4_1x16_BF16_amax_given_exact", nvfp4(), DType::kBF16, 32.0f});
  items.push_back({"NVFP4_16x16_BF16", nvfp4(true), DType::kBF16, 0.0f});
  items.push_back({"NVFP4_16x16_BF16_amax_given", nvfp4(true), DType::kBF16, 1000.0f});
  {
    Recipe r = nvfp4();
    r.nvfp4().row_scaled = true;
    items.push_back({"NVFP4_rowscaled_BF16", r, DType::kBF16, 0.0f});
  }
  {
    Recipe r = nvfp4();
    r.nvfp4().rht = true;
    items.push_back({"NVFP4_RHT_BF16", r, DType::kBF16, 0.0f});
  }
  {
    Recipe r = nvfp4();
    r.nvfp4().fourover6 = true;
    r.nvfp4().e4m3_max = 256;
    items.push_back({"NVFP4_4over6_BF16", r, DType::kBF16, 0.0f});
  }
  {
    Recipe r = nvfp4();
    r.nvfp4().stochastic = true;
    r.nvfp4().seed = 42;
    items.push_back({"NVFP4_SR_BF16", r, DType::kBF16, 0.0f});
  }
  {
    Recipe r = Recipe::of(Mxfp8Options{});
    items.push_back({"MXFP8_E4M3_rceil_BF16", r, DType::kBF16, 0.0f});
    r.mxfp8().tile_2d = true;
    items.push_back({"MXFP8_E4M3_32x32_BF16", r, DType::kBF16, 0.0f});
  }
  {
    Recipe r = Recipe::of(Fp8BlockOptions{});
    items.push_back({"FP8Block_1x128_BF16", r, DType::kBF16, 0.0f});
    r.fp8_block().tile_2d = true;
    r.set_pow2_scales(true);
    items.push_back({"FP8Block_128x128_pow2_BF16", r, DType::kBF16, 0.0f});
  }
  {
    Recipe r = Recipe::of(Fp8TensorOptions{});
    items.push_back({"FP8Tensor_E4M3_BF16", r, DType::kBF16, 0.0f});
    items.push_back({"FP8Tensor_E4M3_BF16_amax_given", r, DType::kBF16, 1000.0f});
  }
  for (const Item& it : items) {
    benchmark::RegisterBenchmark(it.name, [it](benchmark::State& st) { BM_Quantize(st, it.r, it.t, it.given_amax); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.5);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  add_context();
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
