/// \file nvfp4_simd.cpp
/// \brief Vectorized NVFP4 quantizer (profiles te and te_pyref; every option: 1x16, 16x16, row-scaled, RHT,
///        4over6, stochastic rounding), bit-exact to nvfp4.cpp. Per-block scale rules are the scalar ones
///        (simd.hpp); per-element work (amax, multiply, E2M1 encode, packing) runs on vectors. Columnwise
///        blocks are processed "vertically": N adjacent columns of a 16-row strip at once, one lane each.
///        Sums whose order matters (4over6 block errors) keep the scalar order: sequential per lane. The RHT of
///        the columnwise plane's input is rht_simd.cpp's.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/nvfp4_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>
#include <vector>

#include "internal.hpp"
#include "simd/ops-inl.h"
#include "simd/simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace qtc::ref::simd {
namespace HWY_NAMESPACE {

struct Nv {
  bool pyref = false;
  bool sr = false;
  bool f46 = false;
  bool mse = false;
  uint64_t seed = 0;
  float err_div = 2688.0f;  // 6 * e4m3_max
};

/// nb.code(v) for N lanes without 4over6 (rnd: the N random bytes when stochastic).
HWY_INLINE VI NvCode(const Nv& nv, VF v, const uint8_t* rnd) {
  if (nv.sr) {
    const DF df;
    const DI di;
    const VF u = hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(DU8(), rnd))), hn::Set(df, 1.0f / 256.0f));
    return EncodeE2M1Stochastic(v, u);
  }
  return nv.pyref ? EncodeE2M1<true>(v) : EncodeE2M1<false>(v);
}

/// elem_err of N lanes: |d| or d*d, d = RN(RN(RN(q * sf) * amax) / (6 * E4M3_MAX)) - x.
HWY_INLINE VF NvErr(const Nv& nv, VF x, VI code, VF dsf, VF amax) {
  const DF df;
  const VF t = hn::Mul(DecodeE2M1(code), dsf);
  const VF d = hn::Sub(hn::Div(hn::Mul(t, amax), hn::Set(df, nv.err_div)), x);
  return nv.mse ? hn::Mul(d, d) : hn::Abs(d);
}

/// 16 codes (int32 lanes, 0..15) at c[0..15] -> 8 packed bytes, element 2t in the low nibble of byte t.
HWY_INLINE void PackCodes16(const DI di, const VI* c, uint8_t* out) {
  const int64_t N = NF();
#if HWY_TARGET == HWY_SCALAR
  alignas(32) int32_t t[16];
  for (int64_t v = 0; v < 16 / N; ++v) hn::StoreU(c[v], di, t + v * N);
  for (int k = 0; k < 8; ++k) out[k] = static_cast<uint8_t>(t[2 * k] | (t[2 * k + 1] << 4));
#else
  for (int64_t k = 0, v = 0; k < 16; k += 2 * N, v += 2) {
    const VI even = hn::ConcatEven(di, c[v + 1], c[v]);
    const VI odd = hn::ConcatOdd(di, c[v + 1], c[v]);
    StoreBytes(hn::Or(even, hn::ShiftLeft<4>(odd)), out + k / 2);
  }
#endif
}

#if HWY_TARGET != HWY_SCALAR
/// nvfp4_scale_byte of N lanes; senc6 = S_enc * RN(1/6).
HWY_INLINE VI ScaleByteV(VF bamax, float senc6, bool pyref) {
  const DF df;
  const DI di;
  const VF v = hn::Mul(bamax, hn::Set(df, senc6));
  const auto nan = hn::IsNaN(v);
  VI sf = EncodeE4M3(hn::IfThenElse(nan, hn::Set(df, FLT_MAX), hn::Min(v, hn::Set(df, FLT_MAX))));
  if (pyref) sf = hn::IfThenElse(hn::RebindMask(di, nan), hn::Set(di, 0x7F), sf);
  return sf;
}
/// nvfp4_encode_factor of N lanes (dsf: decode_e4m3(sf)).
HWY_INLINE VF EncodeFactorV(VF dsf, float s_dec) {
  const DF df;
  const VF v = hn::Div(hn::Set(df, 1.0f), hn::Mul(dsf, hn::Set(df, s_dec)));
  return hn::IfThenElse(hn::IsNaN(v), v, hn::Min(v, hn::Set(df, FLT_MAX)));
}
/// encode_e4m3(std::fmin(v, 448)) of N lanes.
HWY_INLINE VI E4M3Fmin448(VF v) {
  const DF df;
  return EncodeE4M3(hn::IfThenElse(hn::IsNaN(v), hn::Set(df, 448.0f), hn::Min(v, hn::Set(df, 448.0f))));
}

