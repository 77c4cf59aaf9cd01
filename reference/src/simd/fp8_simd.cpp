/// \file fp8_simd.cpp
/// \brief Vectorized MXFP8 (profiles te, te_pyref, ocp; scale rules rceil and ocp_floor), FP8 block (1x128,
///        128x128) and FP8 per-tensor quantizers and the whole-tensor amax, bit-exact to mxfp8.cpp, fp8.cpp and
///        quantize.cpp. Scales come from the scalar rules (one per block); elements are encoded on vectors.
///        Transposed (columnwise) planes are encoded row by row into a scratch tile, then written transposed.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/fp8_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <vector>

#include "internal.hpp"
#include "simd/ops-inl.h"
#include "simd/simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace qtc::ref::simd {
namespace HWY_NAMESPACE {

/// out[j] = encode_fp8(x[j] * mul) for j < n.
template <bool kE5M2>
HWY_INLINE void EncodeSpan(const float* x, int64_t n, float mul, uint8_t* out) {
  const DF df;
  const int64_t N = NF();
  const VF m = hn::Set(df, mul);
  int64_t j = 0;
  for (; j + N <= n; j += N) StoreBytes(EncodeFp8<kE5M2>(hn::Mul(hn::LoadU(df, x + j), m)), out + j);
  for (; j < n; ++j) out[j] = kE5M2 ? encode_e5m2(x[j] * mul) : encode_e4m3(x[j] * mul);
}

/// out[j] = encode_fp8(x[j] * mul[j]) for j < n.
template <bool kE5M2>
HWY_INLINE void EncodeSpanPerLane(const float* x, int64_t n, const float* mul, uint8_t* out) {
  const DF df;
  const int64_t N = NF();
  int64_t j = 0;
  for (; j + N <= n; j += N) StoreBytes(EncodeFp8<kE5M2>(hn::Mul(hn::LoadU(df, x + j), hn::LoadU(df, mul + j))), out + j);
  for (; j < n; ++j) out[j] = kE5M2 ? encode_e5m2(x[j] * mul[j]) : encode_e4m3(x[j] * mul[j]);
}

/// Column amax of n rows of K floats: acc[j] (NaN-ignoring) and, when propagating, NaN for columns with one.
HWY_INLINE void ColumnAmax(const float* s, int64_t n, int64_t K, bool propagate, float* acc) {
  const DF df;
  const int64_t N = NF();
  int64_t j = 0;
  for (; j + N <= K; j += N) {
    AmaxAcc a;
    for (int64_t i = 0; i < n; ++i) a.add(hn::LoadU(df, s + i * K + j));
    hn::StoreU(a.lanes(propagate), df, acc + j);
  }
  for (; j < K; ++j) {
    float a = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float v = std::fabs(s[i * K + j]);
      a = propagate ? ((a != a || v != v) ? NAN : (v > a ? v : a)) : (v > a ? v : a);
    }
    acc[j] = a;
  }
}

/// Row stride of the scratch tiles: K padded off powers of two (16 rows read together must not share a cache set).
HWY_INLINE int64_t TmpStride(int64_t K) { return K + 64; }

/// tmp (n rows of K bytes, stride TmpStride(K)) -> out[j * ld + i] (the transposed plane rows j, columns i0 + i
/// already in out).
HWY_INLINE void TransposeStore(const uint8_t* tmp, int64_t n, int64_t K, uint8_t* out, int64_t ld) {
  TransposeBytes(tmp, TmpStride(K), n, K, out, ld);
}

