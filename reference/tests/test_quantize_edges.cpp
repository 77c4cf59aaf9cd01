/// \file test_quantize_edges.cpp
/// \brief The quantization edge cases of TE_FORMATS.md §11, one named test each (cases 1-18; 19 is the GEMM
///        suite's, 20 the sharding suite's). Expected values are derived by hand from the spec, not from the
///        implementation under test.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>

#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"

namespace {

using namespace qtc;

/// A float matrix the tests fill by hand.
struct Mat {
  int64_t M, K;
  std::vector<float> v;
  Mat(int64_t m, int64_t k, float fill = 0.0f) : M(m), K(k), v(static_cast<size_t>(m * k), fill) {}
  float& operator()(int64_t i, int64_t j) { return v[static_cast<size_t>(i * K + j)]; }
  MatrixView view() const { return MatrixView{v.data(), DType::kF32, M, K}; }
};

Recipe nvfp4(bool two_d = false) {
  Recipe r = Recipe::of(Nvfp4Options{.tile_2d = two_d});
  return r;
}

/// FP4 code of element (a, b) of a plane (storage coordinates).
uint8_t code(const Plane& p, int64_t a, int64_t b) {
  const uint8_t byte = p.data[static_cast<size_t>(a * p.data_cols + b / 2)];
  return (b & 1) ? byte >> 4 : byte & 0xF;
}

// --- 1 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase01, Nvfp4GlobalAmaxZero) {
  EXPECT_EQ(ref::nvfp4_global_encode_scale(0.0f), 1.0f);
  Mat x(32, 32);
  x(3, 5) = -0.0f;
  const auto q = ref::quantize(x.view(), nvfp4());
  EXPECT_EQ(q.rowwise->amax, std::vector<float>{0.0f});
  for (uint8_t s : q.rowwise->scale.bytes) EXPECT_EQ(s, 0x00);
  for (uint8_t s : q.columnwise->scale.bytes) EXPECT_EQ(s, 0x00);
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t j = 0; j < 32; ++j) EXPECT_EQ(code(*q.rowwise, i, j), (i == 3 && j == 5) ? 0x8 : 0x0) << i << "," << j;
  const auto d = ref::dequantize(q, PlaneKind::kRowwise);
  for (int64_t i = 0; i < 32 * 32; ++i) EXPECT_EQ(std::fabs(d.as<float>()[i]), 0.0f);
}

// --- 2 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase02, Nvfp4GlobalAmaxInf) {
  EXPECT_EQ(ref::nvfp4_global_encode_scale(INFINITY), 1.0f) << "2688/inf = 0 -> 1 in the standard kernels";
  Mat x(16, 32, 1.0f);
  x(0, 0) = INFINITY;
  x(0, 1) = -2.0f;
  x(0, 17) = 2.0f;
  const auto q = ref::quantize(x.view(), nvfp4());
  const Plane& p = *q.rowwise;
  EXPECT_TRUE(std::isinf(p.amax[0]));
  EXPECT_EQ(p.scale.byte(0, 0), 0x7E) << "fminf(inf, FLT_MAX) saturates to 448";
  EXPECT_EQ(code(p, 0, 0), 0x7) << "inf -> +6";
  EXPECT_EQ(code(p, 0, 1), 0x8) << "-2/448 rounds to -0";
  EXPECT_EQ(code(p, 0, 2), 0x0);
  // Other block: bamax 2 with S_enc = 1: sf = E4M3(2 * RN(1/6)) = E4M3(0.33333334) = 0.34375 (0x2B).
  EXPECT_EQ(p.scale.byte(0, 1), 0x2B);
  EXPECT_EQ(code(p, 0, 17), 0x7) << "2 / 0.34375 = 5.82 -> 6";
  EXPECT_EQ(code(p, 0, 16), 0x5) << "1 / 0.34375 = 2.91 -> 3";
}

// --- 3 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase03, Nvfp4TinyAndSubnormalGlobalAmax) {
  const float tiny = 1e-38f;  // subnormal: 2688 / tiny overflows
  EXPECT_EQ(ref::nvfp4_global_encode_scale(tiny), FLT_MAX);
  const float s_dec = 1.0f / FLT_MAX;
  EXPECT_GT(s_dec, 0.0f) << "no flush to zero";
  EXPECT_LT(s_dec, FLT_MIN);
  Mat x(16, 16, 0.0f);
  x(0, 0) = tiny;
  x(0, 1) = tiny / 2;
  const auto q = ref::quantize(x.view(), nvfp4());
  // sf = E4M3(tiny * (FLT_MAX * RN(1/6))) ~ E4M3(0.567) = 0x31 (0.5625); enc = fminf(1/(0.5625 * s_dec)) overflows
  // to inf -> FLT_MAX; tiny * FLT_MAX = 3.40 -> code 5 (3.0); tiny/2 * FLT_MAX = 1.70 -> 3 (1.5).
  EXPECT_EQ(q.rowwise->scale.byte(0, 0), 0x31);
  EXPECT_EQ(code(*q.rowwise, 0, 0), 0x5);
  EXPECT_EQ(code(*q.rowwise, 0, 1), 0x3);
}

