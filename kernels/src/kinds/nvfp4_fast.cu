/// \file nvfp4_fast.cu
/// \brief The fast NVFP4 kernel for the common cases (TE_FORMATS.md §1.4, §1.7, §1.11): 1x16 or 16x16 blocks,
///        RN, optionally row-scaled, profiles te/ocp; BF16/F16 input, M and K multiples of 16, rows 16-byte
///        aligned. Everything else (F32, pyref, torchao, SR, 4over6, RHT) stays on nvfp4_kernel.
///
/// Same arithmetic as nvfp4_common.cuh, in the same order, built for instruction throughput:
///  * persistent CTAs walk 64 x 128 tiles; each tile reaches shared memory through cp.async (16 bytes per
///    thread and copy, zero-filled past K) into one of three stages (dynamic shared memory, 48 KB): the copies
///    of the next two tiles are in flight while one is computed, no register holds a tile in flight, and one
///    barrier per tile (16x16: two) orders it all;
///  * the staged tile keeps its native 16-bit type; 32-bit word w of row r sits at w ^ (8 * ((r >> 4) & 3)) ^
///    (4 * (r & 1)), so the row walk (LDS.128) and the column walk (LDS.32, one word = two columns) are both
///    free of bank conflicts;
///  * a rowwise thread owns two whole 16-element blocks of one row, a columnwise thread two whole 16-row
///    columns (its 16 words): no shuffle for 1x16 block amaxes; the amaxes are packed bf16x2/half2 maxima of
///    |x| (max.xorsign.abs: one instruction per word pair; max returns the other operand for a NaN, as fmaxf
///    does, and the maximum of exact values is exact; balanced trees keep the dependency chains short); 16x16
///    blocks combine the 8 column threads of a block with three shuffles;
///  * S_enc, S_dec, S_enc * RN(1/6) once per CTA, and enc = fminf(1 / (dec(sf) * S_dec), FLT_MAX) from a
///    128-entry shared table per plane built once per CTA with the reference's division (sf is never
///    negative or NaN here). Row-scaled tensors keep one division per block, with the per-row and per-column
///    constants computed once per tile;
///  * sf through the hardware cvt.rn.satfinite.e4m3x2.f32 (exact RN; its input is never NaN), two scales per
///    instruction; codes through the packed two-at-a-time E2M1 encoder (nvfp4_fast.cuh);
///  * every code store is 8 bytes, and the lanes of a warp write whole 32-byte sectors: a row's 4 rowwise
///    threads write 32 contiguous bytes, a column's 4 columnwise threads its 64 rows' 32 bytes.
#include <algorithm>
#include <type_traits>

#include "nvfp4_fast.cuh"
#include "nvfp4_kernel.cuh"
#include "nvfp4_tile_order.cuh"

