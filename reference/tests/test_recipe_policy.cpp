/// \file test_recipe_policy.cpp
/// \brief The recipe policy: describe_plane against what the quantizers and layouts actually produce, for many
///        recipes and ragged shapes (data and scale shapes and types, amax counts, padded and swizzled shapes,
///        and block geometry found by perturbing one input element); and Recipe::validate's rules, each by
///        its message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "qtc/layouts.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe_policy.hpp"

using namespace qtc;

namespace {

Recipe nvfp4(bool tile2d = false) { return Recipe::of(Nvfp4Options{.tile_2d = tile2d}); }
Recipe mxfp8(Fp8Type t, MxScaleRule rule, bool tile2d) {
  return Recipe::of(Mxfp8Options{.fp8 = t, .scale_rule = rule, .tile_2d = tile2d});
}
Recipe fp8_block(Fp8Type t, bool tile2d) { return Recipe::of(Fp8BlockOptions{.fp8 = t, .tile_2d = tile2d}); }
Recipe fp8_tensor(Fp8Type t) { return Recipe::of(Fp8TensorOptions{.fp8 = t}); }

/// Every recipe family and option that changes geometry, with both planes and each plane alone.
std::vector<Recipe> recipes() {
  std::vector<Recipe> base;
  base.push_back(nvfp4(false));
  base.push_back(nvfp4(true));
  Recipe rs = nvfp4();
  rs.nvfp4().row_scaled = true;
  base.push_back(rs);
  Recipe rht = nvfp4();
  rht.nvfp4().rht = true;
  rht.rowwise = false;
  base.push_back(rht);
  Recipe f46 = nvfp4();
  f46.nvfp4().fourover6 = true;
  f46.nvfp4().e4m3_max = 256;
  base.push_back(f46);
  Recipe ao = nvfp4();
  ao.profile = Profile::kTorchAO;
  base.push_back(ao);
  for (Fp8Type t : {Fp8Type::kE4M3, Fp8Type::kE5M2}) {
    for (bool t2 : {false, true}) {
      base.push_back(mxfp8(t, MxScaleRule::kRceil, t2));
      base.push_back(fp8_block(t, t2));
    }
    base.push_back(fp8_tensor(t));
  }
  Recipe floor = mxfp8(Fp8Type::kE4M3, MxScaleRule::kOcpFloor, false);
  floor.profile = Profile::kOCP;
  base.push_back(floor);
  std::vector<Recipe> out;
  for (const Recipe& r : base) {
    for (int planes = 0; planes < 3; ++planes) {
      Recipe x = r;
      x.rowwise = planes != 2;
      x.columnwise = planes != 1;
      if (!x.rowwise && x.nvfp4_row_scaled()) continue;
      if (!x.rowwise && !x.columnwise) continue;
      if (x.rowwise && x.nvfp4_rht() && planes != 2) continue;
      out.push_back(x);
    }
  }
  return out;
}

/// Shapes the recipe accepts: ragged for the FP8 families, multiples of 16 for NVFP4 (any M for torchao's
/// rowwise-only plane); empty tensors included.
std::vector<std::pair<int64_t, int64_t>> shapes(const Recipe& r) {
  if (r.kind() == RecipeKind::kNVFP4) {
    std::vector<std::pair<int64_t, int64_t>> s = {{16, 16}, {32, 48}, {144, 272}, {0, 32}, {16, 0}, {128, 64}};
    if (profile_rules(r.profile).nvfp4_order != Nvfp4Order::kTE && !r.columnwise) {
      s.push_back({17, 32});
      s.push_back({1, 16});
    }
    return s;
  }
  return {{1, 1}, {33, 65}, {129, 257}, {127, 300}, {0, 5}, {5, 0}, {200, 130}, {32, 32}, {256, 128}};
}

HostMatrix random_input(int64_t M, int64_t K, uint32_t seed) {
  HostMatrix x(DType::kBF16, M, K);
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < M * K; ++i) x.as<uint16_t>()[i] = f32_to_bf16(n(g));
  return x;
}

std::string label(const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  return r.name() + " " + std::string(plane_kind_name(p)) + " [" + std::to_string(M) + ", " + std::to_string(K) + "]";
}

