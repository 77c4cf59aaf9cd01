/// \file gemm_test.cpp
/// \brief Reference GEMMs (gemm.hpp): exact accumulator, Eigen path and its bound, pair semantics,
///        operand planes, NVFP4 alpha, row-scaled NVFP4 (§7.5).
///
/// | area               | what                                                                           |
/// |--------------------|--------------------------------------------------------------------------------|
/// | exact rounding     | ties to even, sticky below 2^-60, cancellation of 2^40 terms, F32/BF16/F16 out   |
/// | exact vs Eigen     | bitwise on small-integer inputs; random inputs within the documented bound      |
/// | planes (§7.1)      | fprop TN / dgrad NN / wgrad NT equal X·Wᵀ, dY·W, dYᵀ·X of the dequantized planes |
/// | pairs (§7.1-§7.4)  | FP8 tensor, FP8 block 1D/2D mixes, MXFP8, NVFP4; rejected pairs with reasons   |
/// | NVFP4 alpha (§7.4) | fp32 left to right, 448 and 256, amax of the plane read                         |
/// | row-scaled (§7.5)  | neutralise, post-scale order (fused vs two roundings), bias, accumulate, beta   |
///
/// Seeds: QTC_SEED overrides the default seed; every random test prints it on failure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "qtc/codec.hpp"
#include "qtc/gemm.hpp"
#include "qtc/quantize.hpp"