namespace qtc::cuda::nvfp4 {
namespace {

using namespace dev;

constexpr int kFR = 64, kFC = 128;  // tile rows, columns
constexpr int kWords = kFC / 2;     // 32-bit words per staged tile row
constexpr int kStageWords = kFR * kWords;
/// Shared-memory stages: 2 (the default, kDefaultStages: one tile in flight while one is computed, 32 KB) or 3
/// (LaunchOptions::nvfp4_stages = 3: two tiles in flight, 48 KB; kept for same-process A/B timing).
template <int S>
constexpr size_t kDynSmem = sizeof(uint32_t) * S * kStageWords;

/// Position of word w of tile row r in the staged tile (see the file comment).
__device__ __forceinline__ int swz(int r) { return (8 * ((r >> 4) & 3)) ^ (4 * (r & 1)); }

__device__ __forceinline__ void cp_async16(uint32_t saddr, const void* g, uint32_t bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(g), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits until at most n of this thread's committed copy groups (the newest n) are still in flight.
template <int n>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory"); }

/// Two 16-bit inputs of one 32-bit word: exact conversion to float; packed maximum and absolute value.
template <typename In>
struct Pk;
template <>
struct Pk<__nv_bfloat16> {
  __device__ static __forceinline__ void unpack(uint32_t w, float& lo, float& hi) {
    lo = __uint_as_float(w << 16);
    hi = __uint_as_float(w & 0xFFFF0000u);
  }
  __device__ static __forceinline__ uint32_t max2(uint32_t a, uint32_t b) { return bf22u(__hmax2(u2bf2(a), u2bf2(b))); }
  /// max(|a|, |b|) per half, the sign the XOR of the operands' signs (one HMNMX2.XORSIGN with |.| operands)
  __device__ static __forceinline__ uint32_t maxabs2(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};
template <>
struct Pk<__half> {
  __device__ static __forceinline__ void unpack(uint32_t w, float& lo, float& hi) {
    __half2 h;
    memcpy(&h, &w, 4);
    const float2 f = __half22float2(h);
    lo = f.x;
    hi = f.y;
  }
  __device__ static __forceinline__ uint32_t max2(uint32_t a, uint32_t b) {
    __half2 x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    const __half2 r = __hmax2(x, y);
    uint32_t u;
    memcpy(&u, &r, 4);
    return u;
  }
  __device__ static __forceinline__ uint32_t maxabs2(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("max.xorsign.abs.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};

/// Packed max |x| over n words as a balanced tree of max(|a|, |b|) (short dependency chains; each step takes the
/// magnitudes of its operands, so the XORed sign bits the steps leave behind never matter), then against +0 with
/// the sign cleared: a NaN operand loses every comparison (max without .NaN returns the other operand), as in the
/// reference's fmaxf chain from 0, so an all-NaN set gives +0.
template <typename In, int n>
__device__ __forceinline__ uint32_t absmax_tree(const uint32_t* w) {
  uint32_t t[n / 2];
#pragma unroll
  for (int i = 0; i < n / 2; ++i) t[i] = Pk<In>::maxabs2(w[2 * i], w[2 * i + 1]);
#pragma unroll
  for (int len = n / 2; len > 1; len /= 2) {
#pragma unroll
    for (int i = 0; i < len / 2; ++i) t[i] = Pk<In>::maxabs2(t[2 * i], t[2 * i + 1]);
  }
  return Pk<In>::max2(0u, t[0] & 0x7FFF7FFFu);
}

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
  return PlaneConst{.k = __fmul_rn(s_enc, kRcp6), .s_dec = __fdiv_rn(1.0f, s_enc)};
}

/// 8 rows of one column (the low or high halves of 8 words w[0..7] of one plane-row) times enc -> 4 bytes of
/// codes.
template <typename In, bool kHi>
__device__ __forceinline__ uint32_t encode8_words(const uint32_t* w, float enc) {
  float y[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float a, b;
    Pk<In>::unpack(w[i], a, b);
    y[i] = __fmul_rn(kHi ? b : a, enc);
  }
  return encode8(y);
}

/// 8 consecutive elements (4 words, element 2j in the low half of word j) times enc -> 4 bytes of codes.
template <typename In>
__device__ __forceinline__ uint32_t encode8_row(const uint32_t* w, float enc) {
  float y[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float a, b;
    Pk<In>::unpack(w[j], a, b);
    y[2 * j] = __fmul_rn(a, enc);
    y[2 * j + 1] = __fmul_rn(b, enc);
  }
  return encode8(y);
}

__device__ __forceinline__ float half_lo(uint32_t m, bool bf) {
  return bf ? __uint_as_float(m << 16) : __half2float(__ushort_as_half(static_cast<unsigned short>(m & 0xFFFFu)));
}
__device__ __forceinline__ float half_hi(uint32_t m, bool bf) {
  return bf ? __uint_as_float(m & 0xFFFF0000u) : __half2float(__ushort_as_half(static_cast<unsigned short>(m >> 16)));
}

/// 16x16 blocks, both planes with the same constants: the 8 lanes L = 0..7 of one block (lanes cg + 4L) each
/// hold the block's 16 row bytes of their column pair L (4 words, rows 4k..4k+3 in word k). An 8x8 transpose of
/// 16-bit units (unit p of lane L = rows 2p, 2p+1 of column pair L) in three shuffle stages leaves lane L with
/// rows 2L and 2L+1 of all 8 column pairs: row 2L in r0 (column pairs 0..3) and r1 (4..7), row 2L+1 in r2, r3.
__device__ __forceinline__ void transpose_units8(uint32_t W[4], int L, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                 uint32_t& r3) {
  // Stage d = 1 (units 2w, 2w + 1 of one word): keep the half whose index bit matches L's, send the other.
  {
    const bool odd = L & 1;
    const uint32_t ssel = odd ? 0x5410u : 0x7632u;
    const uint32_t s01 = __byte_perm(W[0], W[1], ssel), s23 = __byte_perm(W[2], W[3], ssel);
    const uint32_t r01 = __shfl_xor_sync(0xFFFFFFFFu, s01, 4), r23 = __shfl_xor_sync(0xFFFFFFFFu, s23, 4);
    const uint32_t lo = odd ? 0x3254u : 0x5410u, hi = odd ? 0x3276u : 0x7610u;
    W[0] = __byte_perm(W[0], r01, lo);
    W[1] = __byte_perm(W[1], r01, hi);
    W[2] = __byte_perm(W[2], r23, lo);
    W[3] = __byte_perm(W[3], r23, hi);
  }
  // Stages d = 2 (word pairs (0,1), (2,3)) and d = 4 (word pairs (0,2), (1,3)).
#pragma unroll
  for (int s = 1; s <= 2; ++s) {
    const int dw = s == 1 ? 1 : 2;  // word distance of the pair
    const bool up = (L >> s) & 1;
#pragma unroll
    for (int a = 0; a < 2; ++a) {
      const int w0 = s == 1 ? 2 * a : a, w1 = w0 + dw;
      const uint32_t snd = up ? W[w0] : W[w1];
      const uint32_t rcv = __shfl_xor_sync(0xFFFFFFFFu, snd, 4 << s);
      if (up)
        W[w0] = rcv;
      else
        W[w1] = rcv;
    }
  }
  r0 = __byte_perm(W[0], W[1], 0x6420u);
  r1 = __byte_perm(W[2], W[3], 0x6420u);
  r2 = __byte_perm(W[0], W[1], 0x7531u);
  r3 = __byte_perm(W[2], W[3], 0x7531u);
}

/// The 8 low (kHi: high) nibbles of the bytes of two words, in byte order: one column's 8 codes from 8 row bytes.
template <bool kHi>
__device__ __forceinline__ uint32_t nibbles8(uint32_t a, uint32_t b) {
  uint32_t x = (kHi ? a >> 4 : a) & 0x0F0F0F0Fu, y = (kHi ? b >> 4 : b) & 0x0F0F0F0Fu;
  x |= x >> 4;
  y |= y >> 4;
  return __byte_perm(x, y, 0x6420u);
}

template <typename In, bool k2d, int S>
__global__ void __launch_bounds__(kThreads, 4) nvfp4_fast_kernel(QuantizeArgs p, uint32_t strip) {
  static_assert(S == 2 || S == 3, "nvfp4 fast kernel: 2 or 3 shared-memory stages");
  constexpr bool kBf = std::is_same_v<In, __nv_bfloat16>;
  extern __shared__ __align__(16) uint32_t tile_w[];  // [S][kStageWords], dynamic
  __shared__ float enc_tab[2][128];  // [plane][sf]: enc of a block scale byte (per-tensor S_dec)
  __shared__ float blk2d[4][8];      // 16x16 block amaxes of the tile
  __shared__ __align__(16) uint2 rowbuf[k2d ? kFR * 8 : 1];  // 16x16, transposed: the tile's row codes, 8 B units
  __shared__ uint8_t blksf[4][8];    // 16x16, transposed: the tile's block scales
  __shared__ PlaneConst rs_row[2][k2d ? 1 : kFR], rs_col[2][k2d ? 1 : kFC];  // row-scaled: per-row / per-column
                                                                            // constants, by tile parity
  const int t = threadIdx.x;
  const bool row_scaled = !k2d && p.nvfp4.row_scaled;
  const float e4m3_max = static_cast<float>(p.nvfp4.e4m3_max);
  PlaneConst pc_r{.k = 0.0f, .s_dec = 0.0f}, pc_c{.k = 0.0f, .s_dec = 0.0f};
  if (!row_scaled) {
    pc_r = plane_const(p.amax_row[0], e4m3_max);
    pc_c = plane_const(p.amax_col[0], e4m3_max);
    const int plane = t >> 7, sf = t & 127;
    enc_tab[plane][sf] = nvfp4_enc(static_cast<uint32_t>(sf), plane ? pc_c.s_dec : pc_r.s_dec);
  }
  // 16x16 with equal row and column constants: the block's codes are the same in both planes, so each value is
  // encoded once (by the column threads) and the rowwise plane is their nibble transpose.
  const bool xpose = k2d && p.rowwise && p.columnwise && pc_r.k == pc_c.k && pc_r.s_dec == pc_c.s_dec;
  const In* x = static_cast<const In*>(p.x);
  const int64_t M = p.M, K = p.K;
  const uint32_t tiles_x = static_cast<uint32_t>((K + kFC - 1) / kFC);
  const uint32_t tiles_y = static_cast<uint32_t>((M + kFR - 1) / kFR);  // fast_eligible: tiles_x * tiles_y < 2^30
  const uint32_t n_tiles = tiles_x * tiles_y, G = gridDim.x;
  const TileOrder order(tiles_x, tiles_y, strip, G);

  // Loads: copy `it` of this thread is tile row lrow + 16 * it, 16-byte chunk lchunk; its shared word is
  // (4 * lchunk) ^ swz(row) = lw ^ (8 * it) of that row.
  const int lrow = t >> 4, lchunk = t & 15;
  const int lw = (4 * lchunk) ^ (4 * (lrow & 1));
  const uint32_t smem0 = static_cast<uint32_t>(__cvta_generic_to_shared(tile_w)) + 4u * lrow * kWords;
  auto issue = [&](const TileOrder::Cursor& c, int stage) {
    if (c.L < n_tiles) {
      uint32_t iy, ix;
      order.at(c, iy, ix);
      const int64_t r0 = static_cast<int64_t>(iy) * kFR, c0 = static_cast<int64_t>(ix) * kFC;
      const int64_t gc = c0 + 8 * lchunk;
      const In* src = x + (r0 + lrow) * K + gc;
      const uint32_t dst = smem0 + 4u * static_cast<uint32_t>(stage * kStageWords);
      if (r0 + kFR <= M && c0 + kFC <= K) {  // interior tile: no bounds checks
#pragma unroll
        for (int it = 0; it < 4; ++it)
          cp_async16(dst + 4u * static_cast<uint32_t>(16 * it * kWords + (lw ^ (8 * it))), src + 16 * it * K, 16u);
      } else {
#pragma unroll
        for (int it = 0; it < 4; ++it) {
          const bool ok = r0 + lrow + 16 * it < M && gc < K;
          cp_async16(dst + 4u * static_cast<uint32_t>(16 * it * kWords + (lw ^ (8 * it))), ok ? src + 16 * it * K : x,
                     ok ? 16u : 0u);
        }
      }
    }
    cp_async_commit();
  };

  // Rowwise work: row rr, blocks rb0 and rb1 (16 columns each): rq and rq + 4, or (transposed 16x16) 2rq and
  // 2rq + 1.
  const int rr = t >> 2, rq = t & 3;
  const int rb0 = xpose ? 2 * rq : rq, rb1 = xpose ? 2 * rq + 1 : rq + 4;
  // Columnwise work: word cw (columns 2cw, 2cw + 1), rows 16 * cg .. + 15; the 8 lanes with one cg in a warp
  // cover one 16-column block (16x16: three shuffles).
  const int wp = t >> 5, ln = t & 31;
  const int cg = ln & 3, cw = 8 * wp + (ln >> 2);
  // Scale positions: entry (r0 + dr, kb0 + dc) of a plane is at scale_index(r0, kb0) + scale_index(dr, dc) in
  // every layout the fast kernel takes (fast_eligible: not the swizzled-transposed one), since tile origins
  // are multiples of 64 rows (column plane: 128) and of 4 scale columns, within one 128 x 4 swizzle block.
  const int32_t rso0 = static_cast<int32_t>(scale_index(p.row_scale, rr, rb0));
  const int32_t rso1 = static_cast<int32_t>(scale_index(p.row_scale, rr, rb1));
  const int32_t cso0 = static_cast<int32_t>(scale_index(p.col_scale, 2 * cw, cg));
  const int32_t cso1 = static_cast<int32_t>(scale_index(p.col_scale, 2 * cw + 1, cg));

  // S stages, one barrier per tile: at the barrier of tile i every thread is done with tile i - 1, whose stage
  // then receives tile i + S - 1, so S - 1 tiles are in flight while one is computed. Per-tile constants
  // (row-scaled) alternate between two sets by tile parity: set i & 1 is written for tile i before barrier i and
  // was last read for tile i - 2, before barrier i - 1.
  // Linear tile indices (TileOrder): tile i of this CTA is blockIdx.x + i G.
  TileOrder::Cursor cur = order.start(blockIdx.x), ahead = cur;  // tiles i and i + S - 1
  issue(cur, 0);
  if (S == 3) {
    order.advance(ahead);
    issue(ahead, 1);
  }
  order.advance(ahead);
  int stage = 0, par = 0;
  for (; cur.L < n_tiles; order.advance(cur), order.advance(ahead), stage = stage == S - 1 ? 0 : stage + 1, par ^= 1) {
    uint32_t ty, tx;
    order.at(cur, ty, tx);
    const int64_t r0 = static_cast<int64_t>(ty) * kFR, c0 = static_cast<int64_t>(tx) * kFC;
    if (row_scaled) {
      if (t < kFR) {
        rs_row[par][t] = plane_const(r0 + t < M ? p.amax_row[r0 + t] : 0.0f, e4m3_max);
      } else if (t < kFR + kFC && p.columnwise) {
        const int j = t - kFR;
        rs_col[par][j] = plane_const(c0 + j < K ? p.amax_col[c0 + j] : 0.0f, e4m3_max);
      }
    }
    cp_async_wait<S - 2>();  // this thread's copies of tile i have landed (S = 3: tile i + 1's may be in flight)
    __syncthreads();
    issue(ahead, stage == 0 ? S - 1 : stage - 1);  // tile i + S - 1 into the stage of tile i - 1
    const uint32_t* sw = tile_w + stage * kStageWords;
    const PlaneConst* rsr = rs_row[par];
    const PlaneConst* rsc = rs_col[par];

    if (p.columnwise || k2d) {
      // Rows 16cg + i: swz = 8cg ^ 4(i & 1), so the even and the odd rows each have one word offset.
      const uint32_t* cb = sw + 16 * cg * kWords;
      const int ce = cw ^ (8 * cg), co = ce ^ 4;
      uint32_t w[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) w[i] = cb[i * kWords + ((i & 1) ? co : ce)];
      const uint32_t m2 = absmax_tree<In, 16>(w);
      float m0 = half_lo(m2, kBf), m1 = half_hi(m2, kBf);
      if (k2d) {
        float m = fmaxf(m0, m1);
#pragma unroll
        for (int o = 4; o <= 16; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
        if ((ln >> 2) == 0) blk2d[cg][wp] = m;
        m0 = m;
        m1 = m;
      }
      const int64_t gk = c0 + 2 * cw, gm = r0 + 16 * cg;
      const bool col_in = gk < K && gm < M;
      const int64_t mh = M / 2;
      uint8_t* cdst = p.col_data + gk * mh + gm / 2;
      uint8_t* csc = p.col_scale.p + scale_index(p.col_scale, c0, r0 / 16);
      if (xpose) {
        // Every lane takes part in the shuffles, in range or not (out-of-range values are 0).
        const uint32_t sf = e4m3x2(sf_arg(m0, pc_c.k), 0.0f) & 0xFFu;
        const float e = enc_tab[1][sf & 127u];
        uint32_t W[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) W[k] = encode8_row<In>(w + 4 * k, e);  // row bytes 4k..4k+3: column 2cw low nibble
        if (col_in) {
          __stcs(reinterpret_cast<uint2*>(cdst), make_uint2(nibbles8<false>(W[0], W[1]), nibbles8<false>(W[2], W[3])));
          __stcs(reinterpret_cast<uint2*>(cdst + mh),
                 make_uint2(nibbles8<true>(W[0], W[1]), nibbles8<true>(W[2], W[3])));
          csc[cso0] = static_cast<uint8_t>(sf);
          csc[cso1] = static_cast<uint8_t>(sf);
        }
        const int L = ln >> 2;
        uint32_t q0, q1, q2, q3;
        transpose_units8(W, L, q0, q1, q2, q3);
        // Rows 16cg + 2L (+1), block wp: 8-byte unit wp of the row, at position wp ^ ((row >> 1) & 7).
        const int ra = 16 * cg + 2 * L;
        rowbuf[ra * 8 + (wp ^ L)] = make_uint2(q0, q1);
        rowbuf[(ra + 1) * 8 + (wp ^ L)] = make_uint2(q2, q3);
        if (L == 0) blksf[cg][wp] = static_cast<uint8_t>(sf);
      } else if (p.columnwise && col_in) {
        const uint32_t sfs = row_scaled ? e4m3x2(sf_arg(m0, rsc[2 * cw].k), sf_arg(m1, rsc[2 * cw + 1].k))
                                        : e4m3x2(sf_arg(m0, pc_c.k), sf_arg(m1, pc_c.k));
        const uint32_t sf0 = sfs & 0xFFu, sf1 = sfs >> 8;
        float e0, e1;
        if (row_scaled) {
          e0 = nvfp4_enc(sf0, rsc[2 * cw].s_dec);
          e1 = nvfp4_enc(sf1, rsc[2 * cw + 1].s_dec);
        } else {
          e0 = enc_tab[1][sf0 & 127u];
          e1 = enc_tab[1][sf1 & 127u];
        }
        const uint32_t a0 = encode8_words<In, false>(w, e0), a1 = encode8_words<In, false>(w + 8, e0);
        const uint32_t b0 = encode8_words<In, true>(w, e1), b1 = encode8_words<In, true>(w + 8, e1);
        __stcs(reinterpret_cast<uint2*>(cdst), make_uint2(a0, a1));
        __stcs(reinterpret_cast<uint2*>(cdst + mh), make_uint2(b0, b1));
        csc[cso0] = static_cast<uint8_t>(sf0);
        csc[cso1] = static_cast<uint8_t>(sf1);
      }
      if (k2d) __syncthreads();
    }

    const int64_t gr = r0 + rr;
    uint8_t* rdst = p.row_data + gr * (K / 2) + c0 / 2;
    uint8_t* rsc_p = p.row_scale.p + scale_index(p.row_scale, r0, c0 / 16);
    if (xpose) {
      // Thread (row rr, 16-byte chunk rq): units 2rq, 2rq + 1 of the row, i.e. blocks rb0 = 2rq and rb1.
      if (gr < M) {
        const int f = (rr >> 1) & 7;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int b = 2 * rq + h;
          if (c0 + 16 * b < K) {
            __stcs(reinterpret_cast<uint2*>(rdst + 8 * b), rowbuf[rr * 8 + (b ^ f)]);
            rsc_p[h ? rso1 : rso0] = blksf[rr >> 4][b];
          }
        }
      }
    } else if (p.rowwise) {
      uint32_t v[2][8];
      float bm[2];
      const uint32_t* rw = sw + rr * kWords;
      const int rs = swz(rr);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int wb = 32 * h + 8 * rq;  // first word of block rq + 4h
        const uint4 u0 = *reinterpret_cast<const uint4*>(&rw[wb ^ rs]);
        const uint4 u1 = *reinterpret_cast<const uint4*>(&rw[(wb + 4) ^ rs]);
        v[h][0] = u0.x; v[h][1] = u0.y; v[h][2] = u0.z; v[h][3] = u0.w;
        v[h][4] = u1.x; v[h][5] = u1.y; v[h][6] = u1.z; v[h][7] = u1.w;
        if (k2d) {
          bm[h] = blk2d[rr >> 4][rq + 4 * h];
        } else {
          const uint32_t m2 = absmax_tree<In, 8>(v[h]);
          bm[h] = fmaxf(half_lo(m2, kBf), half_hi(m2, kBf));
        }
      }
      const uint32_t sfs = row_scaled ? e4m3x2(sf_arg(bm[0], rsr[rr].k), sf_arg(bm[1], rsr[rr].k))
                                      : e4m3x2(sf_arg(bm[0], pc_r.k), sf_arg(bm[1], pc_r.k));
      if (gr < M) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int b = rq + 4 * h;
          if (c0 + 16 * b < K) {
            const uint32_t sf = (sfs >> (8 * h)) & 0xFFu;
            const float e = row_scaled ? nvfp4_enc(sf, rsr[rr].s_dec) : enc_tab[0][sf & 127u];
            const uint32_t lo = encode8_row<In>(v[h], e), hi = encode8_row<In>(v[h] + 4, e);
            __stcs(reinterpret_cast<uint2*>(rdst + 8 * b), make_uint2(lo, hi));
            rsc_p[h ? rso1 : rso0] = static_cast<uint8_t>(sf);
          }
        }
      }
    }
  }
}

/// One persistent CTA per resident slot (at most one per tile), with the dynamic shared memory of its S stages
/// and the largest shared-memory carveout, so that the 4 CTAs per SM the grid is sized for are all resident
/// whatever kernel ran before (the driver otherwise picks the carveout per launch). The attributes and the
/// occupancy are set and read once per kernel (per template instance).
template <typename In, bool k2d, int S>
void launch_fast_k(uint32_t n_tiles, const QuantizeArgs& p, uint32_t strip, cudaStream_t s) {
  static const int per_sm = [] {
    QTC_CUDA_CHECK(cudaFuncSetAttribute(nvfp4_fast_kernel<In, k2d, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kDynSmem<S>)));
    QTC_CUDA_CHECK(cudaFuncSetAttribute(nvfp4_fast_kernel<In, k2d, S>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared));
    int n = 0;
    QTC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, nvfp4_fast_kernel<In, k2d, S>, kThreads, kDynSmem<S>));
    return std::max(n, 1);
  }();
  int dev = 0, sms = 0;
  QTC_CUDA_CHECK(cudaGetDevice(&dev));
  QTC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  int64_t slots = static_cast<int64_t>(sms) * per_sm;
  if (const int64_t cap = detail::grid_stride_cap(); cap > 0) slots = std::min(slots, cap);
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(n_tiles, slots)));
  nvfp4_fast_kernel<In, k2d, S><<<grid, kThreads, kDynSmem<S>, s>>>(p, strip);
  QTC_CUDA_CHECK_LAUNCH();
}

