/// \file nvfp4_kernel.cuh
/// \brief The NVFP4 quantization kernel template (TE_FORMATS.md §1): 1x16 and 16x16 blocks, row-scaled, RHT columnwise plane,
///        4over6 (MAE/MSE, E4M3 max 448/256) and stochastic rounding. One 64x64 input tile per CTA is read once
///        into shared memory and gives both planes. The global amaxes are read from device memory (written
///        by the amax pass before this launch).
#pragma once
#include "launch.hpp"
#include "nvfp4_common.cuh"
#include "qtc/cuda/check.hpp"
#include "tile.cuh"

namespace qtc::cuda::nvfp4 {

using namespace dev;

constexpr int kThreads = 256, kTR = 64, kTC = 64, kLD = kTC + 1;

/// The kernels take the call's QuantizeArgs (launch.hpp) as they are.
using detail::QuantizeArgs;
using detail::ScaleOut;

/// Kernel specializations: kPlain (1x16, optionally row-scaled), k2D (16x16), kFull (4over6, SR, RHT, torchao, the
/// NaN rules; everything by runtime flags). The first two are register-light so that 4 CTAs fit on an SM.
enum Mode : int { kPlain = 0, k2D = 1, kFull = 2 };

/// Whether a call needs the kFull specialization: an option or rule the light ones lack.
inline bool needs_full(const QuantizeArgs& a) {
  return a.nvfp4.fourover6 || a.nvfp4.stochastic || a.nvfp4.rht || a.rules.nvfp4_order == Nvfp4Order::kTorchAO ||
         a.rules.nan_amax || a.rules.nvfp4_nan_scale || a.rules.nvfp4_neg_zero_positive;
}

/// What specialization kMode reads of the call: the options and rules it implements, constant-false the others.
template <int kMode>
__device__ __forceinline__ Nvfp4Cfg nvfp4_cfg(const QuantizeArgs& p) {
  constexpr bool kF = kMode == kFull;
  const float e4m3_max = static_cast<float>(p.nvfp4.e4m3_max);
  return {.nan_amax = kF && p.rules.nan_amax,
          .nan_scale = kF && p.rules.nvfp4_nan_scale,
          .neg_zero_positive = kF && p.rules.nvfp4_neg_zero_positive,
          .torchao = kF && p.rules.nvfp4_order == Nvfp4Order::kTorchAO,
          .tiny_block_floor = p.rules.nvfp4_tiny_block_floor,
          .sr = kF && p.nvfp4.stochastic,
          .f46 = kF && p.nvfp4.fourover6,
          .mse = p.nvfp4.fourover6_err == ErrMode::kMSE,
          .e4m3_max = e4m3_max,
          .k6max = 6.0f * e4m3_max,
          .seed = p.nvfp4.seed,
          .ao_two_level = p.nvfp4.per_tensor_scale,
          .ao_bf16 = p.dtype == DType::kBF16};
}

template <typename In, int kMode>
__global__ void __launch_bounds__(kThreads, kMode == kFull ? 2 : (sizeof(In) == 4 ? 3 : 4)) nvfp4_kernel(QuantizeArgs p) {
  __shared__ float sm[kTR * kLD];
  __shared__ float a1[kTR][4];              // 2D: row-block amaxes
  __shared__ uint32_t blk_sf[4][4];         // 2D: chosen block scale
  __shared__ float blk_enc[4][4];
  __shared__ float blk_amax[4][4];
  __shared__ uint32_t c_sf[2][4][4];        // 2D 4over6 candidates (0: map-to-4, 1: map-to-6)
  __shared__ float c_enc[2][4][4];
  __shared__ float errs[kMode == kFull ? 2 : 1][kMode == kFull ? kTR : 1][4];
  const Nvfp4Cfg c = nvfp4_cfg<kMode>(p);
  const bool tile2d = kMode == k2D || (kMode == kFull && p.nvfp4.tile_2d);
  const bool rht = kMode == kFull && p.nvfp4.rht;
  const bool row_scaled = kMode != k2D && p.nvfp4.row_scaled;
  const In* x = static_cast<const In*>(p.x);
  const int t = threadIdx.x;
  const int r = t >> 2, b = t & 3;  // rowwise work item: row r, 16-column block b
  for_each_tile<In, kTR, kTC, kThreads>(sm, x, p.M, p.K, p.vec_ok, [&](int64_t r0, int64_t c0) {
  const bool row_in = (r0 + r < p.M) && (c0 + 16 * b < p.K);

  if (tile2d) {
    // 16x16 blocks: one amax per block, the same scale for both planes (§1.7).
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) m = max_p(m, fabsf(sm[r * kLD + 16 * b + i]), c.nan_amax);
    a1[r][b] = m;
    __syncthreads();
    const float s_enc = nvfp4_s_enc(p.amax_row[0], c.e4m3_max, c.nan_scale);
    const float s_dec = __fdiv_rn(1.0f, s_enc);
    if (t < 16) {
      const int rg = t >> 2, bb = t & 3;
      float m2 = 0.0f;
      for (int i = 0; i < 16; ++i) m2 = max_p(m2, a1[16 * rg + i][bb], c.nan_amax);
      blk_amax[rg][bb] = m2;
      if (c.f46) {
        nvfp4_46_candidates(m2, s_enc, s_dec, c_sf[0][rg][bb], c_enc[0][rg][bb], c_sf[1][rg][bb], c_enc[1][rg][bb]);
      } else {
        nvfp4_std_scale(m2, s_enc, s_dec, c.nan_scale, blk_sf[rg][bb], blk_enc[rg][bb]);
      }
    }
    __syncthreads();
    if constexpr (kMode == kFull) {
      if (c.f46) {
        const int rg = r >> 4;
        float xr[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) xr[i] = sm[r * kLD + 16 * b + i];
        errs[0][r][b] = nvfp4_46_err(xr, c_sf[0][rg][b], c_enc[0][rg][b], p.amax_row[0], c);
        errs[1][r][b] = nvfp4_46_err(xr, c_sf[1][rg][b], c_enc[1][rg][b], p.amax_row[0], c);
        __syncthreads();
        if (t < 16) {
          const int rg2 = t >> 2, bb = t & 3;
          float e[2][16];
#pragma unroll
          for (int k = 0; k < 2; ++k) {
#pragma unroll
            for (int i = 0; i < 16; ++i) e[k][i] = errs[k][16 * rg2 + i][bb];
#pragma unroll
            for (int w = 8; w >= 1; w >>= 1)
#pragma unroll
              for (int i = 0; i < w; ++i) e[k][i] = __fadd_rn(e[k][i], e[k][i + w]);
          }
          const int pick = e[0][0] < e[1][0] ? 0 : 1;
          blk_sf[rg2][bb] = c_sf[pick][rg2][bb];
          blk_enc[rg2][bb] = c_enc[pick][rg2][bb];
        }
        __syncthreads();
      }
    }
  }

  if (p.rowwise && row_in) {
    const int64_t gr = r0 + r, gc = c0 + 16 * b;
    float xr[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) xr[i] = sm[r * kLD + 16 * b + i];
    uint32_t sf;
    uint2 packed;
    if (tile2d) {
      sf = blk_sf[r >> 4][b];
      packed = nvfp4_encode16(xr, blk_enc[r >> 4][b], c, 0, static_cast<uint64_t>(gr * p.K + gc));
    } else {
      const float am = p.amax_row[row_scaled ? gr : 0];
      packed = nvfp4_block_1d(xr, nvfp4_s_enc(am, c.e4m3_max, c.nan_scale), am, c, 0,
                              static_cast<uint64_t>(gr * p.K + gc), sf);
    }
    __stcs(reinterpret_cast<uint2*>(p.row_data + gr * (p.K / 2) + gc / 2), packed);
    p.row_scale.p[scale_index(p.row_scale, gr, gc / 16)] = static_cast<uint8_t>(sf);
  }

  if (p.columnwise) {
    const int cc = t >> 2, g = t & 3;  // column cc, 16-row group g
    if (c0 + cc < p.K && r0 + 16 * g < p.M) {
      const int64_t gk = c0 + cc, gm = r0 + 16 * g;
      float xc[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) xc[i] = sm[(16 * g + i) * kLD + cc];
      uint32_t sf;
      uint2 packed;
      const uint64_t idx0 = static_cast<uint64_t>(gk * p.M + gm);
      if (tile2d) {
        float enc = blk_enc[g][cc >> 4];
        sf = blk_sf[g][cc >> 4];
        // The columnwise plane takes the columnwise global scale (TE §1.7): equal to the rowwise one unless
        // the amaxes were supplied (quantize_with_amax); 4over6 keeps the block's rowwise choice.
        const float s_enc_c = nvfp4_s_enc(p.amax_col[0], c.e4m3_max, c.nan_scale);
        const float s_enc_r = nvfp4_s_enc(p.amax_row[0], c.e4m3_max, c.nan_scale);
        if (!c.f46 && (c.sr || s_enc_c != s_enc_r))
          nvfp4_std_scale(blk_amax[g][cc >> 4], s_enc_c, __fdiv_rn(1.0f, s_enc_c), c.nan_scale, sf, enc);
        packed = nvfp4_encode16(xc, enc, c, 1, idx0);
      } else {
        if (rht) {
          float y[16];
          rht16(xc, y, p.nvfp4.rht_sign_mask);
#pragma unroll
          for (int i = 0; i < 16; ++i) xc[i] = y[i];
        }
        const float am = p.amax_col[row_scaled ? gk : 0];
        packed = nvfp4_block_1d(xc, nvfp4_s_enc(am, c.e4m3_max, c.nan_scale), am, c, 1, idx0, sf);
      }
      __stcs(reinterpret_cast<uint2*>(p.col_data + gk * (p.M / 2) + gm / 2), packed);
      p.col_scale.p[scale_index(p.col_scale, gk, gm / 16)] = static_cast<uint8_t>(sf);
    }
  }
  });
}

/// Launches the kFull specialization (nvfp4_full.cu: its own translation unit, compiled in parallel).
void launch_full(const QuantizeArgs& p, int64_t n_tiles, cudaStream_t s);

/// The fast kernel of nvfp4_fast.cu (1x16 or 16x16 RN, optionally row-scaled, te's rules, BF16/F16 input with
/// 16-byte aligned rows): why it cannot serve the call (nullptr when it can), and its launcher.
const char* fast_refusal(const QuantizeArgs& p);
void launch_fast(const QuantizeArgs& p, cudaStream_t s);

}  // namespace qtc::cuda::nvfp4
