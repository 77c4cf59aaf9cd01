/// \file tile.cuh
/// \brief Shared tile staging: a TR x TC tile of the input, converted exactly to float, in shared memory with a
///        row stride of TC + 1 words (odd), so that both a thread-per-row and a thread-per-column walk are free
///        of bank conflicts. Out-of-range elements read as +0 (TE: out-of-bounds positions count as 0).
#pragma once
#include <algorithm>

#include "device_util.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"

namespace qtc::cuda::dev {

template <typename In, int TR, int TC, int kThreads>
__device__ __forceinline__ void load_tile(float* sm, const In* __restrict__ x, int64_t M, int64_t K, int64_t r0,
                                          int64_t c0, bool vec_ok) {
  constexpr int LD = TC + 1;
  constexpr int kVec = InputTraits<In>::kVec;
  if (vec_ok) {
    constexpr int kVecPerRow = TC / kVec;
    constexpr int kTotal = TR * kVecPerRow;
    constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
    uint4 buf[kIters];
    // All loads first (independent, in flight together), then the conversions and shared stores.
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int v = threadIdx.x + it * kThreads;
      const int r = v / kVecPerRow, cv = v % kVecPerRow;
      const int64_t gr = r0 + r, gc = c0 + static_cast<int64_t>(cv) * kVec;
      if (v < kTotal && gr < M && gc < K)
        buf[it] = __ldg(reinterpret_cast<const uint4*>(x + gr * K + gc));
      else
        buf[it] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int v = threadIdx.x + it * kThreads;
      if (v >= kTotal) break;
      const int r = v / kVecPerRow, cv = v % kVecPerRow;
      const In* e = reinterpret_cast<const In*>(&buf[it]);
      float* dst = sm + r * LD + cv * kVec;
#pragma unroll
      for (int j = 0; j < kVec; ++j) dst[j] = InputTraits<In>::to_f32(e[j]);
    }
  } else {
    for (int v = threadIdx.x; v < TR * TC; v += kThreads) {
      const int r = v / TC, c = v % TC;
      const int64_t gr = r0 + r, gc = c0 + c;
      sm[r * LD + c] = (gr < M && gc < K) ? InputTraits<In>::to_f32(x[gr * K + gc]) : 0.0f;
    }
  }
}

/// Software-pipelined tile staging for persistent kernels: fetch() issues the 16-byte global loads of a tile
/// into registers (they stay in flight while the previous tile is computed), commit() converts them into the
/// shared tile. Shapes whose rows are not 16-byte aligned fall back to direct loads in commit().
template <typename In, int TR, int TC, int kThreads>
struct TilePipe {
  static constexpr int kVec = InputTraits<In>::kVec;
  static constexpr int kVecPerRow = TC / kVec;
  static constexpr int kTotal = TR * kVecPerRow;
  static constexpr int kIters = (kTotal + kThreads - 1) / kThreads;
  uint4 buf[kIters];

  __device__ __forceinline__ void fetch(const In* __restrict__ x, int64_t M, int64_t K, int64_t r0, int64_t c0,
                                        bool vec_ok) {
    if (!vec_ok) return;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int v = threadIdx.x + it * kThreads;
      const int r = v / kVecPerRow, cv = v % kVecPerRow;
      const int64_t gr = r0 + r, gc = c0 + static_cast<int64_t>(cv) * kVec;
      if (v < kTotal && gr < M && gc < K)
        buf[it] = __ldcs(reinterpret_cast<const uint4*>(x + gr * K + gc));
      else
        buf[it] = make_uint4(0, 0, 0, 0);
    }
  }
  __device__ __forceinline__ void commit(float* sm, const In* __restrict__ x, int64_t M, int64_t K, int64_t r0,
                                         int64_t c0, bool vec_ok) {
    constexpr int LD = TC + 1;
    if (!vec_ok) {
      for (int v = threadIdx.x; v < TR * TC; v += kThreads) {
        const int r = v / TC, c = v % TC;
        const int64_t gr = r0 + r, gc = c0 + c;
        sm[r * LD + c] = (gr < M && gc < K) ? InputTraits<In>::to_f32(x[gr * K + gc]) : 0.0f;
      }
      return;
    }
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int v = threadIdx.x + it * kThreads;
      if (v >= kTotal) break;
      const int r = v / kVecPerRow, cv = v % kVecPerRow;
      const In* e = reinterpret_cast<const In*>(&buf[it]);
      float* dst = sm + r * LD + cv * kVec;
#pragma unroll
      for (int j = 0; j < kVec; ++j) dst[j] = InputTraits<In>::to_f32(e[j]);
    }
  }
};