/// Strips of `strip_rows` rows as float, spread over the threads (detail::for_each_row_strip).
template <typename Fn>
void ForEachStrip(const MatrixView& x, int64_t strip_rows, Fn&& fn) {
  if (x.rows == 0 || x.cols == 0) return;  // no element: an empty tensor costs no time, whatever its other extent
  detail::parallel_for(detail::ceil_div(x.rows, strip_rows), [&](int64_t b, int64_t e) {
    std::vector<float> strip(static_cast<size_t>(strip_rows * x.cols));
    for (int64_t g = b; g < e; ++g) {
      const int64_t i0 = g * strip_rows, n = std::min(strip_rows, x.rows - i0);
      LoadRows(x, i0, n, strip.data());
      fn(g, i0, n, static_cast<const float*>(strip.data()));
    }
  });
}

float Amax(const MatrixView& x, bool propagate) {
  if (x.rows == 0 || x.cols == 0) return 0.0f;
  const int64_t kStrip = 64;
  std::vector<float> partial(static_cast<size_t>(std::max<int64_t>(detail::ceil_div(x.rows, kStrip), 1)), 0.0f);
  ForEachStrip(x, kStrip, [&](int64_t g, int64_t, int64_t n, const float* s) {
    partial[static_cast<size_t>(g)] = AmaxOf(s, n * x.cols, propagate);
  });
  float acc = 0.0f;
  for (float p : partial) {
    const float a = std::fabs(p);
    acc = propagate ? ((acc != acc || a != a) ? NAN : (a > acc ? a : acc)) : (a > acc ? a : acc);
  }
  return acc;
}

// ---- MXFP8 -------------------------------------------------------------------------------------------

struct MxRule {
  bool propagate = false;  // ocp
  bool rceil = true;
  bool e5m2 = false;
  uint8_t scale(float bamax) const {
    return mx_block_scale(bamax, e5m2, !rceil, propagate);  // numeric.hpp
  }
};

template <bool kE5M2>
void QuantizeMxfp8T(const MatrixView& x, const Recipe& r, QuantizedTensor& q) {
  const int64_t M = x.rows, K = x.cols;
  const int64_t kbs = detail::ceil_div(K, 32);
  MxRule rule;
  rule.propagate = profile_rules(r.profile).mx_nonfinite == MxNonFinite::kNaN;  // as mxfp8.cpp's MxRule
  rule.rceil = r.mxfp8().scale_rule == MxScaleRule::kRceil;
  rule.e5m2 = kE5M2;
  const bool prop = rule.propagate;
  (void)M;
  ForEachStrip(x, 32, [&](int64_t g, int64_t i0, int64_t n, const float* s) {
    std::vector<uint8_t> tile_scale(static_cast<size_t>(kbs));
    if (r.is_2d()) {
      for (int64_t c = 0; c < kbs; ++c) {
        const int64_t j0 = c * 32, w = std::min<int64_t>(32, K - j0);
        float a = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
          const float b = AmaxOf(s + i * K + j0, w, prop);
          a = prop ? ((a != a || b != b) ? NAN : (b > a ? b : a)) : (b > a ? b : a);
        }
        tile_scale[static_cast<size_t>(c)] = rule.scale(a);
      }
    }
    if (r.rowwise) {
      Plane& p = *q.rowwise;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < kbs; ++c) {
          const int64_t j0 = c * 32, w = std::min<int64_t>(32, K - j0);
          const float* xs = s + i * K + j0;
          const uint8_t sc = r.is_2d() ? tile_scale[static_cast<size_t>(c)] : rule.scale(AmaxOf(xs, w, prop));
          p.scale.bytes[static_cast<size_t>((i0 + i) * kbs + c)] = sc;
          EncodeSpan<kE5M2>(xs, w, e8m0_reciprocal(sc), p.data.data() + (i0 + i) * K + j0);
        }
    }
    if (r.columnwise) {
      Plane& p = *q.columnwise;
      std::vector<float> col(static_cast<size_t>(K));
      if (!r.is_2d()) ColumnAmax(s, n, K, prop, col.data());
      for (int64_t j = 0; j < K; ++j) {
        const uint8_t sc = r.is_2d() ? tile_scale[static_cast<size_t>(j / 32)] : rule.scale(col[static_cast<size_t>(j)]);
        p.scale.bytes[static_cast<size_t>(g * K + j)] = sc;
        col[static_cast<size_t>(j)] = e8m0_reciprocal(sc);
      }
      for (int64_t i = 0; i < n; ++i) EncodeSpanPerLane<kE5M2>(s + i * K, K, col.data(), p.data.data() + (i0 + i) * K);
    }
  });
}

