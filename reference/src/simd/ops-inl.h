/// \file ops-inl.h
/// \brief Vector building blocks of the SIMD reference path (Highway, included once per instruction set by
///        each simd/*.cpp): input conversion, NaN-aware amax, and the E2M1 / E4M3 / E5M2 / BF16 encoders.
///        Every function gives, lane by lane, the bits of the scalar function named in its comment
///        (qtc/codec.hpp, src/internal.hpp); test_simd_exact checks it on every target compiled in.
// Per-target include guard (Highway convention): toggled by foreach_target.h.
#if defined(QTC_REF_SIMD_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef QTC_REF_SIMD_OPS_INL_H_
#undef QTC_REF_SIMD_OPS_INL_H_
#else
#define QTC_REF_SIMD_OPS_INL_H_
#endif

#include <hwy/highway.h>

#include <cmath>
#include <cstdint>

#include "qtc/codec.hpp"
#include "qtc/tensor.hpp"

HWY_BEFORE_NAMESPACE();
namespace qtc::ref::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 8 float lanes (256 bits): blocks are 16, 32 or 128 elements, and wider vectors would not help.
using DF = hn::CappedTag<float, 8>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DU16 = hn::Rebind<uint16_t, DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using VU = hn::Vec<DU>;

HWY_INLINE int64_t NF() { return static_cast<int64_t>(hn::Lanes(DF())); }

/// bf16_to_f32 of N lanes.
HWY_INLINE VF LoadBF16(const uint16_t* p) {
  const DF df;
  const DU du;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(DU16(), p))));
}

/// f16_to_f32 of N lanes (integer emulation: exact for every code, NaN payloads included).
HWY_INLINE VF LoadF16(const uint16_t* p) {
  const DF df;
  const DU du;
  const DI di;
  const VU h = hn::PromoteTo(du, hn::LoadU(DU16(), p));
  const VU sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const VU e = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1Fu));
  const VU m = hn::And(h, hn::Set(du, 0x3FFu));
  const VU normal = hn::Or(hn::ShiftLeft<23>(hn::Add(e, hn::Set(du, 112u))), hn::ShiftLeft<13>(m));
  const VU special = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(m));
  const VU sub = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, m)), hn::Set(df, 0x1p-24f)));
  VU mag = hn::IfThenElse(hn::Eq(e, hn::Set(du, 0x1Fu)), special, normal);
  mag = hn::IfThenElse(hn::Eq(e, hn::Zero(du)), sub, mag);
  return hn::BitCast(df, hn::Or(sign, mag));
}

