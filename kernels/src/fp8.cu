/// \file fp8.cu
/// \brief FP8 block scaling (TE_FORMATS.md §3: 1x128 and 128x128 blocks, pow2 scales, eps, F32 scale_inv) and
///        FP8 per-tensor current scaling (§4: one scale from the device global amax). Both planes come from one
///        read of each input tile; the columnwise plane is stored transposed ([K, M]).
#include "device_codec.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"
#include "tile.cuh"

namespace qtc::cuda {
namespace {

using namespace dev;

constexpr int kThreads = 256;

/// TE compute_scale_from_amax (§3.2); profile kTEPyRef gives scale 0 for amax = +inf.
__device__ __forceinline__ float scale_from_amax(float amax, float max_fp8, bool pow2, float eps, float value_for_inf,
                                                 bool pyref) {
  if (amax < eps) amax = eps;
  if (pyref && isinf(amax)) return 0.0f;
  if (isinf(amax) || amax == 0.0f || amax != amax) return 1.0f;
  float scale = __fdiv_rn(max_fp8, amax);
  if (isinf(scale)) scale = value_for_inf;
  if (pow2) scale = bitsf(fbits(scale) & 0xFF800000u);
  return scale;
}

ScaleOut to_dev(const detail::ScaleOutHost& h) { return ScaleOut{h.p, h.mode, h.ld, h.num_kb}; }

// ------------------------------------------------------------------------------------------------------
// FP8 block scaling: one 128x128 tile per CTA (66 KB of shared memory).

constexpr int kBT = 128, kBLD = kBT + 1;

struct BlockK {
  const void* x;
  int64_t M, K;
  bool rowwise, columnwise, e5m2, tile2d, pow2, pyref, vec_ok;
  float eps, value_for_inf, max_fp8;
  uint8_t* row_data;
  ScaleOut row_scale;
  uint8_t* col_data;
  ScaleOut col_scale;
};

__device__ __forceinline__ void store_scale(const ScaleOut& s, int64_t r, int64_t c, float v) {
  reinterpret_cast<float*>(s.p)[scale_index(s, r, c)] = v;
}

template <typename In>
__global__ void __launch_bounds__(kThreads) fp8_block_kernel(BlockK p) {
  extern __shared__ float sm[];  // [128][129]
  __shared__ float red[kThreads / 32];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kBT, c0 = static_cast<int64_t>(blockIdx.x) * kBT;
  load_tile<In, kBT, kBT, kThreads>(sm, static_cast<const In*>(p.x), p.M, p.K, r0, c0, p.vec_ok);
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool pr = p.pyref;
  float scale2d = 1.0f;
  if (p.tile2d) {
    float m = 0.0f;
    for (int i = threadIdx.x; i < kBT * kBT; i += kThreads) m = max_p(m, fabsf(sm[(i >> 7) * kBLD + (i & 127)]), pr);
    m = warp_max(m, pr);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = 0.0f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) m = max_p(m, red[w], pr);
    scale2d = scale_from_amax(m, p.max_fp8, p.pow2, p.eps, p.value_for_inf, pr);
    if (threadIdx.x == 0) {
      const float inv = __fdiv_rn(1.0f, scale2d);
      if (p.rowwise) store_scale(p.row_scale, r0 / kBT, c0 / kBT, inv);
      if (p.columnwise) store_scale(p.col_scale, c0 / kBT, r0 / kBT, inv);
    }
  }
  if (p.rowwise) {
    for (int r = warp; r < kBT; r += kThreads / 32) {
      const int64_t gr = r0 + r;
      if (gr >= p.M) break;
      float v[4];
      float m = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[j] = sm[r * kBLD + lane + 32 * j];
        m = max_p(m, fabsf(v[j]), pr);
      }
      float scale = scale2d;
      if (!p.tile2d) {
        m = warp_max(m, pr);
        scale = scale_from_amax(m, p.max_fp8, p.pow2, p.eps, p.value_for_inf, pr);
        if (lane == 0) store_scale(p.row_scale, gr, c0 / kBT, __fdiv_rn(1.0f, scale));
      }
      uint8_t* dst = p.row_data + gr * p.K;
      const uint32_t q01 = cvt_fp8x2(__fmul_rn(v[0], scale), __fmul_rn(v[1], scale), p.e5m2);
      const uint32_t q23 = cvt_fp8x2(__fmul_rn(v[2], scale), __fmul_rn(v[3], scale), p.e5m2);
      const uint32_t qs[4] = {q01 & 0xFFu, q01 >> 8, q23 & 0xFFu, q23 >> 8};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t gc = c0 + lane + 32 * j;
        if (gc < p.K) dst[gc] = static_cast<uint8_t>(qs[j]);
      }
    }
  }
  if (p.columnwise) {
    for (int c = warp; c < kBT; c += kThreads / 32) {
      const int64_t gk = c0 + c;
      if (gk >= p.K) break;
      float v[4];
      float m = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[j] = sm[(lane + 32 * j) * kBLD + c];
        m = max_p(m, fabsf(v[j]), pr);
      }
      float scale = scale2d;
      if (!p.tile2d) {
        m = warp_max(m, pr);
        scale = scale_from_amax(m, p.max_fp8, p.pow2, p.eps, p.value_for_inf, pr);
        if (lane == 0) store_scale(p.col_scale, gk, r0 / kBT, __fdiv_rn(1.0f, scale));
      }
      uint8_t* dst = p.col_data + gk * p.M;
      const uint32_t q01 = cvt_fp8x2(__fmul_rn(v[0], scale), __fmul_rn(v[1], scale), p.e5m2);
      const uint32_t q23 = cvt_fp8x2(__fmul_rn(v[2], scale), __fmul_rn(v[3], scale), p.e5m2);
      const uint32_t qs[4] = {q01 & 0xFFu, q01 >> 8, q23 & 0xFFu, q23 >> 8};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t gm = r0 + lane + 32 * j;
        if (gm < p.M) dst[gm] = static_cast<uint8_t>(qs[j]);
      }
    }
  }
}

