/// \file fp8_pipe.cu
/// \brief The pipelined FP8 block / tensor cast (LaunchOptions::cast_kernel = kPipelined; BF16/F16 input, E4M3,
///        x 16-byte aligned with K % 8 == 0): fp8.cu's fp8_fast_kernel (its 128x128 tile, thread mapping,
///        reductions, scales and transposed staging, hence the same bytes) with
///        * persistent CTAs: CTA b takes tiles b, b + G, b + 2G, ... (G = gridDim.x, row-major over the tiles);
///        * the input as cp.async into two 32 KB shared-memory stages: while tile i is cast, tile i + 1 is in
///          flight and tile i + 2 is requested as soon as tile i's words are in registers (the register kernel
///          had each CTA's loads in flight only before its compute, nothing during it); a thread reads back only
///          its own slots (cast_pipe.cuh), so the stages need no barrier; one barrier per tile orders the shared
///          scratch (reductions, column scales, transposed bytes) between consecutive tiles;
///        * the scaling mode and the NaN rule as template parameters (the register kernel branches on both and
///          issues both max variants under predicates), the per-tensor scale computed once per CTA, and the E4M3
///          NaN code by three integer instructions per four codes (cvt_e4m3x4).
#include "cast_common.cuh"
#include "cast_pipe.cuh"
#include "device_util.cuh"
#include "fp8_common.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"
#include "tile.cuh"

