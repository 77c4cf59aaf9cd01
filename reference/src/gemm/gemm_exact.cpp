/// \file gemm_exact.cpp
/// \brief The exact reference GEMM: every product alpha·a·b (an integer below 2^80 times a power of two)
///        goes into a wide fixed-point accumulator without rounding; the sum, beta·C and the bias too; the
///        total is rounded once to the output type.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "qtc/codec.hpp"
#include "gemm_internal.hpp"
#include "qtc/gemm.hpp"

namespace qtc::ref {
namespace {

struct OutFormat {
  int precision;   ///< significand bits, hidden bit included
  int emin;        ///< exponent of the smallest normal
  double max;      ///< largest finite
};

OutFormat out_format(DType t) {
  switch (t) {
    case DType::kBF16: return {8, -126, 0x1.FEp127};
    case DType::kF16: return {11, -14, 65504.0};
    default: return {24, -126, static_cast<double>(std::numeric_limits<float>::max())};
  }
}

/// Signed fixed-point number with the LSB at 2^kLsb, as two unsigned magnitudes (added separately, so a
/// negative term never ripples a sign extension through every limb).
///
/// Range: an operand element is at least 2^-165 (E5M2 subnormal times the smallest FP32 scale) and below
/// 2^144; alpha, beta, C and bias are FP32. A product alpha·a·b is therefore at least 2^-479 and below 2^416,
/// and a sum of up to 2^24 of them below 2^440: LSB 2^-512 and 16 limbs (up to 2^512) hold every case.
class WideAccumulator {
 public:
  static constexpr int kLsb = -512;
  static constexpr int kLimbs = 16;

  void add(unsigned __int128 mag, int exp, bool negative) {
    if (mag == 0) return;
    const int shift = exp - kLsb;
    QTC_CHECK(shift >= 0, "exact GEMM: term 2^", exp, " below the accumulator's LSB 2^", kLsb);
    const int limb = shift >> 6;
    const int bit = shift & 63;
    const auto w0 = static_cast<uint64_t>(mag);
    const auto w1 = static_cast<uint64_t>(mag >> 64);
    uint64_t parts[3];
    if (bit == 0) {
      parts[0] = w0;
      parts[1] = w1;
      parts[2] = 0;
    } else {
      parts[0] = w0 << bit;
      parts[1] = (w1 << bit) | (w0 >> (64 - bit));
      parts[2] = w1 >> (64 - bit);
    }
    auto& acc = negative ? neg_ : pos_;
    uint64_t carry = 0;
    for (int p = 0; p < 3; ++p) {
      const uint64_t add = parts[p];
      if (limb + p >= kLimbs) {
        QTC_CHECK(add == 0 && carry == 0, "exact GEMM: accumulator overflow above 2^", kLsb + 64 * kLimbs);
        return;
      }
      uint64_t& a = acc[static_cast<size_t>(limb + p)];
      const unsigned __int128 s = static_cast<unsigned __int128>(a) + add + carry;
      a = static_cast<uint64_t>(s);
      carry = static_cast<uint64_t>(s >> 64);
    }
    for (int i = limb + 3; carry != 0; ++i) {
      QTC_CHECK(i < kLimbs, "exact GEMM: accumulator overflow above 2^", kLsb + 64 * kLimbs);
      uint64_t& a = acc[static_cast<size_t>(i)];
      a += 1;
      carry = a == 0;
    }
  }

  void add_double(double v) {  // an FP32/FP64 value with at most 53 significant bits, finite
    if (v == 0.0) return;
    int e = 0;
    const double m = std::frexp(std::fabs(v), &e);
    add(static_cast<unsigned __int128>(static_cast<uint64_t>(std::ldexp(m, 53))), e - 53, v < 0);
  }

