/// \file gemm_cuda.cu
/// \brief Google Benchmark suite of the GPU GEMMs (issue 4, "Benchmarks"): TFLOP/s of qtc's call and its
///        ratio to the matching bare library call on the same data and shape.
///
/// | benchmark          | qtc call                                   | baseline (counter)                         |
/// |--------------------|--------------------------------------------|--------------------------------------------|
/// | Fp8Tensor          | qtc::cuda::gemm, FP8 E4M3 per-tensor, BF16 | bare cuBLASLt FP8 call (frac_of_cublaslt)  |
/// | Fp8Block           | qtc::cuda::gemm, 128x128 W x 1x128 X, BF16 | bare cuBLASLt VEC128/BLK128 (frac_of_cublaslt) |
/// | Nvfp4Emulated      | qtc::cuda::gemm, NVFP4 (BF16 emulation)    | cuBLASLt BF16 GEMM, same shape (frac_of_bf16) |
/// | GroupedRowScaled   | grouped row-scaled NVFP4 fprop, 64 uneven experts, 32768 tokens, N = K = 4096 | one dense NVFP4 GEMM of equal FLOPs (frac_of_dense) |
/// Shapes (M, N, K): 4096³, 8192³, M = 4096 with (N, K) ∈ {(7168, 16384), (4096, 7168), (2112, 7168)}.
/// Timing: CUDA events around batches of back-to-back calls (manual time = mean per call), warm-up outside
/// the timed loop; the baseline is timed the same way (20 calls after 5 warm-ups) in the same process just
/// before. Operands are filled on the
/// device with valid codes (the GEMM's speed does not depend on the values). Not flushed between calls:
/// baseline and qtc see the same cache state.
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "qtc/cuda/check.hpp"
#include "qtc/cuda/gemm.hpp"
#ifdef QTC_HAVE_BENCH_CONTEXT
#include "qtc/bench_context.hpp"
#endif

namespace {

using qtc::DType;
using qtc::Recipe;
using qtc::RecipeKind;
using qtc::ScaleLayout;
using qtc::ScaleType;
using qtc::cuda::DeviceBuffer;
using qtc::cuda::DevicePlane;
using qtc::cuda::DeviceQuantized;

__global__ void fill_bytes(uint8_t* p, int64_t n, uint32_t salt, uint8_t mask, uint8_t base) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ salt;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<uint8_t>(base + (h & mask));
  }
}
__global__ void fill_f32(float* p, int64_t n, float v) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = v;
}

void bytes(DeviceBuffer& b, uint32_t salt, uint8_t mask, uint8_t base) {
  fill_bytes<<<1024, 256>>>(b.as<uint8_t>(), static_cast<int64_t>(b.bytes()), salt, mask, base);
  QTC_CUDA_CHECK_LAUNCH();
}
void floats(DeviceBuffer& b, float v) {
  fill_f32<<<256, 256>>>(b.as<float>(), static_cast<int64_t>(b.bytes() / 4), v);
  QTC_CUDA_CHECK_LAUNCH();
}

/// A [rows, k] operand plane (rowwise) of the recipe, filled on the device.
DeviceQuantized make_operand(const Recipe& r, int64_t rows, int64_t k, uint32_t salt) {
  DeviceQuantized q;
  q.recipe = r;
  q.rows = rows;
  q.cols = k;
  DevicePlane p;
  p.data_rows = rows;
  switch (r.kind) {
    case RecipeKind::kNVFP4:
      p.data_cols = k / 2;
      p.data = DeviceBuffer(static_cast<size_t>(rows * k / 2), nullptr);
      bytes(p.data, salt, 0xFF, 0);
      p.scale_type = ScaleType::kE4M3;
      p.scale_layout = ScaleLayout::kCompact;
      p.scale_rows = rows;
      p.scale_cols = k / 16;
      p.scale = DeviceBuffer(static_cast<size_t>(rows * k / 16), nullptr);
      bytes(p.scale, salt + 1, 0x0F, 0x30);
      p.amax_count = 1;
      p.amax = DeviceBuffer(4, nullptr);
      floats(p.amax, 2688.0f);
      break;
    case RecipeKind::kFP8Block: {
      p.data_cols = k;
      p.data = DeviceBuffer(static_cast<size_t>(rows * k), nullptr);
      bytes(p.data, salt, 0x3F, 0);
      p.scale_type = ScaleType::kF32;
      p.scale_layout = ScaleLayout::kPadded;
      const int64_t kb = (k + 127) / 128, rb = (rows + 127) / 128;
      p.scale_rows = r.block_2d ? rb : kb;                                  // 2D [mb][kb pad 4]; 1D [kb][rows pad 4]
      p.scale_cols = r.block_2d ? (kb + 3) / 4 * 4 : (rows + 3) / 4 * 4;
      p.scale = DeviceBuffer(static_cast<size_t>(p.scale_rows * p.scale_cols) * 4, nullptr);
      floats(p.scale, 1.0f);
      break;
    }
    default:
      p.data_cols = k;
      p.data = DeviceBuffer(static_cast<size_t>(rows * k), nullptr);
      bytes(p.data, salt, 0x3F, 0);
      q.scale_inv = DeviceBuffer(4, nullptr);
      floats(q.scale_inv, 1.0f);
  }
  q.rowwise = std::move(p);
  return q;
}