TEST(PlaneSpec, MatchesWhatTheQuantizerAndLayoutsProduce) {
  int checked = 0;
  for (const Recipe& r : recipes()) {
    ASSERT_NO_THROW(r.validate()) << r.name();
    for (auto [M, K] : shapes(r)) {
      const HostMatrix x = random_input(M, K, static_cast<uint32_t>(M * 131 + K));
      const QuantizedTensor q = ref::quantize(x.view(), r);
      for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
        SCOPED_TRACE(label(r, pk, M, K));
        const PlaneSpec s = describe_plane(r, pk, M, K);
        const auto& pl = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
        ASSERT_EQ(s.requested, pl.has_value());
        EXPECT_EQ(s.M, M);
        EXPECT_EQ(s.K, K);
        EXPECT_EQ(s.data_elem, data_elem_of(r));
        if (!pl) continue;
        EXPECT_EQ(s.data_rows, pl->data_rows);
        EXPECT_EQ(s.data_cols, pl->data_cols);
        EXPECT_EQ(s.data_bytes(), static_cast<int64_t>(pl->data.size()));
        EXPECT_EQ(s.data_row_elems, r.kind() == RecipeKind::kNVFP4 ? 2 * s.data_cols : s.data_cols);
        EXPECT_EQ(s.data_rows * s.data_row_elems, M * K);
        EXPECT_EQ(s.scale_type, pl->scale.type);
        EXPECT_EQ(s.scale_elem_bytes, pl->scale.elem_size());
        EXPECT_EQ(s.compact.rows, pl->scale.rows);
        EXPECT_EQ(s.compact.cols, pl->scale.cols);
        EXPECT_EQ(s.scale_bytes(ScaleLayout::kCompact), static_cast<int64_t>(pl->scale.bytes.size()));
        EXPECT_EQ(s.amax_count, static_cast<int64_t>(pl->amax.size()));
        EXPECT_EQ(s.per_tensor, r.kind() == RecipeKind::kFP8Tensor);
        EXPECT_EQ(s.data_transposed, s.data_m_axis == MAxis::kCols);
        // The layouts: the padded shape and the swizzle, through the conversion functions.
        if (!s.per_tensor) {
          const ScaleMatrix padded = ref::convert_layout(pl->scale, ScaleLayout::kPadded, r, pk, M, K);
          EXPECT_EQ(s.padded.rows, padded.rows);
          EXPECT_EQ(s.padded.cols, padded.cols);
          EXPECT_EQ(s.scale_bytes(ScaleLayout::kPadded), static_cast<int64_t>(padded.bytes.size()));
          EXPECT_EQ(s.padded.rows * s.padded.cols >= s.compact.rows * s.compact.cols, true);
          if (s.has_layout(Layout::kSwizzled)) {
            const ScaleMatrix sw = ref::swizzle(padded, r, pk, M, K);
            EXPECT_EQ(sw.rows, s.padded.rows);
            EXPECT_EQ(sw.cols, s.padded.cols);
          } else {
            EXPECT_THROW((void)ref::swizzle(padded, r, pk, M, K), Error);
          }
          // The padded layout keeps entry (a, b) at [a][b], or at [b][a] when transposed.
          if (s.compact.rows > 0 && s.compact.cols > 0) {
            const int64_t a = s.compact.rows - 1, b = s.compact.cols - 1;
            const size_t es = s.scale_elem_bytes;
            const int64_t at = s.padded_transposed ? b * s.padded.cols + a : a * s.padded.cols + b;
            EXPECT_EQ(0, std::memcmp(pl->scale.bytes.data() + static_cast<size_t>(a * s.compact.cols + b) * es,
                                     padded.bytes.data() + static_cast<size_t>(at) * es, es));
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300);
}

/// Which compact scale entries change when x(i, j) alone is made large.
std::set<std::pair<int64_t, int64_t>> changed_scales(const Recipe& r, PlaneKind pk, const HostMatrix& x, int64_t i, int64_t j) {
  HostMatrix y = x;
  y.as<uint16_t>()[i * x.cols + j] = f32_to_bf16(3.0e4f);
  const bool fixed_amax = r.kind() == RecipeKind::kNVFP4;  // NVFP4: the global amax would change every scale
  const QuantizedTensor a = fixed_amax ? ref::quantize_with_amax(x.view(), r, 1.0e5f, 1.0e5f) : ref::quantize(x.view(), r);
  const QuantizedTensor b = fixed_amax ? ref::quantize_with_amax(y.view(), r, 1.0e5f, 1.0e5f) : ref::quantize(y.view(), r);
  const ScaleMatrix& sa = a.plane(pk).scale;
  const ScaleMatrix& sb = b.plane(pk).scale;
  std::set<std::pair<int64_t, int64_t>> out;
  const size_t es = sa.elem_size();
  for (int64_t u = 0; u < sa.rows; ++u)
    for (int64_t v = 0; v < sa.cols; ++v) {
      const size_t o = static_cast<size_t>(u * sa.cols + v) * es;
      if (std::memcmp(sa.bytes.data() + o, sb.bytes.data() + o, es) != 0) out.insert({u, v});
    }
  return out;
}

// The executable description: every layout a plane has maps the compact entries one-to-one into its buffer (the
// offset the kernels call), every layout it lacks is refused naming the rule; the element decoder and packing.
TEST(PlaneSpec, LayoutGeometryIsABijectionAndRefusalsNameTheRule) {
  int checked = 0;
  for (const Recipe& r : recipes())
    for (auto [M, K] : shapes(r))
      for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
        SCOPED_TRACE(label(r, pk, M, K));
        const PlaneSpec s = describe_plane(r, pk, M, K);
        for (const LayoutName& n : kLayoutNames) {
          SCOPED_TRACE(std::string(n.name));
          const std::string why = s.layout_refusal(n.layout);
          EXPECT_EQ(why.empty(), s.has_layout(n.layout));
          if (!s.has_layout(n.layout)) {
            EXPECT_NE(why.find("rule 'layout-" + std::string(n.name) + "'"), std::string::npos) << why;
            EXPECT_THROW((void)s.geometry(n.layout), Error);
            continue;
          }
          const ScaleGeometry g = s.geometry(n.layout);
          EXPECT_EQ(g.rows, s.compact.rows);
          EXPECT_EQ(g.cols, s.compact.cols);
          std::vector<uint8_t> hit(static_cast<size_t>(g.size()), 0);
          for (int64_t i = 0; i < g.rows; ++i)
            for (int64_t j = 0; j < g.cols; ++j) {
              const int64_t o = g.offset(i, j);
              ASSERT_TRUE(o >= 0 && o < g.size()) << i << ", " << j << " -> " << o;
              ASSERT_EQ(hit[static_cast<size_t>(o)]++, 0) << i << ", " << j << " -> " << o << " twice";
            }
          ++checked;
        }
        // Which kinds have which layout (the table of conformance/README.md, "Scale layouts").
        const bool tiled = r.is(RecipeKind::kNVFP4) || r.is(RecipeKind::kMXFP8) || r.is(RecipeKind::kMXFP4);
        EXPECT_EQ(s.has_layout(Layout::kSwizzled), tiled);
        EXPECT_EQ(s.has_layout(Layout::kSwizzled8x4), tiled);
        EXPECT_EQ(s.has_layout(Layout::kDeepGemmPackedUe8m0), r.is(RecipeKind::kFP8Block) && s.scale_type == ScaleType::kE8M0);
      }
  EXPECT_GT(checked, 100);
  // Element decoding and packing: NVFP4 E2M1 codes two per byte, low nibble first; FP8 one per byte.
  const PlaneSpec nv = describe_plane(Recipe::of(Nvfp4Options{}), PlaneKind::kRowwise, 16, 32);
  EXPECT_EQ(nv.elems_per_byte(), 2);
  const uint8_t packed[] = {0x7A, 0x00};
  EXPECT_EQ(nv.code_at(packed, 0, 0), 0xA);
  EXPECT_EQ(nv.code_at(packed, 0, 1), 0x7);
  EXPECT_EQ(nv.decode(0xA), -1.0f);
  EXPECT_EQ(nv.decode(0x7), 6.0f);
  EXPECT_EQ(nv.decode(0x3), 1.5f);
  const PlaneSpec e4 = describe_plane(Recipe::of(Mxfp8Options{}), PlaneKind::kRowwise, 32, 32);
  EXPECT_EQ(e4.elems_per_byte(), 1);
  EXPECT_EQ(e4.decode(0x38), 1.0f);
  EXPECT_EQ(e4.decode(0x7E), 448.0f);
  EXPECT_TRUE(std::isnan(e4.decode(0x7F)));
  Recipe e5r = Recipe::of(Mxfp8Options{});
  e5r.set_fp8_type(Fp8Type::kE5M2);
  const PlaneSpec e5 = describe_plane(e5r, PlaneKind::kRowwise, 32, 32);
  EXPECT_EQ(e5.decode(0x3C), 1.0f);
  EXPECT_EQ(e5.decode(0x7B), 57344.0f);
  EXPECT_EQ(e5.code_at(packed, 0, 0), 0x7A);
}

TEST(PlaneSpec, BlockGeometryIsWhereOneInputElementReaches) {
  const std::vector<Recipe> rs = {nvfp4(false), nvfp4(true), mxfp8(Fp8Type::kE4M3, MxScaleRule::kRceil, false),
                                  mxfp8(Fp8Type::kE4M3, MxScaleRule::kRceil, true), fp8_block(Fp8Type::kE4M3, false),
                                  fp8_block(Fp8Type::kE4M3, true)};
  for (const Recipe& r : rs) {
    const bool nv = r.kind() == RecipeKind::kNVFP4;
    const int64_t M = nv ? 48 : 161, K = nv ? 64 : 300;  // ragged edges for the FP8 families
    HostMatrix x(DType::kBF16, M, K);
    for (int64_t t = 0; t < M * K; ++t) x.as<uint16_t>()[t] = f32_to_bf16(0.5f + 0.001f * static_cast<float>(t % 7));
    const std::vector<std::pair<int64_t, int64_t>> probes = {{0, 0}, {M - 1, K - 1}, {M / 2 + 1, K / 3 + 2}, {17, 33}};
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      const PlaneSpec s = describe_plane(r, pk, M, K);
      for (auto [i, j] : probes) {
        SCOPED_TRACE(label(r, pk, M, K) + " probe (" + std::to_string(i) + ", " + std::to_string(j) + ")");
        // Expected: every compact entry whose block contains (i, j).
        std::set<std::pair<int64_t, int64_t>> want;
        for (int64_t a = 0; a < s.compact.rows; ++a)
          for (int64_t b = 0; b < s.compact.cols; ++b) {
            const XRegion g = s.scale_block(a, b);
            if (g.r0 <= i && i < g.r1 && g.c0 <= j && j < g.c1) want.insert({a, b});
          }
        EXPECT_EQ(want, changed_scales(r, pk, x, i, j));
        // block_of agrees with the entries' regions.
        const XRegion blk = s.block_of(i, j);
        for (auto [a, b] : want) EXPECT_EQ(s.scale_block(a, b), blk);
        EXPECT_EQ(blk.r1 - blk.r0, std::min(s.block_rows, M - blk.r0));
        EXPECT_EQ(blk.c1 - blk.c0, std::min(s.block_cols, K - blk.c0));
      }
    }
  }
}

TEST(PlaneSpec, FixedTable) {
  // A few shapes written out by hand from TE_FORMATS.md §1-§5, so a change of convention cannot pass unseen.
  Recipe r = nvfp4();
  PlaneSpec s = describe_plane(r, PlaneKind::kColumnwise, 48, 272);
  EXPECT_EQ(s.data_rows, 272);
  EXPECT_EQ(s.data_cols, 24);
  EXPECT_EQ(s.compact, (ScaleShape{272, 3}));
  EXPECT_EQ(s.padded, (ScaleShape{384, 4}));
  EXPECT_EQ(s.amax_count, 1);
  r.nvfp4().row_scaled = true;
  EXPECT_EQ(describe_plane(r, PlaneKind::kRowwise, 48, 272).amax_count, 48);
  EXPECT_EQ(describe_plane(r, PlaneKind::kColumnwise, 48, 272).amax_count, 272);
  s = describe_plane(mxfp8(Fp8Type::kE5M2, MxScaleRule::kRceil, false), PlaneKind::kColumnwise, 33, 65);
  EXPECT_EQ(s.data_elem, DataElem::kE5M2);
  EXPECT_FALSE(s.data_transposed);
  EXPECT_EQ(s.compact, (ScaleShape{2, 65}));
  EXPECT_EQ(s.padded, (ScaleShape{4, 128}));
  EXPECT_TRUE(s.tiles_transposed);
  s = describe_plane(fp8_block(Fp8Type::kE4M3, false), PlaneKind::kRowwise, 129, 257);
  EXPECT_EQ(s.compact, (ScaleShape{129, 3}));
  EXPECT_EQ(s.padded, (ScaleShape{3, 132}));
  EXPECT_TRUE(s.padded_transposed);
  s = describe_plane(fp8_block(Fp8Type::kE4M3, true), PlaneKind::kColumnwise, 129, 257);
  EXPECT_TRUE(s.data_transposed);
  EXPECT_EQ(s.compact, (ScaleShape{3, 2}));
  EXPECT_EQ(s.padded, (ScaleShape{3, 4}));
  s = describe_plane(fp8_tensor(Fp8Type::kE4M3), PlaneKind::kColumnwise, 5, 7);
  EXPECT_EQ(s.data_rows, 7);
  EXPECT_EQ(s.data_cols, 5);
  EXPECT_EQ(s.amax_count, 1);
  EXPECT_EQ(s.block_of(3, 4), (XRegion{0, 5, 0, 7}));
}

TEST(TensorTable, EachKindsOutputsWithTheirShapes) {
  // VECTORS.md, Tensors, written out by hand per kind: which names are outputs, and of which role.
  const std::map<RecipeKind, std::set<std::string>> want = {
      {RecipeKind::kNVFP4,
       {"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "amax_rowwise", "amax_columnwise",
        "dequantized_rowwise", "dequantized_columnwise"}},
      {RecipeKind::kMXFP8,
       {"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "dequantized_rowwise",
        "dequantized_columnwise"}},
      {RecipeKind::kFP8Block,
       {"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "dequantized_rowwise",
        "dequantized_columnwise"}},
      {RecipeKind::kFP8Tensor, {"rowwise_data", "columnwise_data", "scale_inv", "amax", "dequantized_rowwise"}}};
  EXPECT_EQ(tensor_names().size(), 10u);
  EXPECT_FALSE(describe_tensor(nvfp4(), "rowwise_scales", 16, 16).has_value());
  for (const Recipe& r : recipes()) {
    const int64_t M = r.kind() == RecipeKind::kNVFP4 ? 48 : 33, K = r.kind() == RecipeKind::kNVFP4 ? 64 : 65;
    std::set<std::string> got;
    for (std::string_view n : tensor_names()) {
      const auto t = describe_tensor(r, n, M, K);
      if (!t) continue;
      SCOPED_TRACE(r.name() + " " + std::string(n));
      got.insert(std::string(n));
      const PlaneSpec ps = describe_plane(r, t->plane.plane, M, K);
      EXPECT_EQ(std::string(plane_kind_name(ps.plane)), n.find("columnwise") != std::string_view::npos ? "columnwise" : "rowwise");
      switch (t->role) {
        case TensorRole::kData:
          EXPECT_EQ(t->shape, (std::vector<int64_t>{ps.data_rows, ps.data_cols}));
          EXPECT_EQ(t->elem_bytes, 1);
          break;
        case TensorRole::kScale:
          EXPECT_EQ(t->shape, (std::vector<int64_t>{ps.compact.rows, ps.compact.cols}));
          EXPECT_EQ(t->f32, r.kind() == RecipeKind::kFP8Block);
          EXPECT_EQ(t->elem_bytes, r.kind() == RecipeKind::kFP8Block ? 4 : 1);
          break;
        case TensorRole::kAmax: EXPECT_EQ(t->shape, (std::vector<int64_t>{ps.amax_count})); break;
        case TensorRole::kScaleInv:
        case TensorRole::kTensorAmax: EXPECT_EQ(t->shape, (std::vector<int64_t>{1})); break;
        case TensorRole::kDequant: EXPECT_EQ(t->shape, (std::vector<int64_t>{M, K})); break;
      }
      if (t->role != TensorRole::kData && t->role != TensorRole::kScale) {
        EXPECT_TRUE(t->f32 && t->elem_bytes == 4);
      }
    }
    EXPECT_EQ(got, want.at(r.kind())) << r.name();
  }
}

TEST(PlaneSpec, HugeShapesDoNotOverflow) {
  const int64_t big = (int64_t{1} << 62) + 1;
  const PlaneSpec s = describe_plane(fp8_block(Fp8Type::kE4M3, true), PlaneKind::kRowwise, big, 1);
  EXPECT_EQ(s.compact.rows, (int64_t{1} << 55) + 1);
  EXPECT_EQ(s.compact.cols, 1);
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const PlaneSpec n = describe_plane(nvfp4(), PlaneKind::kRowwise, kMax, kMax);
  EXPECT_EQ(n.compact.rows, kMax);
  EXPECT_EQ(n.padded.rows, kMax);  // saturated, not wrapped
  EXPECT_EQ(n.padded.cols, kMax / 16 + 1 + 3 - (kMax / 16 + 1 + 3) % 4);
}

// ---------------------------------------------------------------------------------------------------
// The validator: every rule, by a recipe that breaks it, and the message that names it.

struct RuleCase {
  const char* rule;
  Recipe recipe;
  const char* detail;  ///< a part of the message besides the rule's text ("" for none)
};

std::vector<RuleCase> rule_cases() {
  std::vector<RuleCase> v;
  auto nv = [](auto f) {
    Recipe r = nvfp4();
    f(r);
    return r;
  };
  v.push_back({"planes", nv([](Recipe& r) { r.rowwise = r.columnwise = false; }), ""});
  Recipe ocp_nv = nvfp4();
  ocp_nv.profile = Profile::kOCP;
  v.push_back({"profile-defines-kind", ocp_nv, "profile 'ocp' does not define nvfp4"});
  Recipe ao_blk = fp8_block(Fp8Type::kE4M3, false);
  ao_blk.profile = Profile::kTorchAO;
  v.push_back({"profile-defines-kind", ao_blk, "profile 'torchao' does not define fp8_block"});
  v.push_back({"nvfp4-e4m3-max", nv([](Recipe& r) { r.nvfp4().e4m3_max = 300; r.nvfp4().fourover6 = true; }), ""});
  v.push_back({"nvfp4-e4m3-max-256-needs-4over6", nv([](Recipe& r) { r.nvfp4().e4m3_max = 256; }), ""});
  v.push_back({"nvfp4-row-scaled-1x16", nv([](Recipe& r) { r.nvfp4().row_scaled = true; r.nvfp4().tile_2d = true; }), ""});
  v.push_back({"nvfp4-row-scaled-no-rht", nv([](Recipe& r) { r.nvfp4().row_scaled = true; r.nvfp4().rht = true; }), ""});
  v.push_back({"nvfp4-row-scaled-no-sr", nv([](Recipe& r) { r.nvfp4().row_scaled = true; r.nvfp4().stochastic = true; }), ""});
  v.push_back({"nvfp4-row-scaled-needs-rowwise", nv([](Recipe& r) { r.nvfp4().row_scaled = true; r.rowwise = false; }), ""});
  v.push_back({"nvfp4-rht-1x16", nv([](Recipe& r) { r.nvfp4().rht = true; r.nvfp4().tile_2d = true; }), ""});
  v.push_back({"nvfp4-4over6-no-rht", nv([](Recipe& r) { r.nvfp4().fourover6 = true; r.nvfp4().rht = true; }), ""});
  v.push_back({"nvfp4-4over6-no-sr", nv([](Recipe& r) { r.nvfp4().fourover6 = true; r.nvfp4().stochastic = true; }), ""});
  v.push_back({"nvfp4-row-scaled-4over6-rowwise-only", nv([](Recipe& r) { r.nvfp4().fourover6 = true; r.nvfp4().row_scaled = true; }), ""});
  v.push_back({"nvfp4-profile-sr", nv([](Recipe& r) { r.nvfp4().stochastic = true; r.profile = Profile::kTEPyRef; }),
               "profile 'te_pyref' has no stochastic rounding"});
  v.push_back({"nvfp4-profile-order-1x16", nv([](Recipe& r) { r.nvfp4().tile_2d = true; r.profile = Profile::kTorchAO; }),
               "profile 'torchao'"});
  v.push_back({"nvfp4-single-level", nv([](Recipe& r) { r.nvfp4().per_tensor_scale = false; }), "profile 'te' does not"});
  Recipe ocp_rceil = mxfp8(Fp8Type::kE4M3, MxScaleRule::kRceil, false);
  ocp_rceil.profile = Profile::kOCP;
  v.push_back({"mxfp8-profile-scale-rule", ocp_rceil, "profile 'ocp' defines scale_rule ocp_floor, not rceil"});
  v.push_back({"mxfp8-profile-scale-rule", mxfp8(Fp8Type::kE5M2, MxScaleRule::kCeil, false),
               "profile 'te' defines scale_rule rceil, ocp_floor, not ceil"});
  v.push_back({"mxfp4-profile-scale-rule", Recipe::of(Mxfp4Options{.scale_rule = MxScaleRule::kRceil}, Profile::kOCP),
               "profile 'ocp' defines scale_rule ocp_floor, not rceil"});
  v.push_back({"profile-defines-kind", Recipe::of(Mxfp4Options{}, Profile::kJax), "profile 'jax' does not define mxfp4"});
  Recipe mo_e5m2 = mxfp8(Fp8Type::kE5M2, MxScaleRule::kRceil, false);
  mo_e5m2.profile = Profile::kModelOpt;
  v.push_back({"mxfp8-profile-order-e4m3", mo_e5m2, "profile 'modelopt'"});
  Recipe neg_eps = fp8_tensor(Fp8Type::kE4M3);
  neg_eps.set_eps(-1.0f);
  v.push_back({"fp8-eps", neg_eps, ""});
  Recipe nan_eps = fp8_block(Fp8Type::kE5M2, true);
  nan_eps.set_eps(std::numeric_limits<float>::quiet_NaN());
  v.push_back({"fp8-eps", nan_eps, ""});
  Recipe ue8m0 = fp8_block(Fp8Type::kE4M3, false);
  ue8m0.fp8_block().ue8m0_scales = true;  // UE8M0 bytes need power-of-two scales
  v.push_back({"fp8-block-ue8m0-pow2", ue8m0, ""});
  Recipe b32 = fp8_block(Fp8Type::kE4M3, false);
  b32.fp8_block().block_1d = 32;  // 1x32: DeepGEMM's gran_k=32, not a TE tile
  v.push_back({"fp8-block-1x32", b32, "block length 32 under profile 'te'"});
  Recipe mo_pow2 = fp8_tensor(Fp8Type::kE4M3);
  mo_pow2.profile = Profile::kModelOpt;
  mo_pow2.set_pow2_scales(true);
  v.push_back({"fp8-profile-pow2", mo_pow2, "profile 'modelopt' does not"});
  Recipe ct_e5m2 = mxfp8(Fp8Type::kE5M2, MxScaleRule::kPow2Round, false);
  ct_e5m2.profile = Profile::kCompressedTensors;
  v.push_back({"mxfp8-profile-order-ct", ct_e5m2, "profile 'compressed_tensors'"});
  return v;
}

TEST(RecipeRules, EachRuleIsNamedByTheRecipeThatBreaksIt) {
  std::set<std::string> covered;
  for (const RuleCase& c : rule_cases()) {
    SCOPED_TRACE(std::string(c.rule) + " " + c.recipe.name());
    EXPECT_EQ(c.recipe.broken_rule(), c.rule);
    std::string text;
    for (const RecipeRule& r : recipe_rules())
      if (r.id == c.rule) text = std::string(r.text);
    ASSERT_FALSE(text.empty()) << "no such rule";
    try {
      c.recipe.validate();
      ADD_FAILURE() << "validate() accepted it";
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("recipe " + c.recipe.name() + ": rule '" + c.rule + "': " + text), std::string::npos) << w;
      EXPECT_NE(w.find(c.detail), std::string::npos) << w;
    }
    covered.insert(c.rule);
  }
  for (const RecipeRule& r : recipe_rules()) EXPECT_TRUE(covered.count(std::string(r.id))) << "rule " << r.id << " has no case";
  std::set<std::string_view> ids;
  for (const RecipeRule& r : recipe_rules()) EXPECT_TRUE(ids.insert(r.id).second) << "rule id " << r.id << " twice";
}

