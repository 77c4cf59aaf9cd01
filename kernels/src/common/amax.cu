/// \file amax.cu
/// \brief Device amax passes (TE_FORMATS.md §0.5): global max|x|, per row, per column, and the global amax of
///        the bf16 RHT of x^T (§1.9). NaN is ignored (fmaxf) unless the profile propagates it; blocks combine
///        through atomicMax on the float bits (amax >= 0). Outputs are zeroed first, on the stream.
#include "cast_common.cuh"
#include "device_util.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"
#include "tile.cuh"

namespace qtc::cuda {
namespace {

using namespace dev;

constexpr int kThreads = 256;

/// The CTA's largest of every thread's m (NaN kept when `propagate`), combined into *out by atomicMax on the float
/// bits (m >= 0): what each global amax kernel ends with.
__device__ __forceinline__ void block_max_into(float m, bool propagate, float* __restrict__ out) {
  m = warp_max(m, propagate);
  __shared__ float red[kThreads / 32];
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < kThreads / 32 ? red[threadIdx.x] : 0.0f;
    m = warp_max(m, propagate);
    if (threadIdx.x == 0) atomic_max_nonneg(out, m);
  }
}

/// Global amax: grid-stride over 16-byte vectors, one atomic per block.
template <typename In>
__global__ void __launch_bounds__(kThreads) global_amax_kernel(const In* __restrict__ x, int64_t n, bool vec_ok,
                                                               bool propagate, float* __restrict__ out) {
  constexpr int kVec = InputTraits<In>::kVec;
  float m = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  if (vec_ok) {
    const int64_t nv = n / kVec;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    for (; i + 3 * stride < nv; i += 4 * stride) {
      uint4 b[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) b[u] = __ldg(xv + i + u * stride);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const In* e = reinterpret_cast<const In*>(&b[u]);
#pragma unroll
        for (int j = 0; j < kVec; ++j) m = max_p(m, fabsf(InputTraits<In>::to_f32(e[j])), propagate);
      }
    }
    for (; i < nv; i += stride) {
      const uint4 b = __ldg(xv + i);
      const In* e = reinterpret_cast<const In*>(&b);
#pragma unroll
      for (int j = 0; j < kVec; ++j) m = max_p(m, fabsf(InputTraits<In>::to_f32(e[j])), propagate);
    }
    for (int64_t t = nv * kVec + static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < n; t += stride)
      m = max_p(m, fabsf(InputTraits<In>::to_f32(x[t])), propagate);
  } else {
    for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < n; t += stride)
      m = max_p(m, fabsf(InputTraits<In>::to_f32(x[t])), propagate);
  }
  block_max_into(m, propagate, out);
}

/// Global amax of a BF16/F16 tensor with n % 8 == 0 and 16-byte alignment, for the pipelined casts
/// (AmaxParams::packed_reverse): |x| by clearing the sign bits, max on the packed words (max.{bf16x2,f16x2}: exact,
/// as both types convert to float exactly; NaN ignored from a 0 start, or propagated with .NaN), one float fold per
/// thread at the end (about 1 instruction per element against ~3). The vectors are visited from the last to the
/// first, so that the tensor's first rows are the most recently read when the cast starts on them: those still
/// in L2 are not read from DRAM again. The maximum does not depend on the order.
template <typename In, bool kNan>
__global__ void __launch_bounds__(kThreads) global_amax_packed_kernel(const In* __restrict__ x, int64_t n, float* __restrict__ out) {
  using P = Packed16<In>;
  const int64_t nv = n / 8, stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const uint4* last = reinterpret_cast<const uint4*>(x) + (nv - 1);  // vector j is last[-j]
  uint32_t acc[4] = {0u, 0u, 0u, 0u};
  auto take = [&](const uint4& b) {
    acc[0] = P::max2(acc[0], b.x & kAbs2, kNan);
    acc[1] = P::max2(acc[1], b.y & kAbs2, kNan);
    acc[2] = P::max2(acc[2], b.z & kAbs2, kNan);
    acc[3] = P::max2(acc[3], b.w & kAbs2, kNan);
  };
  int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + 3 * stride < nv; i += 4 * stride) {
    uint4 b[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) b[u] = __ldg(last - (i + u * stride));
#pragma unroll
    for (int u = 0; u < 4; ++u) take(b[u]);
  }
  for (; i < nv; i += stride) take(__ldg(last - i));
  const uint32_t a = P::max2(P::max2(acc[0], acc[1], kNan), P::max2(acc[2], acc[3], kNan), kNan);
  block_max_into(max_p(P::lo(a), P::hi(a), kNan), kNan, out);
}

constexpr int kTR = 64, kTC = 64, kLD = kTC + 1;