/// Eight consecutive 1x16 blocks of one row (x: 128 floats), one block per lane (N == 8): the elements are
/// transposed in registers so that the per-block reductions (amax, 4over6 errors in the scalar order) and the
/// per-block scale rules run on vectors. tile_amax8 (if given): the 8 blocks' amax. idx: SR index of element 0.
HWY_INLINE void RowBlocks8(const Nv& nv, const float* x, const GlobalScale& g, const float* tile_amax8, uint8_t* data,
                           uint8_t* scales, uint32_t plane, uint64_t idx) {
  const DF df;
  const DI di;
  VF e[16];
  for (int l = 0; l < 8; ++l) {
    e[l] = hn::LoadU(df, x + l * 16);
    e[8 + l] = hn::LoadU(df, x + l * 16 + 8);
  }
  Transpose8x8(df, e);
  Transpose8x8(df, e + 8);  // e[k] lane l = x[16 l + k]
  VF bam;
  if (tile_amax8 != nullptr) {
    bam = hn::LoadU(df, tile_amax8);
  } else {
    AmaxAcc a;
    for (int k = 0; k < 16; ++k) a.add(e[k]);
    bam = a.lanes(nv.pyref);
  }
  VI c[16];
  VI sf;
  if (nv.f46) {
    const VF base = hn::Mul(hn::Div(bam, hn::Set(df, 6.0f)), hn::Set(df, g.s_enc));
    const VI sf4 = E4M3Fmin448(hn::Mul(base, hn::Set(df, 1.5f)));
    const VI sf6 = E4M3Fmin448(base);
    const VF d4 = hn::GatherIndex(df, kE4M3Table.data(), sf4), d6 = hn::GatherIndex(df, kE4M3Table.data(), sf6);
    const VF enc4 = EncodeFactorV(d4, g.s_dec), enc6 = EncodeFactorV(d6, g.s_dec);
    const VF am = hn::Set(df, g.amax);
    VF e4 = hn::Zero(df), e6 = hn::Zero(df);
    VI q6[16];
    for (int k = 0; k < 16; ++k) {
      c[k] = NvCode(nv, hn::Mul(e[k], enc4), nullptr);
      q6[k] = NvCode(nv, hn::Mul(e[k], enc6), nullptr);
      e4 = hn::Add(e4, NvErr(nv, e[k], c[k], d4, am));
      e6 = hn::Add(e6, NvErr(nv, e[k], q6[k], d6, am));
    }
    const auto four = hn::RebindMask(di, hn::Lt(e4, e6));
    sf = hn::IfThenElse(four, sf4, sf6);
    for (int k = 0; k < 16; ++k) c[k] = hn::IfThenElse(four, c[k], q6[k]);
  } else {
    sf = ScaleByteV(bam, g.s_enc * kInv6, nv.pyref);
    const VF enc = EncodeFactorV(hn::GatherIndex(df, kE4M3Table.data(), sf), g.s_dec);
    alignas(32) uint8_t rb[8][16], rbt[16][8];
    if (nv.sr) {
      for (int l = 0; l < 8; ++l) sr_block_bytes(nv.seed, plane, idx + 16 * static_cast<uint64_t>(l), rb[l]);
      for (int k = 0; k < 16; ++k)
        for (int l = 0; l < 8; ++l) rbt[k][l] = rb[l][k];
    }
    for (int k = 0; k < 16; ++k) c[k] = NvCode(nv, hn::Mul(e[k], enc), rbt[k]);
  }
  VI pk[8];
  for (int t = 0; t < 8; ++t) pk[t] = hn::Or(c[2 * t], hn::ShiftLeft<4>(c[2 * t + 1]));
  Transpose8x8(di, pk);  // pk[l] lane t = byte t of block l
  for (int l = 0; l < 8; ++l) StoreBytes(pk[l], data + 8 * l);
  StoreBytes(sf, scales);
}
#endif

