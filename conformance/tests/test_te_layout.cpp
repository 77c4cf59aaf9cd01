/// \file test_te_layout.cpp
/// \brief `qtc verify`'s logic on vectors in TransformerEngine's layout (VECTORS.md, Native layouts).
///
/// | test                                    | what                                                                  |
/// |-----------------------------------------|-----------------------------------------------------------------------|
/// | TeLayoutVector.Passes (one per file)     | every bundled te_layout vector (a copy of shared/vectors/te_layout)   |
/// |                                         | passes; with --strict-padding it fails exactly when its padding holds |
/// |                                         | non-zero bytes, naming a tensor and the coordinates                   |
/// | TeLayoutRoundTrip.* (one per recipe      | every recipe variant of `qtc conform` (all profiles) on a ragged      |
/// |   variant)                              | shape: quantized in compact, written in layout te (and te+swizzled    |
/// |                                         | for NVFP4/MXFP8) through the safetensors writer with garbage padding: |
/// |                                         | passes; a flipped valid value fails with count 1 and the first        |
/// |                                         | mismatch at its file coordinates (and compact ones); a flipped        |
/// |                                         | padding byte passes, and fails under --strict-padding naming it       |
/// | TeLayoutErrors.*                        | wrong padded shape, compact buffer under layout=te, bad layout value, |
/// |                                         | swizzled FP8 block: errors naming the shape / key                     |
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cases.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/verify.hpp"