  /// The total rounded once (RN-even) to the format; ±Inf beyond its max.
  double round_to(const OutFormat& f) const {
    std::array<uint64_t, kLimbs> mag{};
    bool negative = false;
    int cmp = 0;
    for (int i = kLimbs - 1; i >= 0 && cmp == 0; --i)
      if (pos_[i] != neg_[i]) cmp = pos_[i] > neg_[i] ? 1 : -1;
    if (cmp == 0) return 0.0;  // exact zero is +0 (round-to-nearest sum of opposite values)
    const auto& big = cmp > 0 ? pos_ : neg_;
    const auto& small = cmp > 0 ? neg_ : pos_;
    negative = cmp < 0;
    unsigned borrow = 0;
    for (int i = 0; i < kLimbs; ++i) {
      const uint64_t d1 = big[i] - small[i];
      const unsigned b1 = big[i] < small[i];
      const uint64_t d2 = d1 - borrow;
      const unsigned b2 = d1 < borrow;
      mag[i] = d2;
      borrow = b1 | b2;
    }
    int top = -1;
    for (int i = kLimbs - 1; i >= 0; --i)
      if (mag[i] != 0) {
        top = i * 64 + 63 - __builtin_clzll(mag[i]);
        break;
      }
    auto bit = [&](int b) -> uint64_t { return b < 0 ? 0 : (mag[b >> 6] >> (b & 63)) & 1u; };
    auto any_below = [&](int b) -> bool {  // any set bit at positions < b
      if (b <= 0) return false;
      const int limb = b >> 6;
      for (int i = 0; i < limb; ++i)
        if (mag[i] != 0) return true;
      const int r = b & 63;
      return r != 0 && (mag[limb] & ((uint64_t{1} << r) - 1)) != 0;
    };
    const int E = top + kLsb;
    const int q = std::max(E - (f.precision - 1), f.emin - (f.precision - 1));  // exponent of the result's ULP
    const int s = q - kLsb;                                                       // bit index of that ULP
    double result;
    if (s <= 0) {  // exact: the whole magnitude fits in `precision` bits above the LSB
      uint64_t kept = 0;
      for (int b = top; b >= 0; --b) kept = (kept << 1) | bit(b);
      result = std::ldexp(static_cast<double>(kept), kLsb);
    } else {
      uint64_t kept = 0;
      for (int b = top; b >= s; --b) kept = (kept << 1) | bit(b);
      const bool guard = bit(s - 1) != 0;
      const bool sticky = any_below(s - 1);
      if (guard && (sticky || (kept & 1u))) ++kept;
      result = std::ldexp(static_cast<double>(kept), q);
    }
    if (result > f.max) result = std::numeric_limits<double>::infinity();
    return negative ? -result : result;
  }

 private:
  std::array<uint64_t, kLimbs> pos_{};
  std::array<uint64_t, kLimbs> neg_{};
};

}  // namespace

double gemm_matrix_value(const HostMatrix& m, int64_t i, int64_t j) {
  const size_t idx = static_cast<size_t>(i * m.cols + j);
  switch (m.dtype) {
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, m.bytes.data() + idx * 2, 2);
      return bf16_to_f32(h);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, m.bytes.data() + idx * 2, 2);
      return f16_to_f32(h);
    }
    case DType::kF32: {
      float f;
      std::memcpy(&f, m.bytes.data() + idx * 4, 4);
      return f;
    }
    default: QTC_FAIL("C must be F32, BF16 or F16, got ", dtype_name(m.dtype));
  }
}

namespace {

void store_value(HostMatrix& out, int64_t i, int64_t j, double rounded) {
  const size_t idx = static_cast<size_t>(i * out.cols + j);
  const auto f = static_cast<float>(rounded);  // exact: `rounded` is already on the output grid (or ±Inf/NaN)
  switch (out.dtype) {
    case DType::kF32: std::memcpy(out.bytes.data() + idx * 4, &f, 4); break;
    case DType::kBF16: {
      const uint16_t h = f32_to_bf16(f);
      std::memcpy(out.bytes.data() + idx * 2, &h, 2);
      break;
    }
    case DType::kF16: {
      const uint16_t h = f32_to_f16(f);
      std::memcpy(out.bytes.data() + idx * 2, &h, 2);
      break;
    }
    default: QTC_FAIL("GEMM output must be F32, BF16 or F16");
  }
}

}  // namespace


