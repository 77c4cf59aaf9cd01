/// \file mxfp8.cu
/// \brief MXFP8 quantization (TE_FORMATS.md §2): E4M3/E5M2 data, one E8M0 scale per 32 elements, rowwise (1x32),
///        columnwise (32x1, same orientation as x) and 2D (32x32, one scale for both planes); scale rule RCEIL
///        (TE: float_to_e8m0(bamax * RN(1/max)), rounded up) or OCP floor. Any M, K: partial blocks reduce over
///        their valid elements. One 64x64 tile per CTA gives both planes from one read.
///        BF16/F16 inputs whose rows are 16-byte aligned take mxfp8_fast_kernel instead: no shared memory, each
///        warp owns a 32x64 tile held in registers, both planes written with 8-byte stores.
#include "dequantize.cuh"
#include "cast_common.cuh"
#include "cast_pipe.cuh"
#include "device_util.cuh"
#include "launch.hpp"
#include "torchao_device.cuh"
#include "qtc/cuda/check.hpp"
#include "tile.cuh"

namespace qtc::cuda {
namespace {

using namespace dev;

constexpr int kThreads = 256, kTR = 64, kTC = 64, kLD = kTC + 1;

using detail::QuantizeArgs;

/// The MXFP8 choices of the call, read from its QuantizeArgs: the options and the profile's rules by name.
__device__ __forceinline__ bool mx_e5m2(const QuantizeArgs& p) { return p.mxfp8.fp8 == Fp8Type::kE5M2; }
/// Rule mxfp8.nonfinite_block NaN: NaN-propagating amax, a non-finite block amax gets scale 0xFF.
__device__ __forceinline__ bool mx_nan(const QuantizeArgs& p) { return p.rules.mx_nonfinite == MxNonFinite::kNaN; }
/// Rule mxfp8.order torchao: scale and data per torchao_device.cuh.
__device__ __forceinline__ bool mx_torchao(const QuantizeArgs& p) { return p.rules.mx_order == MxOrder::kTorchAO; }

/// E8M0 scale of a block amax (NaN already ignored, or propagated under the OCP profile).
__device__ __forceinline__ uint32_t mx_scale(float bamax, const QuantizeArgs& p) {
  if (mx_torchao(p)) return ao::mx_scale(bamax, p.mxfp8.scale_rule, mx_e5m2(p));
  return mx_block_scale(bamax, mx_e5m2(p), p.mxfp8.scale_rule == MxScaleRule::kOcpFloor, mx_nan(p));  // numeric.hpp, as the reference
}

template <typename In>
__global__ void __launch_bounds__(kThreads, sizeof(In) == 4 ? 3 : 4) mxfp8_kernel(QuantizeArgs p) {
  __shared__ float sm[kTR * kLD];
  __shared__ float qa[kTR][4];      // per row, per 16-column quarter
  __shared__ float ca[4][kTC];      // per column, per 16-row quarter
  __shared__ uint32_t blk_e[2][2];  // 2D block scales
  const In* x = static_cast<const In*>(p.x);
  const bool pr = mx_nan(p);
  const int t = threadIdx.x;
  const int r = t >> 2, q = t & 3;     // rowwise: row r, quarter q (16 columns), block q / 2
  const int cc = t & 63, g = t >> 6;   // columnwise: column cc, quarter g (16 rows), block g / 2
  for_each_tile<In, kTR, kTC, kThreads>(sm, x, p.M, p.K, p.vec_ok, [&](int64_t r0, int64_t c0) {
    float xr[16];
    float mr = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      xr[i] = sm[r * kLD + 16 * q + i];
      mr = max_p(mr, fabsf(xr[i]), pr);
    }
    float mc = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) mc = max_p(mc, fabsf(sm[(16 * g + i) * kLD + cc]), pr);
    qa[r][q] = mr;
    ca[g][cc] = mc;
    __syncthreads();
    if (p.mxfp8.tile_2d && t < 4) {
      const int rb = t >> 1, cb = t & 1;
      float m = 0.0f;
      for (int i = 0; i < 32; ++i) m = max_p(m, max_p(qa[32 * rb + i][2 * cb], qa[32 * rb + i][2 * cb + 1], pr), pr);
      blk_e[rb][cb] = mx_scale(m, p);
    }
    if (p.mxfp8.tile_2d) __syncthreads();

    if (p.rowwise) {
      const int64_t gr = r0 + r, gc = c0 + 16 * q;
      if (gr < p.M && gc < p.K) {
        const uint32_t e = p.mxfp8.tile_2d ? blk_e[r >> 5][q >> 1] : mx_scale(max_p(mr, qa[r][q ^ 1], pr), p);
        const float inv = e8m0_reciprocal(e);
        uint32_t w[4];
        if (mx_torchao(p)) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            w[i] = 0u;
            for (int j = 0; j < 4; ++j) w[i] |= ao::mx_code(xr[4 * i + j], e, p.mxfp8.scale_rule, mx_e5m2(p)) << (8 * j);
          }
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i)
            w[i] = cvt_fp8x2(__fmul_rn(xr[4 * i], inv), __fmul_rn(xr[4 * i + 1], inv), mx_e5m2(p)) |
                   (cvt_fp8x2(__fmul_rn(xr[4 * i + 2], inv), __fmul_rn(xr[4 * i + 3], inv), mx_e5m2(p)) << 16);
        }
        uint8_t* dst = p.row_data + gr * p.K + gc;
        if ((p.K % 16) == 0) {
          __stcs(reinterpret_cast<uint4*>(dst), make_uint4(w[0], w[1], w[2], w[3]));
        } else {
          for (int i = 0; i < 16 && gc + i < p.K; ++i) dst[i] = static_cast<uint8_t>(w[i >> 2] >> (8 * (i & 3)));
        }
        if ((q & 1) == 0) p.row_scale.p[scale_index(p.row_scale, gr, gc / 32)] = static_cast<uint8_t>(e);
      }
    }
    if (p.columnwise) {
      const int64_t gk = c0 + cc, gm = r0 + 16 * g;
      if (gk < p.K && gm < p.M) {
        const uint32_t e = p.mxfp8.tile_2d ? blk_e[g >> 1][cc >> 5] : mx_scale(max_p(mc, ca[g ^ 1][cc], pr), p);
        const float inv = e8m0_reciprocal(e);
        uint8_t* dst = p.col_data + gm * p.K + gk;
#pragma unroll
        for (int i = 0; i < 16; i += 2) {
          const float x0 = sm[(16 * g + i) * kLD + cc], x1 = sm[(16 * g + i + 1) * kLD + cc];
          const uint32_t v = mx_torchao(p) ? (ao::mx_code(x0, e, p.mxfp8.scale_rule, mx_e5m2(p)) | (ao::mx_code(x1, e, p.mxfp8.scale_rule, mx_e5m2(p)) << 8))
                                       : cvt_fp8x2(__fmul_rn(x0, inv), __fmul_rn(x1, inv), mx_e5m2(p));
          if (gm + i < p.M) dst[i * p.K] = static_cast<uint8_t>(v);
          if (gm + i + 1 < p.M) dst[(i + 1) * p.K] = static_cast<uint8_t>(v >> 8);
        }
        if ((g & 1) == 0) p.col_scale.p[scale_index(p.col_scale, gm / 32, gk)] = static_cast<uint8_t>(e);
      }
    }
  });
}