/// Defaults: the fastest measured (reports/h200/quantize.md, section h27: 2 stages 1.5% faster than 3, strips of 8
/// 2% faster than 16 and 7% than 32).
constexpr int kDefaultStages = 2;
constexpr int kDefaultStrip = 8;

template <typename In>
void launch_fast_t(const QuantizeArgs& p, cudaStream_t s) {
  const uint32_t n_tiles = static_cast<uint32_t>(((p.K + kFC - 1) / kFC) * ((p.M + kFR - 1) / kFR));
  // The launch choices (LaunchOptions, checked by the dispatcher): stages 2 or 3, strips of 1..64 tiles; 0 the default.
  const bool two = (p.launch.nvfp4_stages == 0 ? kDefaultStages : p.launch.nvfp4_stages) == 2;
  const uint32_t h = static_cast<uint32_t>(p.launch.nvfp4_strip == 0 ? kDefaultStrip : p.launch.nvfp4_strip);
  if (p.nvfp4.tile_2d)
    two ? launch_fast_k<In, true, 2>(n_tiles, p, h, s) : launch_fast_k<In, true, 3>(n_tiles, p, h, s);
  else
    two ? launch_fast_k<In, false, 2>(n_tiles, p, h, s) : launch_fast_k<In, false, 3>(n_tiles, p, h, s);
}

}  // namespace