/// detail::load_rows: n values of a F32 / BF16 / F16 row as float.
HWY_INLINE void LoadRow(const void* src, DType t, int64_t n, float* out) {
  const DF df;
  const int64_t N = NF();
  int64_t i = 0;
  switch (t) {
    case DType::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(src);
      for (; i + N <= n; i += N) hn::StoreU(LoadBF16(p + i), df, out + i);
      for (; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    case DType::kF16: {
      const uint16_t* p = static_cast<const uint16_t*>(src);
      for (; i + N <= n; i += N) hn::StoreU(LoadF16(p + i), df, out + i);
      for (; i < n; ++i) out[i] = f16_to_f32(p[i]);
      break;
    }
    default: {
      const float* p = static_cast<const float*>(src);
      for (; i < n; ++i) out[i] = p[i];
      break;
    }
  }
}

/// Rows [r0, r0 + count) of x as float (detail::load_rows).
HWY_INLINE void LoadRows(const MatrixView& x, int64_t r0, int64_t count, float* out) {
  const size_t es = dtype_size(x.dtype);
  LoadRow(static_cast<const uint8_t*>(x.data) + static_cast<size_t>(r0 * x.cols) * es, x.dtype, count * x.cols, out);
}

/// |v| with NaN lanes replaced by 0 (the NaN-ignoring amax step never keeps a NaN).
HWY_INLINE VF AbsNoNaN(VF v) { return hn::IfThenZeroElse(hn::IsNaN(v), hn::Abs(v)); }

/// Running NaN-aware absolute maximum: `acc` the NaN-ignoring max, `nan` all-ones in lanes that saw a NaN.
struct AmaxAcc {
  VF acc;
  VF nan;
  HWY_INLINE AmaxAcc() : acc(hn::Zero(DF())), nan(hn::Zero(DF())) {}
  HWY_INLINE void add(VF v) {
    const DF df;
    acc = hn::Max(acc, AbsNoNaN(v));
    nan = hn::Or(nan, hn::VecFromMask(df, hn::IsNaN(v)));
  }
  /// amax_step folded over every lane: the max, or NaN when propagating and a lane saw one.
  HWY_INLINE float reduce(bool propagate) const {
    const DF df;
    if (propagate && !hn::AllFalse(df, hn::MaskFromVec(nan))) return NAN;
    return hn::GetLane(hn::MaxOfLanes(df, acc));
  }
  /// Per lane: the NaN-aware amax of what this lane saw.
  HWY_INLINE VF lanes(bool propagate) const {
    if (!propagate) return acc;
    return hn::IfThenElse(hn::MaskFromVec(nan), hn::Set(DF(), NAN), acc);
  }
};

/// amax_step over n floats (any n).
HWY_INLINE float AmaxOf(const float* p, int64_t n, bool propagate) {
  const DF df;
  const int64_t N = NF();
  AmaxAcc a;
  int64_t i = 0;
  for (; i + N <= n; i += N) a.add(hn::LoadU(df, p + i));
  float r = a.reduce(propagate);
  for (; i < n; ++i) {
    // The scalar step, continued from the vector result (max is order independent; NaN sticks when propagating).
    const float v = std::fabs(p[i]);
    if (propagate) {
      r = (r != r || v != v) ? NAN : (v > r ? v : r);
    } else {
      r = v > r ? v : r;
    }
  }
  return r;
}

/// encode_e2m1(v, NegZero::kKeepSign) (kPosZero = false) or encode_e2m1(v, NegZero::kPositiveZero) (true).
template <bool kPosZero>
HWY_INLINE VI EncodeE2M1(VF v) {
  const DF df;
  const DI di;
  const VF a = hn::Abs(v);
  VI c = hn::Zero(di);
  c = hn::Sub(c, hn::BitCast(di, hn::VecFromMask(df, hn::Gt(a, hn::Set(df, 0.25f)))));
  c = hn::Sub(c, hn::BitCast(di, hn::VecFromMask(df, hn::Ge(a, hn::Set(df, 0.75f)))));
  c = hn::Sub(c, hn::BitCast(di, hn::VecFromMask(df, hn::Gt(a, hn::Set(df, 1.25f)))));
  c = hn::Sub(c, hn::BitCast(di, hn::VecFromMask(df, hn::Ge(a, hn::Set(df, 1.75f)))));
  c = hn::Sub(c, hn::BitCast(di, hn::VecFromMask(df, hn::Gt(a, hn::Set(df, 2.5f)))));
  c = hn::Sub(c, hn::BitCast(di, hn::VecFromMask(df, hn::Ge(a, hn::Set(df, 3.5f)))));
  c = hn::Sub(c, hn::BitCast(di, hn::VecFromMask(df, hn::Gt(a, hn::Set(df, 5.0f)))));
  VI neg;
  if constexpr (kPosZero) {
    neg = hn::And(hn::BitCast(di, hn::VecFromMask(df, hn::Lt(v, hn::Zero(df)))), hn::Set(di, 8));
  } else {
    neg = hn::And(hn::ShiftRight<28>(hn::BitCast(di, v)), hn::Set(di, 8));
  }
  return hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(v)), hn::Set(di, kPosZero ? 0 : 7), hn::Or(c, neg));
}