/// Fast path (BF16/F16, K % 8 == 0, x 16-byte aligned): every warp owns one 32-row x 64-column tile. Lane
/// (rg = lane / 8, cl = lane % 8) loads the 8 elements [8 cl, 8 cl + 8) of rows rg, rg + 4, ..., rg + 28 (one
/// warp instruction = 4 rows x 128 B). Rowwise 1x32 block = 4 lanes (shuffles over lane bits 0-1), columnwise
/// 32x1 block = the 4 lanes of one cl (lane bits 3-4); both planes are stored 8 bytes per thread per row.
/// Rows >= M read as 0 (out-of-range positions count as 0) and are not stored; K % 8 == 0 keeps each thread's
/// 8 columns all in range or all out.
constexpr int kFastWarps = 8;

// 4 CTAs per SM (64 registers, a 40-byte spill): on the H200 0.336 ms against 0.340 at 3 CTAs (74 registers),
// 16384^2 BF16 rowwise + columnwise; the extra warps hide more load latency (ncu: long-scoreboard stalls lead).
template <typename In>
__global__ void __launch_bounds__(kFastWarps * 32, 4) mxfp8_fast_kernel(QuantizeArgs p) {
  using P = Packed16<In>;
  const int lane = threadIdx.x & 31;
  const int64_t tiles_x = (p.K + 63) / 64, n_tiles = tiles_x * ((p.M + 31) / 32);
  const int64_t wt = static_cast<int64_t>(blockIdx.x) * kFastWarps + (threadIdx.x >> 5);
  if (wt >= n_tiles) return;  // uniform over the warp
  const int64_t r0 = (wt / tiles_x) * 32, c0 = (wt % tiles_x) * 64;
  const int cl = lane & 7, rg = lane >> 3;
  const int64_t gc = c0 + 8 * cl;
  const bool col_in = gc < p.K;
  const bool pr = mx_nan(p);
  const In* x = static_cast<const In*>(p.x);
  uint4 v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t gr = r0 + rg + 4 * i;
    v[i] = (col_in && gr < p.M) ? __ldcs(reinterpret_cast<const uint4*>(x + gr * p.K + gc)) : make_uint4(0, 0, 0, 0);
  }
  // Block amaxes on the packed words.
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
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    cm[j] = P::max2(cm[j], __shfl_xor_sync(0xFFFFFFFFu, cm[j], 8), pr);
    cm[j] = P::max2(cm[j], __shfl_xor_sync(0xFFFFFFFFu, cm[j], 16), pr);
  }
  uint32_t rp[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    rp[k] = fold_rows<In>(rm[2 * k], rm[2 * k + 1], pr);
    rp[k] = P::max2(rp[k], __shfl_xor_sync(0xFFFFFFFFu, rp[k], 1), pr);
    rp[k] = P::max2(rp[k], __shfl_xor_sync(0xFFFFFFFFu, rp[k], 2), pr);
  }
  // Scales: one per 32x32 block (2D: the 4 lanes of a 32-column block hold its column maxima), else per row
  // (rp, two rows per word) and per column (cm, two columns per word), derived where they are used.
  uint32_t e2d = 0;
  if (p.mxfp8.tile_2d) {
    uint32_t m = P::max2(P::max2(cm[0], cm[1], pr), P::max2(cm[2], cm[3], pr), pr);
    m = P::max2(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1), pr);
    m = P::max2(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2), pr);
    e2d = mx_scale(amax_finish(max_p(P::lo(m), P::hi(m), pr), pr), p);
  }
  // Each scale is computed once per warp: lane (cl % 4 = k) of a 32-column block derives rows 2k, 2k + 1 from
  // rp[k]; lane rg derives columns 2 rg, 2 rg + 1 from cm[rg]; the E8M0 bytes travel by shuffle, two per word.
  auto sel4 = [](const uint32_t a[4], int k) { return k == 0 ? a[0] : (k == 1 ? a[1] : (k == 2 ? a[2] : a[3])); };
  auto pair_e = [&](uint32_t w) {
    if (p.mxfp8.tile_2d) return e2d | (e2d << 8);
    return mx_scale(amax_finish(P::lo(w), pr), p) | (mx_scale(amax_finish(P::hi(w), pr), p) << 8);
  };
  const uint32_t my_re = pair_e(sel4(rp, cl & 3));  // rows 2 (cl % 4), +1
  const uint32_t my_ce = pair_e(sel4(cm, rg));      // columns 2 rg, +1
  uint32_t re[4], ce[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    re[k] = __shfl_sync(0xFFFFFFFFu, my_re, (lane & ~3) | k);
    ce[k] = __shfl_sync(0xFFFFFFFFu, my_ce, (lane & 7) | (k << 3));
  }
  // Row scales: lane k of a 32-column block writes rows 2k, 2k + 1 of its 8, also when its own 8 columns lie
  // past K (the block does whenever its first column is in range).
  if (p.rowwise && gc - 8 * (cl & 3) < p.K) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t gr = r0 + rg + 4 * (2 * (cl & 3) + h);
      if (gr < p.M) p.row_scale.p[scale_index(p.row_scale, gr, gc / 32)] = static_cast<uint8_t>(my_re >> (8 * h));
    }
  }
  if (!col_in) return;  // no shuffles below
  if (p.rowwise) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t gr = r0 + rg + 4 * i;
      if (gr >= p.M) break;
      const float inv = e8m0_reciprocal((re[i >> 1] >> (8 * (i & 1))) & 0xFFu);
      uint32_t q[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t w = word(v[i], j);
        q[j] = cvt_fp8x2(__fmul_rn(P::lo(w), inv), __fmul_rn(P::hi(w), inv), mx_e5m2(p));
      }
      __stcs(reinterpret_cast<uint2*>(p.row_data + gr * p.K + gc), make_uint2(q[0] | (q[1] << 16), q[2] | (q[3] << 16)));
    }
  }
  if (p.columnwise) {
    float inv[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) inv[j] = e8m0_reciprocal((ce[j >> 1] >> (8 * (j & 1))) & 0xFFu);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t gr = r0 + rg + 4 * i;
      if (gr >= p.M) break;
      uint32_t q[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t w = word(v[i], j);
        q[j] = cvt_fp8x2(__fmul_rn(P::lo(w), inv[2 * j]), __fmul_rn(P::hi(w), inv[2 * j + 1]), mx_e5m2(p));
      }
      __stcs(reinterpret_cast<uint2*>(p.col_data + gr * p.K + gc), make_uint2(q[0] | (q[1] << 16), q[2] | (q[3] << 16)));
    }
    // Column scales of block r0 / 32: lane rg writes columns 2 rg, 2 rg + 1 of its 8.