// --- 4 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase04, Nvfp4BlockScaleUnderflow) {
  Mat x(16, 32, 0.0f);
  x(0, 0) = 1e6f;  // sets the global amax
  for (int j = 16; j < 32; ++j) x(0, j) = (j % 2 ? -1e-6f : 1e-6f);
  const auto q = ref::quantize(x.view(), nvfp4());
  // bamax * S_enc / 6 = 1e-6 * 2688e-6 / 6 = 4.5e-10 < 2^-10 -> sf = 0, enc = FLT_MAX, elements saturate to +-6.
  EXPECT_EQ(q.rowwise->scale.byte(0, 1), 0x00);
  for (int j = 16; j < 32; ++j) EXPECT_EQ(code(*q.rowwise, 0, j), j % 2 ? 0xF : 0x7) << j;
  const auto d = ref::dequantize(q, PlaneKind::kRowwise);
  for (int j = 16; j < 32; ++j) EXPECT_EQ(d.as<float>()[j], 0.0f) << "dequantized value is 0 anyway";
}

// --- 5 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase05, Nvfp4BlockScaleSaturation) {
  Mat x(16, 16, 0.0f);
  x(0, 0) = 10.0f;
  x(0, 1) = 1.0f;
  // The amax used (1.0) is smaller than the data (as after an FSDP2 gather without amax reduction).
  const auto q = ref::quantize_with_amax(x.view(), nvfp4(), 1.0f, 1.0f);
  // S_enc = 2688; sf = E4M3(10 * 2688/6) -> 448 (0x7E); enc = 1/(448/2688) = 6; 10*6 -> 6 (0x7), 1*6 -> 6.
  EXPECT_EQ(q.rowwise->scale.byte(0, 0), 0x7E);
  EXPECT_EQ(code(*q.rowwise, 0, 0), 0x7);
  EXPECT_EQ(code(*q.rowwise, 0, 1), 0x7);
  // 4over6 with E4M3 max 448: the map-to-4 candidate is clamped (base * 1.5 > 448) -> same as map-to-6.
  Recipe r = nvfp4();
  r.nvfp4().fourover6 = true;
  Mat y(16, 16, 0.0f);
  y(0, 0) = 6.0f;
  y(0, 1) = 5.0f;
  const auto q46 = ref::quantize(y.view(), r);
  EXPECT_EQ(q46.rowwise->scale.byte(0, 0), 0x7E) << "base = 448: both candidates saturate to 448, tie -> map-to-6";
}

// --- 6 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase06, Nvfp4E2M1TiesAfterTheMultiply) {
  // Golden amax 21504 = 448*6*8 gives S_enc = 1/8 exactly. A block with bamax 48 gets sf = E4M3(48 * (1/8 *
  // RN(1/6))) = 1.0 and enc = 1/(1 * 8) = 0.125, so x * enc is exact and x = 8t lands on the tie t.
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const uint8_t at_tie[] = {0, 2, 2, 4, 4, 6, 6}, below[] = {0, 1, 2, 3, 4, 5, 6}, above[] = {1, 2, 3, 4, 5, 6, 7};
  Mat x(16, 32, 0.0f);
  x(15, 31) = 21504.0f;
  for (int t = 0; t < 7; ++t) {
    x(t, 0) = 48.0f;
    x(t, 1) = 8.0f * ties[t];
    x(t, 2) = std::nextafter(8.0f * ties[t], 0.0f);
    x(t, 3) = std::nextafter(8.0f * ties[t], 1e9f);
    x(t, 4) = -8.0f * ties[t];
  }
  const auto q = ref::quantize(x.view(), nvfp4());
  for (int t = 0; t < 7; ++t) {
    SCOPED_TRACE(ties[t]);
    EXPECT_EQ(q.rowwise->scale.byte(t, 0), 0x38) << "sf = 1.0";
    EXPECT_EQ(code(*q.rowwise, t, 1), at_tie[t]);
    EXPECT_EQ(code(*q.rowwise, t, 2), below[t]);
    EXPECT_EQ(code(*q.rowwise, t, 3), above[t]);
    EXPECT_EQ(code(*q.rowwise, t, 4), at_tie[t] | 0x8);
  }
}