/// quantize_rows_1d: n rows of `len` (row-major src), 1x16 blocks. gs[i] (gs_per_row) or gs[0] is each row's
/// global scale; tile_amax (if given) replaces each block's amax by its 16x16 tile's (blocks b of every row);
/// stochastic rounding keys block (i, b) by index idx0 + i * idx_stride + 16 b of `plane`.
void RowBlocks(const Nv& nv, const float* src, int64_t ld, int64_t n, int64_t len, const GlobalScale* gs, bool gs_per_row,
               const float* tile_amax, uint8_t* data, uint8_t* scales, uint32_t plane, uint64_t idx0, uint64_t idx_stride) {
  const DF df;
  const DI di;
  const int64_t N = NF();
  const int64_t blocks = len / 16;
  VI c[16];
  VI c4[16], c6[16];
  for (int64_t i = 0; i < n; ++i) {
    const GlobalScale& g = gs[gs_per_row ? i : 0];
    const float* row = src + i * ld;
    int64_t b = 0;
#if HWY_TARGET != HWY_SCALAR
    if (N == 8)
      for (; b + 8 <= blocks; b += 8)
        RowBlocks8(nv, row + b * 16, g, tile_amax != nullptr ? tile_amax + b : nullptr, data + i * (len / 2) + b * 8,
                   scales + i * blocks + b, plane, idx0 + static_cast<uint64_t>(i) * idx_stride + static_cast<uint64_t>(b) * 16);
#endif
    for (; b < blocks; ++b) {
      const float* x = row + b * 16;
      float bamax;
      if (tile_amax != nullptr) {
        bamax = tile_amax[b];
      } else {
        AmaxAcc a;
        for (int64_t k = 0; k < 16; k += N) a.add(hn::LoadU(df, x + k));
        bamax = a.reduce(nv.pyref);
      }
      uint8_t sf;
      if (nv.f46) {
        Candidate k6{};
        const Candidate k4 = nvfp4_candidates(bamax, g, k6);
        alignas(32) float e4a[16], e6a[16];
        const VF enc4 = hn::Set(df, k4.enc), enc6 = hn::Set(df, k6.enc);
        const VF d4 = hn::Set(df, decode_e4m3(k4.sf)), d6 = hn::Set(df, decode_e4m3(k6.sf)), am = hn::Set(df, g.amax);
        for (int64_t k = 0, v = 0; k < 16; k += N, ++v) {
          const VF xv = hn::LoadU(df, x + k);
          c4[v] = NvCode(nv, hn::Mul(xv, enc4), nullptr);
          c6[v] = NvCode(nv, hn::Mul(xv, enc6), nullptr);
          hn::StoreU(NvErr(nv, xv, c4[v], d4, am), df, e4a + k);
          hn::StoreU(NvErr(nv, xv, c6[v], d6, am), df, e6a + k);
        }
        float e4 = 0.0f, e6 = 0.0f;
        for (int k = 0; k < 16; ++k) {
          e4 = e4 + e4a[k];
          e6 = e6 + e6a[k];
        }
        const bool four = e4 < e6;
        sf = four ? k4.sf : k6.sf;
        PackCodes16(di, four ? c4 : c6, data + i * (len / 2) + b * 8);
      } else {
        sf = nvfp4_scale_byte(bamax, g, nv.pyref);
        const VF enc = hn::Set(df, nvfp4_encode_factor(sf, g));
        uint8_t rnd[16];
        if (nv.sr) sr_block_bytes(nv.seed, plane, idx0 + static_cast<uint64_t>(i) * idx_stride + static_cast<uint64_t>(b) * 16, rnd);
        for (int64_t k = 0, v = 0; k < 16; k += N, ++v) c[v] = NvCode(nv, hn::Mul(hn::LoadU(df, x + k), enc), rnd + k);
        PackCodes16(di, c, data + i * (len / 2) + b * 8);
      }
      scales[i * blocks + b] = sf;
    }
  }
}

