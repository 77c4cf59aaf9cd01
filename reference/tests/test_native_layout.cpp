/// \file test_native_layout.cpp
/// \brief native_layout.hpp: output tensors in the compact and TE layouts (VECTORS.md, Native layouts).
///
/// | test                                  | what                                                                     |
/// |---------------------------------------|--------------------------------------------------------------------------|
/// | NativeLayout.RoundTrip (param.)        | every recipe kind x layout x ragged shape: from_compact then to_compact   |
/// |                                       | gives the compact bytes back; padding count = elements - compact ones;    |
/// |                                       | the te buffers equal layouts.hpp's padded / swizzled scale matrices       |
/// | NativeLayout.Shapes                   | the VECTORS.md te table for 65x80, 16x48, 200x300 (incl. FP8 block 1x128) |
/// | NativeLayout.MetadataErrors           | bad layout / swizzled values and combinations name the key               |
/// | NativeLayout.ShapeErrorNamesShapes    | wrong padded shape: the message names expected and compact shapes        |
/// | NativeLayout.NonzeroPadding           | one padding byte set: found at its coordinates; valid bytes never count  |
/// | NativeLayout.SwizzleMatchesTorchView  | several 128x4 tiles against TE's view/permute description of the order   |
/// | NativeLayout.SharedVectorsToCompact   | every shared te_layout vector, converted to compact, holds the bytes of   |
/// |                                       | its te/ original (and back again, with the padding zero)                 |
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/quantize.hpp"

namespace {

using namespace qtc;
using ref::OutputLayout;
namespace fs = std::filesystem;

constexpr Layout kCompact = Layout::kCompact, kTE = Layout::kPadded, kSwz = Layout::kSwizzled, k8x4 = Layout::kSwizzled8x4;

struct Case {
  Recipe recipe;
  int64_t M, K;
};

std::string case_name(const testing::TestParamInfo<Case>& i) {
  return i.param.recipe.name() + "_" + std::to_string(i.param.M) + "x" + std::to_string(i.param.K);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](Recipe r, std::vector<std::pair<int64_t, int64_t>> shapes) {
    for (auto [m, k] : shapes) out.push_back({r, m, k});
  };
  Recipe nv = Recipe::of(Nvfp4Options{});
  add(nv, {{16, 48}, {32, 64}, {48, 80}, {144, 208}, {272, 16}});
  nv.nvfp4().tile_2d = true;
  add(nv, {{16, 48}, {144, 208}});
  nv.nvfp4().tile_2d = false;
  nv.nvfp4().row_scaled = true;
  add(nv, {{48, 80}});
  Recipe mx = Recipe::of(Mxfp8Options{});
  add(mx, {{32, 32}, {65, 80}, {1, 32}, {200, 300}, {129, 33}});
  Recipe b = Recipe::of(Fp8BlockOptions{});
  add(b, {{16, 48}, {65, 80}, {1, 1}, {200, 300}, {130, 257}});
  b.fp8_block().tile_2d = true;
  add(b, {{16, 48}, {200, 300}, {130, 257}});
  Recipe t = Recipe::of(Fp8TensorOptions{});
  add(t, {{16, 48}, {7, 13}});
  return out;
}

class NativeLayout : public testing::TestWithParam<Case> {};

