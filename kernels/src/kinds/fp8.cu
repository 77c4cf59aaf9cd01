/// \file fp8.cu
/// \brief FP8 block scaling (TE_FORMATS.md §3: 1x128 and 128x128 blocks, pow2 scales, eps, F32 scale_inv) and
///        FP8 per-tensor current scaling (§4: one scale from the device global amax). Both planes come from one
///        read of each input tile; the columnwise plane is stored transposed ([K, M]).
///        BF16/F16 inputs whose rows are 16-byte aligned take fp8_fast_kernel (all three modes): 128x128 tiles
///        held in registers, the transposed plane staged as FP8 bytes in shared memory and stored 16 B per thread.
#include "dequantize.cuh"
#include "cast_common.cuh"
#include "device_util.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"
#include "tile.cuh"
#include "fp8_common.cuh"

namespace qtc::cuda {
namespace {

using namespace dev;

constexpr int kThreads = 256;

using detail::QuantizeArgs;

// ------------------------------------------------------------------------------------------------------
// FP8 block scaling: one 128x128 tile per CTA (66 KB of shared memory).

constexpr int kBT = 128, kBLD = kBT + 1;


template <typename In>
__global__ void __launch_bounds__(kThreads) fp8_block_kernel(QuantizeArgs p) {
  extern __shared__ float sm[];  // [128][129]
  __shared__ float red[kThreads / 32];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kBT, c0 = static_cast<int64_t>(blockIdx.x) * kBT;
  load_tile<In, kBT, kBT, kThreads>(sm, static_cast<const In*>(p.x), p.M, p.K, r0, c0, p.vec_ok);
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool pr = p.rules.nan_amax;  // rule nan_amax: NaN propagates into the block amax
  float scale2d = 1.0f;
  if (p.fp8_block.tile_2d) {
    float m = 0.0f;
    for (int i = threadIdx.x; i < kBT * kBT; i += kThreads) m = max_p(m, fabsf(sm[(i >> 7) * kBLD + (i & 127)]), pr);
    m = warp_max(m, pr);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = 0.0f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) m = max_p(m, red[w], pr);
    scale2d = fp8_scale(m, p);
    if (threadIdx.x == 0) {
      const float inv = __fdiv_rn(1.0f, scale2d);
      if (p.rowwise) store_scale(p.row_scale, r0 / kBT, c0 / kBT, inv, p.fp8_block.ue8m0_scales);
      if (p.columnwise) store_scale(p.col_scale, c0 / kBT, r0 / kBT, inv, p.fp8_block.ue8m0_scales);
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
      if (!p.fp8_block.tile_2d) {
        m = warp_max(m, pr);
        scale = fp8_scale(m, p);
        if (lane == 0) store_scale(p.row_scale, gr, c0 / kBT, __fdiv_rn(1.0f, scale), p.fp8_block.ue8m0_scales);
      }
      uint8_t* dst = p.row_data + gr * p.K;
      const uint32_t q01 = cvt_fp8x2(__fmul_rn(v[0], scale), __fmul_rn(v[1], scale), e5m2_of(p));
      const uint32_t q23 = cvt_fp8x2(__fmul_rn(v[2], scale), __fmul_rn(v[3], scale), e5m2_of(p));
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
      if (!p.fp8_block.tile_2d) {
        m = warp_max(m, pr);
        scale = fp8_scale(m, p);
        if (lane == 0) store_scale(p.col_scale, gk, r0 / kBT, __fdiv_rn(1.0f, scale), p.fp8_block.ue8m0_scales);
      }
      uint8_t* dst = p.col_data + gk * p.M;
      const uint32_t q01 = cvt_fp8x2(__fmul_rn(v[0], scale), __fmul_rn(v[1], scale), e5m2_of(p));
      const uint32_t q23 = cvt_fp8x2(__fmul_rn(v[2], scale), __fmul_rn(v[3], scale), e5m2_of(p));
      const uint32_t qs[4] = {q01 & 0xFFu, q01 >> 8, q23 & 0xFFu, q23 >> 8};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t gm = r0 + lane + 32 * j;
        if (gm < p.M) dst[gm] = static_cast<uint8_t>(qs[j]);
      }
    }
  }
}