/// The columnwise blocks of one 16-row strip (rows 16 gi .. 16 gi + 15 of x, as float, row-major with K
/// columns): column j's block goes to row j of the (K, M) plane. gcol[j] (per_col) or gcol[0] is each column's
/// global scale; tile_amax (if given) is the amax of each 16x16 tile (columns 16t .. 16t + 15).
/// The packed bytes go to tmp (8 rows of K: byte p of every column); FlushCols writes them into the plane.
void ColBlocks(const Nv& nv, const float* strip, int64_t K, int64_t SK, int64_t TK, const GlobalScale* gcol, bool per_col, const float* tile_amax,
               Plane& colp, int64_t gi, int64_t M, uint8_t* tmp) {
  const DF df;
  const DI di;
  const int64_t N = NF();
  alignas(32) float bam[8], encl[8], enc6l[8], d4l[8], d6l[8], aml[8];
  uint8_t sfl[8], sf6l[8];
  alignas(32) uint8_t rb[8][16], rbt[16][8];
  const int64_t mb = M / 16;
  for (int64_t j0 = 0; j0 < K; j0 += N) {
    if (tile_amax != nullptr) {
      for (int64_t l = 0; l < N; ++l) bam[l] = tile_amax[(j0 + l) / 16];
    } else {
      AmaxAcc a;
      for (int r = 0; r < 16; ++r) a.add(hn::LoadU(df, strip + r * SK + j0));
      hn::StoreU(a.lanes(nv.pyref), df, bam);
    }
    if (!nv.f46) {
#if HWY_TARGET != HWY_SCALAR
      if (N == 8 && !per_col) {  // one global scale: the per-block rules on vectors
        const VI sfv = ScaleByteV(hn::LoadU(df, bam), gcol[0].s_enc * kInv6, nv.pyref);
        hn::StoreU(EncodeFactorV(hn::GatherIndex(df, kE4M3Table.data(), sfv), gcol[0].s_dec), df, encl);
        StoreBytes(sfv, sfl);
        for (int64_t l = 0; l < N; ++l) colp.scale.bytes[static_cast<size_t>((j0 + l) * mb + gi)] = sfl[l];
      } else
#endif
      for (int64_t l = 0; l < N; ++l) {
        const GlobalScale& g = gcol[per_col ? j0 + l : 0];
        sfl[l] = nvfp4_scale_byte(bam[l], g, nv.pyref);
        encl[l] = nvfp4_encode_factor(sfl[l], g);
        colp.scale.bytes[static_cast<size_t>((j0 + l) * mb + gi)] = sfl[l];
      }
      if (nv.sr) {
        for (int64_t l = 0; l < N; ++l) sr_block_bytes(nv.seed, 1, static_cast<uint64_t>((j0 + l) * M + gi * 16), rb[l]);
        for (int r = 0; r < 16; ++r)
          for (int64_t l = 0; l < N; ++l) rbt[r][l] = rb[l][r];
      }
      const VF enc = hn::LoadU(df, encl);
      for (int r = 0; r < 16; r += 2) {
        const VI lo = NvCode(nv, hn::Mul(hn::LoadU(df, strip + r * SK + j0), enc), rbt[r]);
        const VI hi = NvCode(nv, hn::Mul(hn::LoadU(df, strip + (r + 1) * SK + j0), enc), rbt[r + 1]);
        StoreBytes(hn::Or(lo, hn::ShiftLeft<4>(hi)), tmp + (r / 2) * TK + j0);
      }
    } else {
      for (int64_t l = 0; l < N; ++l) {
        const GlobalScale& g = gcol[per_col ? j0 + l : 0];
        Candidate k6{};
        const Candidate k4 = nvfp4_candidates(bam[l], g, k6);
        sfl[l] = k4.sf;
        sf6l[l] = k6.sf;
        encl[l] = k4.enc;
        enc6l[l] = k6.enc;
        d4l[l] = decode_e4m3(k4.sf);
        d6l[l] = decode_e4m3(k6.sf);
        aml[l] = g.amax;
      }
      const VF enc4 = hn::LoadU(df, encl), enc6 = hn::LoadU(df, enc6l);
      const VF d4 = hn::LoadU(df, d4l), d6 = hn::LoadU(df, d6l), am = hn::LoadU(df, aml);
      VF e4 = hn::Zero(df), e6 = hn::Zero(df);
      VI q4[16], q6[16];
      for (int r = 0; r < 16; ++r) {
        const VF xv = hn::LoadU(df, strip + r * SK + j0);
        q4[r] = NvCode(nv, hn::Mul(xv, enc4), nullptr);
        q6[r] = NvCode(nv, hn::Mul(xv, enc6), nullptr);
        e4 = hn::Add(e4, NvErr(nv, xv, q4[r], d4, am));
        e6 = hn::Add(e6, NvErr(nv, xv, q6[r], d6, am));
      }
      const auto four = hn::RebindMask(di, hn::Lt(e4, e6));
      alignas(32) int32_t fl[8];
      hn::StoreU(hn::VecFromMask(di, four), di, fl);
      for (int64_t l = 0; l < N; ++l)
        colp.scale.bytes[static_cast<size_t>((j0 + l) * mb + gi)] = fl[l] != 0 ? sfl[l] : sf6l[l];
      for (int r = 0; r < 16; r += 2) {
        const VI lo = hn::IfThenElse(four, q4[r], q6[r]);
        const VI hi = hn::IfThenElse(four, q4[r + 1], q6[r + 1]);
        StoreBytes(hn::Or(lo, hn::ShiftLeft<4>(hi)), tmp + (r / 2) * TK + j0);
      }
    }
  }
}

