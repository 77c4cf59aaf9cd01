/// \file nvfp4_fast.cu
/// \brief The fast NVFP4 kernel for the common cases (TE_FORMATS.md §1.4, §1.7, §1.11): 1x16 or 16x16 blocks,
///        RN, optionally row-scaled, profiles te/ocp; BF16/F16 input whose rows are 16-byte aligned. Everything
///        else (F32, pyref, torchao, SR, 4over6, RHT, unaligned rows) stays on nvfp4_kernel.
///
/// Same arithmetic as nvfp4_common.cuh, in the same order, fewer instructions:
///  * rowwise straight from the registers of the 16-byte global loads: a thread holds 8 elements of a row, the
///    two threads of a 16-block combine their block amax with one __shfl_xor;
///  * the tile is staged in shared memory in its native 16-bit type; a columnwise thread owns one 32-bit word
///    (two adjacent columns) for 8 rows, and row groups 8..15 of each 16 rows are stored with the word index
///    XOR 16, so every LDS.32 of a warp hits 32 distinct banks;
///  * S_enc, S_dec, S_enc * RN(1/6) once per CTA, and enc = fminf(1 / (dec(sf) * S_dec), FLT_MAX) from a
///    128-entry shared table per plane (sf is never negative or NaN here: bamax ignores NaN, the product is
///    clamped to FLT_MAX before the conversion), built once per CTA with the reference's division. Row-scaled
///    tensors keep one division per block (S_dec differs per row/column); their per-row and per-column S_enc
///    and S_dec are computed once per tile;
///  * sf through the hardware cvt.rn.satfinite.e4m3x2.f32 (exact RN, like the software encoder; the input is
///    never NaN here), two scales per instruction.
#include "nvfp4_fast.cuh"
#include "nvfp4_kernel.cuh"