/// encode_e2m1_stochastic(v, rbyte) with u = rbyte / 256 (u * step is exact, so u * step + a is fmaf's result).
HWY_INLINE VI EncodeE2M1Stochastic(VF v, VF u) {
  const DF df;
  const VF a = hn::Abs(v);
  const VF four = hn::Set(df, 4.0f), two = hn::Set(df, 2.0f), one = hn::Set(df, 1.0f), half = hn::Set(df, 0.5f);
  const VF step = hn::IfThenElse(hn::Ge(a, four), two, hn::IfThenElse(hn::Ge(a, two), one, half));
  const VF t = hn::Add(hn::Mul(u, step), a);
  const VF step_t = hn::IfThenElse(hn::Ge(t, four), two, hn::IfThenElse(hn::Ge(t, two), one, half));
  const VF inv = hn::IfThenElse(hn::Ge(t, four), half, hn::IfThenElse(hn::Ge(t, two), one, two));
  VF q = hn::Mul(hn::Floor(hn::Mul(t, inv)), step_t);
  const VF six = hn::Set(df, 6.0f);
  q = hn::IfThenElse(hn::IsNaN(q), six, hn::Min(q, six));  // fminf: a NaN operand is ignored
  const DU du;
  const VU sign = hn::IfThenZeroElse(hn::RebindMask(du, hn::IsNaN(v)), hn::And(hn::BitCast(du, v), hn::Set(du, 0x80000000u)));
  return EncodeE2M1<false>(hn::BitCast(df, hn::Or(hn::BitCast(du, q), sign)));
}

/// decode_e2m1(code) of N codes (low 4 bits of each lane).
HWY_INLINE VF DecodeE2M1(VI code) {
  const DF df;
  const DI di;
  const VI m = hn::And(code, hn::Set(di, 7));
  const VF small = hn::Mul(hn::ConvertTo(df, m), hn::Set(df, 0.5f));  // 0, 0.5 (m < 2)
  // m >= 2: 2^((m >> 1) - 1) * (1 + (m & 1) / 2)
  const VI bits = hn::Or(hn::ShiftLeft<23>(hn::Add(hn::ShiftRight<1>(m), hn::Set(di, 126))), hn::ShiftLeft<22>(hn::And(m, hn::Set(di, 1))));
  const VF mag = hn::IfThenElse(hn::RebindMask(df, hn::Lt(m, hn::Set(di, 2))), small, hn::BitCast(df, bits));
  const VI sign = hn::ShiftLeft<28>(hn::And(code, hn::Set(di, 8)));
  return hn::BitCast(df, hn::Or(hn::BitCast(di, mag), sign));
}

/// encode_e4m3(v) (satfinite).
HWY_INLINE VI EncodeE4M3(VF v) {
  const DF df;
  const DI di;
  const VI u = hn::BitCast(di, v);
  const VI sign = hn::And(hn::ShiftRight<24>(u), hn::Set(di, 0x80));
  const VI a = hn::And(u, hn::Set(di, 0x7FFFFFFF));
  const VI reb = hn::Sub(a, hn::Set(di, 120 << 23));
  const VI normal = hn::ShiftRight<20>(hn::Add(reb, hn::Add(hn::Set(di, 0x7FFFF), hn::And(hn::ShiftRight<20>(reb), hn::Set(di, 1)))));
  // The subnormal candidate only from the lanes that take it (others 0): a NaN or huge lane must not reach the
  // float -> int conversion, which is undefined behaviour in the portable (EMU128) copy.
  const auto is_sub = hn::Lt(a, hn::Set(di, 0x3C800000));
  const VF small = hn::BitCast(df, hn::IfThenElseZero(is_sub, a));
  const VI sub = hn::ConvertTo(di, hn::Round(hn::Mul(small, hn::Set(df, 512.0f))));
  VI r = hn::IfThenElse(is_sub, sub, normal);
  r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x43E80000 - 1)), hn::Set(di, 0x7E), r);
  r = hn::Or(r, sign);
  return hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7F800000)), hn::Set(di, 0x7F), r);
}