#pragma unroll
    for (int h = 0; h < 2; ++h)
      p.col_scale.p[scale_index(p.col_scale, r0 / 32, gc + 2 * rg + h)] = static_cast<uint8_t>(my_ce >> (8 * h));
  }
}


// ------------------------------------------------------------------------------------------------------
// Pipelined kernel (LaunchOptions::cast_kernel = kPipelined; BF16/F16, E4M3, te's order, x 16-byte aligned with
// K % 8 == 0): the fast kernel's warp tile, lane mapping and arithmetic (so the same bytes), with
//  * persistent warps: warp w of the grid takes tiles w, w + W, w + 2W, ... (W = warps in the grid);
//  * the loads as cp.async into the warp's own two shared-memory stages: while tile i is cast, tile i + 1 is in
//    flight and tile i + 2 is requested as soon as tile i's words are in registers (8 KB per warp, 24 warps per
//    SM: ~190 KB requested ahead per SM, where the fast kernel had only what its resident warps had not yet
//    received); each lane reads back only its own slots (cast_pipe.cuh), so no barrier;
//  * the FP8 type (E4M3) and the NaN rule as template parameters (the fast kernel issues both F2FP variants and
//    both max variants under predicates), and the E4M3 NaN code by three integer instructions per four codes
//    (cvt_e4m3x4) instead of a compare and a select per code.
constexpr int kPipeWarps = 8, kPipeStages = 2, kPipeSlots = 8 * 32;  // uint4 slots per warp and stage (4 KB)
constexpr size_t kPipeSmem = sizeof(uint4) * kPipeSlots * kPipeStages * kPipeWarps;  // 64 KB