/// The packed columnwise bytes of `strips` consecutive strips from gi0 (tmp: 8 * strips rows of K, as ColBlocks
/// wrote them) -> plane rows j, bytes 8 gi0 .. 8 (gi0 + strips): one run of up to 64 bytes per plane row.
void FlushCols(const uint8_t* tmp, int64_t strips, int64_t K, int64_t TK, Plane& colp, int64_t gi0, int64_t M) {
  TransposeBytes(tmp, TK, 8 * strips, K, colp.data.data() + gi0 * 8, M / 2);
}

/// 16x16 4over6 (quantize_2d with fourover6): one choice per tile from its error summed per row, then
/// pairwise over rows; both planes share the tile's scale and codes.
void Tiles4over6(const Nv& nv, const float* strip, int64_t K, int64_t SK, const GlobalScale& g, int64_t gi, int64_t M, Plane* rowp,
                 Plane* colp) {
  const DF df;
  const DI di;
  const int64_t N = NF();
  const int64_t kb = K / 16;
  alignas(32) int32_t q4[16][16], q6[16][16];
  alignas(32) float er4[16][16], er6[16][16];
  for (int64_t c = 0; c < kb; ++c) {
    AmaxAcc a;
    for (int r = 0; r < 16; ++r)
      for (int64_t k = 0; k < 16; k += N) a.add(hn::LoadU(df, strip + r * SK + c * 16 + k));
    const float bamax = a.reduce(nv.pyref);
    Candidate k6{};
    const Candidate k4 = nvfp4_candidates(bamax, g, k6);
    const VF enc4 = hn::Set(df, k4.enc), enc6 = hn::Set(df, k6.enc);
    const VF d4 = hn::Set(df, decode_e4m3(k4.sf)), d6 = hn::Set(df, decode_e4m3(k6.sf)), am = hn::Set(df, g.amax);
    for (int r = 0; r < 16; ++r)
      for (int64_t k = 0; k < 16; k += N) {
        const VF xv = hn::LoadU(df, strip + r * SK + c * 16 + k);
        const VI a4 = NvCode(nv, hn::Mul(xv, enc4), nullptr);
        const VI a6 = NvCode(nv, hn::Mul(xv, enc6), nullptr);
        hn::StoreU(a4, di, &q4[r][k]);
        hn::StoreU(a6, di, &q6[r][k]);
        hn::StoreU(NvErr(nv, xv, a4, d4, am), df, &er4[r][k]);
        hn::StoreU(NvErr(nv, xv, a6, d6, am), df, &er6[r][k]);
      }
    float e4[16], e6[16];
    for (int r = 0; r < 16; ++r) {
      e4[r] = 0.0f;
      e6[r] = 0.0f;
      for (int k = 0; k < 16; ++k) {
        e4[r] = e4[r] + er4[r][k];
        e6[r] = e6[r] + er6[r][k];
      }
    }
    for (int w = 8; w >= 1; w /= 2)
      for (int r = 0; r < w; ++r) {
        e4[r] = e4[r] + e4[r + w];
        e6[r] = e6[r] + e6[r + w];
      }
    const bool four = e4[0] < e6[0];
    const uint8_t sf = four ? k4.sf : k6.sf;
    const int32_t(*q)[16] = four ? q4 : q6;
    if (rowp != nullptr) {
      for (int r = 0; r < 16; ++r) {
        const int64_t i = gi * 16 + r;
        rowp->scale.bytes[static_cast<size_t>(i * kb + c)] = sf;
        uint8_t* o = rowp->data.data() + i * (K / 2) + c * 8;
        for (int t = 0; t < 8; ++t) o[t] = static_cast<uint8_t>(q[r][2 * t] | (q[r][2 * t + 1] << 4));
      }
    }
    if (colp != nullptr) {
      for (int k = 0; k < 16; ++k) {
        const int64_t j = c * 16 + k;
        colp->scale.bytes[static_cast<size_t>(j * (M / 16) + gi)] = sf;
        uint8_t* o = colp->data.data() + j * (M / 2) + gi * 8;
        for (int t = 0; t < 8; ++t) o[t] = static_cast<uint8_t>(q[2 * t][k] | (q[2 * t + 1][k] << 4));
      }
    }
  }
}