// --- 7 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase07, Nvfp4BlockScaleOperationOrder) {
  // Find block amaxes for which bamax * (S_enc * RN(1/6)) and bamax / 6 * S_enc round to different E4M3 scales,
  // and check that the 1x16 quantizer uses the first order and 4over6 the second (map-to-6 candidate).
  // The two orders differ by an ulp or two, so a flip needs a value next to an E4M3 rounding midpoint:
  // scan the floats around bamax = midpoint * 6 / S_enc for a few midpoints.
  const float global = 1000.0f;
  const float s_enc = 2688.0f / global;
  int found = 0;
  for (float mid : {1.0625f, 1.1875f, 1.3125f, 1.4375f, 1.5625f, 1.6875f, 1.8125f, 1.9375f, 3.25f, 13.0f, 104.0f, 0.40625f}) {
    float bamax = mid * 6.0f / s_enc;
    for (int k = 0; k < 64; ++k) bamax = std::nextafter(bamax, 0.0f);
    for (int k = 0; k < 128 && found < 20; ++k, bamax = std::nextafter(bamax, INFINITY)) {
    const uint8_t a = encode_e4m3(bamax * (s_enc * 0x1.555556p-3f));
    const uint8_t b = encode_e4m3(bamax / 6.0f * s_enc);
    if (a == b) continue;
    ++found;
    Mat x(16, 32, 0.0f);
    x(0, 0) = bamax;
    x(0, 16) = global;
    const auto q = ref::quantize(x.view(), nvfp4());
    EXPECT_EQ(q.rowwise->scale.byte(0, 0), a) << std::hexfloat << "bamax " << bamax;
    Recipe r46 = nvfp4();
    r46.nvfp4().fourover6 = true;
    // Make map-to-6 win: the block's other elements sit on the map-to-6 grid.
    const auto q46 = ref::quantize(x.view(), r46);
    const uint8_t s46 = q46.rowwise->scale.byte(0, 0);
    const uint8_t sf4 = encode_e4m3(std::fmin(bamax / 6.0f * s_enc * 1.5f, 448.0f));
    EXPECT_TRUE(s46 == b || s46 == sf4) << std::hexfloat << "bamax " << bamax << ": 4over6 scale " << int(s46)
                                        << " is neither bamax/6*S_enc (" << int(b) << ") nor its map-to-4 (" << int(sf4) << ")";
    }
  }
  EXPECT_GE(found, 5) << "no operation-order case found";
}

// --- 8 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase08, Nvfp4SignedZeroAndNaN) {
  Mat x(16, 16, 1.0f);
  x(0, 0) = -0.0f;
  x(0, 1) = NAN;
  x(0, 2) = 3.0f;
  const auto q = ref::quantize(x.view(), nvfp4());
  EXPECT_EQ(q.rowwise->amax[0], 3.0f) << "NaN is ignored by every amax";
  EXPECT_EQ(code(*q.rowwise, 0, 0), 0x8) << "kernel: -0.0 -> 0x8";
  EXPECT_EQ(code(*q.rowwise, 0, 1), 0x7) << "kernel: NaN -> +6";
  EXPECT_EQ(code(*q.rowwise, 0, 2), 0x7);
  Recipe py = nvfp4();
  py.profile = Profile::kTEPyRef;
  const auto qp = ref::quantize(x.view(), py);
  EXPECT_TRUE(std::isnan(qp.rowwise->amax[0])) << "torch.amax propagates NaN";
  for (uint8_t s : qp.rowwise->scale.bytes) EXPECT_EQ(s, 0x7F);
  for (uint8_t d : qp.rowwise->data) EXPECT_EQ(d, 0x00);
  Mat z(16, 16, 1.0f);
  z(0, 0) = -0.0f;
  EXPECT_EQ(code(*ref::quantize(z.view(), py).rowwise, 0, 0), 0x0) << "PyTorch reference: -0.0 -> 0x0";
}

// --- 9 ---------------------------------------------------------------------------------------------------
TEST(EdgeCase09, Nvfp4RowScaled) {
  Mat x(32, 32, 0.0f);
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t j = 0; j < 32; ++j) x(i, j) = (i == 5) ? 0.0f : nd(rng) * (i % 2 ? 1e-3f : 1e3f);
  Recipe r = nvfp4();
  r.nvfp4().row_scaled = true;
  const auto q = ref::quantize(x.view(), r);
  ASSERT_EQ(q.rowwise->amax.size(), 32u);
  ASSERT_EQ(q.columnwise->amax.size(), 32u);
  for (int64_t i = 0; i < 32; ++i) {
    float a = 0.0f;
    for (int64_t j = 0; j < 32; ++j) a = std::fmax(a, std::fabs(x(i, j)));
    EXPECT_EQ(q.rowwise->amax[static_cast<size_t>(i)], a) << "row " << i;
    // Row i equals a per-tensor quantization of that row with its own amax.
    Mat one(16, 32, 0.0f);
    for (int64_t j = 0; j < 32; ++j) one(0, j) = x(i, j);
    const auto qi = ref::quantize_with_amax(one.view(), nvfp4(), a, a);
    for (int64_t b = 0; b < 16; ++b) EXPECT_EQ(q.rowwise->data[static_cast<size_t>(i * 16 + b)], qi.rowwise->data[static_cast<size_t>(b)]) << i;
    for (int64_t b = 0; b < 2; ++b) EXPECT_EQ(q.rowwise->scale.byte(i, b), qi.rowwise->scale.byte(0, b)) << i;
  }
  for (int64_t b = 0; b < 2; ++b) EXPECT_EQ(q.rowwise->scale.byte(5, b), 0x00) << "all-zero row: S_enc 1, scales 0";
  for (int64_t j = 0; j < 32; ++j) {
    float a = 0.0f;
    for (int64_t i = 0; i < 32; ++i) a = std::fmax(a, std::fabs(x(i, j)));
    EXPECT_EQ(q.columnwise->amax[static_cast<size_t>(j)], a) << "column " << j;
  }
}

