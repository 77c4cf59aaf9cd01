/// \file test_layouts.cpp
/// \brief Scale layouts: compact <-> padded <-> swizzled for every recipe and plane, over ragged shapes.
///
/// | recipes                        | planes              | shapes                                      |
/// |--------------------------------|---------------------|---------------------------------------------|
/// | NVFP4 1x16/16x16, MXFP8 1x32/32x32, FP8 block 1x128/128x128 | rowwise, columnwise | 16x16, 32x48, 48x80, 304x304, 256x272 (MXFP8/FP8 block also 65x80, 1x32, 200x300) |
#include <gtest/gtest.h>

#include <random>

#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"

namespace {

using namespace qtc;

struct Case {
  Recipe recipe;
  int64_t M, K;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::pair<int64_t, int64_t>> nv_shapes = {{16, 16}, {32, 48}, {48, 80}, {304, 304}, {256, 272}};
  const std::vector<std::pair<int64_t, int64_t>> any_shapes = {{16, 16}, {32, 48}, {65, 80}, {1, 32}, {200, 300}, {304, 304}};
  for (bool two_d : {false, true}) {
    Recipe r = Recipe::of(Nvfp4Options{.tile_2d = two_d});
    for (auto [m, k] : nv_shapes) out.push_back({r, m, k});
  }
  for (bool two_d : {false, true}) {
    Recipe r = Recipe::of(Mxfp8Options{.tile_2d = two_d});
    for (auto [m, k] : any_shapes) out.push_back({r, m, k});
    Recipe b = Recipe::of(Fp8BlockOptions{.tile_2d = two_d});
    for (auto [m, k] : any_shapes) out.push_back({b, m, k});
  }
  return out;
}

class LayoutRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(LayoutRoundTrip, CompactPaddedSwizzled) {
  const Case& c = GetParam();
  HostMatrix x(DType::kF32, c.M, c.K);
  std::mt19937 rng(static_cast<uint32_t>(c.M * 1000 + c.K));
  std::lognormal_distribution<float> ln(0.0f, 3.0f);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.K; ++j) x.set(i, j, ln(rng) * ((i + j) % 2 ? -1.0f : 1.0f));
  const auto q = ref::quantize(x.view(), c.recipe);
  for (PlaneKind p : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    SCOPED_TRACE(p == PlaneKind::kRowwise ? "rowwise" : "columnwise");
    const ScaleMatrix& s = q.plane(p).scale;
    const auto cs = ref::compact_scale_shape(c.recipe, p, c.M, c.K);
    ASSERT_EQ(s.rows, cs.rows);
    ASSERT_EQ(s.cols, cs.cols);
    const auto padded = ref::to_padded(s, c.recipe, p, c.M, c.K);
    const auto ps = ref::padded_scale_shape(c.recipe, p, c.M, c.K);
    ASSERT_EQ(padded.rows, ps.rows);
    ASSERT_EQ(padded.cols, ps.cols);
    // Every compact entry appears exactly once in the padded matrix; everything else is zero.
    const size_t es = s.elem_size();
    size_t nonpad = 0;
    for (size_t i = 0; i < padded.bytes.size() / es; ++i) {
      bool zero = true;
      for (size_t b = 0; b < es; ++b) zero = zero && padded.bytes[i * es + b] == 0;
      nonpad += zero ? 0 : 1;
    }
    size_t nonzero_compact = 0;
    for (size_t i = 0; i < s.bytes.size() / es; ++i) {
      bool zero = true;
      for (size_t b = 0; b < es; ++b) zero = zero && s.bytes[i * es + b] == 0;
      nonzero_compact += zero ? 0 : 1;
    }
    EXPECT_EQ(nonpad, nonzero_compact);
    EXPECT_EQ(ref::to_compact(padded, c.recipe, p, c.M, c.K), s);
    if (c.recipe.kind() == RecipeKind::kFP8Block) {
      EXPECT_THROW(ref::swizzle(padded, c.recipe, p, c.M, c.K), Error);
      if (!c.recipe.is_2d()) {  // TE's GEMM-ready layout is the transpose
        for (int64_t i = 0; i < cs.rows; ++i)
          for (int64_t j = 0; j < cs.cols; ++j) ASSERT_EQ(padded.f32(j, i), s.f32(i, j));
      }
      continue;
    }
    const auto sw = ref::swizzle(padded, c.recipe, p, c.M, c.K);
    EXPECT_EQ(sw.bytes.size(), padded.bytes.size());
    EXPECT_EQ(ref::unswizzle(sw, c.recipe, p, c.M, c.K), padded);
    EXPECT_EQ(ref::convert_layout(sw, ScaleLayout::kCompact, c.recipe, p, c.M, c.K), s);
    // Garbage in the padding of a padded matrix never reaches the swizzled output.
    ScaleMatrix dirty = padded;
    for (int64_t i = 0; i < dirty.rows; ++i)
      for (int64_t j = 0; j < dirty.cols; ++j) {
        const bool mxcol = c.recipe.kind() == RecipeKind::kMXFP8 && p == PlaneKind::kColumnwise;
        if (i >= cs.rows || j >= cs.cols) dirty.bytes[static_cast<size_t>(i * dirty.cols + j)] = 0xAB;
        (void)mxcol;
      }
    EXPECT_EQ(ref::swizzle(dirty, c.recipe, p, c.M, c.K), sw);
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.recipe.name() + "M" + std::to_string(info.param.M) + "K" + std::to_string(info.param.K);
  std::string out;
  for (char ch : n)
    if (std::isalnum(static_cast<unsigned char>(ch))) out += ch;
  return out + "n" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(AllRecipes, LayoutRoundTrip, ::testing::ValuesIn(cases()), case_name);

TEST(LayoutErrors, NameTheRule) {
  Recipe r = Recipe::of(Nvfp4Options{});
  ScaleMatrix s;
  s.rows = 3;
  s.cols = 3;
  s.bytes.assign(9, 0);
  try {
    ref::to_padded(s, r, PlaneKind::kRowwise, 32, 32);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected the compact shape [32, 2]"), std::string::npos) << e.what();
  }
  Recipe t = Recipe::of(Fp8TensorOptions{});
  EXPECT_THROW(ref::to_padded(s, t, PlaneKind::kRowwise, 32, 32), Error);
}

}  // namespace