namespace qtc::cuda {
namespace {

using namespace dev;

constexpr int kThreads = 256, kStages = 2, kStageSlots = 8 * kThreads;  // uint4 slots per stage (32 KB)
constexpr size_t kSmem = sizeof(uint4) * kStageSlots * kStages;        // 64 KB, + 18 KB static

template <typename In, Fp8Scaling kMode, bool kNan>
__global__ void __launch_bounds__(kThreads, 2) fp8_pipe_kernel(QuantizeArgs p) {
  using P = Packed16<In>;
  extern __shared__ uint4 slots[];  // slot (stage s, row i) of thread t: slots[(8 s + i) * 256 + t]
  __shared__ __align__(16) uint8_t stage[kFT * kFT];
  __shared__ uint32_t colpart[kThreads / 32][kFT / 2];
  __shared__ __align__(16) float cscale[kFT];
  __shared__ float red[kThreads / 32];
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int cl = lane >> 1, rg = 2 * w + (lane & 1);
  const int64_t tiles_x = (p.K + kFT - 1) / kFT, n_tiles = tiles_x * ((p.M + kFT - 1) / kFT);
  const int64_t G = gridDim.x;
  const In* x = static_cast<const In*>(p.x);
  auto request = [&](int64_t tile, int s, uint32_t token) {
    if (tile < n_tiles) {
      const int64_t gr0 = (tile / tiles_x) * kFT + 8 * rg, gc = (tile % tiles_x) * kFT + 8 * cl;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const bool in = gc < p.K && gr0 + i < p.M;
        cp_async16(&slots[(8 * s + i) * kThreads + t], in ? x + (gr0 + i) * p.K + gc : x, after(in ? 16u : 0u, token));
      }
    }
    cp_async_commit();
  };
  float s_all = 1.0f;  // 128x128 and tensor: the one scale of the tile
  if constexpr (kMode == Fp8Scaling::kTensor) {
    s_all = fp8_scale(*p.amax_row, p);
    if (blockIdx.x == 0 && t == 0) *p.scale_inv = __fdiv_rn(1.0f, s_all);
  }
  request(blockIdx.x, 0, 0u);
  request(blockIdx.x + G, 1, 0u);
  int s = 0;
  for (int64_t tile = blockIdx.x; tile < n_tiles; tile += G, s ^= 1) {
    cp_async_wait<1>();
    uint4 v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = slots[(8 * s + i) * kThreads + t];
    request(tile + 2 * G, s, token_of(v));
    if (tile != blockIdx.x) __syncthreads();  // every thread is done with the previous tile's shared scratch
    const int64_t r0 = (tile / tiles_x) * kFT, c0 = (tile % tiles_x) * kFT;
    const int64_t gc = c0 + 8 * cl, gr0 = r0 + 8 * rg;
    const bool col_in = gc < p.K;
    float s_row = 1.0f;  // 1x128: scale of row 8 rg + (cl % 8), broadcast below
    if constexpr (kMode != Fp8Scaling::kTensor) {
      uint32_t cm[4], rm[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t a0 = v[i].x & kAbs2, a1 = v[i].y & kAbs2, a2 = v[i].z & kAbs2, a3 = v[i].w & kAbs2;
        rm[i] = P::max2(P::max2(a0, a1, kNan), P::max2(a2, a3, kNan), kNan);
        if (i == 0) {
          cm[0] = a0; cm[1] = a1; cm[2] = a2; cm[3] = a3;
        } else {
          cm[0] = P::max2(cm[0], a0, kNan); cm[1] = P::max2(cm[1], a1, kNan);
          cm[2] = P::max2(cm[2], a2, kNan); cm[3] = P::max2(cm[3], a3, kNan);
        }
      }
      if constexpr (kMode == Fp8Scaling::kBlock128x128) {
        uint32_t m = P::max2(P::max2(cm[0], cm[1], kNan), P::max2(cm[2], cm[3], kNan), kNan);
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) m = P::max2(m, __shfl_xor_sync(0xFFFFFFFFu, m, o), kNan);
        if (lane == 0) red[w] = max_p(P::lo(m), P::hi(m), kNan);
      } else {
        if (p.rowwise) {
          uint32_t rp[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            rp[k] = fold_rows<In>(rm[2 * k], rm[2 * k + 1], kNan);
#pragma unroll
            for (int o = 2; o < 32; o <<= 1) rp[k] = P::max2(rp[k], __shfl_xor_sync(0xFFFFFFFFu, rp[k], o), kNan);
          }
          const int i = cl & 7;  // this lane's row: one division per lane, broadcast below
          const uint32_t wsel = (i >> 1) == 0 ? rp[0] : ((i >> 1) == 1 ? rp[1] : ((i >> 1) == 2 ? rp[2] : rp[3]));
          const float a = amax_finish((i & 1) ? P::hi(wsel) : P::lo(wsel), kNan);
          s_row = fp8_scale(a, p);
          if (cl < 8 && gr0 + i < p.M) store_scale(p.row_scale, gr0 + i, c0 / kFT, __fdiv_rn(1.0f, s_row), p.fp8_block.ue8m0_scales);
        }
        if (p.columnwise) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            cm[j] = P::max2(cm[j], __shfl_xor_sync(0xFFFFFFFFu, cm[j], 1), kNan);
            if ((lane & 1) == 0) colpart[w][4 * cl + j] = cm[j];
          }
        }
      }
      __syncthreads();
      if constexpr (kMode == Fp8Scaling::kBlock128x128) {
        float m = red[0];
#pragma unroll
        for (int k = 1; k < kThreads / 32; ++k) m = max_p(m, red[k], kNan);
        s_all = fp8_scale(amax_finish(m, kNan), p);
        if (t == 0) {
          const float inv = __fdiv_rn(1.0f, s_all);
          if (p.rowwise) store_scale(p.row_scale, r0 / kFT, c0 / kFT, inv, p.fp8_block.ue8m0_scales);
          if (p.columnwise) store_scale(p.col_scale, c0 / kFT, r0 / kFT, inv, p.fp8_block.ue8m0_scales);
        }
      } else if (p.columnwise) {
        if (t < kFT) {
          uint32_t m = colpart[0][t >> 1];
#pragma unroll
          for (int k = 1; k < kThreads / 32; ++k) m = P::max2(m, colpart[k][t >> 1], kNan);
          const float a = amax_finish((t & 1) ? P::hi(m) : P::lo(m), kNan);
          const float sc = fp8_scale(a, p);
          cscale[t] = sc;
          if (c0 + t < p.K) store_scale(p.col_scale, c0 + t, r0 / kFT, __fdiv_rn(1.0f, sc), p.fp8_block.ue8m0_scales);
        }
        __syncthreads();
      }
    }
    // Rows of this thread in range: gr0 + i < M for i < n_rows.
    const int64_t left = p.M - gr0;
    const int n_rows = left <= 0 ? 0 : (left >= 8 ? 8 : static_cast<int>(left));
    // Rowwise bytes (also the source of the transposed plane for 128x128 and tensor scaling).
    uint2 rq[8];
    if (p.rowwise || kMode != Fp8Scaling::kBlock1x128) {
      uint8_t* dst = p.row_data + gr0 * p.K + gc;
#pragma unroll
      for (int i = 0; i < 8; ++i, dst += p.K) {
        const float sc = kMode == Fp8Scaling::kBlock1x128 ? __shfl_sync(0xFFFFFFFFu, s_row, (i << 1) | (lane & 1)) : s_all;
        rq[i] = make_uint2(cvt_e4m3x4(__fmul_rn(P::lo(v[i].x), sc), __fmul_rn(P::hi(v[i].x), sc),
                                      __fmul_rn(P::lo(v[i].y), sc), __fmul_rn(P::hi(v[i].y), sc)),
                           cvt_e4m3x4(__fmul_rn(P::lo(v[i].z), sc), __fmul_rn(P::hi(v[i].z), sc),
                                      __fmul_rn(P::lo(v[i].w), sc), __fmul_rn(P::hi(v[i].w), sc)));
        if (p.rowwise && col_in && i < n_rows) __stcs(reinterpret_cast<uint2*>(dst), rq[i]);
      }
    }
    if (!p.columnwise) continue;
    // Transposed bytes: column 8 cl + j, rows 8 rg .. 8 rg + 7, as one 8-byte chunk.
    uint2 cq[8];
    if constexpr (kMode == Fp8Scaling::kBlock1x128) {
      const float4 s_lo = *reinterpret_cast<const float4*>(&cscale[8 * cl]);
      const float4 s_hi = *reinterpret_cast<const float4*>(&cscale[8 * cl + 4]);
      const float sc[8] = {s_lo.x, s_lo.y, s_lo.z, s_lo.w, s_hi.x, s_hi.y, s_hi.z, s_hi.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float e[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const uint32_t wd = word(v[i], j >> 1);
          e[i] = __fmul_rn((j & 1) ? P::hi(wd) : P::lo(wd), sc[j]);
        }
        cq[j] = make_uint2(cvt_e4m3x4(e[0], e[1], e[2], e[3]), cvt_e4m3x4(e[4], e[5], e[6], e[7]));
      }
    } else {
      uint32_t a[4], c[4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // columns 4 half .. 4 half + 3
#pragma unroll
        for (int rh = 0; rh < 2; ++rh) {      // rows 4 rh .. 4 rh + 3
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
    for (int j = 0; j < 8; ++j) *reinterpret_cast<uint2*>(&stage[(8 * cl + j) * kFT + 8 * (rg ^ f)]) = cq[j];
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
  cp_async_wait<0>();  // no copy outlives the kernel's shared memory
}

template <typename In>
bool launch(const QuantizeArgs& p, cudaStream_t s) {
  if constexpr (sizeof(In) != 2) {
    return false;
  } else {
    if (p.launch.cast_kernel != CastKernel::kPipelined || !p.vec_ok || p.fp8 != Fp8Type::kE4M3) return false;
    const bool nan = p.rules.nan_amax;
    void (*kernel)(QuantizeArgs) = nullptr;
    switch (fp8_scaling(p)) {
      case Fp8Scaling::kTensor: kernel = fp8_pipe_kernel<In, Fp8Scaling::kTensor, false>; break;
      case Fp8Scaling::kBlock128x128:
        kernel = nan ? fp8_pipe_kernel<In, Fp8Scaling::kBlock128x128, true> : fp8_pipe_kernel<In, Fp8Scaling::kBlock128x128, false>;
        break;
      case Fp8Scaling::kBlock1x128:
        kernel = nan ? fp8_pipe_kernel<In, Fp8Scaling::kBlock1x128, true> : fp8_pipe_kernel<In, Fp8Scaling::kBlock1x128, false>;
        break;
    }
    const int64_t n_tiles = ((p.K + kFT - 1) / kFT) * ((p.M + kFT - 1) / kFT);
    launch_pipelined_grid(kernel, kSmem, n_tiles, p, s);
    return true;
  }
}

}  // namespace

namespace detail {
bool launch_fp8_pipelined(const QuantizeArgs& p, cudaStream_t s) {
  bool done = false;
  dev::dispatch_input(p.dtype, "fp8", [&](auto in) { done = launch<typename decltype(in)::type>(p, s); });
  return done;
}
}  // namespace detail

}  // namespace qtc::cuda