/// encode_e5m2(v) (satfinite).
HWY_INLINE VI EncodeE5M2(VF v) {
  const DF df;
  const DI di;
  const VI u = hn::BitCast(di, v);
  const VI sign = hn::And(hn::ShiftRight<24>(u), hn::Set(di, 0x80));
  const VI a = hn::And(u, hn::Set(di, 0x7FFFFFFF));
  const VI reb = hn::Sub(a, hn::Set(di, 112 << 23));
  const VI normal = hn::ShiftRight<21>(hn::Add(reb, hn::Add(hn::Set(di, 0xFFFFF), hn::And(hn::ShiftRight<21>(reb), hn::Set(di, 1)))));
  // The subnormal candidate only from the lanes that take it (others 0): a NaN or huge lane must not reach the
  // float -> int conversion, which is undefined behaviour in the portable (EMU128) copy.
  const auto is_sub = hn::Lt(a, hn::Set(di, 0x38800000));
  const VF small = hn::BitCast(df, hn::IfThenElseZero(is_sub, a));
  const VI sub = hn::ConvertTo(di, hn::Round(hn::Mul(small, hn::Set(df, 65536.0f))));
  VI r = hn::IfThenElse(is_sub, sub, normal);
  r = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x47700000 - 1)), hn::Set(di, 0x7B), r);
  r = hn::Or(r, sign);
  return hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7F800000)), hn::Set(di, 0x7F), r);
}

template <bool kE5M2>
HWY_INLINE VI EncodeFp8(VF v) {
  if constexpr (kE5M2) return EncodeE5M2(v);
  else return EncodeE4M3(v);
}

/// N codes (0..255 in int32 lanes) stored as N bytes.
HWY_INLINE void StoreBytes(VI codes, uint8_t* out) { hn::StoreU(hn::DemoteTo(DU8(), codes), DU8(), out); }

/// f32_to_bf16 of N lanes, stored as N uint16.
HWY_INLINE void StoreBF16(VF v, uint16_t* out) {
  const DU du;
  const DI di;
  const VU u = hn::BitCast(du, v);
  const VU nan = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
  const VU rn = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)))));
  const VU r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, rn);
  hn::StoreU(hn::DemoteTo(DU16(), hn::BitCast(di, r)), DU16(), out);
}

