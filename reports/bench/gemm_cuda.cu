/// \file gemm_cuda.cu
/// \brief Google Benchmark suite of the GPU GEMMs (issue 4, "Benchmarks"): TFLOP/s of qtc's call and its
///        ratio to the matching bare library call on the same data and shape.
///
/// | benchmark          | qtc call                                   | baseline (counter)                         |
/// |--------------------|--------------------------------------------|--------------------------------------------|
/// | Fp8Tensor          | qtc::cuda::gemm, FP8 E4M3 per-tensor, BF16 | bare cuBLASLt FP8 call (frac_of_cublaslt)  |
/// | Fp8Block           | qtc::cuda::gemm, 128x128 W x 1x128 X, BF16 | bare cuBLASLt VEC128/BLK128 (frac_of_cublaslt) |
/// | Nvfp4Emulated      | qtc::cuda::gemm, NVFP4 (BF16 emulation)    | cuBLASLt BF16 GEMM, same shape (frac_of_bf16) |
/// | GroupedRowScaled   | grouped row-scaled NVFP4 fprop, device group sizes, 8/64/128 uneven experts, 32768 tokens, N = K = 4096 (cached / per-call weights, graph replay) | one dense cuBLASLt BF16 GEMM of equal FLOPs (frac_of_dense) |
/// Shapes (M, N, K): 4096³, 8192³, M = 4096 with (N, K) ∈ {(7168, 16384), (4096, 7168), (2112, 7168)}.
/// Nvfp4Emulated also reports its own pass alone: us_dequant (both operands NVFP4 -> BF16), dequant_TBps (bytes
/// read + written over that time) and us_bf16_gemm (the baseline's time).
/// Timing: CUDA events around batches of back-to-back calls (manual time = mean per call), warm-up outside
/// the timed loop; the baseline is timed the same way (20 calls after 5 warm-ups) in the same process just
/// before. Operands are filled on the
/// device with valid codes (the GEMM's speed does not depend on the values). Not flushed between calls:
/// baseline and qtc see the same cache state.
#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
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
using qtc::Fp8BlockOptions;
using qtc::Fp8TensorOptions;
using qtc::Nvfp4Options;
using qtc::Recipe;
using qtc::RecipeKind;
using qtc::RecipeOptions;
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
  switch (r.kind()) {
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
      p.scale_rows = r.is_2d() ? rb : kb;                                  // 2D [mb][kb pad 4]; 1D [kb][rows pad 4]
      p.scale_cols = r.is_2d() ? (kb + 3) / 4 * 4 : (rows + 3) / 4 * 4;
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
double time_calls(F&& fn, int warm = 5, int iters = 20, cudaStream_t stream = nullptr) {
  for (int i = 0; i < warm; ++i) fn();
  cudaEvent_t a, b;
  QTC_CUDA_CHECK(cudaEventCreate(&a));
  QTC_CUDA_CHECK(cudaEventCreate(&b));
  QTC_CUDA_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < iters; ++i) fn();
  QTC_CUDA_CHECK(cudaEventRecord(b, stream));
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
    // FP8 block: weights 128x128, activations 1x128 (TE's recipe)
    const RecipeOptions oa = path == Path::kFp8Tensor ? RecipeOptions(Fp8TensorOptions{})
                             : path == Path::kFp8Block ? RecipeOptions(Fp8BlockOptions{.tile_2d = true})
                                                       : RecipeOptions(Nvfp4Options{});
    const RecipeOptions ob = path == Path::kFp8Tensor ? RecipeOptions(Fp8TensorOptions{})
                             : path == Path::kFp8Block ? RecipeOptions(Fp8BlockOptions{})
                                                       : RecipeOptions(Nvfp4Options{});
    Recipe ra = Recipe::of(oa), rb = Recipe::of(ob);
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
    if (path == Path::kNvfp4) {  // the emulation's own pass alone: both operands NVFP4 -> BF16 (one launch each here)
      DeviceBuffer a16(static_cast<size_t>(N * K) * 2, nullptr), b16(static_cast<size_t>(M * K) * 2, nullptr);
      const double t_deq = time_calls([&] {
        qtc::cuda::nvfp4_plane_to_bf16(*a.rowwise, N, K, a16.data(), nullptr);
        qtc::cuda::nvfp4_plane_to_bf16(*b.rowwise, M, K, b16.data(), nullptr);
      });
      state.counters["us_dequant"] = t_deq * 1e6;
      state.counters["dequant_TBps"] = static_cast<double>(M + N) * static_cast<double>(K) * (0.5 + 1.0 / 16 + 2) / t_deq / 1e12;
      state.counters["us_bf16_gemm"] = t_base * 1e6;
    }
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

/// Grouped row-scaled NVFP4 fprop with device group sizes (gemm_nvfp4_row_scaled_grouped_fprop_device): E experts
/// of uneven sizes (multiples of 16 around 32768/E) totalling 32768 tokens, N = K = 4096, BF16 output, against one
/// dense cuBLASLt BF16 GEMM of equal FLOPs ([32768, 4096] x [4096, 4096], BF16 out: frac_of_dense). Variants:
///   cached   the experts' weights dequantized once into a GroupedWeightsBf16 the caller owns (per step)
///   percall  the NVFP4 weights dequantized on every call (only the groups with tokens, decided on the device)
///   graph    the cached call captured once in a CUDA graph, replayed (us_eager: the same call launched eagerly)
/// Breakdown counters (each part alone, microseconds per call): us_x_dequant (all tokens to BF16), us_w_dequant
/// (every weight to BF16, what percall adds), us_gemm_epilogue (the rest of the cached call: row factors, vectors,
/// the grouped GEMM with the fused epilogue); x_dequant_TBps / w_dequant_TBps: those passes' bytes read + written
/// (0.5625 B in, 2 B out per element) over their time.
enum class GroupedMode { kCached, kPerCall, kGraph };

void BM_GroupedRowScaled(benchmark::State& state, GroupedMode mode) {
  const qtc::gating::GroupedPath gp = qtc::gating::grouped_row_scaled_path(qtc::cuda::device_capability());
  if (!gp.engine) {
    state.SkipWithError(("no device-driven grouped engine: " + gp.why).c_str());
    return;
  }
  struct OwnStream {  // declared before every buffer: they free while it lives
    cudaStream_t s = nullptr;
    OwnStream() { QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
    ~OwnStream() {
      (void)cudaDeviceSynchronize();
      (void)cudaStreamDestroy(s);
    }
  } stream;
  try {
    const int64_t kGroups = state.range(0);
    constexpr int64_t kTokens = 32768, N = 4096, K = 4096;
    std::vector<int64_t> sizes(kGroups), offsets(kGroups);
    int64_t total = 0;
    const int64_t avg = kTokens / kGroups, spread = std::min<int64_t>(12, avg / 32);
    for (int64_t g = 0; g < kGroups; ++g) {
      sizes[g] = avg + 16 * ((g * 37) % (2 * spread + 1) - spread);
      total += sizes[g];
    }
    sizes[kGroups - 1] += kTokens - total;
    for (int64_t g = 0, off = 0; g < kGroups; off += sizes[g], ++g) offsets[g] = off;
    Recipe rx = Recipe::of(Nvfp4Options{.row_scaled = true}), rw;
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
    qtc::cuda::GroupedRowsOnDevice rows{kGroups, kTokens, d_sizes.as<int64_t>(), d_offsets.as<int64_t>(), 1};
    DeviceBuffer d(static_cast<size_t>(kTokens * N) * 2, nullptr);
    QTC_CUDA_CHECK(cudaDeviceSynchronize());  // operands filled on the legacy stream, used on ours
    qtc::cuda::GemmContext ctx(stream.s);
    const cudaStream_t st = stream.s;
    qtc::cuda::GroupedWeightsBf16 cache = qtc::cuda::allocate_grouped_weights(kGroups, N, K, st);
    qtc::cuda::dequantize_grouped_weights_into(ctx, wp, cache);
    // dense baseline of equal FLOPs: one cuBLASLt BF16 GEMM [32768, 4096] x [4096, 4096] -> BF16
    DeviceBuffer a16(static_cast<size_t>(N * K) * 2, nullptr), b16(static_cast<size_t>(kTokens * K) * 2, nullptr);
    bytes(a16, 3, 0x3F, 0x30);
    bytes(b16, 5, 0x3F, 0x30);
    QTC_CUDA_CHECK(cudaDeviceSynchronize());
    const double t_dense = time_calls(
        [&] { qtc::cuda::gemm_bf16(ctx, a16.data(), b16.data(), N, kTokens, K, DType::kBF16, d.data()); }, 3, 10, st);
    const qtc::cuda::DeviceGemmArgs args = qtc::cuda::DeviceGemmArgs::of(qtc::ref::GemmKind::kFprop, DType::kBF16);
    auto cached = [&] { qtc::cuda::gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, cache, x, rows, args, d.data()); };
    auto percall = [&] { qtc::cuda::gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, wp, x, rows, args, d.data()); };
    for (int i = 0; i < 2; ++i) mode == GroupedMode::kPerCall ? percall() : cached();
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (mode == GroupedMode::kGraph) {  // the context has run the shape: its scratch is sized outside capture
      QTC_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      cached();
      QTC_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
      QTC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    }
    auto launch_graph = [&] { QTC_CUDA_CHECK(cudaGraphLaunch(exec, st)); };
    double total_t = 0;
    int64_t n = 0;
    for (auto _ : state) {
      const double t = mode == GroupedMode::kGraph    ? time_calls(launch_graph, 0, 5, st)
                       : mode == GroupedMode::kPerCall ? time_calls(percall, 0, 3, st)
                                                       : time_calls(cached, 0, 5, st);
      state.SetIterationTime(t);
      total_t += t;
      ++n;
    }
    const double t_call = total_t / static_cast<double>(n);
    const double flops = 2.0 * kTokens * N * K;
    state.counters["TFLOPs"] = benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["frac_of_dense"] = t_dense / t_call;
    state.counters["dense_TFLOPs"] = flops / t_dense / 1e12;
    state.counters["us_dense_bf16"] = t_dense * 1e6;
    if (mode == GroupedMode::kGraph) {
      const double t_eager = time_calls(cached, 1, 5, st);
      state.counters["us_eager"] = t_eager * 1e6;
      state.counters["eager_over_graph"] = t_eager / t_call;
      QTC_CUDA_CHECK(cudaGraphExecDestroy(exec));
      QTC_CUDA_CHECK(cudaGraphDestroy(graph));
    }
    if (mode == GroupedMode::kCached) {
      DeviceBuffer x16(static_cast<size_t>(kTokens * K) * 2, st);
      const double t_x =
          time_calls([&] { qtc::cuda::nvfp4_plane_to_bf16(*x.rowwise, kTokens, K, x16.data(), st); }, 1, 5, st);
      const double t_w = time_calls([&] { qtc::cuda::dequantize_grouped_weights_into(ctx, wp, cache); }, 1, 3, st);
      state.counters["us_x_dequant"] = t_x * 1e6;
      state.counters["us_w_dequant"] = t_w * 1e6;
      state.counters["w_dequant_TBps"] = static_cast<double>(kGroups * N * K) * (0.5 + 1.0 / 16 + 2) / t_w / 1e12;
      state.counters["x_dequant_TBps"] = static_cast<double>(kTokens * K) * (0.5 + 1.0 / 16 + 2) / t_x / 1e12;
      state.counters["us_gemm_epilogue"] = (t_call - t_x) * 1e6;
    }
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  } catch (const std::exception& ex) {
    state.SkipWithError(ex.what());
  }
}
void experts(benchmark::internal::Benchmark* b) {
  b->Arg(64)->Arg(8)->Arg(128)->ArgNames({"experts"})->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
}
BENCHMARK_CAPTURE(BM_GroupedRowScaled, Cached, GroupedMode::kCached)->Apply(experts);
BENCHMARK_CAPTURE(BM_GroupedRowScaled, PerCall, GroupedMode::kPerCall)->Apply(experts);
BENCHMARK_CAPTURE(BM_GroupedRowScaled, Graph, GroupedMode::kGraph)->Arg(64)->ArgNames({"experts"})->UseManualTime()
    ->Unit(benchmark::kMicrosecond)->MinTime(0.2);

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