/// The persistent tile loop of the tiled kernels (nvfp4_kernel.cuh, mxfp8.cu, fp8.cu's tensor kernel): the M x K
/// input is cut into TR x TC tiles and CTA b walks tiles b, b + G, b + 2G, ... (G = gridDim.x). Two TilePipe register buffers keep the loads
/// of the next two tiles in flight while one is computed: each step commits its tile into the shared tile `sm`,
/// synchronizes, issues the loads of the tile 2G ahead, calls body(r0, c0) (the tile's first row and column) and
/// synchronizes again before the shared tile is overwritten.
template <typename In, int TR, int TC, int kThreads, typename Body>
__device__ __forceinline__ void for_each_tile(float* sm, const In* __restrict__ x, int64_t M, int64_t K, bool vec_ok,
                                              Body&& body) {
  using Pipe = TilePipe<In, TR, TC, kThreads>;
  const int64_t tiles_x = (K + TC - 1) / TC, n_tiles = tiles_x * ((M + TR - 1) / TR);
  const int64_t G = gridDim.x;
  Pipe pipe_a, pipe_b;
  auto fetch = [&](Pipe& pp, int64_t tt) {
    if (tt < n_tiles) pp.fetch(x, M, K, (tt / tiles_x) * TR, (tt % tiles_x) * TC, vec_ok);
  };
  auto step = [&](int64_t tile, Pipe& pipe) {
    const int64_t r0 = (tile / tiles_x) * TR, c0 = (tile % tiles_x) * TC;
    pipe.commit(sm, x, M, K, r0, c0, vec_ok);
    __syncthreads();
    fetch(pipe, tile + 2 * G);
    body(r0, c0);
    __syncthreads();  // the shared tile is overwritten by the next commit
  };
  int64_t tile = blockIdx.x;
  fetch(pipe_a, tile);
  fetch(pipe_b, tile + G);
  for (; tile < n_tiles; tile += 2 * G) {
    step(tile, pipe_a);
    if (tile + G < n_tiles) step(tile + G, pipe_b);
  }
}

/// Sign of RHT row r: -1 iff bit r of the mask is set; H[r][c] = (-1)^popcount(r & c) / 4 (TE_FORMATS.md §1.9).
__device__ __forceinline__ double rht_coef(int r, int c, uint32_t mask) {
  const int neg = ((__popc(static_cast<unsigned>(r & c)) & 1) ^ ((mask >> r) & 1));
  return neg ? -0.25 : 0.25;
}

/// y[c] = bf16_RN(sum_r x[r] * s_r * H[r][c]) for c = 0..15, the sum exact in double, rounded once
/// (reference rht_transform). Returns the bf16-rounded values as floats.
__device__ __forceinline__ void rht16(const float x[16], float y[16], uint32_t mask) {
#pragma unroll
  for (int c = 0; c < 16; ++c) {
    double acc = 0.0;
#pragma unroll
    for (int r = 0; r < 16; ++r) acc = __dadd_rn(acc, __dmul_rn(static_cast<double>(x[r]), rht_coef(r, c, mask)));
    y[c] = bits_f32(static_cast<uint32_t>(f64_to_bf16(acc)) << 16);
  }
}

/// The element type tag dispatch_input passes: typename decltype(tag)::type is float, __nv_bfloat16 or __half.
template <typename T>
struct InputType {
  using type = T;
};

/// The one input-dtype dispatcher of the launchers: fn(InputType<T>{}) with T the device element type of an F32,
/// BF16 or F16 input; any other type is refused with a message naming the quantizer `what`.
template <typename Fn>
void dispatch_input(DType t, const char* what, Fn&& fn) {
  switch (t) {
    case DType::kF32: fn(InputType<float>{}); return;
    case DType::kBF16: fn(InputType<__nv_bfloat16>{}); return;
    case DType::kF16: fn(InputType<__half>{}); return;
    default: QTC_FAIL(what, ": input must be F32, BF16 or F16");
  }
}

/// Launches a persistent tile kernel (256 threads, static shared memory): one CTA per resident slot, at most
/// one per tile; each CTA walks tiles blockIdx.x, blockIdx.x + gridDim.x, ...
template <typename P>
void launch_persistent(void (*kernel)(P), int64_t n_tiles, const P& p, cudaStream_t s) {
  int dev = 0, sms = 0, per_sm = 0;
  QTC_CUDA_CHECK(cudaGetDevice(&dev));
  QTC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  QTC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, 0));
  int64_t slots = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  if (const int64_t cap = detail::grid_stride_cap(); cap > 0) slots = std::min(slots, cap);
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(n_tiles, slots)));
  kernel<<<grid, 256, 0, s>>>(p);
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace qtc::cuda::dev