namespace qtc::cuda::nvfp4 {
namespace {

using namespace dev;

constexpr int kFR = 64, kFC = 64;  // tile rows, columns
constexpr int kWords = kFC / 2;    // 32-bit words per staged tile row

/// Two 16-bit inputs of one 32-bit word, exactly converted to float.
template <typename In>
struct Unpack;
template <>
struct Unpack<__nv_bfloat16> {
  __device__ static __forceinline__ void run(uint32_t w, float& lo, float& hi) {
    lo = __uint_as_float(w << 16);
    hi = __uint_as_float(w & 0xFFFF0000u);
  }
};
template <>
struct Unpack<__half> {
  __device__ static __forceinline__ void run(uint32_t w, float& lo, float& hi) {
    __half2 h;
    memcpy(&h, &w, 4);
    const float2 f = __half22float2(h);
    lo = f.x;
    hi = f.y;
  }
};

/// Two non-negative, non-NaN floats -> two E4M3 bytes (RN, satfinite): lo in bits 7:0, hi in bits 15:8.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

/// v = fminf(bamax * k, FLT_MAX), k = S_enc * RN(1/6) (the reference's product order).
__device__ __forceinline__ float sf_arg(float bamax, float k) { return fminf(__fmul_rn(bamax, k), kFltMax); }

struct PlaneConst {
  float k;      ///< S_enc * RN(1/6)
  float s_dec;  ///< 1 / S_enc
};

__device__ __forceinline__ PlaneConst plane_const(float amax, float e4m3_max) {
  const float s_enc = nvfp4_s_enc(amax, e4m3_max, false);
  return PlaneConst{__fmul_rn(s_enc, kRcp6), __fdiv_rn(1.0f, s_enc)};
}

template <typename In, bool k2d, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) nvfp4_fast_kernel(KParams p) {
  __shared__ __align__(16) uint32_t tile_w[kFR * kWords];
  __shared__ float enc_tab[2][128];  // [plane][sf]: enc of a block scale byte (per-tensor S_dec)
  __shared__ float blk2d[4][4];      // 16x16 block amaxes of the tile
  __shared__ PlaneConst rs_row[kFR], rs_col[kFC];  // row-scaled: per-row / per-column constants of the tile
  const int t = threadIdx.x;
  const bool row_scaled = !k2d && p.row_scaled;
  const float e4m3_max = p.cfg.e4m3_max;
  PlaneConst pc_r{0.0f, 0.0f}, pc_c{0.0f, 0.0f};
  if (!row_scaled) {
    pc_r = plane_const(p.amax_row[0], e4m3_max);
    pc_c = plane_const(p.amax_col[0], e4m3_max);
    const int plane = t >> 7, sf = t & 127;
    enc_tab[plane][sf] = nvfp4_enc(static_cast<uint32_t>(sf), plane ? pc_c.s_dec : pc_r.s_dec);
  }
  const In* x = static_cast<const In*>(p.x);
  const int64_t M = p.M, K = p.K;
  const int64_t tiles_x = (K + kFC - 1) / kFC, n_tiles = tiles_x * ((M + kFR - 1) / kFR);
  const uint32_t tx32 = static_cast<uint32_t>(tiles_x);  // fast_eligible: n_tiles < 2^31
  using Pipe = TilePipe<In, kFR, kFC, kThreads>;
  static_assert(Pipe::kIters == 2, "fast NVFP4 tile: two 16-byte vectors per thread");
  Pipe pipe_a, pipe_b;
  const int64_t G = gridDim.x;
  auto fetch = [&](Pipe& pp, int64_t tt) {
    if (tt < n_tiles) {
      const uint32_t ty = static_cast<uint32_t>(tt) / tx32;
      pp.fetch(x, M, K, static_cast<int64_t>(ty) * kFR, static_cast<int64_t>(static_cast<uint32_t>(tt) - ty * tx32) * kFC, true);
    }
  };
  // Rowwise work: vector it of this thread is row (t >> 3) + 32 * it, 8 columns 8 * (t & 7) ...; the two halves of
  // a 16-column block are lanes t and t ^ 1.
  const int chunk = t & 7, rrow = t >> 3;
  // Columnwise work: word cw (columns 2cw, 2cw + 1), rows 16 * cg + 8 * ch + 0..7; lanes t, t ^ 1 share a block.
  const int wp = t >> 5, ln = t & 31;
  const int cw = 16 * (wp & 1) + (ln >> 1), cg = wp >> 1, ch = ln & 1;

  auto step = [&](int64_t tile, Pipe& pipe) {
    const uint32_t ty = static_cast<uint32_t>(tile) / tx32;
    const int64_t r0 = static_cast<int64_t>(ty) * kFR, c0 = static_cast<int64_t>(static_cast<uint32_t>(tile) - ty * tx32) * kFC;
#pragma unroll
    for (int it = 0; it < 2; ++it) {
      const int row = rrow + 32 * it;
      *reinterpret_cast<uint4*>(&tile_w[row * kWords + ((4 * chunk) ^ (16 * ((row >> 3) & 1)))]) = pipe.buf[it];
    }
    if (row_scaled) {
      if (t < kFR) {
        rs_row[t] = plane_const(r0 + t < M ? p.amax_row[r0 + t] : 0.0f, e4m3_max);
      } else if (t < kFR + kFC && p.columnwise) {
        const int j = t - kFR;
        rs_col[j] = plane_const(c0 + j < K ? p.amax_col[c0 + j] : 0.0f, e4m3_max);
      }
    }
    __syncthreads();

    if (p.columnwise || k2d) {
      float lo[8], hi[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int row = 16 * cg + 8 * ch + i;
        Unpack<In>::run(tile_w[row * kWords + (cw ^ (16 * ch))], lo[i], hi[i]);
      }
      float m0 = 0.0f, m1 = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        m0 = fmaxf(m0, fabsf(lo[i]));
        m1 = fmaxf(m1, fabsf(hi[i]));
      }
      m0 = fmaxf(m0, __shfl_xor_sync(0xFFFFFFFFu, m0, 1));
      m1 = fmaxf(m1, __shfl_xor_sync(0xFFFFFFFFu, m1, 1));
      if (k2d) {
        // 16x16 block: lanes 0..15 cover columns 32 * (wp & 1) + 0..15, lanes 16..31 the next 16 (§1.7).
        float m = fmaxf(m0, m1);
#pragma unroll
        for (int o = 2; o <= 8; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
        if ((ln & 15) == 0) blk2d[cg][2 * (wp & 1) + (ln >> 4)] = m;
        m0 = m;
        m1 = m;
      }
      const int64_t gk = c0 + 2 * cw, gm = r0 + 16 * cg;
      if (p.columnwise && gk < K && gm < M) {
        const uint32_t sfs = row_scaled ? e4m3x2(sf_arg(m0, rs_col[2 * cw].k), sf_arg(m1, rs_col[2 * cw + 1].k))
                                        : e4m3x2(sf_arg(m0, pc_c.k), sf_arg(m1, pc_c.k));
        const uint32_t sf0 = sfs & 0xFFu, sf1 = sfs >> 8;
        float e0, e1;
        if (row_scaled) {
          e0 = nvfp4_enc(sf0, rs_col[2 * cw].s_dec);
          e1 = nvfp4_enc(sf1, rs_col[2 * cw + 1].s_dec);
        } else {
          e0 = enc_tab[1][sf0 & 127u];
          e1 = enc_tab[1][sf1 & 127u];
        }
        const uint32_t w0 = encode8_packed(lo, e0), w1 = encode8_packed(hi, e1);
        const int64_t mh = M / 2, off = (gm + 8 * ch) / 2;
        __stcs(reinterpret_cast<uint32_t*>(p.col_data + gk * mh + off), w0);
        __stcs(reinterpret_cast<uint32_t*>(p.col_data + (gk + 1) * mh + off), w1);
        if (ch == 0) {
          p.col_scale.p[scale_index(p.col_scale, gk, gm / 16)] = static_cast<uint8_t>(sf0);
          p.col_scale.p[scale_index(p.col_scale, gk + 1, gm / 16)] = static_cast<uint8_t>(sf1);
        }
      }
      if (k2d) __syncthreads();
    }

    if (p.rowwise) {
      float v[2][8], bm[2];
#pragma unroll
      for (int it = 0; it < 2; ++it) {
        const uint32_t* w = reinterpret_cast<const uint32_t*>(&pipe.buf[it]);
        float m = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          Unpack<In>::run(w[j], v[it][2 * j], v[it][2 * j + 1]);
          m = fmaxf(m, fmaxf(fabsf(v[it][2 * j]), fabsf(v[it][2 * j + 1])));
        }
        if (k2d) {
          m = blk2d[(rrow + 32 * it) >> 4][chunk >> 1];
        } else {
          m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
        }
        bm[it] = m;
      }
      uint32_t sfs;
      if (row_scaled)
        sfs = e4m3x2(sf_arg(bm[0], rs_row[rrow].k), sf_arg(bm[1], rs_row[rrow + 32].k));
      else
        sfs = e4m3x2(sf_arg(bm[0], pc_r.k), sf_arg(bm[1], pc_r.k));
#pragma unroll
      for (int it = 0; it < 2; ++it) {
        const int64_t gr = r0 + rrow + 32 * it, gb = c0 + 16 * (chunk >> 1);
        const uint32_t sf = (sfs >> (8 * it)) & 0xFFu;
        const float e = row_scaled ? nvfp4_enc(sf, rs_row[rrow + 32 * it].s_dec) : enc_tab[0][sf & 127u];
        const uint32_t w = encode8_packed(v[it], e);
        if (gr < M && gb < K) {
          __stcs(reinterpret_cast<uint32_t*>(p.row_data + gr * (K / 2) + (c0 + 8 * chunk) / 2), w);
          if ((chunk & 1) == 0) p.row_scale.p[scale_index(p.row_scale, gr, gb / 16)] = static_cast<uint8_t>(sf);
        }
      }
    }
    fetch(pipe, tile + 2 * G);
    __syncthreads();  // the staged tile and the per-tile constants are overwritten by the next step
  };
  __syncthreads();  // enc_tab
  int64_t tile = blockIdx.x;
  fetch(pipe_a, tile);
  fetch(pipe_b, tile + G);
  for (; tile < n_tiles; tile += 2 * G) {
    step(tile, pipe_a);
    if (tile + G < n_tiles) step(tile + G, pipe_b);
  }
}