const char* fast_refusal(const QuantizeArgs& p) {
  if (needs_full(p)) return "4over6, stochastic rounding, RHT, torchao's order and the NaN rules run on the generic kernel";
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return "the input must be BF16 or F16";
  if (!p.vec_ok) return "x must be 16-byte aligned with rows of a multiple of 16 bytes";
  if (p.M % 16 != 0 || p.K % 16 != 0) return "M and K must be multiples of 16";
  if (((p.M + kFR - 1) / kFR) * ((p.K + kFC - 1) / kFC) >= (int64_t{1} << 30)) return "fewer than 2^30 tiles of 64 x 128";
  const auto a8 = [](const void* q) { return q == nullptr || reinterpret_cast<uintptr_t>(q) % 8 == 0; };
  if (!a8(p.row_data) || !a8(p.col_data)) return "the data planes must be 8-byte aligned";
  // Scale positions are split into a per-tile base and 32-bit per-thread offsets (see the kernel).
  const auto layout_ok = [](const ScaleOut& sc) {
    // The layouts whose offset is additive over tile origins (64-row / 4-column multiples): row-major ones and
    // both swizzles, untransposed. Any other layout takes the generic kernel.
    const Layout l = sc.geom.layout;
    const bool additive = l == Layout::kCompact || l == Layout::kPadded || l == Layout::kSwizzled || l == Layout::kSwizzled8x4;
    return additive && !sc.geom.transposed && sc.geom.buf_cols >= 0 && sc.geom.buf_cols < (int64_t{1} << 24);
  };
  if (!layout_ok(p.row_scale) || !layout_ok(p.col_scale)) return "the scale layout must not be swizzled-transposed, leading dimension < 2^24";
  return nullptr;
}

void launch_fast(const QuantizeArgs& p, cudaStream_t s) {
  if (p.dtype == DType::kBF16)
    launch_fast_t<__nv_bfloat16>(p, s);
  else if (p.dtype == DType::kF16)
    launch_fast_t<__half>(p, s);
  else
    QTC_FAIL("nvfp4 fast kernel: input must be BF16 or F16");
}

}  // namespace qtc::cuda::nvfp4
