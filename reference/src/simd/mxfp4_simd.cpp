/// \file mxfp4_simd.cpp
/// \brief Vectorized MXFP4 quantizer, bit-exact to mxfp4.cpp for the orders it implements: te / ocp (scale rules
///        rceil and ocp_floor, NaN ignored or propagated), triton_kernels (rceil = ROUND_UP, ocp_floor = ROUND_DOWN)
///        and vllm_cutlass (even, the threshold rule). Loads, block amaxes, the per-element multiply and the E2M1
///        encode run on vectors; each block's E8M0 byte and element multiplier come from the scalar functions of
///        mxfp4_codec.hpp that mxfp4.cpp and the CUDA kernel call (one value per block). The torchao and
///        compressed_tensors orders are not here: dispatch.cpp refuses them by rule name (path_rules.hpp) and
///        quantize() takes the scalar path. Columnwise blocks are processed "vertically": for a strip of 32 rows,
///        N adjacent columns at once, one lane each; the codes are packed two per byte afterwards.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/mxfp4_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <vector>

#include "internal.hpp"
#include "qtc/mxfp4_codec.hpp"
#include "simd/ops-inl.h"
#include "simd/simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace qtc::ref::simd {
namespace HWY_NAMESPACE {

/// The per-block steps of the recipe's order (mxfp4.cpp's Mx4Rule, through the same codec functions).
struct Mx4 {
  MxScaleRule rule = MxScaleRule::kOcpFloor;
  bool propagate = false;  ///< te / ocp: NaN propagates into the amax (mxfp4.nonfinite_block NaN)
  bool from_nan = false;   ///< triton_kernels, vllm_cutlass: NaN ignored, an all-NaN block keeps a NaN amax
  bool vllm = false;       ///< vllm_cutlass's scale byte
  uint8_t scale(float bamax) const {
    if (vllm) return mxfp4::scale_vllm_cutlass(bamax);
    if (from_nan) return mxfp4::scale_triton(bamax, rule);
    return mxfp4::scale_te(bamax, rule, propagate);
  }
  /// The multiplier of a block's elements: code = encode_e2m1(x * mul(e)) (mxfp4::code_te, mxfp4::code_triton).
  float mul(uint8_t e) const { return from_nan ? mxfp4::quant_scale_triton(e) : e8m0_reciprocal(e); }
};

/// True when none of the n floats is a number (the fmaxf fold from NaN then keeps NaN).
HWY_INLINE bool AllNaN(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (p[i] == p[i]) return false;
  return true;
}

/// The block amax of n floats under the order: amax_step folded from 0, or the fmaxf fold from NaN.
HWY_INLINE float BlockAmax(const Mx4& m, const float* p, int64_t n) {
  if (!m.from_nan) return AmaxOf(p, n, m.propagate);
  return AllNaN(p, n) ? bits_f32(mxfp4::kTritonAmaxStart) : AmaxOf(p, n, false);
}

/// Column amaxes of n rows of K floats under the order (acc[j] for column j).
HWY_INLINE void ColumnAmax4(const Mx4& m, const float* s, int64_t n, int64_t K, float* acc) {
  const DF df;
  const int64_t N = NF();
  const bool prop = m.propagate && !m.from_nan;
  int64_t j = 0;
  for (; j + N <= K; j += N) {
    AmaxAcc a;
    VF seen = hn::Zero(df);  // all-ones in lanes that saw a number
    for (int64_t i = 0; i < n; ++i) {
      const VF v = hn::LoadU(df, s + i * K + j);
      a.add(v);
      seen = hn::Or(seen, hn::VecFromMask(df, hn::Not(hn::IsNaN(v))));
    }
    VF r = a.lanes(prop);
    if (m.from_nan) r = hn::IfThenElse(hn::MaskFromVec(seen), r, hn::Set(df, bits_f32(mxfp4::kTritonAmaxStart)));
    hn::StoreU(r, df, acc + j);
  }
  for (; j < K; ++j) {
    float a = m.from_nan ? bits_f32(mxfp4::kTritonAmaxStart) : 0.0f;
    for (int64_t i = 0; i < n; ++i) a = m.from_nan ? mxfp4::amax_step_triton(a, s[i * K + j]) : detail::amax_step(a, s[i * K + j], prop);
    acc[j] = a;
  }
}

/// out[j] = encode_e2m1(x[j] * mul) for j < n, one byte per code.
HWY_INLINE void EncodeSpan4(const float* x, int64_t n, float mul, uint8_t* out) {
  const DF df;
  const int64_t N = NF();
  const VF m = hn::Set(df, mul);
  int64_t j = 0;
  for (; j + N <= n; j += N) StoreBytes(EncodeE2M1<false>(hn::Mul(hn::LoadU(df, x + j), m)), out + j);
  for (; j < n; ++j) out[j] = encode_e2m1(x[j] * mul);
}

/// out[j] = encode_e2m1(x[j] * mul[j]) for j < n, one byte per code.
HWY_INLINE void EncodeSpanPerLane4(const float* x, int64_t n, const float* mul, uint8_t* out) {
  const DF df;
  const int64_t N = NF();
  int64_t j = 0;
  for (; j + N <= n; j += N) StoreBytes(EncodeE2M1<false>(hn::Mul(hn::LoadU(df, x + j), hn::LoadU(df, mul + j))), out + j);
  for (; j < n; ++j) out[j] = encode_e2m1(x[j] * mul[j]);
}

/// n codes (one per byte) -> ceil(n / 2) bytes, element 2t in the low nibble of byte t; an odd n leaves the last
/// high nibble 0.
HWY_INLINE void PackRow(const uint8_t* codes, int64_t n, uint8_t* out) {
  int64_t t = 0;
  for (; 2 * t + 1 < n; ++t) out[t] = static_cast<uint8_t>((codes[2 * t] & 0xF) | (codes[2 * t + 1] << 4));
  if (2 * t < n) out[t] = static_cast<uint8_t>(codes[2 * t] & 0xF);
}

/// Strips of 32 rows as float, spread over the threads (detail::for_each_row_strip with the vector loads).
template <typename Fn>
void ForEachStrip32(const MatrixView& x, Fn&& fn) {
  if (x.rows == 0 || x.cols == 0) return;
  detail::parallel_for(detail::ceil_div(x.rows, 32), [&](int64_t b, int64_t e) {
    std::vector<float> strip(static_cast<size_t>(32 * x.cols));
    for (int64_t g = b; g < e; ++g) {
      const int64_t i0 = g * 32, n = std::min<int64_t>(32, x.rows - i0);
      LoadRows(x, i0, n, strip.data());
      fn(g, i0, n, static_cast<const float*>(strip.data()));
    }
  });
}

QuantizedTensor QuantizeMxfp4(const MatrixView& x, const Recipe& r) {
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  detail::start_output(q, r, x.dtype, M, K);  // planes as describe_plane says
  const ProfileRules& pr = profile_rules(r.profile);
  Mx4 m;
  m.rule = r.mxfp4().scale_rule;
  m.propagate = pr.mx_nonfinite == MxNonFinite::kNaN;
  m.vllm = pr.mx_order == MxOrder::kVllmCutlass;
  m.from_nan = m.vllm || pr.mx_order == MxOrder::kTritonKernels;
  const int64_t kbs = detail::ceil_div(K, 32);
  ForEachStrip32(x, [&](int64_t g, int64_t i0, int64_t n, const float* s) {
    std::vector<uint8_t> codes(static_cast<size_t>(n * K));
    if (r.rowwise) {
      Plane& p = *q.rowwise;
      for (int64_t i = 0; i < n; ++i) {
        uint8_t* c = codes.data() + i * K;
        for (int64_t b = 0; b < kbs; ++b) {
          const int64_t j0 = b * 32, w = std::min<int64_t>(32, K - j0);
          const uint8_t e = m.scale(BlockAmax(m, s + i * K + j0, w));
          p.scale.bytes[static_cast<size_t>((i0 + i) * kbs + b)] = e;
          EncodeSpan4(s + i * K + j0, w, m.mul(e), c + j0);
        }
        PackRow(c, K, p.data.data() + (i0 + i) * p.data_cols);
      }
    }
    if (r.columnwise) {
      Plane& p = *q.columnwise;  // row j holds column j of x; strip g is scale column g
      const int64_t mbs = p.scale.cols;
      std::vector<float> col(static_cast<size_t>(K));
      ColumnAmax4(m, s, n, K, col.data());
      for (int64_t j = 0; j < K; ++j) {
        const uint8_t e = m.scale(col[static_cast<size_t>(j)]);
        p.scale.bytes[static_cast<size_t>(j * mbs + g)] = e;
        col[static_cast<size_t>(j)] = m.mul(e);
      }
      for (int64_t i = 0; i < n; ++i) EncodeSpanPerLane4(s + i * K, K, col.data(), codes.data() + i * K);
      uint8_t pair[32];
      for (int64_t j = 0; j < K; ++j) {
        for (int64_t i = 0; i < n; ++i) pair[i] = codes[static_cast<size_t>(i * K + j)];
        PackRow(pair, n, p.data.data() + j * p.data_cols + i0 / 2);  // i0 is a multiple of 32: whole bytes
      }
    }
  });
  return q;
}

}  // namespace HWY_NAMESPACE
}  // namespace qtc::ref::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qtc::ref::simd {
HWY_EXPORT(QuantizeMxfp4);

QuantizedTensor quantize_mxfp4(const MatrixView& x, const Recipe& r) { return HWY_DYNAMIC_DISPATCH(QuantizeMxfp4)(x, r); }
}  // namespace qtc::ref::simd
#endif