// ------------------------------------------------------------------------------------------------------
// Fast path for BF16/F16 inputs with K % 8 == 0 and a 16-byte aligned x: FP8 block 1x128 (Fp8Scaling::kBlock1x128), block
// 128x128 (kBlock128x128) and per tensor (kTensor). One 128x128 tile per CTA of 256 threads; thread (cl = lane / 2,
// rg = 2 warp + lane % 2) loads the 8 elements [8 cl, 8 cl + 8) of the 8 consecutive rows [8 rg, 8 rg + 8)
// (one warp instruction = 2 rows x 256 B). Rowwise 1x128 amax: the 16 lanes of one rg (lane bits 1-4);
// columnwise 128x1 amax: lane bit 0, then the 8 warps through shared memory. The rowwise plane is stored 8 B per
// thread per row; the columnwise (transposed) plane is staged as bytes: row k of the staging tile is column k
// of x (128 B = 16 chunks of 8 B, chunk rg at position rg ^ 2 (k / 8 % 8), so that a half-warp's 8-byte stores
// and a quarter-warp's 16-byte reads hit distinct banks), then stored 16 B per thread. Rows >= M and columns
// >= K read as 0 (out-of-range positions count as 0) and are not stored.

// 4 CTAs per SM (64 registers, no spill): on the H200 FP8 block 1x128 takes 0.345 ms against 0.363 at 3 CTAs
// (76 registers), 16384^2 BF16; ncu showed long-scoreboard stalls (loads in flight) leading at 36% occupancy.
template <typename In>
__global__ void __launch_bounds__(kThreads, 4) fp8_fast_kernel(QuantizeArgs p) {
  using P = Packed16<In>;
  __shared__ __align__(16) uint8_t stage[kFT * kFT];
  __shared__ uint32_t colpart[kThreads / 32][kFT / 2];
  __shared__ __align__(16) float cscale[kFT];
  __shared__ float red[kThreads / 32];
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int cl = lane >> 1, rg = 2 * w + (lane & 1);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kFT, c0 = static_cast<int64_t>(blockIdx.x) * kFT;
  const int64_t gc = c0 + 8 * cl, gr0 = r0 + 8 * rg;
  const bool col_in = gc < p.K;
  const bool pr = p.rules.nan_amax;  // rule nan_amax: NaN propagates into the block amax
  const In* x = static_cast<const In*>(p.x);
  uint4 v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    v[i] = (col_in && gr0 + i < p.M) ? __ldcs(reinterpret_cast<const uint4*>(x + (gr0 + i) * p.K + gc))
                                      : make_uint4(0, 0, 0, 0);
  float s_all = 1.0f;  // 128x128 and tensor: the one scale of the tile
  float s_row = 1.0f;  // 1x128: scale of row 8 rg + (cl % 8), broadcast below
  if (fp8_scaling(p) == Fp8Scaling::kTensor) {
    s_all = fp8_scale(*p.amax_row, p);
    if (blockIdx.x == 0 && blockIdx.y == 0 && t == 0) *p.scale_inv = __fdiv_rn(1.0f, s_all);
  } else {
    uint32_t cm[4], rm[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t a0 = v[i].x & kAbs2, a1 = v[i].y & kAbs2, a2 = v[i].z & kAbs2, a3 = v[i].w & kAbs2;
      rm[i] = P::max2(P::max2(a0, a1, pr), P::max2(a2, a3, pr), pr);
      if (i == 0) {
        cm[0] = a0; cm[1] = a1; cm[2] = a2; cm[3] = a3;
      } else {
        cm[0] = P::max2(cm[0], a0, pr); cm[1] = P::max2(cm[1], a1, pr);
        cm[2] = P::max2(cm[2], a2, pr); cm[3] = P::max2(cm[3], a3, pr);
      }
    }
    if (fp8_scaling(p) == Fp8Scaling::kBlock128x128) {
      uint32_t m = P::max2(P::max2(cm[0], cm[1], pr), P::max2(cm[2], cm[3], pr), pr);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) m = P::max2(m, __shfl_xor_sync(0xFFFFFFFFu, m, o), pr);
      if (lane == 0) red[w] = max_p(P::lo(m), P::hi(m), pr);
    } else {
      if (p.rowwise) {
        uint32_t rp[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          rp[k] = fold_rows<In>(rm[2 * k], rm[2 * k + 1], pr);
#pragma unroll
          for (int o = 2; o < 32; o <<= 1) rp[k] = P::max2(rp[k], __shfl_xor_sync(0xFFFFFFFFu, rp[k], o), pr);
        }
        const int i = cl & 7;  // this lane's row: one division per lane, broadcast below
        const uint32_t wsel = (i >> 1) == 0 ? rp[0] : ((i >> 1) == 1 ? rp[1] : ((i >> 1) == 2 ? rp[2] : rp[3]));
        const float a = amax_finish((i & 1) ? P::hi(wsel) : P::lo(wsel), pr);
        s_row = fp8_scale(a, p);
        if (cl < 8 && gr0 + i < p.M) store_scale(p.row_scale, gr0 + i, c0 / kFT, __fdiv_rn(1.0f, s_row), p.fp8_block.ue8m0_scales);
      }
      if (p.columnwise) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          cm[j] = P::max2(cm[j], __shfl_xor_sync(0xFFFFFFFFu, cm[j], 1), pr);
          if ((lane & 1) == 0) colpart[w][4 * cl + j] = cm[j];
        }
      }
    }
    __syncthreads();
    if (fp8_scaling(p) == Fp8Scaling::kBlock128x128) {
      float m = red[0];
#pragma unroll
      for (int k = 1; k < kThreads / 32; ++k) m = max_p(m, red[k], pr);
      s_all = fp8_scale(amax_finish(m, pr), p);
      if (t == 0) {
        const float inv = __fdiv_rn(1.0f, s_all);
        if (p.rowwise) store_scale(p.row_scale, r0 / kFT, c0 / kFT, inv, p.fp8_block.ue8m0_scales);
        if (p.columnwise) store_scale(p.col_scale, c0 / kFT, r0 / kFT, inv, p.fp8_block.ue8m0_scales);
      }
    } else if (p.columnwise) {
      if (t < kFT) {
        uint32_t m = colpart[0][t >> 1];
#pragma unroll
        for (int k = 1; k < kThreads / 32; ++k) m = P::max2(m, colpart[k][t >> 1], pr);
        const float a = amax_finish((t & 1) ? P::hi(m) : P::lo(m), pr);
        const float sc = fp8_scale(a, p);
        cscale[t] = sc;
        if (c0 + t < p.K) store_scale(p.col_scale, c0 + t, r0 / kFT, __fdiv_rn(1.0f, sc), p.fp8_block.ue8m0_scales);
      }
      __syncthreads();
    }
  }
  // Rowwise bytes (also the source of the transposed plane for 128x128 and tensor scaling).
  uint2 rq[8];
  if (p.rowwise || fp8_scaling(p) != Fp8Scaling::kBlock1x128) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float sc = fp8_scaling(p) == Fp8Scaling::kBlock1x128 ? __shfl_sync(0xFFFFFFFFu, s_row, (i << 1) | (lane & 1)) : s_all;
      uint32_t q[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t wd = word(v[i], j);
        q[j] = cvt_fp8x2(__fmul_rn(P::lo(wd), sc), __fmul_rn(P::hi(wd), sc), e5m2_of(p));
      }
      rq[i] = make_uint2(q[0] | (q[1] << 16), q[2] | (q[3] << 16));
      if (p.rowwise && col_in && gr0 + i < p.M) __stcs(reinterpret_cast<uint2*>(p.row_data + (gr0 + i) * p.K + gc), rq[i]);
    }
  }
  if (!p.columnwise) return;
  // Transposed bytes: column 8 cl + j, rows 8 rg .. 8 rg + 7, as one 8-byte chunk.
  uint2 cq[8];
  if (fp8_scaling(p) == Fp8Scaling::kBlock1x128) {
    const float4 s_lo = *reinterpret_cast<const float4*>(&cscale[8 * cl]);
    const float4 s_hi = *reinterpret_cast<const float4*>(&cscale[8 * cl + 4]);
    const float sc[8] = {s_lo.x, s_lo.y, s_lo.z, s_lo.w, s_hi.x, s_hi.y, s_hi.z, s_hi.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t q[4];
#pragma unroll
      for (int i = 0; i < 8; i += 2) {
        const uint32_t w0 = word(v[i], j >> 1), w1 = word(v[i + 1], j >> 1);
        const float x0 = (j & 1) ? P::hi(w0) : P::lo(w0), x1 = (j & 1) ? P::hi(w1) : P::lo(w1);
        q[i >> 1] = cvt_fp8x2(__fmul_rn(x0, sc[j]), __fmul_rn(x1, sc[j]), e5m2_of(p));
      }
      cq[j] = make_uint2(q[0] | (q[1] << 16), q[2] | (q[3] << 16));
    }
  } else {
    uint32_t a[4], c[4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {      // columns 4 half .. 4 half + 3
#pragma unroll
      for (int rh = 0; rh < 2; ++rh) {          // rows 4 rh .. 4 rh + 3
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = half ? rq[4 * rh + i].y : rq[4 * rh + i].x;
        transpose4x4(a, c);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (rh == 0) cq[4 * half + j].x = c[j];
          else cq[4 * half + j].y = c[j];
        }
      }
    }
  }
  const int f = 2 * (cl & 7);