// --- 10 --------------------------------------------------------------------------------------------------
TEST(EdgeCase10, Nvfp4TwoDimensionalColumnwiseIsTheTranspose) {
  for (auto [M, K] : {std::pair<int64_t, int64_t>{48, 80}, {304, 304}, {32, 16}}) {
    Mat x(M, K);
    std::mt19937 rng(static_cast<uint32_t>(M * K));
    std::normal_distribution<float> nd;
    for (float& v : x.v) v = nd(rng);
    const auto q = ref::quantize(x.view(), nvfp4(true));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < K; ++j) {
        ASSERT_EQ(code(*q.columnwise, j, i), code(*q.rowwise, i, j)) << M << "x" << K << " at " << i << "," << j;
        if (i % 16 == 0 && j % 16 == 0) {
          ASSERT_EQ(q.columnwise->scale.byte(j, i / 16), q.rowwise->scale.byte(i, j / 16));
          for (int r = 0; r < 16; ++r) ASSERT_EQ(q.rowwise->scale.byte(i + r, j / 16), q.rowwise->scale.byte(i, j / 16)) << "tile scale repeated";
        }
      }
  }
}

// --- 11 --------------------------------------------------------------------------------------------------
TEST(EdgeCase11, Nvfp4Rht) {
  // An impulse at row r of a 16-row group, column k: Y[k][16g + c] = s_r * H[r][c] = +-0.25 exactly.
  HostMatrix x(DType::kBF16, 32, 16);
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t j = 0; j < 16; ++j) x.set(i, j, 0.0f);
  x.set(16 + 3, 2, 1.0f);
  const auto y = ref::rht_transform(x.view());
  const uint16_t mask = 0xD7E8;
  for (int c = 0; c < 16; ++c) {
    const float h = (std::popcount(3u & static_cast<unsigned>(c)) % 2) ? -0.25f : 0.25f;
    const float want = ((mask >> 3) & 1) ? -h : h;
    EXPECT_EQ(y.get(2, 16 + c), want) << c;
    EXPECT_EQ(y.get(2, c), 0.0f) << "other group untouched";
  }
  // RHT changes only the columnwise plane; its amax is max|Y| of the bf16 Y.
  HostMatrix z(DType::kBF16, 32, 32);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t j = 0; j < 32; ++j) z.set(i, j, nd(rng));
  Recipe r = nvfp4();
  r.nvfp4().rht = true;
  const auto qr = ref::quantize(z.view(), r);
  const auto qp = ref::quantize(z.view(), nvfp4());
  EXPECT_EQ(qr.rowwise->data, qp.rowwise->data);
  EXPECT_EQ(qr.rowwise->scale.bytes, qp.rowwise->scale.bytes);
  EXPECT_EQ(qr.rowwise->amax, qp.rowwise->amax) << "rowwise amax is pre-RHT";
  const auto yz = ref::rht_transform(z.view());
  EXPECT_EQ(qr.columnwise->amax[0], ref::amax(yz.view())) << "columnwise amax is post-RHT";
  EXPECT_NE(qr.columnwise->amax[0], qp.columnwise->amax[0]);
  Recipe r0 = r;
  r0.nvfp4().rht_sign_mask = 0;
  EXPECT_NE(ref::quantize(z.view(), r0).columnwise->data, qr.columnwise->data) << "sign mask 0 vs 0xD7E8";
  Recipe bad = r;
  HostMatrix f(DType::kF32, 32, 32);
  EXPECT_THROW(ref::quantize(f.view(), bad), Error) << "RHT is bf16-only";
}

// --- 12 --------------------------------------------------------------------------------------------------
TEST(EdgeCase12, Nvfp4PackingAndLayout) {
  Mat x(16, 16, 0.0f);
  x(0, 0) = 6.0f;  // amax 6: S_enc = 448, sf(6) = 448 -> enc = 1
  x(0, 1) = -6.0f;
  x(0, 2) = 0.5f;
  x(0, 3) = 1.0f;
  x(1, 0) = 1.5f;
  const auto q = ref::quantize(x.view(), nvfp4());
  EXPECT_EQ(q.rowwise->data_cols, 8);
  EXPECT_EQ(q.rowwise->data[0], 0xF7) << "element 0 in the low nibble";
  EXPECT_EQ(q.rowwise->data[1], 0x21);
  // Columnwise is [K][M/2]: row 0 holds column 0 of x: x(0,0)=6 (low), x(1,0)=1.5 (high).
  EXPECT_EQ(q.columnwise->data_rows, 16);
  EXPECT_EQ(q.columnwise->data[0], 0x37);
  Mat odd(17, 16);
  EXPECT_THROW(ref::quantize(odd.view(), nvfp4()), Error) << "M % 16";
  Mat oddk(16, 24);
  EXPECT_THROW(ref::quantize(oddk.view(), nvfp4()), Error) << "K % 16";
}