double ulp_of(DType t, double v) {
  const OutFormat f = out_format(t);
  const double a = std::fabs(v);
  int e = f.emin;
  if (a >= std::ldexp(1.0, f.emin) && std::isfinite(a)) e = std::ilogb(a);
  return std::ldexp(1.0, e - (f.precision - 1));
}

void store_rounded(HostMatrix& out, int64_t i, int64_t j, double v) {
  const OutFormat f = out_format(out.dtype);
  double r = v;
  if (std::isfinite(v) && v != 0.0) {
    const int E = std::ilogb(v);
    const int q = std::max(E - (f.precision - 1), f.emin - (f.precision - 1));
    r = std::ldexp(std::nearbyint(std::ldexp(v, -q)), q);  // default rounding mode: RN-even
    if (std::fabs(r) > f.max) r = std::copysign(std::numeric_limits<double>::infinity(), v);
  }
  store_value(out, i, j, r);
}

HostMatrix gemm_exact(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args) {
  return gemm_exact(resolve_gemm(A, B, args), args);
}

HostMatrix gemm_exact(const ResolvedGemm& g, const GemmArgs& args) {
  const int64_t n = g.b.rows;
  const int64_t m = g.a.rows;
  const int64_t K = g.a.k;
  HostMatrix out(args.out, n, m);
  const OutFormat fmt = out_format(args.out);
  const bool use_c = args.beta != 0.0f && args.c != nullptr;

  int64_t alpha_sig = 0;
  int32_t alpha_exp = 0;
  const bool alpha_finite = std::isfinite(g.alpha);
  if (alpha_finite && g.alpha != 0.0f) {
    int e = 0;
    const double mm = std::frexp(std::fabs(static_cast<double>(g.alpha)), &e);
    alpha_sig = static_cast<int64_t>(std::ldexp(mm, 24));  // FP32: 24 significant bits
    alpha_exp = e - 24;
  }
  const bool alpha_neg = g.alpha < 0.0f;

  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      const double cv = use_c ? static_cast<double>(args.beta) * gemm_matrix_value(*args.c, i, j) : 0.0;  // exact: 24x24 bits
      const double bv = args.bias.empty() ? 0.0 : static_cast<double>(args.bias[static_cast<size_t>(j)]);
      const bool nonfinite = !alpha_finite || g.a.row_nonfinite[static_cast<size_t>(j)] ||
                             g.b.row_nonfinite[static_cast<size_t>(i)] || !std::isfinite(cv) || !std::isfinite(bv);
      if (nonfinite) {  // IEEE semantics in FP64: NaN and Inf propagate as any FP implementation would
        double s = 0.0;
        for (int64_t r = 0; r < K; ++r) s += g.b.at(i, r) * g.a.at(j, r);
        store_rounded(out, i, j, static_cast<double>(g.alpha) * s + cv + bv);
        continue;
      }
      WideAccumulator acc;
      if (alpha_sig != 0) {
        const int64_t* sa = g.a.sig.data() + j * K;
        const int64_t* sb = g.b.sig.data() + i * K;
        const int32_t* ea = g.a.exp.data() + j * K;
        const int32_t* eb = g.b.exp.data() + i * K;
        for (int64_t r = 0; r < K; ++r) {
          if (sa[r] == 0 || sb[r] == 0) continue;
          const bool neg = ((sa[r] < 0) != (sb[r] < 0)) != alpha_neg;
          const auto ab = static_cast<unsigned __int128>(static_cast<uint64_t>(sa[r] < 0 ? -sa[r] : sa[r])) *
                          static_cast<uint64_t>(sb[r] < 0 ? -sb[r] : sb[r]);
          acc.add(ab * static_cast<uint64_t>(alpha_sig), ea[r] + eb[r] + alpha_exp, neg);
        }
      }
      acc.add_double(cv);
      acc.add_double(bv);
      store_value(out, i, j, acc.round_to(fmt));
    }
  }
  return out;
}

}  // namespace qtc::ref