#pragma unroll
  for (int j = 0; j < 8; ++j)
    *reinterpret_cast<uint2*>(&stage[(8 * cl + j) * kFT + 8 * (rg ^ f)]) = cq[j];
  __syncthreads();
  const bool m16 = (p.M % 16) == 0;
#pragma unroll
  for (int u = 0; u < kFT * kFT / 16 / kThreads; ++u) {
    const int idx = t + u * kThreads;
    const int k = idx >> 3, h = idx & 7;
    const int64_t gk = c0 + k, gm = r0 + 16 * h;
    if (gk >= p.K || gm >= p.M) continue;
    const uint4 val = *reinterpret_cast<const uint4*>(&stage[k * kFT + 16 * (h ^ ((k >> 3) & 7))]);
    uint8_t* dst = p.col_data + gk * p.M + gm;
    if (m16) {
      __stcs(reinterpret_cast<uint4*>(dst), val);
    } else {
      const uint32_t wv[4] = {val.x, val.y, val.z, val.w};
      for (int b = 0; b < 16 && gm + b < p.M; ++b) dst[b] = static_cast<uint8_t>(wv[b >> 2] >> (8 * (b & 3)));
    }
  }
}

/// Launches the fast kernel when it applies (16-bit input, K % 8 == 0, x 16-byte aligned); false otherwise.
template <typename In>
bool launch_fast(const QuantizeArgs& p, cudaStream_t s) {
  if constexpr (sizeof(In) != 2) {
    return false;
  } else {
    const int64_t gx = (p.K + kFT - 1) / kFT, gy = (p.M + kFT - 1) / kFT;
    if (!p.vec_ok || gy > 65535 || gx > 0x7FFFFFFF) return false;
    fp8_fast_kernel<In><<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), kThreads, 0, s>>>(p);
    QTC_CUDA_CHECK_LAUNCH();
    return true;
  }
}