// --- 13 --------------------------------------------------------------------------------------------------
TEST(EdgeCase13, ScalePadding) {
  for (auto [M, K] : {std::pair<int64_t, int64_t>{304, 304}, {256, 272}}) {
    Mat x(M, K, 1.0f);
    auto q = ref::quantize(x.view(), nvfp4());
    const auto ps = ref::padded_scale_shape(q.recipe, PlaneKind::kRowwise, M, K);
    EXPECT_EQ(ps.rows, (M + 127) / 128 * 128);
    EXPECT_EQ(ps.cols, ((K / 16) + 3) / 4 * 4);
    const auto padded = ref::to_padded(q.rowwise->scale, q.recipe, PlaneKind::kRowwise, M, K);
    for (int64_t i = 0; i < ps.rows; ++i)
      for (int64_t j = 0; j < ps.cols; ++j)
        if (i >= M || j >= K / 16) ASSERT_EQ(padded.byte(i, j), 0) << "padding is zero at " << i << "," << j;
    EXPECT_EQ(ref::to_compact(padded, q.recipe, PlaneKind::kRowwise, M, K), q.rowwise->scale);
    const auto sw = ref::swizzle(padded, q.recipe, PlaneKind::kRowwise, M, K);
    int64_t nonzero = 0;
    for (uint8_t b : sw.bytes) nonzero += b != 0;
    EXPECT_EQ(nonzero, M * (K / 16)) << "swizzled padding is zero";
  }
}

// --- 14 --------------------------------------------------------------------------------------------------
TEST(EdgeCase14, SwizzleIndexBoundaries) {
  EXPECT_EQ(ref::swizzled_offset(0, 0, 4), 0);
  EXPECT_EQ(ref::swizzled_offset(31, 0, 4), 31 * 16);
  EXPECT_EQ(ref::swizzled_offset(32, 0, 4), 4);
  EXPECT_EQ(ref::swizzled_offset(127, 3, 4), 31 * 16 + 3 * 4 + 3);
  EXPECT_EQ(ref::swizzled_offset(128, 0, 4), 512);
  EXPECT_EQ(ref::swizzled_offset(0, 4, 8), 512);
  EXPECT_EQ(ref::swizzled_offset(128, 0, 8), 1024);
  EXPECT_EQ(ref::swizzled_offset(129, 5, 8), 1024 + 512 + 16 + 1);
  // MXFP8 columnwise: compact [M/32][K] swizzled transposed (row = K index j, kb = M block).
  Recipe mx = Recipe::of(Mxfp8Options{});
  const int64_t M = 64, K = 160;
  Mat x(M, K);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) x(i, j) = std::ldexp(1.0f, static_cast<int>((i / 32) * 7 + j % 13));
  const auto q = ref::quantize(x.view(), mx);
  const auto sw = ref::convert_layout(q.columnwise->scale, ScaleLayout::kSwizzled, mx, PlaneKind::kColumnwise, M, K);
  const int64_t mb_pad = 4;  // roundup(ceil(64/32), 4)
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < K; ++j)
      ASSERT_EQ(sw.bytes[static_cast<size_t>(ref::swizzled_offset(j, b, mb_pad))], q.columnwise->scale.byte(b, j)) << b << "," << j;
  // NVFP4 columnwise uses the rowwise swizzle on the (K, M/16) matrix.
  Mat y(32, 48, 1.0f);
  for (int64_t i = 0; i < 32; ++i) y(i, 7) = static_cast<float>(i + 1);
  const auto qn = ref::quantize(y.view(), nvfp4());
  const auto swn = ref::convert_layout(qn.columnwise->scale, ScaleLayout::kSwizzled, qn.recipe, PlaneKind::kColumnwise, 32, 48);
  for (int64_t k = 0; k < 48; ++k)
    for (int64_t b = 0; b < 2; ++b)
      ASSERT_EQ(swn.bytes[static_cast<size_t>(ref::swizzled_offset(k, b, 4))], qn.columnwise->scale.byte(k, b));
}

// --- 15 --------------------------------------------------------------------------------------------------
Recipe mxfp8(Fp8Type t) {
  Recipe r = Recipe::of(Mxfp8Options{.fp8 = t});
  return r;
}

uint8_t mx_row_scale_of(float bamax, Fp8Type t) {
  Mat x(1, 32, 0.0f);
  x(0, 0) = bamax;
  return ref::quantize(x.view(), mxfp8(t)).rowwise->scale.byte(0, 0);
}