QuantizedTensor QuantizeMxfp8(const MatrixView& x, const Recipe& r) {
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  detail::start_output(q, r, x.dtype, M, K);  // planes as describe_plane says
  if (r.fp8_type() == Fp8Type::kE5M2)
    QuantizeMxfp8T<true>(x, r, q);
  else
    QuantizeMxfp8T<false>(x, r, q);
  return q;
}

// ---- FP8 block ---------------------------------------------------------------------------------------

template <bool kE5M2>
void QuantizeFp8BlockT(const MatrixView& x, const Recipe& r, QuantizedTensor& q) {
  const int64_t M = x.rows, K = x.cols;
  const int64_t kbs = detail::ceil_div(K, 128);
  const float max_fp8 = fp8_max(r.fp8_type());
  const float vinf = dtype_max(x.dtype);
  const bool prop = profile_rules(r.profile).nan_amax;
  const bool pow2 = r.pow2_scales();
  const float eps = r.eps();
  auto scale_of = [&](float a) { return fp8_scale_from_amax(a, max_fp8, pow2, eps, vinf, r.profile); };
  ForEachStrip(x, 128, [&](int64_t g, int64_t i0, int64_t n, const float* s) {
    std::vector<float> sc(static_cast<size_t>(K));
    std::vector<uint8_t> tmp;
    if (r.is_2d()) {
      for (int64_t c = 0; c < kbs; ++c) {
        const int64_t j0 = c * 128, w = std::min<int64_t>(128, K - j0);
        float a = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
          const float b = AmaxOf(s + i * K + j0, w, prop);
          a = prop ? ((a != a || b != b) ? NAN : (b > a ? b : a)) : (b > a ? b : a);
        }
        const float t = scale_of(a);
        for (int64_t j = j0; j < j0 + w; ++j) sc[static_cast<size_t>(j)] = t;
        if (r.rowwise) q.rowwise->scale.set_f32(g, c, 1.0f / t);
        if (r.columnwise) q.columnwise->scale.set_f32(c, g, 1.0f / t);
      }
      uint8_t* dst = nullptr;
      if (r.columnwise) {
        tmp.resize(static_cast<size_t>(n * TmpStride(K)));
        dst = tmp.data();
      }
      for (int64_t i = 0; i < n; ++i) {
        uint8_t* o = r.rowwise ? q.rowwise->data.data() + (i0 + i) * K : dst + i * TmpStride(K);
        EncodeSpanPerLane<kE5M2>(s + i * K, K, sc.data(), o);
        if (r.rowwise && r.columnwise) std::copy_n(o, K, dst + i * TmpStride(K));
      }
      if (r.columnwise) TransposeStore(tmp.data(), n, K, q.columnwise->data.data() + i0, M);
      return;
    }
    if (r.rowwise) {
      Plane& p = *q.rowwise;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t c = 0; c < kbs; ++c) {
          const int64_t j0 = c * 128, w = std::min<int64_t>(128, K - j0);
          const float* xs = s + i * K + j0;
          const float t = scale_of(AmaxOf(xs, w, prop));
          p.scale.set_f32(i0 + i, c, 1.0f / t);
          EncodeSpan<kE5M2>(xs, w, t, p.data.data() + (i0 + i) * K + j0);
        }
    }
    if (r.columnwise) {
      Plane& p = *q.columnwise;
      ColumnAmax(s, n, K, prop, sc.data());
      for (int64_t j = 0; j < K; ++j) {
        const float t = scale_of(sc[static_cast<size_t>(j)]);
        p.scale.set_f32(j, g, 1.0f / t);
        sc[static_cast<size_t>(j)] = t;
      }
      tmp.resize(static_cast<size_t>(n * TmpStride(K)));
      for (int64_t i = 0; i < n; ++i) EncodeSpanPerLane<kE5M2>(s + i * K, K, sc.data(), tmp.data() + i * TmpStride(K));
      TransposeStore(tmp.data(), n, K, p.data.data() + i0, M);
    }
  });
}

