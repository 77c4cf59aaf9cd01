/// \file rht_simd.cpp
/// \brief Vectorized random Hadamard transform of NVFP4's RHT columnwise plane (TE_FORMATS.md §1.9), bit-exact to
///        quantize.cpp's rht_transform: the 16 exact products of each output summed in the scalar order in double,
///        rounded once to BF16.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/rht_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <bit>
#include <cmath>
#include <vector>

#include "internal.hpp"
#include "simd/ops-inl.h"
#include "simd/simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace qtc::ref::simd {
namespace HWY_NAMESPACE {

/// f64_to_bf16 (one RN-even rounding of a double; NaN -> 0x7FC0 / 0xFFC0; overflow -> Inf) from the bits.
HWY_INLINE uint16_t F64ToBF16(double d) {
  const uint64_t u = std::bit_cast<uint64_t>(d);
  const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000u);
  const uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
  if (a > 0x7FF0000000000000ull) return sign ? 0xFFC0 : 0x7FC0;
  if (a < (static_cast<uint64_t>(1023 - 126) << 52)) {  // below 2^-126: the subnormal grid of 2^-133
    const double qv = std::nearbyint(std::bit_cast<double>(a) * 0x1p133);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(qv));
  }
  const uint64_t rn = (a + 0xFFFFFFFFFFFull + ((a >> 45) & 1u)) >> 45;  // + 2^44 - 1 + lsb
  const uint64_t code = rn - (static_cast<uint64_t>(1023 - 127) << 7);
  if (code >= 0x7F80u) return static_cast<uint16_t>(sign | 0x7F80u);
  return static_cast<uint16_t>(sign | code);
}

HostMatrix RhtTransform(const MatrixView& x, uint16_t sign_mask) {
  QTC_CHECK(x.rows % 16 == 0, "RHT needs M % 16 == 0, got M = ", x.rows, " (TE_FORMATS.md §1.9)");
  HostMatrix y(DType::kBF16, x.cols, x.rows);
  using DD = hn::CappedTag<double, 4>;
  const DD dd;
  const int64_t L = static_cast<int64_t>(hn::Lanes(dd));
  alignas(64) double t[16][16];
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      const double h = (std::popcount(static_cast<unsigned>(r & c)) & 1) ? -0.25 : 0.25;
      t[r][c] = ((sign_mask >> r) & 1u) ? -h : h;
    }
  uint16_t* out = y.as<uint16_t>();
  const int64_t K = x.cols, M = x.rows;
  if (M == 0 || K == 0) return y;
  detail::parallel_for(M / 16, [&](int64_t b, int64_t e) {
    const int64_t SK = K + 16;  // padded row stride: the 16 rows are read column by column
    std::vector<float> buf(static_cast<size_t>(16 * SK));
    alignas(64) double acc_out[16];
    for (int64_t g = b; g < e; ++g) {
      for (int rr = 0; rr < 16; ++rr) LoadRows(x, g * 16 + rr, 1, buf.data() + rr * SK);
      for (int64_t k = 0; k < K; ++k) {
        // acc[c] = sum over r (in order) of x[r][k] * t[r][c]: exact products, the scalar order of additions.
        for (int64_t c0 = 0; c0 < 16; c0 += 4 * L) {
          auto a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
          for (int rr = 0; rr < 16; ++rr) {
            const auto xv = hn::Set(dd, static_cast<double>(buf[static_cast<size_t>(rr * SK + k)]));
            a0 = hn::Add(a0, hn::Mul(xv, hn::Load(dd, &t[rr][c0])));
            a1 = hn::Add(a1, hn::Mul(xv, hn::Load(dd, &t[rr][c0 + L])));
            a2 = hn::Add(a2, hn::Mul(xv, hn::Load(dd, &t[rr][c0 + 2 * L])));
            a3 = hn::Add(a3, hn::Mul(xv, hn::Load(dd, &t[rr][c0 + 3 * L])));
          }
          hn::Store(a0, dd, acc_out + c0);
          hn::Store(a1, dd, acc_out + c0 + L);
          hn::Store(a2, dd, acc_out + c0 + 2 * L);
          hn::Store(a3, dd, acc_out + c0 + 3 * L);
        }
        uint16_t* o = out + k * M + g * 16;
        for (int c = 0; c < 16; ++c) o[c] = F64ToBF16(acc_out[c]);
      }
    }
  });
  return y;
}

}  // namespace HWY_NAMESPACE
}  // namespace qtc::ref::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qtc::ref::simd {
HWY_EXPORT(RhtTransform);

HostMatrix rht_transform(const MatrixView& x, uint16_t sign_mask) { return HWY_DYNAMIC_DISPATCH(RhtTransform)(x, sign_mask); }
}  // namespace qtc::ref::simd
#endif