TEST(RecipeRules, AnotherKindsOptionsAreNotRepresentable) {
  // A recipe holds its kind's alternative only: asking for another kind's options throws, naming the rule.
  auto expect_kind_options = [](auto&& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("rule 'kind-options'"), std::string::npos) << w;
      EXPECT_NE(w.find(what), std::string::npos) << w;
    }
  };
  Recipe mx = mxfp8(Fp8Type::kE4M3, MxScaleRule::kRceil, false);
  const Recipe nv = nvfp4();
  const Recipe blk = fp8_block(Fp8Type::kE4M3, false);
  const Recipe ten = fp8_tensor(Fp8Type::kE5M2);
  expect_kind_options([&] { mx.nvfp4().row_scaled = true; },
                      "recipe mxfp8_e4m3_rceil: rule 'kind-options': NVFP4 options were asked of a recipe of kind MXFP8");
  expect_kind_options([&] { (void)nv.fp8_type(); }, "fp8_dtype) is an option of MXFP8, FP8 block and FP8 tensor, not of NVFP4");
  expect_kind_options([&] { (void)blk.mxfp8(); }, "MXFP8 options were asked of a recipe of kind FP8 block");
  expect_kind_options([&] { (void)ten.fp8_block(); }, "FP8 block options were asked of a recipe of kind FP8 tensor");
  expect_kind_options([&] { mx.set_eps(0.5f); }, "eps is an option of FP8 block and FP8 tensor, not of MXFP8");
  expect_kind_options([&] { (void)mx.pow2_scales(); }, "pow2_scales is an option of FP8 block and FP8 tensor, not of MXFP8");
  expect_kind_options([&] { (void)nv.fp8_tensor(); }, "FP8 tensor options were asked of a recipe of kind NVFP4");
  EXPECT_EQ(mx.nvfp4_or_null(), nullptr);
  EXPECT_EQ(mx.name(), "mxfp8_e4m3_rceil") << "a refused access changes nothing";
  // The shared accessors read the alternative of the recipe's kind.
  EXPECT_EQ(ten.fp8_type(), Fp8Type::kE5M2);
  EXPECT_EQ(blk.eps(), 0.0f);
  EXPECT_FALSE(ten.is_2d());
  EXPECT_TRUE(nvfp4(true).is_2d());
  EXPECT_FALSE(nv.nvfp4_row_scaled());
  EXPECT_FALSE(mx.nvfp4_rht());
  // Replacing the alternative changes the kind and keeps profile and planes.
  Recipe r = Recipe::of(Nvfp4Options{.rht = true}, Profile::kTEPyRef, true, false);
  r.set_options(Fp8TensorOptions{.pow2_scales = true});
  EXPECT_EQ(r.kind(), RecipeKind::kFP8Tensor);
  EXPECT_EQ(r.name(), "fp8tensor_e4m3_pow2_te_pyref_rowonly");
  for (RecipeKind k : {RecipeKind::kNVFP4, RecipeKind::kMXFP8, RecipeKind::kFP8Block, RecipeKind::kFP8Tensor})
    EXPECT_EQ(Recipe::of(Recipe::default_options(k)).kind(), k);
}