template <typename In, bool kNan>
__global__ void __launch_bounds__(kPipeWarps * 32, 3) mxfp8_pipe_kernel(QuantizeArgs p) {
  using P = Packed16<In>;
  extern __shared__ uint4 slots[];
  const int lane = threadIdx.x & 31, cl = lane & 7, rg = lane >> 3;
  uint4* my = slots + (threadIdx.x >> 5) * (kPipeSlots * kPipeStages) + lane;  // slot (stage s, row i): my[s * 256 + 32 i]
  const int64_t tiles_x = (p.K + 63) / 64, n_tiles = tiles_x * ((p.M + 31) / 32);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kPipeWarps;
  const In* x = static_cast<const In*>(p.x);
  // Requests tile `tile` into stage s (nothing past the last tile; the group is committed either way, so that
  // wait_group counts the same on every path).
  auto request = [&](int64_t tile, int s, uint32_t token) {
    if (tile < n_tiles) {
      const int64_t r0 = (tile / tiles_x) * 32, gc = (tile % tiles_x) * 64 + 8 * cl;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int64_t gr = r0 + rg + 4 * i;
        const bool in = gc < p.K && gr < p.M;
        cp_async16(my + s * kPipeSlots + 32 * i, in ? x + gr * p.K + gc : x, after(in ? 16u : 0u, token));
      }
    }
    cp_async_commit();
  };
  int64_t wt = static_cast<int64_t>(blockIdx.x) * kPipeWarps + (threadIdx.x >> 5);
  request(wt, 0, 0u);
  request(wt + stride, 1, 0u);
  for (int s = 0; wt < n_tiles; wt += stride, s ^= 1) {  // uniform over the warp
    cp_async_wait<1>();  // this tile's group is complete (the next one may still be in flight)
    uint4 v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = my[s * kPipeSlots + 32 * i];
    request(wt + 2 * stride, s, token_of(v));
    const int64_t r0 = (wt / tiles_x) * 32, c0 = (wt % tiles_x) * 64;
    const int64_t gc = c0 + 8 * cl;
    const bool col_in = gc < p.K;
    // Block amaxes on the packed words (as mxfp8_fast_kernel).
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
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      cm[j] = P::max2(cm[j], __shfl_xor_sync(0xFFFFFFFFu, cm[j], 8), kNan);
      cm[j] = P::max2(cm[j], __shfl_xor_sync(0xFFFFFFFFu, cm[j], 16), kNan);
    }
    uint32_t rp[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      rp[k] = fold_rows<In>(rm[2 * k], rm[2 * k + 1], kNan);
      rp[k] = P::max2(rp[k], __shfl_xor_sync(0xFFFFFFFFu, rp[k], 1), kNan);
      rp[k] = P::max2(rp[k], __shfl_xor_sync(0xFFFFFFFFu, rp[k], 2), kNan);
    }
    uint32_t e2d = 0;
    if (p.mxfp8.tile_2d) {
      uint32_t m = P::max2(P::max2(cm[0], cm[1], kNan), P::max2(cm[2], cm[3], kNan), kNan);
      m = P::max2(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1), kNan);
      m = P::max2(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2), kNan);
      e2d = mx_scale(amax_finish(max_p(P::lo(m), P::hi(m), kNan), kNan), p);
    }
    auto sel4 = [](const uint32_t a[4], int k) { return k == 0 ? a[0] : (k == 1 ? a[1] : (k == 2 ? a[2] : a[3])); };
    auto pair_e = [&](uint32_t w) {
      if (p.mxfp8.tile_2d) return e2d | (e2d << 8);
      return mx_scale(amax_finish(P::lo(w), kNan), p) | (mx_scale(amax_finish(P::hi(w), kNan), p) << 8);
    };
    const uint32_t my_re = pair_e(sel4(rp, cl & 3));  // rows 2 (cl % 4), +1
    const uint32_t my_ce = pair_e(sel4(cm, rg));      // columns 2 rg, +1
    uint32_t re[4], ce[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      re[k] = __shfl_sync(0xFFFFFFFFu, my_re, (lane & ~3) | k);
      ce[k] = __shfl_sync(0xFFFFFFFFu, my_ce, (lane & 7) | (k << 3));
    }
    if (p.rowwise && gc - 8 * (cl & 3) < p.K) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t gr = r0 + rg + 4 * (2 * (cl & 3) + h);
        if (gr < p.M) p.row_scale.p[scale_index(p.row_scale, gr, gc / 32)] = static_cast<uint8_t>(my_re >> (8 * h));
      }
    }
    if (!col_in) continue;  // no shuffles below
    // Rows of this lane in range: rg + 4 i < M - r0 for i < n_rows.
    const int64_t left = p.M - r0 - rg;
    const int n_rows = left <= 0 ? 0 : static_cast<int>(left >= 29 ? 8 : (left + 3) / 4);
    const int64_t first = (r0 + rg) * p.K + gc, step = 4 * p.K;
    if (p.rowwise) {
      uint8_t* dst = p.row_data + first;
#pragma unroll
      for (int i = 0; i < 8; ++i, dst += step) {
        if (i >= n_rows) break;
        const float inv = e8m0_reciprocal_sel((re[i >> 1] >> (8 * (i & 1))) & 0xFFu);
        const uint32_t q0 = cvt_e4m3x4(__fmul_rn(P::lo(v[i].x), inv), __fmul_rn(P::hi(v[i].x), inv),
                                       __fmul_rn(P::lo(v[i].y), inv), __fmul_rn(P::hi(v[i].y), inv));
        const uint32_t q1 = cvt_e4m3x4(__fmul_rn(P::lo(v[i].z), inv), __fmul_rn(P::hi(v[i].z), inv),
                                       __fmul_rn(P::lo(v[i].w), inv), __fmul_rn(P::hi(v[i].w), inv));
        __stcs(reinterpret_cast<uint2*>(dst), make_uint2(q0, q1));
      }
    }
    if (p.columnwise) {
      float inv[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) inv[j] = e8m0_reciprocal_sel((ce[j >> 1] >> (8 * (j & 1))) & 0xFFu);
      uint8_t* dst = p.col_data + first;
#pragma unroll
      for (int i = 0; i < 8; ++i, dst += step) {
        if (i >= n_rows) break;
        const uint32_t q0 = cvt_e4m3x4(__fmul_rn(P::lo(v[i].x), inv[0]), __fmul_rn(P::hi(v[i].x), inv[1]),
                                       __fmul_rn(P::lo(v[i].y), inv[2]), __fmul_rn(P::hi(v[i].y), inv[3]));
        const uint32_t q1 = cvt_e4m3x4(__fmul_rn(P::lo(v[i].z), inv[4]), __fmul_rn(P::hi(v[i].z), inv[5]),
                                       __fmul_rn(P::lo(v[i].w), inv[6]), __fmul_rn(P::hi(v[i].w), inv[7]));
        __stcs(reinterpret_cast<uint2*>(dst), make_uint2(q0, q1));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h)
        p.col_scale.p[scale_index(p.col_scale, r0 / 32, gc + 2 * rg + h)] = static_cast<uint8_t>(my_ce >> (8 * h));
    }
  }
  cp_async_wait<0>();  // no copy outlives the kernel's shared memory
}