namespace {

namespace fs = std::filesystem;
using qtc::conformance::FileResult;
using qtc::conformance::Verdict;
using qtc::conformance::VerifyOptions;
using qtc::Layout;
using qtc::ref::OutputLayout;

const fs::path kTeLayoutDir = fs::path(QTC_BUNDLED_VECTORS_DIR).parent_path() / "te_layout";

FileResult run(const qtc::io::File& f, bool strict = false) {
  auto cpu = qtc::make_cpu_backend();
  VerifyOptions o;
  o.strict_padding = strict;
  return qtc::conformance::verify_vector(f, "planted.safetensors", *cpu, o);
}

std::string all_text(const FileResult& r) {
  std::string s = qtc::conformance::result_line(r);
  for (const auto& d : detail_lines(r)) s += "\n    " + d;
  return s;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "message: " << text << "\nexpected to contain: " << part;
}

qtc::io::Tensor& tensor(qtc::io::File& f, const std::string& name) {
  for (auto& t : f.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

// ---------------------------------------------------------------------------------------------------
// The bundled te_layout vectors

std::vector<fs::path> te_layout_files() {
  std::vector<FileResult> problems;
  return qtc::conformance::collect_vector_files({kTeLayoutDir.string()}, problems);
}

class TeLayoutVector : public testing::TestWithParam<fs::path> {};

TEST_P(TeLayoutVector, Passes) {
  const qtc::io::File f = qtc::io::read_file(GetParam());
  const FileResult r = run(f);
  EXPECT_EQ(r.verdict, Verdict::kPass) << all_text(r);
  // --strict-padding: fails exactly when some padding entry is not zero.
  const qtc::Recipe rc = qtc::Recipe::from_metadata(f.metadata);
  const Layout lo = qtc::ref::layout_from_metadata(f.metadata);
  ASSERT_TRUE(lo == Layout::kPadded || lo == Layout::kSwizzled);
  const auto& x = f.at("x");
  bool dirty = false;
  for (const auto& t : f.tensors) {
    if (t.name == "x") continue;
    const auto L = OutputLayout::find(t.name, rc, x.shape[0], x.shape[1], lo);
    ASSERT_TRUE(L.has_value()) << t.name;
    dirty = dirty || L->nonzero_padding(t.bytes, t.shape).has_value();
  }
  const FileResult s = run(f, true);
  EXPECT_EQ(s.verdict, dirty ? Verdict::kFail : Verdict::kPass) << all_text(s);
  if (dirty) expect_contains(s.message, "padding not zero (--strict-padding)");
}

INSTANTIATE_TEST_SUITE_P(Shared, TeLayoutVector, testing::ValuesIn(te_layout_files()), [](const testing::TestParamInfo<fs::path>& i) {
  std::string n;
  for (char c : i.param.filename().string())
    if (std::isalnum(static_cast<unsigned char>(c))) n += c;
  return n;
});

TEST(TeLayoutVectors, AllPresent) {
  EXPECT_EQ(te_layout_files().size(), 184u) << "conformance/vectors/te_layout should hold the 184 shared TE-layout vectors";
}

// ---------------------------------------------------------------------------------------------------
// Generated round trips: every recipe variant, ragged shapes

struct Variant {
  qtc::Recipe recipe;
  qtc::DType dtype;
  int64_t M, K;
};

std::vector<Variant> variants() {
  // Shapes that are not multiples of 128 (rows), 4 (scale columns) or the 32 / 128 blocks, where the recipe allows.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{130, 257}, {65, 100}, {144, 208}, {48, 80}, {64, 128}};
  std::vector<Variant> out;
  for (const qtc::Recipe& r : qtc::conformance::all_recipe_variants()) {
    const qtc::DType d = r.nvfp4_rht() ? qtc::DType::kBF16 : qtc::DType::kF32;
    for (auto [m, k] : shapes) {
      try {
        r.validate_input(d, m, k);
      } catch (const qtc::Error&) {
        continue;
      }
      out.push_back({r, d, m, k});
      break;
    }
  }
  return out;
}

class TeLayoutRoundTrip : public testing::TestWithParam<Variant> {};

/// The first (in compact order) element of a tensor whose flip is certainly a different value: a scale or data
/// element in the middle of the tensor.
int64_t pick_element(const OutputLayout& L) { return L.compact_elements() / 2; }

TEST_P(TeLayoutRoundTrip, WriteVerifyFlip) {
  const Variant& v = GetParam();
  auto cpu = qtc::make_cpu_backend();
  qtc::conformance::Case c;
  c.recipe = v.recipe;
  c.dtype = v.dtype;
  c.rows = v.M;
  c.cols = v.K;
  c.id = "roundtrip";
  const qtc::HostMatrix x = qtc::conformance::make_input(qtc::conformance::InputClass::kHeavy, v.dtype, v.M, v.K, 7);
  const qtc::QuantizedTensor q = cpu->quantize(x.view(), v.recipe);
  const qtc::io::File compact = qtc::conformance::make_vector(c, x, q, *cpu, 7);
  ASSERT_EQ(run(compact).verdict, Verdict::kPass) << all_text(run(compact));
  if (v.recipe.kind() == qtc::RecipeKind::kFP8Tensor && v.recipe.columnwise) {
    EXPECT_NE(compact.find("columnwise_data"), nullptr) << "FP8 tensor vectors carry the transposed plane";
  }

  std::vector<Layout> layouts = {Layout::kPadded};
  if (v.recipe.kind() == qtc::RecipeKind::kNVFP4 || v.recipe.kind() == qtc::RecipeKind::kMXFP8 ||
      v.recipe.kind() == qtc::RecipeKind::kMXFP4) {
    layouts.push_back(Layout::kSwizzled);
    layouts.push_back(Layout::kSwizzled8x4);  // FlashInfer / TensorRT-LLM's small-M layout, verified as the others
  }
  const bool fp4 = v.recipe.kind() == qtc::RecipeKind::kNVFP4 || v.recipe.kind() == qtc::RecipeKind::kMXFP4;  // 2 per byte
  const fs::path dir = fs::path(testing::TempDir()) / "qtc_te_layout_roundtrip";
  fs::create_directories(dir);
  for (const Layout lo : layouts) {
    SCOPED_TRACE(std::string(qtc::layout_name(lo)));
    // Written through the safetensors writer with padding TE never writes, read back.
    const fs::path path = dir / (v.recipe.name() + "_" + std::string(qtc::layout_name(lo)) + ".safetensors");
    qtc::io::write_file(path, qtc::ref::convert_vector_layout(compact, lo, 0xAB));
    const qtc::io::File te = qtc::io::read_file(path);
    ASSERT_EQ(te.metadata.at("layout"), lo == Layout::kSwizzled8x4 ? "swizzled_8x4" : "te");
    ASSERT_EQ(qtc::ref::layout_from_metadata(te.metadata), lo);
    const FileResult pass = run(te);
    ASSERT_EQ(pass.verdict, Verdict::kPass) << all_text(pass);
    const bool has_scales = v.recipe.kind() != qtc::RecipeKind::kFP8Tensor;
    EXPECT_EQ(run(te, true).verdict, has_scales ? Verdict::kFail : Verdict::kPass) << "padding 0xAB under --strict-padding";

    // A flipped valid value: fail, count 1, first mismatch at the file's coordinates (and the compact ones).
    for (const char* name : {"rowwise_scale_inv", "columnwise_scale_inv", "rowwise_data", "columnwise_data"}) {
      if (te.find(name) == nullptr) continue;
      SCOPED_TRACE(name);
      const auto L = OutputLayout::find(name, v.recipe, v.M, v.K, lo);
      ASSERT_TRUE(L.has_value());
      qtc::io::File g = te;
      qtc::io::Tensor& t = tensor(g, name);
      const int64_t ci = pick_element(*L);
      const int64_t li = L->layout_index(ci);
      const size_t byte = static_cast<size_t>(li * L->elem_bytes()) + (L->elem_bytes() == 4 ? 2 : 0);  // F32: a mantissa bit
      t.bytes[byte] ^= 0x04;  // E2M1: bit 2 of the low nibble; FP8 / E4M3 / E8M0: bit 2
      const FileResult r = run(g);
      ASSERT_EQ(r.verdict, Verdict::kFail) << all_text(r);
      const auto fc = OutputLayout::coords(li, t.shape);
      const int64_t ccols = L->compact_shape()[1] * (std::string(name).ends_with("_data") && fp4 ? 2 : 1);
      const int64_t elem = std::string(name).ends_with("_data") && fp4 ? 2 * ci : ci;
      std::string where = "[" + std::to_string(elem / ccols) + ", " + std::to_string(elem % ccols) + "]";
      if (!L->is_identity()) where = OutputLayout::coords_text(fc) + " (compact " + where + ")";
      expect_contains(r.message, std::string(name) + ": 1 of ");
      expect_contains(r.message, "first at " + where + ": expected ");
    }

    // Zero padding passes --strict-padding; one padding byte set passes by default, fails strictly naming it.
    const qtc::io::File clean = qtc::ref::convert_vector_layout(compact, lo, 0x00);
    EXPECT_EQ(run(clean, true).verdict, Verdict::kPass) << all_text(run(clean, true));
    for (const char* name : {"rowwise_scale_inv", "columnwise_scale_inv"}) {
      if (clean.find(name) == nullptr) continue;
      SCOPED_TRACE(name);
      const auto L = OutputLayout::find(name, v.recipe, v.M, v.K, lo);
      const auto mask = L->padding_mask();
      const auto it = std::find(mask.rbegin(), mask.rend(), true);  // the last padding element
      if (it == mask.rend()) continue;                               // no padding at this shape
      const int64_t pi = static_cast<int64_t>(mask.rend() - it) - 1;
      qtc::io::File g = clean;
      qtc::io::Tensor& t = tensor(g, name);
      t.bytes[static_cast<size_t>(pi * L->elem_bytes())] = 0x01;
      const FileResult p = run(g);
      EXPECT_EQ(p.verdict, Verdict::kPass) << all_text(p);
      const FileResult s = run(g, true);
      ASSERT_EQ(s.verdict, Verdict::kFail) << all_text(s);
      expect_contains(s.message, std::string(name) + ": padding not zero (--strict-padding): 1 of ");
      expect_contains(s.message, "first at " + OutputLayout::coords_text(OutputLayout::coords(pi, t.shape)) + ": ");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, TeLayoutRoundTrip, testing::ValuesIn(variants()), [](const testing::TestParamInfo<Variant>& i) {
  std::string n = i.param.recipe.name() + "_" + std::string(qtc::profile_name(i.param.recipe.profile)) + "_" +
                  std::to_string(i.param.M) + "x" + std::to_string(i.param.K);
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

// ---------------------------------------------------------------------------------------------------
// Errors

qtc::io::File shared(const std::string& name) { return qtc::io::read_file(kTeLayoutDir / name); }

TEST(TeLayoutErrors, WrongPaddedShapeNamesExpectedAndCompact) {
  auto f = shared("nvfp4_1x16_normal_16x48.te.safetensors");
  auto& t = tensor(f, "rowwise_scale_inv");
  t.shape = {16, 3};
  t.bytes.resize(48);
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kError) << all_text(r);
  expect_contains(r.message, "tensor 'rowwise_scale_inv' has shape [16, 3], expected [128, 4]");
  expect_contains(r.message, "layout=te expects TE's padded shape");
  expect_contains(r.message, "compact is [16, 3]");

  auto g = shared("fp8block_1x128_e4m3_normal_16x48.te.safetensors");
  auto& s = tensor(g, "rowwise_scale_inv");
  s.shape = {16, 1};  // the compact orientation of a 1x128 scale buffer: TE keeps it transposed, [1, 16]
  const FileResult e = run(g);
  ASSERT_EQ(e.verdict, Verdict::kError);
  expect_contains(e.message, "has shape [16, 1], expected [1, 16]");
}

TEST(TeLayoutErrors, TeBufferWithoutLayoutKeySaysWhatToDeclare) {
  auto f = shared("nvfp4_1x16_normal_16x48.te.safetensors");
  f.metadata.erase("layout");
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kError);
  expect_contains(r.message, "tensor 'columnwise_scale_inv' has shape [128, 4], expected [48, 1]");
  expect_contains(r.message, "this is TE's padded shape: declare metadata layout=te");
}

TEST(TeLayoutErrors, BadLayoutMetadataNamesTheKey) {
  auto f = shared("nvfp4_1x16_normal_16x48.te.safetensors");
  f.metadata["layout"] = "transformer_engine";
  expect_contains(run(f).message, "metadata key 'layout': unknown value 'transformer_engine'");
  EXPECT_EQ(run(f).verdict, Verdict::kError);
  f.metadata["layout"] = "te";
  f.metadata["swizzled"] = "2";
  expect_contains(run(f).message, "metadata key 'swizzled'");
  auto g = shared("fp8block_1x128_e4m3_normal_16x48.te.safetensors");
  g.metadata["swizzled"] = "1";
  const FileResult r = run(g);
  EXPECT_EQ(r.verdict, Verdict::kError);
  expect_contains(r.message, "rule 'layout-swizzled_128x4'");
  g.metadata.erase("swizzled");
  g.metadata["layout"] = "swizzled_8x4";
  const FileResult r8 = run(g);
  EXPECT_EQ(r8.verdict, Verdict::kError);
  expect_contains(r8.message, "rule 'layout-swizzled_8x4'");
}

TEST(TeLayoutErrors, SwizzledMxfp8ColumnwiseAcceptsBothTwoDViews) {
  auto f = shared("mxfp8rceil_e4m3_normal_f32_65x80.te_swizzled.safetensors");
  ASSERT_EQ(tensor(f, "columnwise_scale_inv").shape, (std::vector<int64_t>{128, 4}));
  EXPECT_EQ(run(f).verdict, Verdict::kPass);
  tensor(f, "columnwise_scale_inv").shape = {4, 128};  // TE's allocation shape: the same tile bytes
  EXPECT_EQ(run(f).verdict, Verdict::kPass) << all_text(run(f));
  tensor(f, "columnwise_scale_inv").shape = {2, 256};
  EXPECT_EQ(run(f).verdict, Verdict::kError);
}

}  // namespace