template <typename In>
void run_block(const detail::Fp8BlockParams& h, cudaStream_t s) {
  BlockK p{};
  p.x = h.x;
  p.M = h.M;
  p.K = h.K;
  p.rowwise = h.rowwise;
  p.columnwise = h.columnwise;
  p.e5m2 = h.e5m2;
  p.tile2d = h.tile2d;
  p.pow2 = h.pow2;
  p.pyref = h.pyref;
  p.vec_ok = (reinterpret_cast<uintptr_t>(h.x) % 16 == 0) && ((h.K * sizeof(In)) % 16 == 0);
  p.eps = h.eps;
  p.value_for_inf = h.value_for_inf;
  p.max_fp8 = h.e5m2 ? 57344.0f : 448.0f;
  p.row_data = h.row_data;
  p.row_scale = to_dev(h.row_scale);
  p.col_data = h.col_data;
  p.col_scale = to_dev(h.col_scale);
  if (h.M == 0 || h.K == 0) return;
  constexpr size_t kSmem = sizeof(float) * kBT * kBLD;
  QTC_CUDA_CHECK(cudaFuncSetAttribute(fp8_block_kernel<In>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>((h.K + kBT - 1) / kBT), static_cast<unsigned>((h.M + kBT - 1) / kBT));
  fp8_block_kernel<In><<<grid, kThreads, kSmem, s>>>(p);
  QTC_CUDA_CHECK_LAUNCH();
}

// ------------------------------------------------------------------------------------------------------
// FP8 per-tensor current scaling: 64x64 tiles, rowwise bytes and their transpose.

constexpr int kTT = 64, kTLD = kTT + 1;

struct TensorK {
  const void* x;
  int64_t M, K;
  bool rowwise, columnwise, e5m2, pow2, pyref, vec_ok;
  float eps, max_fp8;
  const float* amax;
  float* scale_inv;
  uint8_t* row_data;
  uint8_t* col_data;
};

template <typename In>
__global__ void __launch_bounds__(kThreads, sizeof(In) == 4 ? 3 : 4) fp8_tensor_kernel(TensorK p) {
  __shared__ float sm[kTT * kTLD];
  const In* x = static_cast<const In*>(p.x);
  const int64_t tiles_x = (p.K + kTT - 1) / kTT, n_tiles = tiles_x * ((p.M + kTT - 1) / kTT);
  const float scale = scale_from_amax(*p.amax, p.max_fp8, p.pow2, p.eps, kFltMax, p.pyref);
  if (blockIdx.x == 0 && threadIdx.x == 0) *p.scale_inv = __fdiv_rn(1.0f, scale);
  const int t = threadIdx.x;
  using Pipe = TilePipe<In, kTT, kTT, kThreads>;
  // Two register buffers: the loads of the next two tiles are in flight while this one is computed.
  Pipe pipe_a, pipe_b;
  const int64_t G = gridDim.x;
  auto fetch = [&](Pipe& pp, int64_t tt) {
    if (tt < n_tiles) pp.fetch(x, p.M, p.K, (tt / tiles_x) * kTT, (tt % tiles_x) * kTT, p.vec_ok);
  };
  auto step = [&](int64_t tile, Pipe& pipe) {
    const int64_t r0 = (tile / tiles_x) * kTT, c0 = (tile % tiles_x) * kTT;
    pipe.commit(sm, x, p.M, p.K, r0, c0, p.vec_ok);
    __syncthreads();
    fetch(pipe, tile + 2 * G);
    if (p.rowwise) {
      const int r = t >> 2, q = t & 3;
      const int64_t gr = r0 + r, gc = c0 + 16 * q;
      if (gr < p.M && gc < p.K) {
        uint32_t w[4];
        const float* src = sm + r * kTLD + 16 * q;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[i] = cvt_fp8x2(__fmul_rn(src[4 * i], scale), __fmul_rn(src[4 * i + 1], scale), p.e5m2) |
                 (cvt_fp8x2(__fmul_rn(src[4 * i + 2], scale), __fmul_rn(src[4 * i + 3], scale), p.e5m2) << 16);
        uint8_t* dst = p.row_data + gr * p.K + gc;
        if ((p.K % 16) == 0)
          __stcs(reinterpret_cast<uint4*>(dst), make_uint4(w[0], w[1], w[2], w[3]));
        else
          for (int i = 0; i < 16 && gc + i < p.K; ++i) dst[i] = static_cast<uint8_t>(w[i >> 2] >> (8 * (i & 3)));
      }
    }
    if (p.columnwise) {
      const int c = t >> 2, g = t & 3;
      const int64_t gk = c0 + c, gm = r0 + 16 * g;
      if (gk < p.K && gm < p.M) {
        uint32_t w[4];
        const float* src = sm + (16 * g) * kTLD + c;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[i] = cvt_fp8x2(__fmul_rn(src[(4 * i) * kTLD], scale), __fmul_rn(src[(4 * i + 1) * kTLD], scale), p.e5m2) |
                 (cvt_fp8x2(__fmul_rn(src[(4 * i + 2) * kTLD], scale), __fmul_rn(src[(4 * i + 3) * kTLD], scale), p.e5m2) << 16);
        uint8_t* dst = p.col_data + gk * p.M + gm;
        if ((p.M % 16) == 0)
          __stcs(reinterpret_cast<uint4*>(dst), make_uint4(w[0], w[1], w[2], w[3]));
        else
          for (int i = 0; i < 16 && gm + i < p.M; ++i) dst[i] = static_cast<uint8_t>(w[i >> 2] >> (8 * (i & 3)));
      }
    }
    __syncthreads();
  };
  int64_t tile = blockIdx.x;
  fetch(pipe_a, tile);
  fetch(pipe_b, tile + G);
  for (; tile < n_tiles; tile += 2 * G) {
    step(tile, pipe_a);
    if (tile + G < n_tiles) step(tile + G, pipe_b);
  }
}

/// An empty tensor still has a scale: TE computes it from amax 0 (raised to eps when eps > 0).
__global__ void fp8_tensor_scale_only_kernel(TensorK p) {
  const float scale = scale_from_amax(*p.amax, p.max_fp8, p.pow2, p.eps, kFltMax, p.pyref);
  *p.scale_inv = __fdiv_rn(1.0f, scale);
}

template <typename In>
void run_tensor(const detail::Fp8TensorParams& h, cudaStream_t s) {
  TensorK p{};
  p.x = h.x;
  p.M = h.M;
  p.K = h.K;
  p.rowwise = h.rowwise;
  p.columnwise = h.columnwise;
  p.e5m2 = h.e5m2;
  p.pow2 = h.pow2;
  p.pyref = h.pyref;
  p.vec_ok = (reinterpret_cast<uintptr_t>(h.x) % 16 == 0) && ((h.K * sizeof(In)) % 16 == 0);
  p.eps = h.eps;
  p.max_fp8 = h.e5m2 ? 57344.0f : 448.0f;
  p.amax = h.amax;
  p.scale_inv = h.scale_inv;
  p.row_data = h.row_data;
  p.col_data = h.col_data;
  if (h.M == 0 || h.K == 0) {
    fp8_tensor_scale_only_kernel<<<1, 1, 0, s>>>(p);
    QTC_CUDA_CHECK_LAUNCH();
    return;
  }
  launch_persistent(fp8_tensor_kernel<In>, ((h.K + kTT - 1) / kTT) * ((h.M + kTT - 1) / kTT), p, s);
}

}  // namespace

namespace detail {
void launch_fp8_block(const Fp8BlockParams& p, cudaStream_t s) {
  switch (p.dtype) {
    case DType::kF32: run_block<float>(p, s); break;
    case DType::kBF16: run_block<__nv_bfloat16>(p, s); break;
    case DType::kF16: run_block<__half>(p, s); break;
    default: QTC_FAIL("fp8 block: input must be F32, BF16 or F16");
  }
}
void launch_fp8_tensor(const Fp8TensorParams& p, cudaStream_t s) {
  switch (p.dtype) {
    case DType::kF32: run_tensor<float>(p, s); break;
    case DType::kBF16: run_tensor<__nv_bfloat16>(p, s); break;
    case DType::kF16: run_tensor<__half>(p, s); break;
    default: QTC_FAIL("fp8 tensor: input must be F32, BF16 or F16");
  }
}
}  // namespace detail

}  // namespace qtc::cuda