QuantizedTensor QuantizeFp8Block(const MatrixView& x, const Recipe& r) {
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  detail::start_output(q, r, x.dtype, M, K);  // planes as describe_plane says
  if (r.fp8_type() == Fp8Type::kE5M2)
    QuantizeFp8BlockT<true>(x, r, q);
  else
    QuantizeFp8BlockT<false>(x, r, q);
  return q;
}

// ---- FP8 per-tensor ----------------------------------------------------------------------------------

QuantizedTensor QuantizeFp8Tensor(const MatrixView& x, const Recipe& r, const float* amax_override) {
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  detail::start_output(q, r, x.dtype, M, K);  // planes as describe_plane says: a 1x1 scale_inv and one amax
  const bool prop = profile_rules(r.profile).nan_amax;
  const float a = amax_override != nullptr ? amax_override[0] : Amax(x, prop);
  const float scale = fp8_scale_from_amax(a, fp8_max(r.fp8_type()), r.pow2_scales(), r.eps(), FLT_MAX, r.profile);
  q.scale_inv = 1.0f / scale;
  for (auto* p : {&q.rowwise, &q.columnwise})
    if (*p) {
      (*p)->scale.set_f32(0, 0, q.scale_inv);
      (*p)->amax.at(0) = a;
    }
  const bool e5 = r.fp8_type() == Fp8Type::kE5M2;
  ForEachStrip(x, 64, [&](int64_t, int64_t i0, int64_t n, const float* s) {
    std::vector<uint8_t> tmp(r.columnwise ? static_cast<size_t>(n * TmpStride(K)) : 0);
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* o = r.rowwise ? q.rowwise->data.data() + (i0 + i) * K : tmp.data() + i * TmpStride(K);
      if (e5)
        EncodeSpan<true>(s + i * K, K, scale, o);
      else
        EncodeSpan<false>(s + i * K, K, scale, o);
      if (r.rowwise && r.columnwise) std::copy_n(o, K, tmp.data() + i * TmpStride(K));
    }
    if (r.columnwise) TransposeStore(tmp.data(), n, K, q.columnwise->data.data() + i0, M);
  });
  return q;
}

/// The instruction set of the copy that dynamic dispatch runs.
const char* DispatchedTarget() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace qtc::ref::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qtc::ref::simd {
HWY_EXPORT(Amax);
HWY_EXPORT(DispatchedTarget);
const char* dispatched_target() { return HWY_DYNAMIC_DISPATCH(DispatchedTarget)(); }
HWY_EXPORT(QuantizeMxfp8);
HWY_EXPORT(QuantizeFp8Block);
HWY_EXPORT(QuantizeFp8Tensor);

float amax(const MatrixView& x, bool propagate_nan) { return HWY_DYNAMIC_DISPATCH(Amax)(x, propagate_nan); }
QuantizedTensor quantize_mxfp8(const MatrixView& x, const Recipe& r) { return HWY_DYNAMIC_DISPATCH(QuantizeMxfp8)(x, r); }
QuantizedTensor quantize_fp8_block(const MatrixView& x, const Recipe& r) { return HWY_DYNAMIC_DISPATCH(QuantizeFp8Block)(x, r); }
QuantizedTensor quantize_fp8_tensor(const MatrixView& x, const Recipe& r, const float* amax_override) {
  return HWY_DYNAMIC_DISPATCH(QuantizeFp8Tensor)(x, r, amax_override);
}
}  // namespace qtc::ref::simd
#endif