TEST(EdgeCase15, Mxfp8ScaleRounding) {
  for (auto t : {Fp8Type::kE4M3, Fp8Type::kE5M2}) {
    const float mx = fp8_max(t);
    for (int k : {-100, -10, 0, 5, 60}) {
      const float at = std::ldexp(mx, k);
      SCOPED_TRACE(at);
      EXPECT_EQ(mx_row_scale_of(at, t), 127 + k) << "bamax = max * 2^k";
      EXPECT_EQ(mx_row_scale_of(std::nextafter(at, INFINITY), t), 128 + k) << "one ulp above rounds up";
      EXPECT_EQ(mx_row_scale_of(std::nextafter(at, 0.0f), t), 127 + k);
    }
  }
  EXPECT_EQ(mx_row_scale_of(0x1.c00002p-119f, Fp8Type::kE4M3), 0x00) << "§2.2 exception";
  EXPECT_EQ(mx_row_scale_of(0x1.c00002p-112f, Fp8Type::kE5M2), 0x00) << "§2.2 exception";
  EXPECT_EQ(mx_row_scale_of(0x1.c00004p-119f, Fp8Type::kE4M3), 0x01);
  EXPECT_EQ(mx_row_scale_of(0.0f, Fp8Type::kE4M3), 0x00);
  EXPECT_EQ(mx_row_scale_of(1e-45f, Fp8Type::kE4M3), 0x00) << "subnormal bamax";
  // An inf element: scale 0xFE, inf -> max, the rest of the block ~ 0.
  Mat x(1, 32, 1.0f);
  x(0, 3) = -INFINITY;
  const auto q = ref::quantize(x.view(), mxfp8(Fp8Type::kE4M3));
  EXPECT_EQ(q.rowwise->scale.byte(0, 0), 0xFE);
  EXPECT_EQ(q.rowwise->data[3], 0xFE) << "-inf -> -448";
  EXPECT_EQ(q.rowwise->data[0], 0x00) << "1 * 2^-127 underflows";
  // Zero block decodes to 2^-127 * 0 = 0.
  Mat z(1, 32, 0.0f);
  const auto qz = ref::quantize(z.view(), mxfp8(Fp8Type::kE4M3));
  EXPECT_EQ(ref::dequantize(qz, PlaneKind::kRowwise).as<float>()[0], 0.0f);
  // E5M2 keeps more range: 57344 -> code 0x7B at scale 127.
  Mat e(1, 32, 0.0f);
  e(0, 0) = 57344.0f;
  const auto qe = ref::quantize(e.view(), mxfp8(Fp8Type::kE5M2));
  EXPECT_EQ(qe.rowwise->scale.byte(0, 0), 127);
  EXPECT_EQ(qe.rowwise->data[0], 0x7B);
}

// --- 16 --------------------------------------------------------------------------------------------------
TEST(EdgeCase16, Mxfp8NonAlignedShapesAnd2D) {
  for (auto [M, K] : {std::pair<int64_t, int64_t>{1, 16}, {65, 80}, {993, 512}}) {
    Mat x(M, K);
    std::mt19937 rng(static_cast<uint32_t>(M + K));
    std::normal_distribution<float> nd;
    for (float& v : x.v) v = nd(rng);
    const auto q = ref::quantize(x.view(), mxfp8(Fp8Type::kE4M3));
    ASSERT_EQ(q.rowwise->scale.cols, (K + 31) / 32);
    ASSERT_EQ(q.columnwise->scale.rows, (M + 31) / 32);
    // The partial trailing block reduces over its valid elements only.
    const int64_t j0 = (K - 1) / 32 * 32;
    float a = 0.0f;
    for (int64_t j = j0; j < K; ++j) a = std::fmax(a, std::fabs(x(M - 1, j)));
    EXPECT_EQ(q.rowwise->scale.byte(M - 1, (K - 1) / 32), encode_e8m0(a * bits_f32(0x3B124925u)));
    const int64_t i0 = (M - 1) / 32 * 32;
    float c = 0.0f;
    for (int64_t i = i0; i < M; ++i) c = std::fmax(c, std::fabs(x(i, K - 1)));
    EXPECT_EQ(q.columnwise->scale.byte((M - 1) / 32, K - 1), encode_e8m0(c * bits_f32(0x3B124925u)));
  }
  Recipe r2 = mxfp8(Fp8Type::kE4M3);
  r2.mxfp8().tile_2d = true;
  Mat x(64, 64);
  std::mt19937 rng(16);
  std::normal_distribution<float> nd;
  for (float& v : x.v) v = nd(rng);
  x(40, 40) = 100.0f;
  const auto q = ref::quantize(x.view(), r2);
  for (int64_t i = 32; i < 64; ++i) EXPECT_EQ(q.rowwise->scale.byte(i, 1), q.rowwise->scale.byte(40, 1));
  for (int64_t j = 32; j < 64; ++j) EXPECT_EQ(q.columnwise->scale.byte(1, j), q.rowwise->scale.byte(40, 1)) << "one scale both ways";
  EXPECT_EQ(q.rowwise->data, q.columnwise->data) << "same scale -> same bytes (columnwise keeps x's orientation)";
}

// --- 17 --------------------------------------------------------------------------------------------------
Recipe fp8block(bool two_d, bool pow2, float eps = 0.0f) {
  Recipe r = Recipe::of(Fp8BlockOptions{.tile_2d = two_d, .pow2_scales = pow2, .eps = eps});
  return r;
}

