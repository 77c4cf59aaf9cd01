/// \file dequant_simd.cpp
/// \brief Vectorized dequantize() (quantize.cpp) for every recipe but profile torchao, to F32 or BF16 output,
///        bit-exact to the scalar one: each value is the same product (same operands, same order), rounded
///        once to the output type. Plane rows are decoded kGroup at a time into a float buffer, then stored
///        as rows (rowwise planes) or, transposed, as kGroup consecutive values of each output row.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/dequant_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <vector>

#include "internal.hpp"
#include "simd/ops-inl.h"
#include "simd/simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace qtc::ref::simd {
namespace HWY_NAMESPACE {

/// n floats -> out (F32 copy or BF16 RN-even).
HWY_INLINE void StoreRow(const float* v, int64_t n, bool bf16, void* out) {
  if (!bf16) {
    std::copy_n(v, n, static_cast<float*>(out));
    return;
  }
  const DF df;
  const int64_t N = NF();
  uint16_t* o = static_cast<uint16_t*>(out);
  int64_t i = 0;
  for (; i + N <= n; i += N) StoreBF16(hn::LoadU(df, v + i), o + i);
  for (; i < n; ++i) o[i] = f32_to_bf16(v[i]);
}

HostMatrix Dequantize(const QuantizedTensor& q, PlaneKind pk, DType out) {
  const Plane& p = q.plane(pk);
  const Recipe& r = q.recipe;
  const int64_t M = q.rows, K = q.cols;
  const bool col = pk == PlaneKind::kColumnwise;
  const bool bf16 = out == DType::kBF16;
  const size_t es = bf16 ? 2 : 4;
  HostMatrix y(out, M, K);
  uint8_t* yb = y.bytes.data();
  constexpr int64_t kGroup = 16;
  const int64_t len = col ? M : K;

  // v: n decoded plane rows of len; rowwise: output rows a0..; columnwise: output columns a0.. .
  auto store_group = [&](int64_t a0, int64_t n, const float* v, float* tb) {
    if (!col) {
      for (int64_t t = 0; t < n; ++t) StoreRow(v + t * len, len, bf16, yb + static_cast<size_t>((a0 + t) * K) * es);
      return;
    }
    for (int64_t b = 0; b < len; ++b) {
      for (int64_t t = 0; t < n; ++t) tb[t] = v[t * len + b];
      StoreRow(tb, n, bf16, yb + static_cast<size_t>(b * K + a0) * es);
    }
  };
  auto for_plane_rows = [&](int64_t nrows, const auto& decode) {
    detail::parallel_for(detail::ceil_div(nrows, kGroup), [&](int64_t g0, int64_t g1) {
      std::vector<float> v(static_cast<size_t>(kGroup * len));
      float tb[kGroup];
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t a0 = g * kGroup, n = std::min(kGroup, nrows - a0);
        for (int64_t t = 0; t < n; ++t) decode(a0 + t, v.data() + t * len);
        store_group(a0, n, v.data(), tb);
      }
    });
  };
  const DF df;
  const int64_t N = NF();
  switch (r.kind) {
    case RecipeKind::kNVFP4: {
      const float factor = 1.0f / (6.0f * static_cast<float>(r.e4m3_max));
      for_plane_rows(p.data_rows, [&](int64_t a, float* v) {
        const float am = p.amax.size() > 1 ? p.amax[static_cast<size_t>(a)] : p.amax.at(0);
        const uint8_t* d = p.data.data() + a * p.data_cols;
        const uint8_t* sc = p.scale.bytes.data() + a * p.scale.cols;
        alignas(32) float table[16];
        for (int64_t blk = 0; blk < len / 16; ++blk) {
          const float s_blk = (decode_e4m3(sc[blk]) * am) * factor;
          const VF sv = hn::Set(df, s_blk);
          for (int c = 0; c < 16; c += static_cast<int>(N)) hn::Store(hn::Mul(hn::LoadU(df, kE2M1Values + c), sv), df, table + c);
          float* o = v + blk * 16;
          for (int64_t t = 0; t < 8; ++t) {
            const uint8_t byte = d[blk * 8 + t];
            o[2 * t] = table[byte & 0xF];
            o[2 * t + 1] = table[byte >> 4];
          }
        }
      });
      break;
    }
    case RecipeKind::kMXFP8: {
      // Data keeps x's orientation in both planes; only the scale blocks differ.
      const float* tab = r.fp8 == Fp8Type::kE4M3 ? kE4M3Table.data() : kE5M2Table.data();
      detail::parallel_for(M, [&](int64_t b0, int64_t e0) {
        std::vector<float> v(static_cast<size_t>(K)), sv(static_cast<size_t>(K));
        for (int64_t i = b0; i < e0; ++i) {
          const uint8_t* d = p.data.data() + i * K;
          if (col) {
            const uint8_t* srow = p.scale.bytes.data() + (i / 32) * p.scale.cols;
            for (int64_t j = 0; j < K; ++j) v[static_cast<size_t>(j)] = decode_e8m0(srow[j]) * tab[d[j]];
          } else {
            const uint8_t* srow = p.scale.bytes.data() + i * p.scale.cols;
            for (int64_t c = 0; c * 32 < K; ++c) {
              const float s = decode_e8m0(srow[c]);
              const int64_t j1 = std::min(K, c * 32 + 32);
              for (int64_t j = c * 32; j < j1; ++j) v[static_cast<size_t>(j)] = s * tab[d[j]];
            }
          }
          StoreRow(v.data(), K, bf16, yb + static_cast<size_t>(i * K) * es);
        }
      });
      break;
    }
    case RecipeKind::kFP8Block:
    case RecipeKind::kFP8Tensor: {
      const float* tab = r.fp8 == Fp8Type::kE4M3 ? kE4M3Table.data() : kE5M2Table.data();
      const int64_t rows = col ? K : M;
      for_plane_rows(rows, [&](int64_t a, float* v) {
        const uint8_t* d = p.data.data() + a * p.data_cols;
        for (int64_t b0 = 0; b0 < len; b0 += 128) {
          float s_b = q.scale_inv;
          if (r.kind == RecipeKind::kFP8Block) s_b = r.block_2d ? p.scale.f32(a / 128, b0 / 128) : p.scale.f32(a, b0 / 128);
          const int64_t b1 = std::min(len, b0 + 128);
          for (int64_t b = b0; b < b1; ++b) v[b] = tab[d[b]] * s_b;
        }
      });
      break;
    }
  }
  return y;
}

}  // namespace HWY_NAMESPACE
}  // namespace qtc::ref::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace qtc::ref::simd {
HWY_EXPORT(Dequantize);
HostMatrix dequantize(const QuantizedTensor& q, PlaneKind pk, DType out) { return HWY_DYNAMIC_DISPATCH(Dequantize)(q, pk, out); }
}  // namespace qtc::ref::simd
#endif
