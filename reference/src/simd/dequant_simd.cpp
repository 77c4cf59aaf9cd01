/// \file dequant_simd.cpp
/// \brief Vectorized dequantize() (quantize.cpp) for every recipe but profile torchao, to F32 or BF16 output,
///        bit-exact to the scalar one: each value is the same product (same operands, same order), rounded
///        once to the output type. Plane rows are decoded kGroup at a time into a float buffer, then stored
///        as rows (rowwise planes) or, transposed, as kGroup consecutive values of each output row.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/dequant_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>
#include <vector>

#include "internal.hpp"
#include "qtc/kind.hpp"
#include "qtc/quantize.hpp"
#include "simd/ops-inl.h"
#include "simd/simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace qtc::ref::simd {
namespace HWY_NAMESPACE {

/// N values -> out + i (F32, or BF16 rounded RN-even).
HWY_INLINE void StoreOut(VF v, bool bf16, uint8_t* out, int64_t i) {
  if (bf16)
    StoreBF16(v, reinterpret_cast<uint16_t*>(out) + i);
  else
    hn::StoreU(v, DF(), reinterpret_cast<float*>(out) + i);
}

/// n floats -> out + i.
HWY_INLINE void StoreSpan(const float* v, int64_t n, bool bf16, uint8_t* out, int64_t i) {
  const DF df;
  const int64_t N = NF();
  int64_t t = 0;
  for (; t + N <= n; t += N) StoreOut(hn::LoadU(df, v + t), bf16, out, i + t);
  for (; t < n; ++t) {
    if (bf16)
      reinterpret_cast<uint16_t*>(out)[i + t] = f32_to_bf16(v[t]);
    else
      reinterpret_cast<float*>(out)[i + t] = v[t];
  }
}

/// decode_e8m0 of N bytes.
HWY_INLINE VF DecodeE8M0(const uint8_t* p) {
  const DF df;
  const DI di;
  const VI e = hn::PromoteTo(di, hn::LoadU(DU8(), p));
  VI bits = hn::ShiftLeft<23>(e);
  bits = hn::IfThenElse(hn::Eq(e, hn::Zero(di)), hn::Set(di, 0x00400000), bits);
  bits = hn::IfThenElse(hn::Eq(e, hn::Set(di, 0xFF)), hn::Set(di, 0x7FFFFFFF), bits);
  return hn::BitCast(df, bits);
}

/// decode_e4m3 / decode_e5m2 (the values of kE4M3Table / kE5M2Table) of N codes, from the bits.
template <bool kE5M2>
HWY_INLINE VF DecodeFp8(const uint8_t* p) {
  const DF df;
  const DI di;
  const VI c = hn::PromoteTo(di, hn::LoadU(DU8(), p));
  const VI sign = hn::ShiftLeft<24>(hn::And(c, hn::Set(di, 0x80)));
  constexpr int kMan = kE5M2 ? 2 : 3;
  const VI e = hn::And(hn::ShiftRight<kMan>(c), hn::Set(di, kE5M2 ? 0x1F : 0xF));
  const VI m = hn::And(c, hn::Set(di, kE5M2 ? 3 : 7));
  const VI normal = hn::Or(hn::ShiftLeft<23>(hn::Add(e, hn::Set(di, kE5M2 ? 112 : 120))), hn::ShiftLeft<23 - kMan>(m));
  const VI sub = hn::BitCast(di, hn::Mul(hn::ConvertTo(df, m), hn::Set(df, kE5M2 ? 0x1p-16f : 0x1p-9f)));
  VI mag = hn::IfThenElse(hn::Eq(e, hn::Zero(di)), sub, normal);
  VI v = hn::Or(mag, sign);
  if constexpr (kE5M2) {
    // e == 31: +-Inf (m == 0) or a NaN carrying the code's sign
    const VI special = hn::Or(sign, hn::IfThenElse(hn::Eq(m, hn::Zero(di)), hn::Set(di, 0x7F800000), hn::Set(di, 0x7FC00000)));
    v = hn::IfThenElse(hn::Eq(e, hn::Set(di, 0x1F)), special, v);
  } else {
    v = hn::IfThenElse(hn::Eq(hn::And(c, hn::Set(di, 0x7F)), hn::Set(di, 0x7F)), hn::Set(di, 0x7FC00000), v);  // NaN, positive
  }
  return hn::BitCast(df, v);
}
HWY_INLINE VF DecodeFp8(const float* tab, const uint8_t* p) {
  return tab == kE5M2Table.data() ? DecodeFp8<true>(p) : DecodeFp8<false>(p);
}

/// The 16 values of one NVFP4 block (8 bytes d, scale s_blk): kE2M1Values[code] * s_blk, as in the scalar table.
HWY_INLINE void DecodeNvBlock(const uint8_t* d, float s_blk, float* out) {
  const DF df;
  const int64_t N = NF();
  if (N == 8) {
    const DU du;
    const DI di;
    const VF s = hn::Set(df, s_blk);
    const VF lo = hn::Mul(hn::LoadU(df, kE2M1Values), s), hi = hn::Mul(hn::LoadU(df, kE2M1Values + 8), s);
    alignas(32) static constexpr uint32_t kShift[8] = {0, 4, 8, 12, 16, 20, 24, 28};
    const VU sh = hn::Load(du, kShift);
    for (int h = 0; h < 2; ++h) {
      uint32_t w;
      std::memcpy(&w, d + 4 * h, 4);
      const VU idx = hn::And(hn::Set(du, w) >> sh, hn::Set(du, 0xFu));
      const auto i7 = hn::IndicesFromVec(df, hn::BitCast(di, hn::And(idx, hn::Set(du, 7u))));
      const auto top = hn::RebindMask(df, hn::Ne(hn::And(idx, hn::Set(du, 8u)), hn::Zero(du)));
      hn::StoreU(hn::IfThenElse(top, hn::TableLookupLanes(hi, i7), hn::TableLookupLanes(lo, i7)), df, out + 8 * h);
    }
    return;
  }
  float table[16];
  for (int c = 0; c < 16; ++c) table[c] = kE2M1Values[c] * s_blk;
  for (int t = 0; t < 8; ++t) {
    out[2 * t] = table[d[t] & 0xF];
    out[2 * t + 1] = table[d[t] >> 4];
  }
}

/// How a plane's elements decode: what the kinds' modules (kinds/<kind>_kind.cpp) name through the entry points
/// below. E2M1 codes times E4M3 block scales (NVFP4); FP8 codes times E8M0 scales, data in x's orientation in both
/// planes (MXFP8); FP8 codes times F32 block scales or the tensor's scale_inv (FP8 block, FP8 tensor).
enum class Decode { kE2M1E4M3, kFp8E8M0, kFp8F32 };

HostMatrix DequantizeAs(const QuantizedTensor& q, PlaneKind pk, DType out, Decode how) {
  const Plane& p = q.plane(pk);
  const Recipe& r = q.recipe;
  const int64_t M = q.rows, K = q.cols;
  const bool col = pk == PlaneKind::kColumnwise;
  const bool bf16 = out == DType::kBF16;
  HostMatrix y(out, M, K);
  if (M == 0 || K == 0) return y;  // nothing to decode, however long the other extent
  uint8_t* yb = y.bytes.data();
  const DF df;
  const int64_t N = NF();

  // Transposed planes: plane row a is output column a. Each thread takes a range of output rows (plane columns),
  // W at a time, and sweeps the plane rows kT at a time: a kT x W tile is decoded, then each of its W output rows
  // gets kT consecutive values (one cache line for BF16), so every output row is written front to back.
  constexpr int64_t kT = 32;
  auto transposed = [&](int64_t W, const auto& decode) {  // decode(a, b0, n, float* out): plane row a, columns b0..b0+n
    const int64_t rows = p.data_rows, len = col ? M : K;
    detail::parallel_for(detail::ceil_div(len, W), [&](int64_t t0, int64_t t1) {
      std::vector<float> tile(static_cast<size_t>(kT * W));
      alignas(32) float colv[kT];
      for (int64_t tb = t0; tb < t1; ++tb) {
        const int64_t b0 = tb * W, w = std::min(W, len - b0);
        for (int64_t a0 = 0; a0 < rows; a0 += kT) {
          const int64_t n = std::min(kT, rows - a0);
          for (int64_t t = 0; t < n; ++t) decode(a0 + t, b0, w, tile.data() + t * W);
          int64_t b = 0;
#if HWY_TARGET != HWY_SCALAR
          if (N == 8 && n == kT) {  // 8x8 blocks transposed in registers
            for (; b + 8 <= w; b += 8)
              for (int64_t t0 = 0; t0 < kT; t0 += 8) {
                VF rr[8];
                for (int i = 0; i < 8; ++i) rr[i] = hn::LoadU(df, tile.data() + (t0 + i) * W + b);
                Transpose8x8(df, rr);
                for (int i = 0; i < 8; ++i) StoreOut(rr[i], bf16, yb, (b0 + b + i) * K + a0 + t0);
              }
          }
#endif
          for (; b < w; ++b) {
            for (int64_t t = 0; t < n; ++t) colv[t] = tile[static_cast<size_t>(t * W + b)];
            StoreSpan(colv, n, bf16, yb, (b0 + b) * K + a0);
          }
        }
      }
    });
  };

  switch (how) {
    case Decode::kE2M1E4M3: {
      const Nvfp4BlockDequant block_scale(r);  // the scale ref::dequantize applies (one formula for both paths)
      auto decode = [&](int64_t a, int64_t b0, int64_t n, float* v) {
        const float am = p.amax.size() > 1 ? p.amax[static_cast<size_t>(a)] : p.amax.at(0);
        const uint8_t* d = p.data.data() + a * p.data_cols;
        const uint8_t* sc = p.scale.bytes.data() + a * p.scale.cols;
        for (int64_t b = b0; b < b0 + n; b += 16) {
          const float s_blk = block_scale(am, sc[b / 16]);
          DecodeNvBlock(d + b / 2, s_blk, v + (b - b0));
        }
      };
      if (col) {
        transposed(256, decode);
      } else {
        detail::parallel_for(M, [&](int64_t a0, int64_t a1) {
          std::vector<float> v(static_cast<size_t>(K));
          for (int64_t a = a0; a < a1; ++a) {
            decode(a, 0, K, v.data());
            StoreSpan(v.data(), K, bf16, yb, a * K);
          }
        });
      }
      break;
    }
    case Decode::kFp8E8M0: {
      // Data keeps x's orientation in both planes; only the scale blocks differ.
      const float* tab = r.fp8_type() == Fp8Type::kE4M3 ? kE4M3Table.data() : kE5M2Table.data();
      detail::parallel_for(M, [&](int64_t i0, int64_t i1) {
        std::vector<float> v(static_cast<size_t>(K));
        for (int64_t i = i0; i < i1; ++i) {
          const uint8_t* d = p.data.data() + i * K;
          int64_t j = 0;
          if (col) {
            const uint8_t* srow = p.scale.bytes.data() + (i / 32) * p.scale.cols;
            for (; j + N <= K; j += N) hn::StoreU(hn::Mul(DecodeE8M0(srow + j), DecodeFp8(tab, d + j)), df, v.data() + j);
            for (; j < K; ++j) v[static_cast<size_t>(j)] = decode_e8m0(srow[j]) * tab[d[j]];
          } else {
            const uint8_t* srow = p.scale.bytes.data() + i * p.scale.cols;
            for (int64_t c = 0; c * 32 < K; ++c) {
              const float s = decode_e8m0(srow[c]);
              const VF sv = hn::Set(df, s);
              const int64_t j1 = std::min(K, c * 32 + 32);
              for (j = c * 32; j + N <= j1; j += N) hn::StoreU(hn::Mul(sv, DecodeFp8(tab, d + j)), df, v.data() + j);
              for (; j < j1; ++j) v[static_cast<size_t>(j)] = s * tab[d[j]];
            }
          }
          StoreSpan(v.data(), K, bf16, yb, i * K);
        }
      });
      break;
    }
    case Decode::kFp8F32: {
      const float* tab = r.fp8_type() == Fp8Type::kE4M3 ? kE4M3Table.data() : kE5M2Table.data();
      const bool block = !kind_info(r).per_tensor_scale, two_d = r.is_2d();
      auto decode = [&](int64_t a, int64_t b0, int64_t n, float* v) {
        const uint8_t* d = p.data.data() + a * p.data_cols;
        for (int64_t s0 = b0; s0 < b0 + n; s0 = (s0 / 128 + 1) * 128) {
          float s_b = q.scale_inv;
          if (block) s_b = two_d ? p.scale.f32(a / 128, s0 / 128) : p.scale.f32(a, s0 / 128);
          const VF sv = hn::Set(df, s_b);
          const int64_t s1 = std::min(b0 + n, (s0 / 128 + 1) * 128);
          int64_t b = s0;
          for (; b + N <= s1; b += N) hn::StoreU(hn::Mul(DecodeFp8(tab, d + b), sv), df, v + (b - b0));
          for (; b < s1; ++b) v[b - b0] = tab[d[b]] * s_b;
        }
      };
      if (col) {
        transposed(512, decode);
      } else {
        detail::parallel_for(M, [&](int64_t a0, int64_t a1) {
          std::vector<float> v(static_cast<size_t>(K));
          for (int64_t a = a0; a < a1; ++a) {
            decode(a, 0, K, v.data());
            StoreSpan(v.data(), K, bf16, yb, a * K);
          }
        });
      }
      break;
    }
  }
  return y;
}

HostMatrix DequantizeNvfp4(const QuantizedTensor& q, PlaneKind pk, DType out) { return DequantizeAs(q, pk, out, Decode::kE2M1E4M3); }
HostMatrix DequantizeMxfp8(const QuantizedTensor& q, PlaneKind pk, DType out) { return DequantizeAs(q, pk, out, Decode::kFp8E8M0); }
HostMatrix DequantizeFp8(const QuantizedTensor& q, PlaneKind pk, DType out) { return DequantizeAs(q, pk, out, Decode::kFp8F32); }

}  // namespace HWY_NAMESPACE
}  // namespace qtc::ref::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qtc::ref::simd {
HWY_EXPORT(DequantizeNvfp4);
HWY_EXPORT(DequantizeMxfp8);
HWY_EXPORT(DequantizeFp8);
HostMatrix dequantize_nvfp4(const QuantizedTensor& q, PlaneKind pk, DType out) { return HWY_DYNAMIC_DISPATCH(DequantizeNvfp4)(q, pk, out); }
HostMatrix dequantize_mxfp8(const QuantizedTensor& q, PlaneKind pk, DType out) { return HWY_DYNAMIC_DISPATCH(DequantizeMxfp8)(q, pk, out); }
HostMatrix dequantize_fp8(const QuantizedTensor& q, PlaneKind pk, DType out) { return HWY_DYNAMIC_DISPATCH(DequantizeFp8)(q, pk, out); }
}  // namespace qtc::ref::simd
#endif