namespace qtc::ref {
namespace {

uint64_t test_seed() {
  const char* s = std::getenv("QTC_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 0) : 20261129ull;
}

double value_at(const HostMatrix& m, int64_t i, int64_t j) {
  const size_t idx = static_cast<size_t>(i * m.cols + j);
  uint16_t h = 0;
  float f = 0;
  switch (m.dtype) {
    case DType::kF32: std::memcpy(&f, m.bytes.data() + idx * 4, 4); return f;
    case DType::kBF16: std::memcpy(&h, m.bytes.data() + idx * 2, 2); return bf16_to_f32(h);
    case DType::kF16: std::memcpy(&h, m.bytes.data() + idx * 2, 2); return f16_to_f32(h);
    default: return NAN;
  }
}

/// Random input matrix: F32 values, either small integers times 2^shift or normal-ish reals.
HostMatrix random_input(int64_t rows, int64_t cols, std::mt19937_64& rng, bool small_ints, int shift = 0) {
  HostMatrix x(DType::kF32, rows, cols);
  std::uniform_int_distribution<int> di(-4, 4);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  for (int64_t i = 0; i < rows * cols; ++i)
    x.as<float>()[i] = small_ints ? std::ldexp(static_cast<float>(di(rng)), shift) : dn(rng) * (1.0f + (i % 7));
  return x;
}

Recipe recipe_of(RecipeKind k) {
  Recipe r;
  r.set_options(Recipe::default_options(k));
  return r;
}
Recipe fp8_block(bool two_d, bool pow2 = false) {
  Recipe r = recipe_of(RecipeKind::kFP8Block);
  r.fp8_block().tile_2d = two_d;
  r.set_pow2_scales(pow2);
  return r;
}

/// Hand-built FP8 block 1x128 tensor [rows, K] (rowwise only) with the given values as E4M3 codes and one
/// F32 scale per (row, 128-block).
QuantizedTensor fp8_block_tensor(int64_t rows, int64_t K, const std::vector<uint8_t>& codes,
                                 const std::vector<float>& scales) {
  QuantizedTensor q;
  q.recipe = fp8_block(false);
  q.recipe.columnwise = false;
  q.rows = rows;
  q.cols = K;
  Plane p;
  p.data_rows = rows;
  p.data_cols = K;
  p.data = codes;
  p.scale.type = ScaleType::kF32;
  p.scale.rows = rows;
  p.scale.cols = (K + 127) / 128;
  p.scale.bytes.resize(scales.size() * 4);
  std::memcpy(p.scale.bytes.data(), scales.data(), scales.size() * 4);
  q.rowwise = p;
  return q;
}

// ------------------------------------------------------------------------------------------------
// The exact accumulator and its single rounding

TEST(GemmExact, TiesToEvenAndStickyBits) {
  // A row [1 (block 0), 2^-24 (block 1), t (block 1)] against B = ones: the exact sum is 1 + 2^-24 + t.
  const int64_t K = 256;
  auto make_a = [&](uint8_t tail_code) {
    std::vector<uint8_t> codes(K, 0);
    codes[0] = 0x38;           // 1.0
    codes[128] = 0x38;         // 1.0 · 2^-24
    codes[129] = tail_code;    // tail · 2^-24
    return fp8_block_tensor(1, K, codes, {1.0f, 0x1p-24f});
  };
  const QuantizedTensor b = fp8_block_tensor(1, K, std::vector<uint8_t>(K, 0x38), {1.0f, 1.0f});
  GemmArgs args = GemmArgs::of(GemmKind::kFprop);
  // exact tie 1 + 2^-24: RN-even gives 1.0
  EXPECT_EQ(value_at(gemm_exact(make_a(0x00), b, args), 0, 0), 1.0);
  // 1 + 2^-24 + 2^-33 (E4M3 min subnormal 2^-9 times 2^-24): above the tie, rounds up
  EXPECT_EQ(value_at(gemm_exact(make_a(0x01), b, args), 0, 0), 1.0 + 0x1p-23);
  // 1 + 2^-24 - 2^-33: below the tie, rounds down
  EXPECT_EQ(value_at(gemm_exact(make_a(0x81), b, args), 0, 0), 1.0);
  // BF16 and F16 outputs round the same exact value once
  args.out = DType::kBF16;
  EXPECT_EQ(value_at(gemm_exact(make_a(0x01), b, args), 0, 0), 1.0);
}

TEST(GemmExact, CancellationKeepsTheTinyTerm) {
  // [448·2^40, 2^-9·2^-40, -448·2^40] · ones: FP64 loses the middle term, the exact sum is 2^-49.
  const int64_t K = 384;
  std::vector<uint8_t> codes(K, 0);
  codes[0] = 0x7E;    // 448, block 0 scale 2^40
  codes[128] = 0x01;  // 2^-9, block 1 scale 2^-40
  codes[256] = 0xFE;  // -448, block 2 scale 2^40
  const QuantizedTensor a = fp8_block_tensor(1, K, codes, {0x1p40f, 0x1p-40f, 0x1p40f});
  const QuantizedTensor b = fp8_block_tensor(1, K, std::vector<uint8_t>(K, 0x38), {1.0f, 1.0f, 1.0f});
  const GemmArgs args = GemmArgs::of(GemmKind::kFprop);
  EXPECT_EQ(value_at(gemm_exact(a, b, args), 0, 0), 0x1p-49);
}

TEST(GemmExact, OverflowAndSubnormalOutputs) {
  const int64_t K = 128;
  std::vector<uint8_t> codes(K, 0);
  codes[0] = 0x7E;  // 448
  const QuantizedTensor b = fp8_block_tensor(1, K, std::vector<uint8_t>(K, 0x38), {1.0f});
  GemmArgs args = GemmArgs::of(GemmKind::kFprop, DType::kF16);
  // 448·256 = 114688 > 65504 + ½ulp: F16 overflows to +Inf
  EXPECT_TRUE(std::isinf(value_at(gemm_exact(fp8_block_tensor(1, K, codes, {256.0f}), b, args), 0, 0)));
  // 448·2^-40 is below F16's smallest subnormal 2^-24: rounds to 0; F32 keeps it exactly
  EXPECT_EQ(value_at(gemm_exact(fp8_block_tensor(1, K, codes, {0x1p-40f}), b, args), 0, 0), 0.0);
  args.out = DType::kF32;
  EXPECT_EQ(value_at(gemm_exact(fp8_block_tensor(1, K, codes, {0x1p-40f}), b, args), 0, 0), 448.0 * 0x1p-40);
}

TEST(GemmExact, NaNPropagates) {
  const int64_t K = 128;
  std::vector<uint8_t> codes(K, 0x38);
  codes[5] = 0x7F;  // E4M3 NaN
  const QuantizedTensor a = fp8_block_tensor(2, K, [&] {
    std::vector<uint8_t> c2(codes);
    c2.insert(c2.end(), K, 0x38);
    return c2;
  }(), {1.0f, 1.0f});
  const QuantizedTensor b = fp8_block_tensor(1, K, std::vector<uint8_t>(K, 0x38), {1.0f});
  const HostMatrix d = gemm_exact(a, b, GemmArgs::of(GemmKind::kFprop));
  EXPECT_TRUE(std::isnan(value_at(d, 0, 0)));
  EXPECT_EQ(value_at(d, 0, 1), 128.0);
}

// ------------------------------------------------------------------------------------------------
// Every accepted pair, every layout: exact vs Eigen, and the planes against dequantized matrices

struct PairCase {
  std::string name;
  Recipe a;  ///< recipe of the A-side tensor (W for fprop/dgrad, X for wgrad)
  Recipe b;
};

std::vector<PairCase> accepted_pairs() {
  std::vector<PairCase> v;
  Recipe e4 = recipe_of(RecipeKind::kFP8Tensor);
  Recipe e5 = e4;
  e5.set_fp8_type(Fp8Type::kE5M2);
  v.push_back({"Fp8TensorE4M3xE4M3", e4, e4});
  v.push_back({"Fp8TensorE4M3xE5M2", e4, e5});
  v.push_back({"Fp8TensorE5M2xE4M3", e5, e4});
  v.push_back({"Fp8Block2Dx1D", fp8_block(true), fp8_block(false)});
  v.push_back({"Fp8Block1Dx1D", fp8_block(false), fp8_block(false)});
  v.push_back({"Fp8Block1Dx2D", fp8_block(false), fp8_block(true)});
  Recipe mx = recipe_of(RecipeKind::kMXFP8);
  Recipe mx5 = mx;
  mx5.set_fp8_type(Fp8Type::kE5M2);
  v.push_back({"Mxfp8E4M3xE4M3", mx, mx});
  v.push_back({"Mxfp8E4M3xE5M2", mx, mx5});
  Recipe nv = recipe_of(RecipeKind::kNVFP4);
  v.push_back({"Nvfp4x1D", nv, nv});
  Recipe nv2d = nv;
  nv2d.nvfp4().tile_2d = true;
  v.push_back({"Nvfp4W2DxX1D", nv2d, nv});
  Recipe nv46 = nv;
  nv46.nvfp4().fourover6 = true;
  nv46.nvfp4().e4m3_max = 256;
  v.push_back({"Nvfp44over6E4M3Max256", nv46, nv});
  return v;
}

struct LayoutCase {
  GemmKind kind;
  const char* name;
};
const LayoutCase kLayouts[] = {{GemmKind::kFprop, "FpropTN"}, {GemmKind::kDgrad, "DgradNN"}, {GemmKind::kWgrad, "WgradNT"}};

class GemmPairs : public testing::TestWithParam<std::tuple<PairCase, LayoutCase>> {};

/// Shapes: tokens M, input features K, output features N (multiples of 128 so 2D blocks are whole,
/// N and M not equal so a transposed plane shows up as a shape error).
constexpr int64_t kM = 256, kK = 384, kN = 128;

struct Operands {
  QuantizedTensor a, b;
  GemmArgs args;
};

/// W [N, K], X [M, K], dY [M, N] quantized with the pair's recipes; A/B assigned per the layout (§7.1).
Operands make_operands(const PairCase& pc, GemmKind kind, std::mt19937_64& rng, bool small_ints, DType out) {
  Operands o;
  o.args = GemmArgs::of(kind, out);
  switch (kind) {
    case GemmKind::kFprop: {  // A = W [N, K], B = X [M, K]
      const HostMatrix w = random_input(kN, kK, rng, small_ints), x = random_input(kM, kK, rng, small_ints);
      o.a = quantize(w.view(), pc.a);
      o.b = quantize(x.view(), pc.b);
      break;
    }
    case GemmKind::kDgrad: {  // A = W [N, K] (columnwise), B = dY [M, N]
      const HostMatrix w = random_input(kN, kK, rng, small_ints), dy = random_input(kM, kN, rng, small_ints);
      o.a = quantize(w.view(), pc.a);
      o.b = quantize(dy.view(), pc.b);
      break;
    }
    case GemmKind::kWgrad: {  // A = X [M, K] (columnwise), B = dY [M, N] (columnwise)
      const HostMatrix x = random_input(kM, kK, rng, small_ints), dy = random_input(kM, kN, rng, small_ints);
      o.a = quantize(x.view(), pc.a);
      o.b = quantize(dy.view(), pc.b);
      break;
    }
  }
  return o;
}

TEST_P(GemmPairs, ExactEqualsEigenWithinBoundAndShapesFollowTheLayout) {
  const auto& [pc, lc] = GetParam();
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (QTC_SEED overrides)");
  std::mt19937_64 rng(seed);
  for (DType out : {DType::kF32, DType::kBF16}) {
    const Operands o = make_operands(pc, lc.kind, rng, /*small_ints=*/false, out);
    const ResolvedGemm g = resolve_gemm(o.a, o.b, o.args);
    const int64_t want_n = lc.kind == GemmKind::kWgrad ? kN : kM;
    const int64_t want_m = lc.kind == GemmKind::kFprop ? kN : kK;
    ASSERT_EQ(g.b.rows, want_n);
    ASSERT_EQ(g.a.rows, want_m);
    const HostMatrix ex = gemm_exact(g, o.args);
    const HostMatrix fa = gemm_eigen(g, o.args);
    const std::vector<double> e = gemm_eigen_error_bound(g, o.args);
    int64_t bad = 0, equal = 0;
    for (int64_t i = 0; i < ex.rows; ++i)
      for (int64_t j = 0; j < ex.cols; ++j) {
        const double x = value_at(ex, i, j), y = value_at(fa, i, j);
        const double bound = e[static_cast<size_t>(i * ex.cols + j)] + ulp_of(out, std::max(std::fabs(x), std::fabs(y)));
        equal += x == y;
        if (std::fabs(x - y) > bound && bad++ < 5)
          ADD_FAILURE() << "(" << i << ", " << j << "): exact " << x << " eigen " << y << " |diff| "
                        << std::fabs(x - y) << " > bound " << bound;
      }
    EXPECT_EQ(bad, 0);
    // the bound is not vacuous: nearly every output is bitwise equal
    EXPECT_GT(equal, ex.rows * ex.cols * 9 / 10) << equal << " of " << ex.rows * ex.cols << " equal";
  }
}

TEST_P(GemmPairs, SmallIntegersAreExactInBothPaths) {
  const auto& [pc, lc] = GetParam();
  std::mt19937_64 rng(test_seed() + 1);
  // power-of-two scales keep every product and partial sum exact in FP64 (STYLE.md item 6)
  PairCase p2 = pc;
  if (p2.a.kind() == RecipeKind::kFP8Block || p2.a.kind() == RecipeKind::kFP8Tensor) {
    p2.a.set_pow2_scales(true);
    p2.b.set_pow2_scales(true);
  }
  const Operands o = make_operands(p2, lc.kind, rng, /*small_ints=*/true, DType::kF32);
  const HostMatrix ex = gemm_exact(o.a, o.b, o.args);
  const HostMatrix fa = gemm_eigen(o.a, o.b, o.args);
  ASSERT_EQ(ex.bytes.size(), fa.bytes.size());
  int64_t mism = 0;
  for (int64_t i = 0; i < ex.rows; ++i)
    for (int64_t j = 0; j < ex.cols; ++j)
      if (value_at(ex, i, j) != value_at(fa, i, j) && mism++ < 5)
        ADD_FAILURE() << "(" << i << ", " << j << "): exact " << value_at(ex, i, j) << " eigen " << value_at(fa, i, j);
  EXPECT_EQ(mism, 0);
}

TEST_P(GemmPairs, PlanesMatchTheDequantizedProduct) {
  // D from the dequantized planes (in x's orientation) multiplied as the layout says, in FP64.
  const auto& [pc, lc] = GetParam();
  if (pc.a.kind() == RecipeKind::kNVFP4) GTEST_SKIP() << "NVFP4 dequantize folds the global scale with extra roundings";
  std::mt19937_64 rng(test_seed() + 2);
  const Operands o = make_operands(pc, lc.kind, rng, false, DType::kF32);
  const PlaneKind pa = o.args.transa ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
  const PlaneKind pb = o.args.transb ? PlaneKind::kColumnwise : PlaneKind::kRowwise;
  const HostMatrix da = dequantize(o.a, pa, DType::kF32), db = dequantize(o.b, pb, DType::kF32);
  const HostMatrix d = gemm_eigen(o.a, o.b, o.args);
  // fprop: D = X·Wᵀ (b rows · a rows); dgrad: D = dY·W; wgrad: D = dYᵀ·X.
  for (int64_t i = 0; i < d.rows; i += 7)
    for (int64_t j = 0; j < d.cols; j += 5) {
      double s = 0, sa = 0;
      const int64_t R = lc.kind == GemmKind::kFprop ? kK : (lc.kind == GemmKind::kDgrad ? kN : kM);
      for (int64_t r = 0; r < R; ++r) {
        double x = 0, y = 0;
        switch (lc.kind) {
          case GemmKind::kFprop: x = value_at(db, i, r); y = value_at(da, j, r); break;
          case GemmKind::kDgrad: x = value_at(db, i, r); y = value_at(da, r, j); break;
          case GemmKind::kWgrad: x = value_at(db, r, i); y = value_at(da, r, j); break;
        }
        s += x * y;
        sa += std::fabs(x * y);
      }
      // dequantize rounds each element to F32 once (FP8 block/tensor with non-power-of-two scales)
      EXPECT_NEAR(value_at(d, i, j), s, sa * 0x1p-22 + 1e-30) << "(" << i << ", " << j << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(All, GemmPairs, testing::Combine(testing::ValuesIn(accepted_pairs()), testing::ValuesIn(kLayouts)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + std::get<1>(info.param).name;
                         });

// ------------------------------------------------------------------------------------------------
// Rejected pairs

TEST(GemmPairsRejected, EachWithItsRule) {
  std::mt19937_64 rng(test_seed());
  const HostMatrix w = random_input(128, 128, rng, false), x = random_input(128, 128, rng, false);
  const GemmArgs fprop = GemmArgs::of(GemmKind::kFprop);
  auto expect_throw = [&](const QuantizedTensor& a, const QuantizedTensor& b, const GemmArgs& args, const std::string& needle) {
    try {
      (void)gemm_exact(a, b, args);
      ADD_FAILURE() << "accepted, expected an error containing \"" << needle << "\"";
    } catch (const qtc::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_throw(quantize(w.view(), fp8_block(true)), quantize(x.view(), fp8_block(true)), fprop, "128x128 x 128x128");
  Recipe e5 = recipe_of(RecipeKind::kFP8Tensor);
  e5.set_fp8_type(Fp8Type::kE5M2);
  expect_throw(quantize(w.view(), e5), quantize(x.view(), e5), fprop, "E5M2 x E5M2");
  expect_throw(quantize(w.view(), recipe_of(RecipeKind::kMXFP8)), quantize(x.view(), recipe_of(RecipeKind::kNVFP4)), fprop,
               "same scaling mode");
  Recipe rs = recipe_of(RecipeKind::kNVFP4);
  rs.nvfp4().row_scaled = true;
  rs.columnwise = false;
  expect_throw(quantize(w.view(), recipe_of(RecipeKind::kNVFP4)), quantize(x.view(), rs), fprop, "row-scaled");
  expect_throw(quantize(w.view(), recipe_of(RecipeKind::kNVFP4)), quantize(x.view(), recipe_of(RecipeKind::kNVFP4)),
               GemmArgs::of(GemmKind::kFprop, DType::kF16), "FP16 output");
  Recipe row_only = recipe_of(RecipeKind::kMXFP8);
  row_only.columnwise = false;
  expect_throw(quantize(w.view(), row_only), quantize(x.view(), row_only), GemmArgs::of(GemmKind::kDgrad), "columnwise plane");
  GemmArgs beta = fprop;
  beta.beta = 1.0f;
  expect_throw(quantize(w.view(), row_only), quantize(x.view(), row_only), beta, "needs a C matrix");
}

// ------------------------------------------------------------------------------------------------
// NVFP4 alpha (§7.4)

TEST(Nvfp4Alpha, Fp32LeftToRightWithTheTensorsE4M3Max) {
  const float a = 3.7f, b = 11.3f;
  const float f448 = 1.0f / 7225344.0f;  // 36·448·448
  EXPECT_EQ(nvfp4_gemm_alpha(1.0f, a, b, 448, 448), (1.0f * a) * b * f448);
  EXPECT_EQ(f32_bits(f448), 0x34149B93u);  // §0.6: 0x1.293726p-23 (24-bit hex fraction, shifted by one)
  const float f256 = 1.0f / static_cast<float>(36 * 448 * 256);
  EXPECT_EQ(nvfp4_gemm_alpha(2.0f, a, b, 448, 256), ((2.0f * a) * b) * f256);
}

TEST(Nvfp4Alpha, UsesTheAmaxOfThePlaneRead) {
  std::mt19937_64 rng(test_seed());
  const HostMatrix w = random_input(128, 128, rng, false), x = random_input(128, 128, rng, false);
  QuantizedTensor qa = quantize(w.view(), recipe_of(RecipeKind::kNVFP4));
  QuantizedTensor qb = quantize(x.view(), recipe_of(RecipeKind::kNVFP4));
  qa.rowwise->amax = {2.0f};
  qa.columnwise->amax = {4.0f};
  qb.rowwise->amax = {8.0f};
  qb.columnwise->amax = {16.0f};
  EXPECT_EQ(resolve_gemm(qa, qb, GemmArgs::of(GemmKind::kFprop)).alpha, nvfp4_gemm_alpha(1.0f, 2.0f, 8.0f, 448, 448));
  EXPECT_EQ(resolve_gemm(qa, qb, GemmArgs::of(GemmKind::kDgrad)).alpha, nvfp4_gemm_alpha(1.0f, 4.0f, 8.0f, 448, 448));
  EXPECT_EQ(resolve_gemm(qa, qb, GemmArgs::of(GemmKind::kWgrad)).alpha, nvfp4_gemm_alpha(1.0f, 4.0f, 16.0f, 448, 448));
}

// ------------------------------------------------------------------------------------------------
// beta·C and bias

TEST(GemmEpilogue, BetaCAndBiasAreInsideTheSingleRounding) {
  // one output: 1 (product) + beta·C + bias = 1 + 2^-24 + 2^-40: exact rounding goes up; rounding the
  // product-plus-C first would give the tie and round down.
  const int64_t K = 128;
  std::vector<uint8_t> codes(K, 0);
  codes[0] = 0x38;
  const QuantizedTensor a = fp8_block_tensor(1, K, codes, {1.0f});
  const QuantizedTensor b = fp8_block_tensor(1, K, std::vector<uint8_t>(K, 0x38), {1.0f});
  HostMatrix c(DType::kF32, 1, 1);
  c.as<float>()[0] = 0x1p-23f;
  GemmArgs args = GemmArgs::of(GemmKind::kFprop);
  args.beta = 0.5f;
  args.c = &c;
  args.bias = {0x1p-40f};
  EXPECT_EQ(value_at(gemm_exact(a, b, args), 0, 0), 1.0 + 0x1p-23);
  args.bias = {};
  EXPECT_EQ(value_at(gemm_exact(a, b, args), 0, 0), 1.0);
}

// ------------------------------------------------------------------------------------------------
// Row-scaled NVFP4 (§7.5)

TEST(RowScaled, PostScaleOrder) {
  // Values where (x·r)·c, x·(r·c) and x·(c·r) (the same as x·(r·c)) differ in fp32: searched, seeded.
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(0.5f, 4.0f);
  float x = 0, r = 0, c = 0;
  for (int t = 0; t < 1000 && (x * r) * c == x * (r * c); ++t) {
    x = u(g);
    r = u(g);
    c = u(g);
  }
  ASSERT_NE((x * r) * c, x * (r * c));
  std::vector<float> s{x};
  const std::vector<float> rv{r}, cv{c}, two{c, c};
  row_scaled_post_scale(s, 1, 1, rv, cv);  // col scalar: out *= (row * col)
  EXPECT_EQ(s[0], x * (r * c));
  s = {x, x};
  row_scaled_post_scale(s, 1, 2, rv, two);  // row scalar: out *= (col * row)
  EXPECT_EQ(s[0], x * (c * r));
  s = {x, x};
  const std::vector<float> rows2{r, r};
  row_scaled_post_scale(s, 2, 1, rows2, cv);  // col scalar again (per-row factor)
  EXPECT_EQ(s[1], x * (r * c));
  s = {x, x, x, x};
  row_scaled_post_scale(s, 2, 2, rows2, two);  // both vectors: two roundings
  EXPECT_EQ(s[3], (x * r) * c);
}

struct RowScaledOperands {
  QuantizedTensor w, x;
};
RowScaledOperands row_scaled_operands(std::mt19937_64& rng, int64_t M, int64_t N, int64_t K) {
  Recipe rs = recipe_of(RecipeKind::kNVFP4);
  rs.nvfp4().row_scaled = true;
  const HostMatrix w = random_input(N, K, rng, false), x = random_input(M, K, rng, false);
  return {quantize(w.view(), recipe_of(RecipeKind::kNVFP4)), quantize(x.view(), rs)};
}

TEST(RowScaled, FpropMatchesTheSpelledOutSteps) {
  std::mt19937_64 rng(test_seed());
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  const int64_t M = 96, N = 64, K = 256;
  const RowScaledOperands o = row_scaled_operands(rng, M, N, K);
  ASSERT_EQ(o.x.rowwise->amax.size(), static_cast<size_t>(M));
  GemmArgs args = GemmArgs::of(GemmKind::kFprop, DType::kBF16);
  args.bias.resize(N);
  for (int64_t j = 0; j < N; ++j) args.bias[static_cast<size_t>(j)] = 0.25f * static_cast<float>(j % 5) - 0.5f;
  const HostMatrix d = gemm_nvfp4_row_scaled(o.w, o.x, args);
  // The steps by hand: neutralised per-tensor GEMM (amax 1) in FP32, x amax[i]·w amax, + bias, -> bf16.
  QuantizedTensor w1 = o.w, x1 = o.x;
  w1.rowwise->amax = {1.0f};
  w1.columnwise->amax = {1.0f};
  x1.rowwise->amax = {1.0f};
  x1.recipe.nvfp4().row_scaled = false;
  if (x1.columnwise) x1.columnwise->amax = {1.0f};
  const HostMatrix scratch = gemm_exact(w1, x1, GemmArgs::of(GemmKind::kFprop));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float v = scratch.as<float>()[i * N + j] * (o.x.rowwise->amax[static_cast<size_t>(i)] * o.w.rowwise->amax[0]);
      v += args.bias[static_cast<size_t>(j)];
      ASSERT_EQ(value_at(d, i, j), static_cast<double>(bf16_to_f32(f32_to_bf16(v)))) << "(" << i << ", " << j << ")";
    }
  // and the result is close to the dequantized product
  const HostMatrix dx = dequantize(o.x, PlaneKind::kRowwise), dw = dequantize(o.w, PlaneKind::kRowwise);
  for (int64_t i = 0; i < M; i += 11)
    for (int64_t j = 0; j < N; j += 13) {
      double s = args.bias[static_cast<size_t>(j)], sa = 0;
      for (int64_t r = 0; r < K; ++r) {
        s += value_at(dx, i, r) * value_at(dw, j, r);
        sa += std::fabs(value_at(dx, i, r) * value_at(dw, j, r));
      }
      EXPECT_NEAR(value_at(d, i, j), s, sa * 1e-5 + ulp_of(DType::kBF16, s)) << "(" << i << ", " << j << ")";
    }
}

TEST(RowScaled, WgradUsesPerColumnScalesAndTwoRoundings) {
  // wgrad NT with both operands row-scaled with columnwise planes: A = X (col scales [K]), B = dY ([N]).
  std::mt19937_64 rng(test_seed() + 3);
  const int64_t M = 64, N = 32, K = 96;
  Recipe rs = recipe_of(RecipeKind::kNVFP4);
  rs.nvfp4().row_scaled = true;
  const HostMatrix x = random_input(M, K, rng, false), dy = random_input(M, N, rng, false);
  // Row-scaled columnwise output needs BF16 input (§1.11).
  HostMatrix xb(DType::kBF16, M, K), dyb(DType::kBF16, M, N);
  for (int64_t i = 0; i < M * K; ++i) xb.as<uint16_t>()[i] = f32_to_bf16(x.as<float>()[i]);
  for (int64_t i = 0; i < M * N; ++i) dyb.as<uint16_t>()[i] = f32_to_bf16(dy.as<float>()[i]);
  const QuantizedTensor qx = quantize(xb.view(), rs), qdy = quantize(dyb.view(), rs);
  ASSERT_EQ(qx.columnwise->amax.size(), static_cast<size_t>(K));
  const GemmArgs args = GemmArgs::of(GemmKind::kWgrad);
  const RowScaledSplit s = neutralize_row_scaled(qx, qdy, args);
  EXPECT_EQ(s.col_scales.size(), static_cast<size_t>(K));
  EXPECT_EQ(s.row_scales.size(), static_cast<size_t>(N));
  const HostMatrix d = gemm_nvfp4_row_scaled(qx, qdy, args);
  GemmArgs inner = args;
  const HostMatrix scratch = gemm_exact(s.a, s.b, inner);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const float v = (scratch.as<float>()[i * K + j] * s.row_scales[static_cast<size_t>(i)]) * s.col_scales[static_cast<size_t>(j)];
      ASSERT_EQ(value_at(d, i, j), static_cast<double>(v)) << "(" << i << ", " << j << ")";
    }
}

TEST(RowScaled, AccumulateAddsInTheOutputDtypeAndBetaIsRejected) {
  std::mt19937_64 rng(test_seed() + 4);
  const int64_t M = 32, N = 32, K = 64;
  const RowScaledOperands o = row_scaled_operands(rng, M, N, K);
  GemmArgs args = GemmArgs::of(GemmKind::kFprop, DType::kBF16);
  const HostMatrix plain = gemm_nvfp4_row_scaled(o.w, o.x, args);
  HostMatrix c(DType::kBF16, M, N);
  for (int64_t i = 0; i < M * N; ++i) c.as<uint16_t>()[i] = f32_to_bf16(0.1f * static_cast<float>(i % 17));
  args.beta = 1.0f;
  args.c = &c;
  const HostMatrix acc = gemm_nvfp4_row_scaled(o.w, o.x, args);
  for (int64_t i = 0; i < M * N; ++i) {
    const float want = bf16_to_f32(c.as<uint16_t>()[i]) + bf16_to_f32(plain.as<uint16_t>()[i]);
    ASSERT_EQ(acc.as<uint16_t>()[i], f32_to_bf16(want)) << "element " << i;
  }
  args.beta = 0.5f;
  EXPECT_THROW((void)gemm_nvfp4_row_scaled(o.w, o.x, args), qtc::Error);
  args.beta = 0.0f;
  args.alpha = 2.0f;
  EXPECT_THROW((void)gemm_nvfp4_row_scaled(o.w, o.x, args), qtc::Error);
}

}  // namespace
}  // namespace qtc::ref

namespace qtc::ref {
namespace {

// ------------------------------------------------------------------------------------------------
// FP8 block scaling in cuBLAS's order (§7.3)

TEST(Fp8BlockCublasOrder, EqualsExactOnExactInputsAndStaysCloseOnRandom) {
  const std::pair<bool, bool> mixes[] = {{true, false}, {false, false}, {false, true}};  // (A 2D, B 2D)
  for (auto [a2, b2] : mixes)
    for (GemmKind k : {GemmKind::kFprop, GemmKind::kWgrad}) {
      SCOPED_TRACE(std::string(a2 ? "128x128" : "1x128") + " x " + (b2 ? "128x128" : "1x128") +
                   (k == GemmKind::kFprop ? " fprop" : " wgrad"));
      std::mt19937_64 rng(test_seed() + 40);
      PairCase pc{"", fp8_block(a2, true), fp8_block(b2, true)};
      // exact inputs: small integers, power-of-two scales -> both models give the exact result
      const Operands o = make_operands(pc, k, rng, /*small_ints=*/true, DType::kF32);
      const HostMatrix ex = gemm_exact(o.a, o.b, o.args), cb = gemm_fp8_block_cublas_order(o.a, o.b, o.args);
      ASSERT_EQ(ex.bytes, cb.bytes);
      // random inputs, non-power-of-two scales: the per-block FP32 roundings stay within nkb·2 roundings of S
      PairCase pr{"", fp8_block(a2), fp8_block(b2)};
      const Operands r = make_operands(pr, k, rng, /*small_ints=*/false, DType::kF32);
      const ResolvedGemm g = resolve_gemm(r.a, r.b, r.args);
      const HostMatrix ex2 = gemm_exact(g, r.args), cb2 = gemm_fp8_block_cublas_order(r.a, r.b, r.args);
      const std::vector<double> e = gemm_eigen_error_bound(g, r.args);
      const double nk = static_cast<double>(g.a.k + 3), gamma = nk * 0x1p-53 / (1 - nk * 0x1p-53) * 1.01;
      const double nkb = static_cast<double>((g.a.k + 127) / 128);
      int64_t differ = 0;
      for (int64_t i = 0; i < ex2.numel(); ++i) {
        const double x = value_at(ex2, i / ex2.cols, i % ex2.cols), y = value_at(cb2, i / ex2.cols, i % ex2.cols);
        const double s = e[static_cast<size_t>(i)] / gamma;
        differ += x != y;
        ASSERT_LE(std::fabs(x - y), ulp_of(DType::kF32, x) + 3.0 * nkb * 0x1p-24 * s) << "element " << i;
      }
      RecordProperty("differing_outputs", static_cast<int>(differ));
    }
}

}  // namespace
}  // namespace qtc::ref