/// Per row (per_column = false) or per column amax of x, NaN-aware.
std::vector<float> LineAmax(const MatrixView& x, bool per_column, bool propagate) {
  const DF df;
  const int64_t N = NF();
  const int64_t M = x.rows, K = x.cols;
  std::vector<float> out(static_cast<size_t>(per_column ? K : M), 0.0f);
  if (M == 0 || K == 0) return out;  // every line is empty: amax 0
  if (!per_column) {
    detail::parallel_for(M, [&](int64_t b, int64_t e) {
      std::vector<float> buf(static_cast<size_t>(K));
      for (int64_t i = b; i < e; ++i) {
        LoadRows(x, i, 1, buf.data());
        out[static_cast<size_t>(i)] = AmaxOf(buf.data(), K, propagate);
      }
    });
    return out;
  }
  // Columns: each thread reduces a range of rows; the max is order independent, NaN sticks.
  const int64_t threads = std::min<int64_t>(detail::cpu_threads(), std::max<int64_t>(M, 1));
  std::vector<std::vector<float>> acc(threads, std::vector<float>(static_cast<size_t>(K), 0.0f));
  std::vector<std::vector<uint8_t>> nan(threads, std::vector<uint8_t>(static_cast<size_t>(K), 0));
  const int64_t chunk = detail::ceil_div(M, threads);
  detail::parallel_for(threads, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      std::vector<float> buf(static_cast<size_t>(K));
      float* ac = acc[static_cast<size_t>(t)].data();
      uint8_t* nn = nan[static_cast<size_t>(t)].data();
      for (int64_t i = t * chunk; i < std::min(M, (t + 1) * chunk); ++i) {
        LoadRows(x, i, 1, buf.data());
        int64_t j = 0;
        for (; j + N <= K; j += N) {
          const VF v = hn::LoadU(df, buf.data() + j);
          hn::StoreU(hn::Max(hn::LoadU(df, ac + j), AbsNoNaN(v)), df, ac + j);
        }
        for (; j < K; ++j) {
          const float v = std::fabs(buf[static_cast<size_t>(j)]);
          if (v > ac[j]) ac[j] = v;
        }
        if (propagate)
          for (j = 0; j < K; ++j) nn[j] |= static_cast<uint8_t>(std::isnan(buf[static_cast<size_t>(j)]));
      }
    }
  });
  for (int64_t j = 0; j < K; ++j) {
    float m = 0.0f;
    bool n = false;
    for (int64_t t = 0; t < threads; ++t) {
      m = std::max(m, acc[static_cast<size_t>(t)][static_cast<size_t>(j)]);
      n = n || nan[static_cast<size_t>(t)][static_cast<size_t>(j)] != 0;
    }
    out[static_cast<size_t>(j)] = (propagate && n) ? NAN : m;
  }
  return out;
}