/// Launches the pipelined kernel when the call asks for it and it applies; false otherwise.
template <typename In>
bool launch_pipelined(const QuantizeArgs& p, cudaStream_t s) {
  if (p.launch.cast_kernel != CastKernel::kPipelined || !p.vec_ok || p.rules.mx_order == MxOrder::kTorchAO ||
      p.fp8 != Fp8Type::kE4M3)
    return false;
  auto kernel = p.rules.mx_nonfinite == MxNonFinite::kNaN ? mxfp8_pipe_kernel<In, true> : mxfp8_pipe_kernel<In, false>;
  const int64_t n_tiles = ((p.K + 63) / 64) * ((p.M + 31) / 32);
  launch_pipelined_grid(kernel, kPipeSmem, (n_tiles + kPipeWarps - 1) / kPipeWarps, p, s);
  return true;
}


template <typename In>
void run(const QuantizeArgs& p, cudaStream_t s) {
  if (p.M == 0 || p.K == 0) return;
  if constexpr (sizeof(In) == 2) {
    if (launch_pipelined<In>(p, s)) return;
    if (p.vec_ok && p.rules.mx_order != MxOrder::kTorchAO) {  // torchao's to_mx runs on the generic kernel
      const int64_t n_tiles = ((p.K + 63) / 64) * ((p.M + 31) / 32);
      const int64_t grid = (n_tiles + kFastWarps - 1) / kFastWarps;
      QTC_CHECK(grid <= 0x7FFFFFFF, "mxfp8: tensor too large for one launch (", p.M, " x ", p.K, ")");
      mxfp8_fast_kernel<In><<<static_cast<unsigned>(grid), kFastWarps * 32, 0, s>>>(p);
      QTC_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  launch_persistent(mxfp8_kernel<In>, ((p.K + kTC - 1) / kTC) * ((p.M + kTR - 1) / kTR), p, s);
}

}  // namespace

namespace detail {
void launch_mxfp8(const QuantizeArgs& p, cudaStream_t s) {
  dev::dispatch_input(p.dtype, "mxfp8", [&](auto in) { run<typename decltype(in)::type>(p, s); });
}
}  // namespace detail

namespace mxfp8 {
/// One MXFP8 element, both planes in x's orientation: 2^(e-127) * q (§2.3).
struct Dequant {
  __device__ float operator()(const detail::DequantizeArgs& p, int64_t i, int64_t j) const {
    const uint32_t q = p.data[i * p.K + j];
    const uint32_t e = p.columnwise ? p.scale[scale_index(p.scale_layout, i / 32, j)] : p.scale[scale_index(p.scale_layout, i, j / 32)];
    return __fmul_rn(qtc::decode_e8m0(e), qtc::decode_fp8(q, p.fp8 == Fp8Type::kE5M2));
  }
};
}  // namespace mxfp8

namespace detail {
void launch_dequantize_mxfp8(const DequantizeArgs& a, cudaStream_t s) { dev::launch_dequantize_with(a, mxfp8::Dequant{}, s); }
}  // namespace detail

}  // namespace qtc::cuda