/// Per-row / per-column / RHT amax over 64x64 tiles (also the global amax when asked).
template <typename In>
__global__ void __launch_bounds__(kThreads) tile_amax_kernel(detail::AmaxParams p, bool vec_ok) {
  __shared__ float sm[kTR * kLD];
  __shared__ float colpart[4][kTC];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTR, c0 = static_cast<int64_t>(blockIdx.x) * kTC;
  load_tile<In, kTR, kTC, kThreads>(sm, static_cast<const In*>(p.x), p.rows, p.cols, r0, c0, vec_ok);
  __syncthreads();
  const bool pr = p.nan_amax;
  const int t = threadIdx.x;
  float gmax = 0.0f;
  {  // rows: thread (r = t/4, quarter t%4)
    const int r = t >> 2, q = t & 3;
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) m = max_p(m, fabsf(sm[r * kLD + q * 16 + i]), pr);
    m = max_p(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1), pr);
    m = max_p(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2), pr);
    gmax = m;
    if (p.per_row != nullptr && q == 0 && r0 + r < p.rows) atomic_max_nonneg(p.per_row + r0 + r, m);
  }
  if (p.per_col != nullptr) {  // columns: thread (c = t%64, part t/64)
    const int c = t & 63, g = t >> 6;
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) m = max_p(m, fabsf(sm[(g * 16 + i) * kLD + c]), pr);
    colpart[g][c] = m;
    __syncthreads();
    if (t < kTC && c0 + t < p.cols) {
      float mm = max_p(max_p(colpart[0][t], colpart[1][t], pr), max_p(colpart[2][t], colpart[3][t], pr), pr);
      atomic_max_nonneg(p.per_col + c0 + t, mm);
    }
  }
  __shared__ float red[2][kThreads / 32];
  float rmax = 0.0f;
  if (p.rht_global != nullptr) {  // RHT: thread (column c = t/4, 16-row group g = t%4)
    const int c = t >> 2, g = t & 3;
    float xin[16], y[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) xin[i] = sm[(g * 16 + i) * kLD + c];
    rht16(xin, y, p.rht_sign_mask);
#pragma unroll
    for (int i = 0; i < 16; ++i) rmax = max_p(rmax, fabsf(y[i]), pr);
  }
  gmax = warp_max(gmax, pr);
  rmax = warp_max(rmax, pr);
  if ((t & 31) == 0) {
    red[0][t >> 5] = gmax;
    red[1][t >> 5] = rmax;
  }
  __syncthreads();
  if (t < 32) {
    gmax = warp_max(t < kThreads / 32 ? red[0][t] : 0.0f, pr);
    rmax = warp_max(t < kThreads / 32 ? red[1][t] : 0.0f, pr);
    if (t == 0) {
      if (p.global != nullptr) atomic_max_nonneg(p.global, gmax);
      if (p.rht_global != nullptr) atomic_max_nonneg(p.rht_global, rmax);
    }
  }
}

__global__ void fill_kernel(float* p, int64_t n, float v) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = v;
}

template <typename In>
void run(const detail::AmaxParams& p, cudaStream_t s) {
  const int64_t n = p.rows * p.cols;
  const bool vec_ok = (reinterpret_cast<uintptr_t>(p.x) % 16 == 0) && ((p.cols * sizeof(In)) % 16 == 0);
  if (n == 0) return;
  if (p.per_row == nullptr && p.per_col == nullptr && p.rht_global == nullptr) {
    if (p.global == nullptr) return;
    int dev = 0, sms = 0;
    QTC_CUDA_CHECK(cudaGetDevice(&dev));
    QTC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int64_t want = (n / InputTraits<In>::kVec + kThreads - 1) / kThreads;
    int64_t slots = static_cast<int64_t>(sms) * 8;
    if (const int64_t cap = detail::grid_stride_cap(); cap > 0) slots = std::min(slots, cap);
    const int grid = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, slots)));
    if constexpr (sizeof(In) == 2) {
      if (p.packed_reverse && vec_ok) {
        auto kernel = p.nan_amax ? global_amax_packed_kernel<In, true> : global_amax_packed_kernel<In, false>;
        kernel<<<grid, kThreads, 0, s>>>(static_cast<const In*>(p.x), n, p.global);
        QTC_CUDA_CHECK_LAUNCH();
        return;
      }
    }
    global_amax_kernel<In><<<grid, kThreads, 0, s>>>(static_cast<const In*>(p.x), n, vec_ok, p.nan_amax, p.global);
    QTC_CUDA_CHECK_LAUNCH();
    return;
  }
  const dim3 grid(static_cast<unsigned>((p.cols + kTC - 1) / kTC), static_cast<unsigned>((p.rows + kTR - 1) / kTR));
  tile_amax_kernel<In><<<grid, kThreads, 0, s>>>(p, vec_ok);
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace

namespace detail {
void launch_fill(float* p, int64_t n, float v, cudaStream_t s) {
  if (n <= 0) return;
  fill_kernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 4096)), 256, 0, s>>>(p, n, v);
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_amax(const AmaxParams& p, cudaStream_t s) {
  if (p.global) QTC_CUDA_CHECK(cudaMemsetAsync(p.global, 0, sizeof(float), s));
  if (p.per_row) QTC_CUDA_CHECK(cudaMemsetAsync(p.per_row, 0, sizeof(float) * p.rows, s));
  if (p.per_col) QTC_CUDA_CHECK(cudaMemsetAsync(p.per_col, 0, sizeof(float) * p.cols, s));
  if (p.rht_global) QTC_CUDA_CHECK(cudaMemsetAsync(p.rht_global, 0, sizeof(float), s));
  dev::dispatch_input(p.dtype, "amax", [&](auto in) { run<typename decltype(in)::type>(p, s); });
}
}  // namespace detail

}  // namespace qtc::cuda