TEST(EdgeCase17, Fp8BlockScale) {
  // pow2 truncates the mantissa: 448/3 = 149.33 -> 128.
  EXPECT_EQ(ref::fp8_scale_from_amax(3.0f, 448.0f, true, 0.0f, FLT_MAX), 128.0f);
  EXPECT_EQ(ref::fp8_scale_from_amax(3.0f, 448.0f, false, 0.0f, FLT_MAX), 448.0f / 3.0f);
  EXPECT_EQ(ref::fp8_scale_from_amax(0.0f, 448.0f, false, 0.0f, FLT_MAX), 1.0f) << "amax 0 -> 1";
  EXPECT_EQ(ref::fp8_scale_from_amax(INFINITY, 448.0f, false, 0.0f, FLT_MAX), 1.0f) << "kernel: inf -> 1";
  EXPECT_EQ(ref::fp8_scale_from_amax(INFINITY, 448.0f, false, 0.0f, FLT_MAX, Profile::kTEPyRef), 0.0f) << "references: 0";
  EXPECT_EQ(ref::fp8_scale_from_amax(NAN, 448.0f, false, 0.0f, FLT_MAX), 1.0f);
  EXPECT_EQ(ref::fp8_scale_from_amax(1e-3f, 448.0f, false, 1.0f, FLT_MAX), 448.0f) << "amax < eps -> eps";
  // Scale overflow -> the input type's max (value_for_inf), then pow2 keeps 2^127.
  Mat t(1, 128, 0.0f);
  t(0, 0) = 1e-38f;
  const auto q32 = ref::quantize(t.view(), fp8block(false, false));
  EXPECT_EQ(q32.rowwise->scale.f32(0, 0), 1.0f / FLT_MAX);
  HostMatrix tb(DType::kBF16, 1, 128);
  for (int j = 0; j < 128; ++j) tb.set(0, j, 0.0f);
  tb.set(0, 0, 1e-38f);
  const auto qb = ref::quantize(tb.view(), fp8block(false, false));
  EXPECT_EQ(qb.rowwise->scale.f32(0, 0), 1.0f / bits_f32(0x7F7F0000u)) << "bf16 input: value_for_inf = 0x1.FEp127";
  const auto qp = ref::quantize(t.view(), fp8block(false, true));
  EXPECT_EQ(qp.rowwise->scale.f32(0, 0), 0x1p-127f);
  // Partial 128-blocks, 1D transposed columnwise, 2D transpose.
  Mat x(200, 300);
  std::mt19937 rng(17);
  std::normal_distribution<float> nd;
  for (float& v : x.v) v = nd(rng);
  const auto q1 = ref::quantize(x.view(), fp8block(false, true));
  EXPECT_EQ(q1.rowwise->scale.cols, 3);
  EXPECT_EQ(q1.columnwise->scale.rows, 300);
  EXPECT_EQ(q1.columnwise->scale.cols, 2);
  const auto q2 = ref::quantize(x.view(), fp8block(true, true));
  for (int64_t i = 0; i < 200; ++i)
    for (int64_t j = 0; j < 300; ++j)
      ASSERT_EQ(q2.columnwise->data[static_cast<size_t>(j * 200 + i)], q2.rowwise->data[static_cast<size_t>(i * 300 + j)]);
  // Zero block with eps = 1: amax clamps to 1.
  Mat z(1, 128, 0.0f);
  EXPECT_EQ(ref::quantize(z.view(), fp8block(false, false, 1.0f)).rowwise->scale.f32(0, 0), 1.0f / 448.0f);
  EXPECT_EQ(ref::quantize(z.view(), fp8block(false, false)).rowwise->scale.f32(0, 0), 1.0f) << "all zeros -> scale_inv 1";
}