TEST_P(NativeLayout, RoundTrip) {
  const Case& c = GetParam();
  HostMatrix x(DType::kF32, c.M, c.K);
  std::mt19937 rng(static_cast<uint32_t>(c.M * 1000 + c.K));
  std::lognormal_distribution<float> ln(0.0f, 2.0f);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.K; ++j) x.set(i, j, ln(rng) * ((i + j) % 2 ? -1.0f : 1.0f));
  const QuantizedTensor q = ref::quantize(x.view(), c.recipe);
  const bool swz_ok = c.recipe.kind() == RecipeKind::kNVFP4 || c.recipe.kind() == RecipeKind::kMXFP8;
  for (const Layout o : {kCompact, kTE, kSwz, k8x4}) {
    if ((o == kSwz || o == k8x4) && !swz_ok) {
      EXPECT_THROW((void)OutputLayout::find("rowwise_data", c.recipe, c.M, c.K, o), Error);
      continue;
    }
    SCOPED_TRACE(std::string(layout_name(o)));
    for (PlaneKind p : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      const Plane& pl = q.plane(p);
      const std::string pre = p == PlaneKind::kRowwise ? "rowwise" : "columnwise";
      // Data planes: the same bytes in every layout (FP8 tensor's columnwise_data is x^T, [K, M]).
      const auto d = OutputLayout::find(pre + "_data", c.recipe, c.M, c.K, o);
      ASSERT_TRUE(d.has_value());
      EXPECT_EQ(d->shape(), (std::vector<int64_t>{pl.data_rows, pl.data_cols}));
      EXPECT_EQ(d->from_compact(pl.data, 0xAB), pl.data);
      if (c.recipe.kind() == RecipeKind::kFP8Tensor) {
        EXPECT_FALSE(OutputLayout::find(pre + "_scale_inv", c.recipe, c.M, c.K, o).has_value());
        continue;
      }
      const auto s = OutputLayout::find(pre + "_scale_inv", c.recipe, c.M, c.K, o);
      ASSERT_TRUE(s.has_value());
      ASSERT_EQ(s->compact_shape(), (std::vector<int64_t>{pl.scale.rows, pl.scale.cols}));
      const std::vector<uint8_t> buf = s->from_compact(pl.scale.bytes, 0xAB);
      EXPECT_EQ(s->to_compact(buf), pl.scale.bytes) << "round trip";
      const auto mask = s->padding_mask();
      EXPECT_EQ(std::count(mask.begin(), mask.end(), true), s->elements() - s->compact_elements());
      // The same buffers as layouts.hpp's (padding zero there).
      const ScaleMatrix want = ref::convert_layout(pl.scale, o, c.recipe, p, c.M, c.K);
      EXPECT_EQ(s->from_compact(pl.scale.bytes, 0), want.bytes);
      EXPECT_EQ(s->shape(), (std::vector<int64_t>{want.rows, want.cols}));
      if (o == kCompact) {
        EXPECT_TRUE(s->is_identity());
        EXPECT_FALSE(s->nonzero_padding(buf).has_value());
      } else if (s->elements() > s->compact_elements()) {
        const auto pp = s->nonzero_padding(buf);
        ASSERT_TRUE(pp.has_value());
        EXPECT_EQ(pp->nonzero, pp->total);
        EXPECT_EQ(pp->total, s->elements() - s->compact_elements());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, NativeLayout, testing::ValuesIn(cases()), case_name);

Recipe recipe(RecipeKind k, bool two_d = false) {
  Recipe r;
  r.set_options(Recipe::default_options(k));
  if (k == RecipeKind::kFP8Block) r.fp8_block().tile_2d = two_d;
  if (k == RecipeKind::kNVFP4) r.nvfp4().tile_2d = two_d;
  return r;
}

std::vector<int64_t> shape_of(const Recipe& r, const char* name, int64_t M, int64_t K, Layout o) {
  const auto L = OutputLayout::find(name, r, M, K, o);
  return L ? L->shape() : std::vector<int64_t>{-1};
}

TEST(NativeLayoutTable, Shapes) {
  using V = std::vector<int64_t>;
  const Recipe nv = recipe(RecipeKind::kNVFP4), mx = recipe(RecipeKind::kMXFP8);
  const Recipe b1 = recipe(RecipeKind::kFP8Block), b2 = recipe(RecipeKind::kFP8Block, true), t = recipe(RecipeKind::kFP8Tensor);
  EXPECT_EQ(shape_of(nv, "rowwise_scale_inv", 16, 48, kTE), (V{128, 4}));
  EXPECT_EQ(shape_of(nv, "columnwise_scale_inv", 16, 48, kTE), (V{128, 4}));
  EXPECT_EQ(shape_of(nv, "columnwise_scale_inv", 144, 208, kSwz), (V{256, 12}));
  EXPECT_EQ(shape_of(mx, "rowwise_scale_inv", 65, 80, kTE), (V{128, 4}));
  EXPECT_EQ(shape_of(mx, "columnwise_scale_inv", 65, 80, kTE), (V{4, 128}));
  EXPECT_EQ(shape_of(mx, "columnwise_scale_inv", 200, 300, kSwz), (V{8, 384}));
  EXPECT_TRUE(OutputLayout::find("columnwise_scale_inv", mx, 200, 300, kSwz)->accepts_shape({384, 8}));
  EXPECT_FALSE(OutputLayout::find("columnwise_scale_inv", mx, 200, 300, kTE)->accepts_shape({384, 8}));
  EXPECT_EQ(shape_of(b1, "rowwise_scale_inv", 65, 300, kTE), (V{3, 68}));
  EXPECT_EQ(shape_of(b1, "columnwise_scale_inv", 65, 300, kTE), (V{1, 300}));
  EXPECT_EQ(shape_of(b1, "columnwise_scale_inv", 65, 301, kTE), (V{1, 304}));
  EXPECT_EQ(shape_of(b2, "rowwise_scale_inv", 200, 300, kTE), (V{2, 4}));
  EXPECT_EQ(shape_of(b2, "columnwise_scale_inv", 200, 300, kTE), (V{3, 4}));
  EXPECT_EQ(shape_of(b1, "rowwise_scale_inv", 65, 300, kCompact), (V{65, 3}));
  EXPECT_EQ(shape_of(t, "columnwise_data", 7, 13, kTE), (V{13, 7}));
  EXPECT_EQ(shape_of(t, "columnwise_data", 7, 13, kCompact), (V{13, 7}));
  EXPECT_EQ(shape_of(t, "scale_inv", 7, 13, kTE), (V{1}));
  EXPECT_EQ(shape_of(t, "columnwise_scale_inv", 7, 13, kTE), (V{-1}));
  EXPECT_EQ(OutputLayout::find("rowwise_scale_inv", b1, 65, 300, kTE)->dtype(), std::string("F32"));
  // FP8 block 1x128 under te: compact (i, kb) sits at [kb][i].
  const auto L = OutputLayout::find("rowwise_scale_inv", b1, 65, 300, kTE);
  EXPECT_EQ(L->layout_index(5 * 3 + 2), 2 * 68 + 5);
}

TEST(NativeLayoutTable, MetadataErrors) {
  auto err = [](std::map<std::string, std::string> md) -> std::string {
    try {
      (void)ref::layout_from_metadata(md);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(err({{"layout", "TE"}}).find("metadata key 'layout': unknown value 'TE'"), std::string::npos) << err({{"layout", "TE"}});
  EXPECT_NE(err({{"layout", "te"}, {"swizzled", "yes"}}).find("metadata key 'swizzled'"), std::string::npos);
  EXPECT_NE(err({{"swizzled", "1"}}).find("needs layout=te"), std::string::npos);
  EXPECT_EQ(err({{"layout", "te"}, {"swizzled", "1"}}), "");
  EXPECT_EQ(err({{"layout", "compact"}, {"swizzled", "0"}}), "");
  EXPECT_EQ(ref::layout_from_metadata({{"layout", "te"}, {"swizzled", "1"}}), kSwz);
  EXPECT_EQ(ref::layout_from_metadata({}), kCompact);
  try {
    (void)OutputLayout::find("rowwise_scale_inv", recipe(RecipeKind::kFP8Block), 16, 48, kSwz);
    ADD_FAILURE() << "swizzled FP8 block accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rule 'layout-swizzled_128x4'"), std::string::npos) << e.what();
  }
  // The 8x4 layout: its own metadata value; swizzled=1 beside it is refused; FP8 scales do not have it.
  EXPECT_EQ(ref::layout_from_metadata({{"layout", "swizzled_8x4"}}), k8x4);
  EXPECT_NE(err({{"layout", "swizzled_8x4"}, {"swizzled", "1"}}).find("needs layout=te"), std::string::npos);
  EXPECT_THROW((void)OutputLayout::find("rowwise_scale_inv", recipe(RecipeKind::kFP8Block), 16, 48, k8x4), Error);
  for (const LayoutName& n : kLayoutNames) {  // every value round-trips through the metadata keys
    std::map<std::string, std::string> m;
    ref::layout_to_metadata(n.layout, m);
    EXPECT_EQ(ref::layout_from_metadata(m), n.layout) << n.name;
  }
  {
    std::map<std::string, std::string> m;
    ref::layout_to_metadata(kSwz, m);  // the form of the committed vectors and TE's dumps
    EXPECT_EQ(m, (std::map<std::string, std::string>{{"layout", "te"}, {"swizzled", "1"}}));
  }
  // Recipe::from_metadata accepts the layout keys.
  EXPECT_NO_THROW((void)Recipe::from_metadata({{"recipe", "nvfp4"}, {"layout", "te"}, {"swizzled", "1"}}));
  std::map<std::string, std::string> md{{"swizzled", "1"}};
  ref::layout_to_metadata(kTE, md);
  EXPECT_EQ(md, (std::map<std::string, std::string>{{"layout", "te"}}));
}

TEST(NativeLayoutTable, ShapeErrorNamesShapes) {
  const Recipe nv = recipe(RecipeKind::kNVFP4);
  const auto te = OutputLayout::find("rowwise_scale_inv", nv, 16, 48, kTE);
  const std::string m = te->shape_error({16, 3});
  EXPECT_NE(m.find("has shape [16, 3], expected [128, 4]"), std::string::npos) << m;
  EXPECT_NE(m.find("layout=te expects TE's padded shape"), std::string::npos) << m;
  EXPECT_NE(m.find("compact is [16, 3]"), std::string::npos) << m;
  const auto c = OutputLayout::find("rowwise_scale_inv", nv, 16, 48, kCompact);
  const std::string m2 = c->shape_error({128, 4});
  EXPECT_NE(m2.find("declare metadata layout=te"), std::string::npos) << m2;
  EXPECT_THROW((void)te->to_compact(std::vector<uint8_t>(48)), Error);
}

TEST(NativeLayoutTable, NonzeroPadding) {
  const Recipe b1 = recipe(RecipeKind::kFP8Block);
  const auto L = OutputLayout::find("rowwise_scale_inv", b1, 65, 300, kTE);  // [3, 68], valid [kb][0..64]
  std::vector<uint8_t> buf(static_cast<size_t>(L->elements()) * 4, 0);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = L->padding_mask()[i / 4] ? 0 : 0x5A;
  EXPECT_FALSE(L->nonzero_padding(buf).has_value());
  buf[(1 * 68 + 66) * 4 + 3] = 0x80;  // -0.0f in padding entry [1, 66]
  const auto p = L->nonzero_padding(buf);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->nonzero, 1);
  EXPECT_EQ(p->total, 3 * 3);
  EXPECT_EQ(p->first, (std::vector<int64_t>{1, 66}));
}

/// Swizzled scales over several 128x4 tiles, against TE's own description of the order (TE_FORMATS.md §6): the
/// padded matrix S viewed as [R/128, 4, 32, C/4, 4] and permuted to (0, 3, 2, 1, 4). The shared vectors hold one
/// tile per matrix only; here NVFP4 272x400 (3 x 7 tiles rowwise) and MXFP8 300x520 (columnwise: the transposed
/// matrix, 5 x 3 tiles).
TEST(NativeLayoutTable, SwizzleMatchesTorchViewOverManyTiles) {
  struct Shape {
    RecipeKind kind;
    int64_t M, K;
  };
  for (const Shape sh : {Shape{RecipeKind::kNVFP4, 272, 400}, Shape{RecipeKind::kMXFP8, 300, 520}, Shape{RecipeKind::kMXFP8, 129, 33}}) {
    const Recipe r = recipe(sh.kind);
    for (const char* name : {"rowwise_scale_inv", "columnwise_scale_inv"}) {
      SCOPED_TRACE(std::string(recipe_kind_name(sh.kind)) + " " + name);
      const auto te = OutputLayout::find(name, r, sh.M, sh.K, kTE);
      const auto sw = OutputLayout::find(name, r, sh.M, sh.K, kSwz);
      const int64_t n = te->compact_elements();
      std::vector<uint8_t> compact(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) compact[static_cast<size_t>(i)] = static_cast<uint8_t>(1 + (i * 37) % 251);
      std::vector<uint8_t> S = te->from_compact(compact, 0);  // padded, TE's allocation shape
      int64_t R = te->shape()[0], C = te->shape()[1];
      const bool mx_col = sh.kind == RecipeKind::kMXFP8 && std::string(name) == "columnwise_scale_inv";
      if (mx_col) {  // the matrix the swizzle tiles is the transposed one: row = K index
        std::vector<uint8_t> T(S.size());
        for (int64_t i = 0; i < R; ++i)
          for (int64_t j = 0; j < C; ++j) T[static_cast<size_t>(j * R + i)] = S[static_cast<size_t>(i * C + j)];
        S.swap(T);
        std::swap(R, C);
      }
      ASSERT_EQ(R % 128, 0);
      ASSERT_EQ(C % 4, 0);
      std::vector<uint8_t> want(S.size());
      size_t o = 0;
      for (int64_t rt = 0; rt < R / 128; ++rt)
        for (int64_t ct = 0; ct < C / 4; ++ct)
          for (int64_t b = 0; b < 32; ++b)
            for (int64_t a = 0; a < 4; ++a)
              for (int64_t c = 0; c < 4; ++c) want[o++] = S[static_cast<size_t>((rt * 128 + a * 32 + b) * C + ct * 4 + c)];
      EXPECT_EQ(sw->from_compact(compact, 0), want);
      EXPECT_EQ(sw->to_compact(want), compact);
    }
  }
}

/// Every shared te_layout vector holds, after conversion to compact, exactly the outputs of its te/ original.
TEST(NativeLayoutTable, SharedVectorsToCompact) {
  const fs::path root = QTC_VECTORS_ROOT;
  ASSERT_TRUE(fs::is_directory(root / "te_layout")) << root;
  int n = 0;
  for (const auto& e : fs::directory_iterator(root / "te_layout")) {
    const std::string fname = e.path().filename().string();
    if (e.path().extension() != ".safetensors") continue;
    SCOPED_TRACE(fname);
    const std::string stem = fname.substr(0, fname.find(".te"));
    const io::File te = io::read_file(e.path());
    const io::File orig = io::read_file(root / "te" / (stem + ".safetensors"));
    const Layout o = ref::layout_from_metadata(te.metadata);
    EXPECT_EQ(o, fname.find(".te_swizzled.") != std::string::npos ? kSwz : kTE);
    const io::File compact = ref::convert_vector_layout(te, kCompact);
    for (const io::Tensor& t : orig.tensors) {
      const io::Tensor* c = compact.find(t.name);
      ASSERT_NE(c, nullptr) << t.name;
      EXPECT_EQ(c->shape, t.shape) << t.name;
      EXPECT_EQ(c->bytes, t.bytes) << t.name;
    }
    EXPECT_EQ(compact.tensors.size(), orig.tensors.size());
    // And back: the valid entries land where they were; the padding is zero.
    const io::File again = ref::convert_vector_layout(compact, o);
    EXPECT_EQ(again.at("x"), te.at("x"));
    for (const io::Tensor& t : again.tensors) {
      if (t.name == "x") continue;
      const io::Tensor& w = te.at(t.name);
      if (t.shape != w.shape) {  // swizzled MXFP8 columnwise: the shared files use the transposed 2-D view
        EXPECT_EQ(t.bytes.size(), w.bytes.size()) << t.name;
      }
      const Recipe r = Recipe::from_metadata(te.metadata);
      const auto L = OutputLayout::find(t.name, r, te.at("x").shape[0], te.at("x").shape[1], o);
      ASSERT_TRUE(L.has_value());
      EXPECT_EQ(L->to_compact(t.bytes), L->to_compact(w.bytes)) << t.name;
      EXPECT_FALSE(L->nonzero_padding(t.bytes).has_value()) << t.name;
    }
    ++n;
  }
  EXPECT_EQ(n, 184);
}

}  // namespace