/// Mean seconds per call of fn over `iters` calls after `warm` warm-ups, with CUDA events.
template <typename F>
double time_calls(F&& fn, int warm = 5, int iters = 20) {
  for (int i = 0; i < warm; ++i) fn();
  cudaEvent_t a, b;
  QTC_CUDA_CHECK(cudaEventCreate(&a));
  QTC_CUDA_CHECK(cudaEventCreate(&b));
  QTC_CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) fn();
  QTC_CUDA_CHECK(cudaEventRecord(b));
  QTC_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  QTC_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 1e3 / iters;
}

/// A bare cuBLASLt call, set up once: the baseline "same call without qtc" (FP8 scalar/block scales).
struct BareLt {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  DeviceBuffer ws{32u << 20, nullptr};
  float alpha = 1.0f, beta = 0.0f;
  const void *a = nullptr, *b = nullptr;
  void* d = nullptr;

  BareLt(cudaDataType at, const void* a_, const void* b_, void* d_, int64_t m, int64_t n, int64_t k, int mode_a,
         int mode_b, const void* sa, const void* sb)
      : a(a_), b(b_), d(d_) {
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn);
    if (sa != nullptr) {
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
      const auto ma = static_cast<cublasLtMatmulMatrixScale_t>(mode_a), mb = static_cast<cublasLtMatmulMatrixScale_t>(mode_b);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb);
      const int8_t fast = 0;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    }
    cublasLtMatrixLayoutCreate(&la, at, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, at, k, n, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    const size_t wsb = ws.bytes();
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &r, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    QTC_CHECK(found > 0, "bare cuBLASLt: no algorithm");
    algo = r.algo;
  }
  void operator()() {
    const cublasStatus_t s =
        cublasLtMatmul(h, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &algo, ws.data(), ws.bytes(), nullptr);
    QTC_CHECK(s == CUBLAS_STATUS_SUCCESS, "bare cuBLASLt matmul failed: ", cublasLtGetStatusName(s));
  }
  ~BareLt() {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
  }
};

enum class Path { kFp8Tensor, kFp8Block, kNvfp4 };