// --- 18 --------------------------------------------------------------------------------------------------
TEST(EdgeCase18, Fp8PerTensorAndDelayedScaling) {
  Recipe r = Recipe::of(Fp8TensorOptions{});
  for (float a : {0.0f, INFINITY, NAN}) {
    Mat x(4, 4, 0.0f);
    x(1, 1) = a;
    const auto q = ref::quantize(x.view(), r);
    EXPECT_EQ(q.scale_inv, 1.0f) << "amax " << a;
  }
  Mat tiny(4, 4, 0.0f);
  tiny(0, 0) = 1e-39f;
  EXPECT_EQ(ref::quantize(tiny.view(), r).scale_inv, 1.0f / FLT_MAX) << "tiny amax -> scale FLT_MAX";
  Recipe p2 = r;
  p2.set_pow2_scales(true);
  Mat x(4, 4, 0.0f);
  x(0, 0) = 3.0f;
  EXPECT_EQ(ref::quantize(x.view(), p2).scale_inv, 1.0f / 128.0f);
  Recipe e = r;
  e.set_eps(10.0f);
  EXPECT_EQ(ref::quantize(x.view(), e).scale_inv, 1.0f / 44.8f);
  // Delayed scaling: roll, "max" vs "most_recent", margin, non-finite amax keeps the previous scale.
  ref::DelayedScalingState st{{2.0f, 8.0f, 1.0f, 4.0f}, 1.0f};
  ref::delayed_scaling_update(st, 448.0f, 1.0f, ref::AmaxComputeAlgo::kMax);
  EXPECT_EQ(st.scale, 224.0f / 8.0f);
  EXPECT_EQ(st.amax_history, (std::vector<float>{0.0f, 1.0f, 4.0f, 2.0f}));
  ref::DelayedScalingState mr{{2.0f, 8.0f}, 1.0f};
  ref::delayed_scaling_update(mr, 448.0f, 0.0f, ref::AmaxComputeAlgo::kMostRecent);
  EXPECT_EQ(mr.scale, 224.0f);
  ref::DelayedScalingState inf{{INFINITY, 1.0f}, 5.0f};
  ref::delayed_scaling_update(inf, 448.0f, 0.0f, ref::AmaxComputeAlgo::kMostRecent);
  EXPECT_EQ(inf.scale, 5.0f) << "non-finite amax keeps the previous scale";
  ref::DelayedScalingState zero{{0.0f, 3.0f}, 5.0f};
  ref::delayed_scaling_update(zero, 448.0f, 0.0f, ref::AmaxComputeAlgo::kMax);
  EXPECT_EQ(zero.amax_history, (std::vector<float>{0.0f, 3.0f})) << "nothing recorded: no roll";
  EXPECT_EQ(zero.scale, 5.0f);
}

}  // namespace

namespace {

// --- Profiles beyond te -----------------------------------------------------------------------------------
TEST(ProfileTorchAO, Nvfp4AgainstTheMeasuredDivergences) {
  // DIVERGENCES.md, "Measured: torchao against TE's rules": identical bytes on random normal data; all-zero
  // blocks get scale 0x08 (2^-6) where TE stores 0x00, with equal codes; blocks far below amax/28672 are
  // clamped up to 2^-6.
  Mat x(64, 64);
  std::mt19937 rng(42);
  std::normal_distribution<float> nd;
  for (float& v : x.v) v = nd(rng);
  for (int j = 0; j < 16; ++j) x(3, j) = 0.0f;
  Recipe te = nvfp4(), ao = nvfp4();
  ao.profile = Profile::kTorchAO;
  const auto qt = ref::quantize(x.view(), te), qa = ref::quantize(x.view(), ao);
  EXPECT_EQ(qa.rowwise->scale.byte(3, 0), 0x08);
  EXPECT_EQ(qt.rowwise->scale.byte(3, 0), 0x00);
  int64_t diff = 0;
  for (size_t i = 0; i < qt.rowwise->data.size(); ++i) diff += qt.rowwise->data[i] != qa.rowwise->data[i];
  EXPECT_LE(diff, static_cast<int64_t>(qt.rowwise->data.size() / 100)) << "codes agree on normal data (up to rare order effects)";
  Mat t(16, 32, 1e-6f);
  t(0, 0) = 1000.0f;
  const auto qtiny = ref::quantize(t.view(), ao);
  EXPECT_EQ(qtiny.rowwise->scale.byte(0, 1), 0x08) << "clamped to E4M3's smallest normal";
  EXPECT_EQ(ref::quantize(t.view(), te).rowwise->scale.byte(0, 1), 0x00);
  Recipe bad = ao;
  bad.nvfp4().tile_2d = true;
  EXPECT_THROW(bad.validate(), Error);
}

TEST(ProfileOcp, Mxfp8FloorRuleAndNonFiniteBlocks) {
  Recipe r = mxfp8(Fp8Type::kE4M3);
  r.mxfp8().scale_rule = MxScaleRule::kOcpFloor;
  r.profile = Profile::kOCP;
  Mat x(1, 64, 1.0f);
  x(0, 0) = 500.0f;  // floor(log2 500) = 8 -> X = 2^(8-8) = 1: 500 saturates to 448 (TE's rceil would pick 2^1)
  x(0, 40) = NAN;
  const auto q = ref::quantize(x.view(), r);
  EXPECT_EQ(q.rowwise->scale.byte(0, 0), 127);
  EXPECT_EQ(q.rowwise->data[0], 0x7E);
  EXPECT_EQ(q.rowwise->scale.byte(0, 1), 0xFF) << "a NaN block gets a NaN scale";
  EXPECT_EQ(q.rowwise->data[33], 0x7F);
  Recipe te = mxfp8(Fp8Type::kE4M3);
  const auto qt = ref::quantize(x.view(), te);
  EXPECT_EQ(qt.rowwise->scale.byte(0, 0), 128);
  EXPECT_EQ(qt.rowwise->scale.byte(0, 1), 119) << "te ignores the NaN in the amax: ceil(log2(1/448)) = -8";
  Recipe wrong = r;
  wrong.mxfp8().scale_rule = MxScaleRule::kRceil;
  EXPECT_THROW(wrong.validate(), Error) << "ocp uses the floor rule";
}

}  // namespace
