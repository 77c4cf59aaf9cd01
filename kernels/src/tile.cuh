/// \file tile.cuh
/// \brief Shared tile staging: a TR x TC tile of the input, converted exactly to float, in shared memory with a
///        row stride of TC + 1 words (odd), so that both a thread-per-row and a thread-per-column walk are free
///        of bank conflicts. Out-of-range elements read as +0 (TE: out-of-bounds positions count as 0).
#pragma once
#include <algorithm>

#include "device_codec.cuh"
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
    y[c] = bitsf(static_cast<uint32_t>(f64_to_bf16(acc)) << 16);
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
  const int64_t slots = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(n_tiles, slots)));
  kernel<<<grid, 256, 0, s>>>(p);
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace qtc::cuda::dev