void BM_Gemm(benchmark::State& state, Path path) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const qtc::gating::Feature f = path == Path::kFp8Tensor  ? qtc::gating::Feature::kGemmFp8Tensor
                                 : path == Path::kFp8Block ? qtc::gating::Feature::kGemmFp8Block
                                                           : qtc::gating::Feature::kGemmNvfp4Emulated;
  const qtc::gating::Support s = qtc::cuda::device_supports(f);
  if (!s.supported) {
    state.SkipWithError(s.reason.c_str());
    return;
  }
  try {
    Recipe ra, rb;
    ra.kind = rb.kind = path == Path::kFp8Tensor ? RecipeKind::kFP8Tensor
                        : path == Path::kFp8Block ? RecipeKind::kFP8Block
                                                   : RecipeKind::kNVFP4;
    ra.block_2d = path == Path::kFp8Block;  // weights 128x128, activations 1x128 (TE's recipe)
    const DeviceQuantized a = make_operand(ra, N, K, 1), b = make_operand(rb, M, K, 7);  // fprop: A = W, B = X
    DeviceBuffer d(static_cast<size_t>(M * N) * 2, nullptr);
    qtc::cuda::GemmContext ctx;
    qtc::cuda::DeviceGemmArgs args = qtc::cuda::DeviceGemmArgs::of(qtc::ref::GemmKind::kFprop, DType::kBF16);
    auto qtc_call = [&] { qtc::cuda::gemm(ctx, a, b, args, d.data()); };

    double t_base = 0;
    if (path == Path::kNvfp4) {
      DeviceBuffer a16(static_cast<size_t>(N * K) * 2, nullptr), b16(static_cast<size_t>(M * K) * 2, nullptr);
      bytes(a16, 3, 0x3F, 0x30);  // BF16 bytes: the value does not matter for speed
      bytes(b16, 5, 0x3F, 0x30);
      t_base = time_calls([&] { qtc::cuda::gemm_bf16(ctx, a16.data(), b16.data(), N, M, K, DType::kBF16, d.data()); });
    } else {
      const bool blk = path == Path::kFp8Block;
      BareLt bare(CUDA_R_8F_E4M3, a.rowwise->data.data(), b.rowwise->data.data(), d.data(), N, M, K,
                  blk ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
                  blk ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
                  blk ? a.rowwise->scale.data() : a.scale_inv.data(), blk ? b.rowwise->scale.data() : b.scale_inv.data());
      t_base = time_calls(bare);
    }
    // qtc's call is timed exactly like the baseline: batches of back-to-back calls between two events, so
    // host-side work overlaps the GPU as it does in a training step (a sync per call would add launch latency
    // to qtc only).
    constexpr int kBatch = 10;
    for (int i = 0; i < 5; ++i) qtc_call();
    double total = 0;
    int64_t n = 0;
    for (auto _ : state) {
      const double t = time_calls(qtc_call, 0, kBatch);
      state.SetIterationTime(t);
      total += t;
      ++n;
    }
    const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
    state.counters["TFLOPs"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
    const double t_qtc = total / static_cast<double>(n);
    state.counters[path == Path::kNvfp4 ? "frac_of_bf16" : "frac_of_cublaslt"] = t_base / t_qtc;
    state.counters["baseline_TFLOPs"] = flops / t_base / 1e12;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({4096, 4096, 4096})->Args({8192, 8192, 8192})->Args({4096, 7168, 16384})->Args({4096, 4096, 7168})
      ->Args({4096, 2112, 7168});
  b->ArgNames({"M", "N", "K"})->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
}

BENCHMARK_CAPTURE(BM_Gemm, Fp8Tensor, Path::kFp8Tensor)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Gemm, Fp8Block, Path::kFp8Block)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Gemm, Nvfp4Emulated, Path::kNvfp4)->Apply(shapes);