QuantizedTensor QuantizeNvfp4(const MatrixView& x, const Recipe& r, const float* amax_override) {
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  q.recipe = r;
  q.input_dtype = x.dtype;
  q.rows = M;
  q.cols = K;
  Nv nv;
  nv.pyref = profile_rules(r.profile).nvfp4_neg_zero_positive;  // with nan_scale and nan_amax (dispatch.cpp)
  const Nvfp4Options& o = r.nvfp4();
  nv.sr = o.stochastic;
  nv.f46 = o.fourover6;
  nv.mse = o.fourover6_err == ErrMode::kMSE;
  nv.seed = o.seed;
  nv.err_div = 6.0f * static_cast<float>(o.e4m3_max);
  const bool propagate = nv.pyref;

  GlobalScale g_row, g_col;
  std::vector<GlobalScale> row_scales, col_scales;
  HostMatrix rht_y;
  if (o.row_scaled) {
    for (float a : LineAmax(x, false, propagate)) row_scales.push_back(make_global(a, r));
    if (r.columnwise)
      for (float a : LineAmax(x, true, propagate)) col_scales.push_back(make_global(a, r));
  } else {
    float ar, ac;
    if (amax_override != nullptr) {
      ar = amax_override[0];
      ac = amax_override[1];
    } else {
      ar = simd::amax(x, propagate);
      ac = ar;
      if (o.rht && r.columnwise) {
        rht_y = simd::rht_transform(x, o.rht_sign_mask);
        ac = simd::amax(rht_y.view(), propagate);
      }
    }
    if (o.rht && r.columnwise && rht_y.numel() == 0 && M * K > 0) rht_y = simd::rht_transform(x, o.rht_sign_mask);
    g_row = make_global(ar, r);
    g_col = make_global(ac, r);
  }
  detail::start_output(q, r, x.dtype, M, K);  // planes as describe_plane says
  if (q.rowwise) detail::fill_amax(*q.rowwise, r, row_scales, g_row);
  if (q.columnwise) detail::fill_amax(*q.columnwise, r, col_scales, g_col);
  if (M == 0 || K == 0) return q;

  const int64_t kb = K / 16;
  // Strips of 16 rows, kGroup at a time: the columnwise bytes of a group go out as one run per plane row.
  constexpr int64_t kGroup = 8;
  const int64_t strips = M / 16;
  detail::parallel_for(detail::ceil_div(strips, kGroup), [&](int64_t g0, int64_t g1) {
    const DF df;
    const int64_t N = NF();
    // Row strides padded off powers of two: 16 rows read column by column must not share one cache set.
    const int64_t SK = K + 16, TK = K + 64;
    std::vector<float> strip(static_cast<size_t>(16 * SK)), tile_amax(static_cast<size_t>(kb));
    std::vector<uint8_t> tmp(static_cast<size_t>(kGroup * 8 * TK));
    for (int64_t grp = g0; grp < g1; ++grp) {
      const int64_t s0 = grp * kGroup, s1 = std::min(strips, s0 + kGroup);
      bool cols_in_tmp = false;
      for (int64_t gi = s0; gi < s1; ++gi) {
        uint8_t* t = tmp.data() + (gi - s0) * 8 * TK;
        for (int rr = 0; rr < 16; ++rr) LoadRows(x, gi * 16 + rr, 1, strip.data() + rr * SK);
        if (o.tile_2d) {
          if (o.fourover6 && !o.stochastic) {
            Tiles4over6(nv, strip.data(), K, SK, g_row, gi, M, q.rowwise ? &*q.rowwise : nullptr, q.columnwise ? &*q.columnwise : nullptr);
            continue;
          }
          for (int64_t c = 0; c < kb; ++c) {
            AmaxAcc a;
            for (int rr = 0; rr < 16; ++rr)
              for (int64_t k = 0; k < 16; k += N) a.add(hn::LoadU(df, strip.data() + rr * SK + c * 16 + k));
            tile_amax[static_cast<size_t>(c)] = a.reduce(propagate);
          }
          if (r.rowwise)
            RowBlocks(nv, strip.data(), SK, 16, K, &g_row, false, tile_amax.data(), q.rowwise->data.data() + gi * 16 * (K / 2),
                      q.rowwise->scale.bytes.data() + gi * 16 * kb, 0, static_cast<uint64_t>(gi * 16 * K), static_cast<uint64_t>(K));
          if (r.columnwise) {
            ColBlocks(nv, strip.data(), K, SK, TK, &g_col, false, tile_amax.data(), *q.columnwise, gi, M, t);
            cols_in_tmp = true;
          }
          continue;
        }
        if (r.rowwise) {
          const GlobalScale* gs = o.row_scaled ? row_scales.data() + gi * 16 : &g_row;
          RowBlocks(nv, strip.data(), SK, 16, K, gs, o.row_scaled, nullptr, q.rowwise->data.data() + gi * 16 * (K / 2),
                    q.rowwise->scale.bytes.data() + gi * 16 * kb, 0, static_cast<uint64_t>(gi * 16 * K), static_cast<uint64_t>(K));
        }
        if (r.columnwise && !o.rht) {
          const GlobalScale* gc = o.row_scaled ? col_scales.data() : &g_col;
          ColBlocks(nv, strip.data(), K, SK, TK, gc, o.row_scaled, nullptr, *q.columnwise, gi, M, t);
          cols_in_tmp = true;
        }
      }
      if (cols_in_tmp) FlushCols(tmp.data(), s1 - s0, K, TK, *q.columnwise, s0, M);
    }
  });

  if (o.rht && r.columnwise) {
    // Columnwise plane of RHT(x^T): the rows of Y (K, M) quantized with blocks of 16 along M.
    const int64_t rows_per_chunk = 16;
    detail::parallel_for(detail::ceil_div(K, rows_per_chunk), [&](int64_t b, int64_t e) {
      std::vector<float> buf(static_cast<size_t>(rows_per_chunk * M));
      for (int64_t c = b; c < e; ++c) {
        const int64_t k0 = c * rows_per_chunk, n = std::min(rows_per_chunk, K - k0);
        LoadRows(rht_y.view(), k0, n, buf.data());
        RowBlocks(nv, buf.data(), M, n, M, &g_col, false, nullptr, q.columnwise->data.data() + k0 * (M / 2),
                  q.columnwise->scale.bytes.data() + k0 * (M / 16), 1, static_cast<uint64_t>(k0 * M), static_cast<uint64_t>(M));
      }
    });
  }
  return q;
}

}  // namespace HWY_NAMESPACE
}  // namespace qtc::ref::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qtc::ref::simd {
HWY_EXPORT(QuantizeNvfp4);

QuantizedTensor quantize_nvfp4(const MatrixView& x, const Recipe& r, const float* amax_override) {
  return HWY_DYNAMIC_DISPATCH(QuantizeNvfp4)(x, r, amax_override);
}
}  // namespace qtc::ref::simd
#endif
