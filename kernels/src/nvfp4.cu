/// \file nvfp4.cu
/// \brief NVFP4 quantization (TE_FORMATS.md §1): 1x16 and 16x16 blocks, row-scaled, RHT columnwise plane,
///        4over6 (MAE/MSE, E4M3 max 448/256) and stochastic rounding. One 64x64 input tile per CTA is read once
///        into shared memory and gives both planes. The global amaxes are read from device memory (written
///        by the amax pass before this launch).
#include "launch.hpp"
#include "nvfp4_common.cuh"
#include "qtc/cuda/check.hpp"
#include "tile.cuh"

namespace qtc::cuda {
namespace {

using namespace dev;

constexpr int kThreads = 256, kTR = 64, kTC = 64, kLD = kTC + 1;

struct KParams {
  const void* x;
  int64_t M, K;
  bool rowwise, columnwise, tile2d, row_scaled, rht, vec_ok;
  Nvfp4Cfg cfg;
  uint32_t rht_mask;
  const float* amax_row;
  const float* amax_col;
  uint8_t* row_data;
  ScaleOut row_scale;
  uint8_t* col_data;
  ScaleOut col_scale;
};

template <typename In>
__global__ void __launch_bounds__(kThreads) nvfp4_kernel(KParams p) {
  __shared__ float sm[kTR * kLD];
  __shared__ float a1[kTR][4];              // 2D: row-block amaxes
  __shared__ uint32_t blk_sf[4][4];         // 2D: chosen block scale
  __shared__ float blk_enc[4][4];
  __shared__ float blk_amax[4][4];
  __shared__ uint32_t c_sf[2][4][4];        // 2D 4over6 candidates (0: map-to-4, 1: map-to-6)
  __shared__ float c_enc[2][4][4];
  __shared__ float errs[2][kTR][4];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTR, c0 = static_cast<int64_t>(blockIdx.x) * kTC;
  load_tile<In, kTR, kTC, kThreads>(sm, static_cast<const In*>(p.x), p.M, p.K, r0, c0, p.vec_ok);
  __syncthreads();
  const Nvfp4Cfg& c = p.cfg;
  const int t = threadIdx.x;
  const int r = t >> 2, b = t & 3;  // rowwise work item: row r, 16-column block b
  const bool row_in = (r0 + r < p.M) && (c0 + 16 * b < p.K);

  if (p.tile2d) {
    // 16x16 blocks: one amax per block, the same scale for both planes (§1.7).
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) m = max_p(m, fabsf(sm[r * kLD + 16 * b + i]), c.pyref);
    a1[r][b] = m;
    __syncthreads();
    const float s_enc = nvfp4_s_enc(p.amax_row[0], c.e4m3_max, c.pyref);
    const float s_dec = __fdiv_rn(1.0f, s_enc);
    if (t < 16) {
      const int rg = t >> 2, bb = t & 3;
      float m2 = 0.0f;
      for (int i = 0; i < 16; ++i) m2 = max_p(m2, a1[16 * rg + i][bb], c.pyref);
      blk_amax[rg][bb] = m2;
      if (c.f46) {
        nvfp4_46_candidates(m2, s_enc, s_dec, c_sf[0][rg][bb], c_enc[0][rg][bb], c_sf[1][rg][bb], c_enc[1][rg][bb]);
      } else {
        nvfp4_std_scale(m2, s_enc, s_dec, c.pyref, blk_sf[rg][bb], blk_enc[rg][bb]);
      }
    }
    __syncthreads();
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

  if (p.rowwise && row_in) {
    const int64_t gr = r0 + r, gc = c0 + 16 * b;
    float xr[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) xr[i] = sm[r * kLD + 16 * b + i];
    uint32_t sf;
    uint2 packed;
    if (p.tile2d) {
      sf = blk_sf[r >> 4][b];
      packed = nvfp4_encode16(xr, blk_enc[r >> 4][b], c, 0, static_cast<uint64_t>(gr * p.K + gc));
    } else {
      const float am = p.amax_row[p.row_scaled ? gr : 0];
      packed = nvfp4_block_1d(xr, nvfp4_s_enc(am, c.e4m3_max, c.pyref), am, c, 0,
                              static_cast<uint64_t>(gr * p.K + gc), sf);
    }
    *reinterpret_cast<uint2*>(p.row_data + gr * (p.K / 2) + gc / 2) = packed;
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
      if (p.tile2d) {
        float enc = blk_enc[g][cc >> 4];
        sf = blk_sf[g][cc >> 4];
        // The columnwise plane takes the columnwise global scale (TE §1.7): equal to the rowwise one unless
        // the amaxes were supplied (quantize_with_amax); 4over6 keeps the block's rowwise choice.
        const float s_enc_c = nvfp4_s_enc(p.amax_col[0], c.e4m3_max, c.pyref);
        const float s_enc_r = nvfp4_s_enc(p.amax_row[0], c.e4m3_max, c.pyref);
        if (!c.f46 && (c.sr || s_enc_c != s_enc_r))
          nvfp4_std_scale(blk_amax[g][cc >> 4], s_enc_c, __fdiv_rn(1.0f, s_enc_c), c.pyref, sf, enc);
        packed = nvfp4_encode16(xc, enc, c, 1, idx0);
      } else {
        if (p.rht) {
          float y[16];
          rht16(xc, y, p.rht_mask);
#pragma unroll
          for (int i = 0; i < 16; ++i) xc[i] = y[i];
        }
        const float am = p.amax_col[p.row_scaled ? gk : 0];
        packed = nvfp4_block_1d(xc, nvfp4_s_enc(am, c.e4m3_max, c.pyref), am, c, 1, idx0, sf);
      }
      *reinterpret_cast<uint2*>(p.col_data + gk * (p.M / 2) + gm / 2) = packed;
      p.col_scale.p[scale_index(p.col_scale, gk, gm / 16)] = static_cast<uint8_t>(sf);
    }
  }
}

ScaleOut to_dev(const detail::ScaleOutHost& h) { return ScaleOut{h.p, h.mode, h.ld, h.num_kb}; }

template <typename In>
void run(const detail::Nvfp4Params& h, cudaStream_t s) {
  KParams p{};
  p.x = h.x;
  p.M = h.M;
  p.K = h.K;
  p.rowwise = h.rowwise;
  p.columnwise = h.columnwise;
  p.tile2d = h.tile2d;
  p.row_scaled = h.row_scaled;
  p.rht = h.rht;
  p.vec_ok = (reinterpret_cast<uintptr_t>(h.x) % 16 == 0) && ((h.K * sizeof(In)) % 16 == 0);
  p.cfg = Nvfp4Cfg{h.pyref, h.torchao, h.stochastic, h.fourover6, h.mse, h.e4m3_max, 6.0f * h.e4m3_max, h.seed};
  p.rht_mask = h.rht_sign_mask;
  p.amax_row = h.amax_row;
  p.amax_col = h.amax_col;
  p.row_data = h.row_data;
  p.row_scale = to_dev(h.row_scale);
  p.col_data = h.col_data;
  p.col_scale = to_dev(h.col_scale);
  if (h.M == 0 || h.K == 0) return;
  const dim3 grid(static_cast<unsigned>((h.K + kTC - 1) / kTC), static_cast<unsigned>((h.M + kTR - 1) / kTR));
  nvfp4_kernel<In><<<grid, kThreads, 0, s>>>(p);
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace

namespace detail {
void launch_nvfp4(const Nvfp4Params& p, cudaStream_t s) {
  switch (p.dtype) {
    case DType::kF32: run<float>(p, s); break;
    case DType::kBF16: run<__nv_bfloat16>(p, s); break;
    case DType::kF16: run<__half>(p, s); break;
    default: QTC_FAIL("nvfp4: input must be F32, BF16 or F16");
  }
}
}  // namespace detail

}  // namespace qtc::cuda