/// Grouped row-scaled NVFP4 fprop: 64 experts of uneven sizes totalling 32768 tokens, N = K = 4096, against
/// one dense NVFP4 GEMM of equal FLOPs (M = 32768) through the same emulation (frac_of_dense).
void BM_GroupedRowScaled(benchmark::State& state) {
  const qtc::gating::Support s = qtc::cuda::device_supports(qtc::gating::Feature::kGemmGroupedNvfp4RowScaled);
  const qtc::gating::Support e = qtc::cuda::device_supports(qtc::gating::Feature::kGemmNvfp4Emulated);
  if (!s.supported || !e.supported) {
    state.SkipWithError((s.supported ? e.reason : s.reason).c_str());
    return;
  }
  try {
    constexpr int64_t kGroups = 64, kTokens = 32768, N = 4096, K = 4096;
    // uneven sizes: 512 ± a deterministic spread in multiples of 16, summing to 32768
    std::vector<int64_t> sizes(kGroups), offsets(kGroups);
    int64_t total = 0;
    for (int64_t g = 0; g < kGroups; ++g) {
      sizes[g] = 512 + 16 * ((g * 37) % 25 - 12);
      total += sizes[g];
    }
    sizes[kGroups - 1] += kTokens - total;
    for (int64_t g = 0, off = 0; g < kGroups; off += sizes[g], ++g) offsets[g] = off;
    Recipe rx, rw;
    rx.kind = rw.kind = RecipeKind::kNVFP4;
    rx.row_scaled = true;
    DeviceQuantized x = make_operand(rx, kTokens, K, 11);
    x.rowwise->amax_count = kTokens;
    x.rowwise->amax = DeviceBuffer(kTokens * 4, nullptr);
    floats(x.rowwise->amax, 2688.0f);
    std::vector<DeviceQuantized> w;
    std::vector<const DeviceQuantized*> wp;
    for (int64_t g = 0; g < kGroups; ++g) w.push_back(make_operand(rw, N, K, 100 + static_cast<uint32_t>(g)));
    for (const auto& q : w) wp.push_back(&q);
    DeviceBuffer d_sizes(kGroups * 8, nullptr), d_offsets(kGroups * 8, nullptr);
    QTC_CUDA_CHECK(cudaMemcpy(d_sizes.data(), sizes.data(), kGroups * 8, cudaMemcpyHostToDevice));
    QTC_CUDA_CHECK(cudaMemcpy(d_offsets.data(), offsets.data(), kGroups * 8, cudaMemcpyHostToDevice));
    qtc::cuda::GroupedRowsDevice rows{sizes, offsets, kTokens, d_sizes.as<int64_t>(), d_offsets.as<int64_t>()};
    DeviceBuffer d(static_cast<size_t>(kTokens * N) * 2, nullptr);
    qtc::cuda::GemmContext ctx;
    // dense baseline of equal FLOPs: one per-tensor NVFP4 GEMM [32768, 4096] x [4096, 4096]
    const DeviceQuantized xd = make_operand(rw, kTokens, K, 11);
    const qtc::cuda::DeviceGemmArgs args = qtc::cuda::DeviceGemmArgs::of(qtc::ref::GemmKind::kFprop, DType::kBF16);
    const double t_dense = time_calls([&] { qtc::cuda::gemm(ctx, w[0], xd, args, d.data()); }, 3, 10);
    auto call = [&] { qtc::cuda::gemm_nvfp4_row_scaled_grouped_fprop(ctx, wp, x, rows, DType::kBF16, d.data()); };
    for (int i = 0; i < 2; ++i) call();
    double total_t = 0;
    int64_t n = 0;
    for (auto _ : state) {
      const double t = time_calls(call, 0, 3);
      state.SetIterationTime(t);
      total_t += t;
      ++n;
    }
    const double flops = 2.0 * kTokens * N * K;
    state.counters["TFLOPs"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["frac_of_dense"] = t_dense / (total_t / static_cast<double>(n));
    state.counters["dense_TFLOPs"] = flops / t_dense / 1e12;
    // Where the time goes (each part alone, one stream, microseconds per call): the 64 weight
    // dequantizations to BF16 (the emulation's extra traffic: 64 weights instead of 1), the 64 per-group BF16
    // GEMMs into FP32 (small-M GEMMs), and one BF16 GEMM of all tokens into FP32 (what one dense GEMM costs).
    {
      DeviceBuffer w16(static_cast<size_t>(N * K) * 2, nullptr), x16(static_cast<size_t>(kTokens * K) * 2, nullptr);
      DeviceBuffer acc(static_cast<size_t>(kTokens * N) * 4, nullptr);
      const double t_wdq = time_calls([&] {
        for (int64_t g = 0; g < kGroups; ++g) qtc::cuda::nvfp4_plane_to_bf16(*w[g].rowwise, N, K, w16.data(), nullptr);
      }, 1, 3);
      const double t_gemms = time_calls([&] {
        for (int64_t g = 0; g < kGroups; ++g)
          qtc::cuda::gemm_bf16(ctx, w16.data(), x16.as<uint8_t>() + offsets[g] * K * 2, N, sizes[g], K, DType::kF32,
                               acc.as<float>() + offsets[g] * N);
      }, 1, 3);
      const double t_one = time_calls([&] {
        qtc::cuda::gemm_bf16(ctx, w16.data(), x16.data(), N, kTokens, K, DType::kF32, acc.data());
      }, 1, 3);
      state.counters["us_weight_dequant_x64"] = t_wdq * 1e6;
      state.counters["us_group_gemms_f32"] = t_gemms * 1e6;
      state.counters["us_one_gemm_f32"] = t_one * 1e6;
    }
  } catch (const std::exception& ex) {
    state.SkipWithError(ex.what());
  }
}
BENCHMARK(BM_GroupedRowScaled)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
#ifdef QTC_HAVE_BENCH_CONTEXT
  qtc::bench::GpuContext g;
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
    g.gpu = p.name;
    int clk = 0;
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    g.sm_clock_mhz = std::to_string(clk / 1000);
  }
  int v = 0;
  cudaDriverGetVersion(&v);
  g.driver = std::to_string(v);
  cudaRuntimeGetVersion(&v);
  g.cuda_runtime = std::to_string(v);
  g.cublaslt = std::to_string(cublasLtGetVersion());
  g.gpu_count = "1";
  qtc::bench::add_bench_context(g);
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