/// dst[i * dld + r] = src[r * sld + i] for r < n, i < w (a byte matrix transposed): 16x16 blocks in registers,
/// the edges byte by byte.
HWY_INLINE void TransposeBytes(const uint8_t* src, int64_t sld, int64_t n, int64_t w, uint8_t* dst, int64_t dld) {
  int64_t r0 = 0;
#if HWY_TARGET != HWY_SCALAR
  using D8 = hn::Full128<uint8_t>;
  const D8 d8;
  const hn::Repartition<uint16_t, D8> d16;
  const hn::Repartition<uint32_t, D8> d32;
  const hn::Repartition<uint64_t, D8> d64;
  using V = hn::Vec<D8>;
  for (; r0 + 16 <= n; r0 += 16) {
    int64_t c0 = 0;
    for (; c0 + 16 <= w; c0 += 16) {
      V R[16], A[16], B[16], C[16];
      for (int i = 0; i < 16; ++i) R[i] = hn::LoadU(d8, src + (r0 + i) * sld + c0);
      for (int k = 0; k < 8; ++k) {  // rows 2k, 2k+1; columns 0-7 | 8-15
        A[k] = hn::InterleaveLower(d8, R[2 * k], R[2 * k + 1]);
        A[8 + k] = hn::InterleaveUpper(d8, R[2 * k], R[2 * k + 1]);
      }
      for (int h = 0; h < 2; ++h)
        for (int m = 0; m < 4; ++m) {  // rows 4m..4m+3; columns 8h..8h+3 | 8h+4..8h+7
          const auto a = hn::BitCast(d16, A[8 * h + 2 * m]), b = hn::BitCast(d16, A[8 * h + 2 * m + 1]);
          B[8 * h + m] = hn::BitCast(d8, hn::InterleaveLower(d16, a, b));
          B[8 * h + 4 + m] = hn::BitCast(d8, hn::InterleaveUpper(d16, a, b));
        }
      for (int q = 0; q < 4; ++q) {  // columns 4q..4q+3
        const auto b0 = hn::BitCast(d32, B[4 * q]), b1 = hn::BitCast(d32, B[4 * q + 1]);
        const auto b2 = hn::BitCast(d32, B[4 * q + 2]), b3 = hn::BitCast(d32, B[4 * q + 3]);
        C[4 * q] = hn::BitCast(d8, hn::InterleaveLower(d32, b0, b1));      // columns 4q, 4q+1; rows 0-7
        C[4 * q + 1] = hn::BitCast(d8, hn::InterleaveUpper(d32, b0, b1));  // columns 4q+2, 4q+3; rows 0-7
        C[4 * q + 2] = hn::BitCast(d8, hn::InterleaveLower(d32, b2, b3));  // columns 4q, 4q+1; rows 8-15
        C[4 * q + 3] = hn::BitCast(d8, hn::InterleaveUpper(d32, b2, b3));  // columns 4q+2, 4q+3; rows 8-15
      }
      for (int q = 0; q < 4; ++q) {
        const auto lo01 = hn::BitCast(d64, C[4 * q]), hi01 = hn::BitCast(d64, C[4 * q + 2]);
        const auto lo23 = hn::BitCast(d64, C[4 * q + 1]), hi23 = hn::BitCast(d64, C[4 * q + 3]);
        hn::StoreU(hn::BitCast(d8, hn::InterleaveLower(d64, lo01, hi01)), d8, dst + (c0 + 4 * q) * dld + r0);
        hn::StoreU(hn::BitCast(d8, hn::InterleaveUpper(d64, lo01, hi01)), d8, dst + (c0 + 4 * q + 1) * dld + r0);
        hn::StoreU(hn::BitCast(d8, hn::InterleaveLower(d64, lo23, hi23)), d8, dst + (c0 + 4 * q + 2) * dld + r0);
        hn::StoreU(hn::BitCast(d8, hn::InterleaveUpper(d64, lo23, hi23)), d8, dst + (c0 + 4 * q + 3) * dld + r0);
      }
    }
    for (int64_t c = c0; c < w; ++c)
      for (int64_t r = r0; r < r0 + 16; ++r) dst[c * dld + r] = src[r * sld + c];
  }
#endif
  for (int64_t c = 0; c < w; ++c)
    for (int64_t r = r0; r < n; ++r) dst[c * dld + r] = src[r * sld + c];
}

#if HWY_TARGET != HWY_SCALAR
/// In-register transpose of an 8x8 block of 32-bit lanes (N == 8 only): r[i] lane j -> r[j] lane i.
template <class D>
HWY_INLINE void Transpose8x8(D d, hn::Vec<D>* r) {
  const hn::Repartition<double, D> dd;
  using V = hn::Vec<D>;
  V t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = hn::InterleaveLower(d, r[i], r[i + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5
    t[i + 1] = hn::InterleaveUpper(d, r[i], r[i + 1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
  }
  V u[8];
  for (int h = 0; h < 8; h += 4) {
    const auto a = hn::BitCast(dd, t[h]), b = hn::BitCast(dd, t[h + 1]), c = hn::BitCast(dd, t[h + 2]), e = hn::BitCast(dd, t[h + 3]);
    u[h] = hn::BitCast(d, hn::InterleaveLower(dd, a, c));      // col 0 | col 4 of rows h..h+3
    u[h + 1] = hn::BitCast(d, hn::InterleaveUpper(dd, a, c));  // col 1 | col 5
    u[h + 2] = hn::BitCast(d, hn::InterleaveLower(dd, b, e));  // col 2 | col 6
    u[h + 3] = hn::BitCast(d, hn::InterleaveUpper(dd, b, e));  // col 3 | col 7
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = hn::ConcatLowerLower(d, u[4 + c], u[c]);
    r[c + 4] = hn::ConcatUpperUpper(d, u[4 + c], u[c]);
  }
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace qtc::ref::simd
HWY_AFTER_NAMESPACE();

#endif  // QTC_REF_SIMD_OPS_INL_H_