template <typename In>
void run_block(const QuantizeArgs& p, cudaStream_t s) {
  if (p.M == 0 || p.K == 0) return;
  if (detail::launch_fp8_pipelined(p, s) || launch_fast<In>(p, s)) return;
  constexpr size_t kSmem = sizeof(float) * kBT * kBLD;
  QTC_CUDA_CHECK(cudaFuncSetAttribute(fp8_block_kernel<In>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid(static_cast<unsigned>((p.K + kBT - 1) / kBT), static_cast<unsigned>((p.M + kBT - 1) / kBT));
  fp8_block_kernel<In><<<grid, kThreads, kSmem, s>>>(p);
  QTC_CUDA_CHECK_LAUNCH();
}

// ------------------------------------------------------------------------------------------------------
// FP8 per-tensor current scaling: 64x64 tiles, rowwise bytes and their transpose.

constexpr int kTT = 64, kTLD = kTT + 1;


template <typename In>
__global__ void __launch_bounds__(kThreads, sizeof(In) == 4 ? 3 : 4) fp8_tensor_kernel(QuantizeArgs p) {
  __shared__ float sm[kTT * kTLD];
  const In* x = static_cast<const In*>(p.x);
  const float scale = fp8_scale(*p.amax_row, p);
  if (blockIdx.x == 0 && threadIdx.x == 0) *p.scale_inv = __fdiv_rn(1.0f, scale);
  const int t = threadIdx.x;
  for_each_tile<In, kTT, kTT, kThreads>(sm, x, p.M, p.K, p.vec_ok, [&](int64_t r0, int64_t c0) {
    if (p.rowwise) {
      const int r = t >> 2, q = t & 3;
      const int64_t gr = r0 + r, gc = c0 + 16 * q;
      if (gr < p.M && gc < p.K) {
        uint32_t w[4];
        const float* src = sm + r * kTLD + 16 * q;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[i] = cvt_fp8x2(__fmul_rn(src[4 * i], scale), __fmul_rn(src[4 * i + 1], scale), e5m2_of(p)) |
                 (cvt_fp8x2(__fmul_rn(src[4 * i + 2], scale), __fmul_rn(src[4 * i + 3], scale), e5m2_of(p)) << 16);
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
          w[i] = cvt_fp8x2(__fmul_rn(src[(4 * i) * kTLD], scale), __fmul_rn(src[(4 * i + 1) * kTLD], scale), e5m2_of(p)) |
                 (cvt_fp8x2(__fmul_rn(src[(4 * i + 2) * kTLD], scale), __fmul_rn(src[(4 * i + 3) * kTLD], scale), e5m2_of(p)) << 16);
        uint8_t* dst = p.col_data + gk * p.M + gm;
        if ((p.M % 16) == 0)
          __stcs(reinterpret_cast<uint4*>(dst), make_uint4(w[0], w[1], w[2], w[3]));
        else
          for (int i = 0; i < 16 && gm + i < p.M; ++i) dst[i] = static_cast<uint8_t>(w[i >> 2] >> (8 * (i & 3)));
      }
    }
  });
}

/// An empty tensor still has a scale: TE computes it from amax 0 (raised to eps when eps > 0).
__global__ void fp8_tensor_scale_only_kernel(QuantizeArgs p) {
  const float scale = fp8_scale(*p.amax_row, p);
  *p.scale_inv = __fdiv_rn(1.0f, scale);
}

template <typename In>
void run_tensor(const QuantizeArgs& p, cudaStream_t s) {
  if (p.M == 0 || p.K == 0) {
    fp8_tensor_scale_only_kernel<<<1, 1, 0, s>>>(p);
    QTC_CUDA_CHECK_LAUNCH();
    return;
  }
  if (detail::launch_fp8_pipelined(p, s) || launch_fast<In>(p, s)) return;
  launch_persistent(fp8_tensor_kernel<In>, ((p.K + kTT - 1) / kTT) * ((p.M + kTT - 1) / kTT), p, s);
}

}  // namespace

namespace detail {
void launch_fp8_block(const QuantizeArgs& p, cudaStream_t s) {
  dev::dispatch_input(p.dtype, "fp8 block", [&](auto in) { run_block<typename decltype(in)::type>(p, s); });
}
void launch_fp8_tensor(const QuantizeArgs& p, cudaStream_t s) {
  dev::dispatch_input(p.dtype, "fp8 tensor", [&](auto in) { run_tensor<typename decltype(in)::type>(p, s); });
}
}  // namespace detail

namespace fp8 {
/// One FP8 block element: q * scale_inv of its 1x128 or 128x128 block (F32, or E8M0 with ue8m0_scales) (§3.3).
struct DequantBlock {
  __device__ float operator()(const detail::DequantizeArgs& p, int64_t i, int64_t j) const {
    const int64_t a = p.columnwise ? j : i, b = p.columnwise ? i : j, len = p.columnwise ? p.M : p.K;
    const uint32_t q = p.data[a * len + b];
    const int64_t at = p.fp8_block.tile_2d ? scale_index(p.scale_layout, a / 128, b / 128) : scale_index(p.scale_layout, a, b / 128);
    const float si = p.fp8_block.ue8m0_scales ? qtc::decode_e8m0(p.scale[at]) : reinterpret_cast<const float*>(p.scale)[at];
    return __fmul_rn(qtc::decode_fp8(q, p.fp8 == Fp8Type::kE5M2), si);
  }
};
/// One FP8 per-tensor element: q * scale_inv (§4.2).
struct DequantTensor {
  __device__ float operator()(const detail::DequantizeArgs& p, int64_t i, int64_t j) const {
    const uint32_t q = p.columnwise ? p.data[j * p.M + i] : p.data[i * p.K + j];
    return __fmul_rn(qtc::decode_fp8(q, p.fp8 == Fp8Type::kE5M2), *p.amax);
  }
};
}  // namespace fp8

namespace detail {
void launch_dequantize_fp8_block(const DequantizeArgs& a, cudaStream_t s) { dev::launch_dequantize_with(a, fp8::DequantBlock{}, s); }
void launch_dequantize_fp8_tensor(const DequantizeArgs& a, cudaStream_t s) { dev::launch_dequantize_with(a, fp8::DequantTensor{}, s); }
}  // namespace detail

}  // namespace qtc::cuda