template <typename In>
void launch_fast_t(const KParams& p, int64_t M, int64_t K, cudaStream_t s) {
  const int64_t n_tiles = ((K + kFC - 1) / kFC) * ((M + kFR - 1) / kFR);
  // 4 CTAs per SM (64 registers); 5 (51 registers) measured slower on the H200 (0.702 vs 0.644 ms, 1x16 amax given).
  if (p.tile2d)
    launch_persistent(nvfp4_fast_kernel<In, true, 4>, n_tiles, p, s);
  else
    launch_persistent(nvfp4_fast_kernel<In, false, 4>, n_tiles, p, s);
}

}  // namespace

bool fast_eligible(const KParams& p, DType t, bool full) {
  if (full || (t != DType::kBF16 && t != DType::kF16) || !p.vec_ok) return false;
  if (p.M % 16 != 0 || p.K % 16 != 0) return false;
  if (((p.M + kFR - 1) / kFR) * ((p.K + kFC - 1) / kFC) >= (int64_t{1} << 31)) return false;
  const auto a4 = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % 4 == 0; };
  return a4(p.row_data) && a4(p.col_data);
}

void launch_fast(const KParams& p, DType t, cudaStream_t s) {
  if (t == DType::kBF16)
    launch_fast_t<__nv_bfloat16>(p, p.M, p.K, s);
  else if (t == DType::kF16)
    launch_fast_t<__half>(p, p.M, p.K, s);
  else
    QTC_FAIL("nvfp4 fast kernel: input must be BF16 or F16");
}

}  // namespace qtc::cuda::nvfp4