TEST(RecipeRules, ValidRecipesBreakNoRule) {
  for (const Recipe& r : recipes()) {
    EXPECT_EQ(r.broken_rule(), "") << r.name();
    EXPECT_NO_THROW(r.validate()) << r.name();
  }
}

TEST(RecipeRules, MetadataOfAnotherKindIsRefused) {
  // The parse path builds the kind's alternative: keys of other kinds never reach a recipe.
  EXPECT_THROW((void)Recipe::from_metadata({{"recipe", "mxfp8"}, {"row_scaled", "1"}}), Error);
  EXPECT_THROW((void)Recipe::from_metadata({{"recipe", "fp8_tensor"}, {"tile", "128x128"}}), Error);
  try {
    (void)Recipe::from_metadata({{"recipe", "nvfp4"}, {"row_scaled", "1"}, {"tile", "16x16"}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rule 'nvfp4-row-scaled-1x16'"), std::string::npos) << e.what();
  }
}

TEST(RecipeOptionsTest, OneAlternativePerKindRoundTrips) {
  for (const Recipe& r : recipes()) {
    SCOPED_TRACE(r.name());
    const RecipeOptions o = r.options();
    EXPECT_EQ(o.index(), static_cast<size_t>(r.kind()));
    const Recipe back = Recipe::of(o, r.profile, r.rowwise, r.columnwise);
    EXPECT_EQ(back.name(), r.name());
    EXPECT_EQ(back.to_metadata(), r.to_metadata());
    EXPECT_EQ(back.options(), o);
    EXPECT_EQ(Recipe::from_metadata(r.to_metadata()).options(), o);
  }
  // An alternative carries only its kind's options: a recipe built from one has no foreign option set.
  const Recipe r = Recipe::of(Mxfp8Options{.fp8 = Fp8Type::kE5M2, .scale_rule = MxScaleRule::kOcpFloor, .tile_2d = true}, Profile::kOCP);
  EXPECT_EQ(r.kind(), RecipeKind::kMXFP8);
  EXPECT_EQ(r.name(), "mxfp8_e5m2_ocpfloor_32x32_ocp");
  EXPECT_EQ(r.broken_rule(), "");
  const Fp8BlockOptions blk{.tile_2d = true, .eps = 0.25f};
  EXPECT_EQ(Recipe::of(blk).name(), "fp8block_128x128_e4m3_eps0.25");
  EXPECT_EQ(describe_plane(Recipe::of(blk), PlaneKind::kRowwise, 300, 300).compact, (ScaleShape{3, 3}));
}

TEST(RecipeRules, InputRulesAreNamed) {
  auto message = [](const Recipe& r, DType t, int64_t M, int64_t K) {
    try {
      r.validate_input(t, M, K);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(nvfp4(), DType::kU8, 16, 16).find("rule 'input-dtype'"), std::string::npos);
  EXPECT_NE(message(fp8_tensor(Fp8Type::kE4M3), DType::kF32, -1, 4).find("rule 'input-shape'"), std::string::npos);
  EXPECT_NE(message(nvfp4(), DType::kF32, 16, 24).find("rule 'nvfp4-input-k16'"), std::string::npos);
  EXPECT_NE(message(nvfp4(), DType::kF32, 24, 16).find("rule 'nvfp4-input-m16'"), std::string::npos);
  Recipe rht = nvfp4();
  rht.nvfp4().rht = true;
  EXPECT_NE(message(rht, DType::kF32, 16, 16).find("rule 'nvfp4-input-rht-bf16'"), std::string::npos);
  EXPECT_EQ(message(rht, DType::kBF16, 16, 16), "");
  Recipe ao = nvfp4();
  ao.profile = Profile::kTorchAO;
  ao.columnwise = false;
  EXPECT_EQ(message(ao, DType::kF32, 17, 16), "");  // torchao's rowwise-only plane takes any M
  EXPECT_EQ(message(mxfp8(Fp8Type::kE4M3, MxScaleRule::kRceil, false), DType::kF16, 3, 5), "");
  // A recipe rule comes first: validate_input validates the recipe.
  Recipe bad = nvfp4();
  bad.rowwise = bad.columnwise = false;
  EXPECT_NE(message(bad, DType::kF32, 16, 16).find("rule 'planes'"), std::string::npos);
}

}  // namespace
