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
/// | FbgemmMx4.*                             | layout=fbgemm_mx4 (FBGEMM's MX4 rows, codes and exponent byte in one  |
/// |                                         | tensor): the bundled vectors pass (strict padding); swapped nibbles,  |
/// |                                         | the exponent byte before the codes, a separate scale tensor, another  |
/// |                                         | kind, a wrong shape fail or are refused naming the rule; the byte map |
/// |                                         | written out by hand; the scale-buffer paths refuse the layout          |
#include <gtest/gtest.h>

#include <algorithm>
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
  if (v.recipe.kind() == qtc::RecipeKind::kMXFP4) layouts.push_back(Layout::kFbgemmMx4);  // FBGEMM's MX4 rows
  const bool fp4 = v.recipe.kind() == qtc::RecipeKind::kNVFP4 || v.recipe.kind() == qtc::RecipeKind::kMXFP4;  // 2 per byte
  const fs::path dir = fs::path(testing::TempDir()) / "qtc_te_layout_roundtrip";
  fs::create_directories(dir);
  for (const Layout lo : layouts) {
    SCOPED_TRACE(std::string(qtc::layout_name(lo)));
    // Written through the safetensors writer with padding TE never writes, read back.
    const fs::path path = dir / (v.recipe.name() + "_" + std::string(qtc::layout_name(lo)) + ".safetensors");
    qtc::io::write_file(path, qtc::ref::convert_vector_layout(compact, lo, 0xAB));
    const qtc::io::File te = qtc::io::read_file(path);
    ASSERT_EQ(te.metadata.at("layout"), lo == Layout::kSwizzled ? "te" : std::string(qtc::layout_name(lo)));
    ASSERT_EQ(qtc::ref::layout_from_metadata(te.metadata), lo);
    const FileResult pass = run(te);
    ASSERT_EQ(pass.verdict, Verdict::kPass) << all_text(pass);
    bool padded = false;  // some output buffer of this layout holds padding (written 0xAB above)
    for (const auto& t : te.tensors) {
      if (t.name == "x") continue;
      const auto L = OutputLayout::find(t.name, v.recipe, v.M, v.K, lo);
      ASSERT_TRUE(L.has_value()) << t.name;
      const auto mask = L->padding_mask();
      padded = padded || std::find(mask.begin(), mask.end(), true) != mask.end();
    }
    EXPECT_TRUE(padded || v.recipe.kind() == qtc::RecipeKind::kFP8Tensor) << "the round-trip shapes are ragged";
    EXPECT_EQ(run(te, true).verdict, padded ? Verdict::kFail : Verdict::kPass) << "padding 0xAB under --strict-padding";

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

// ---------------------------------------------------------------------------------------------------
// FBGEMM's MX4 rows (layout=fbgemm_mx4)

const fs::path kFbgemmMx4Dir = fs::path(QTC_BUNDLED_VECTORS_DIR).parent_path() / "fbgemm_mx4";

qtc::io::File fbgemm_vector(const std::string& name) { return qtc::io::read_file(kFbgemmMx4Dir / name); }

TEST(FbgemmMx4, BundledVectorsPassStrictly) {
  std::vector<FileResult> problems;
  const auto files = qtc::conformance::collect_vector_files({kFbgemmMx4Dir.string()}, problems);
  ASSERT_EQ(files.size(), 16u) << "conformance/vectors/fbgemm_mx4 (peers/fbgemm_mx4_dump.py) holds 16 vectors";
  for (const fs::path& p : files) {
    const qtc::io::File f = qtc::io::read_file(p);
    ASSERT_EQ(f.metadata.at("layout"), "fbgemm_mx4") << p;
    EXPECT_EQ(f.find("rowwise_scale_inv"), nullptr) << p;
    const FileResult r = run(f, true);
    EXPECT_EQ(r.verdict, Verdict::kPass) << p << ": " << all_text(r);
  }
}

/// Each group of 17 bytes of every row of `t` (a [rows, G*17] packed tensor) rewritten by `f(group)`.
template <typename F>
void each_group(qtc::io::Tensor& t, F f) {
  ASSERT_EQ(t.shape.size(), 2u);
  ASSERT_EQ(t.shape[1] % 17, 0);
  for (size_t g = 0; g + 17 <= t.bytes.size(); g += 17) f(t.bytes.data() + g);
}

// FBGEMM's CUDA kernel order (element 2j in the HIGH nibble) is not this layout: the swapped bytes fail on the codes.
TEST(FbgemmMx4, SwappedNibblesFail) {
  auto f = fbgemm_vector("mxfp4_fbgemm_mx4_ceil_f32_normal_37x45.safetensors");
  int differing = 0;
  each_group(tensor(f, "rowwise_data"), [&](uint8_t* g) {
    for (int j = 0; j < 16; ++j) {
      differing += (g[j] & 0xF) != (g[j] >> 4);
      g[j] = static_cast<uint8_t>((g[j] << 4) | (g[j] >> 4));
    }
  });
  ASSERT_GT(differing, 0);
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail) << all_text(r);
  expect_contains(r.message, "rowwise_data: ");
  EXPECT_EQ(r.message.find("rowwise_scale_inv"), std::string::npos) << r.message;
}

// The exponent byte first, then the 16 code bytes: every group's scale and codes are read from the wrong bytes.
TEST(FbgemmMx4, ExponentByteBeforeTheCodesFails) {
  auto f = fbgemm_vector("mxfp4_fbgemm_mx4_ceil_f32_normal_64x96.safetensors");
  each_group(tensor(f, "columnwise_data"), [](uint8_t* g) { std::rotate(g, g + 16, g + 17); });
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail) << all_text(r);
  expect_contains(r.message, "columnwise_data: ");
  expect_contains(r.message, "also differ: columnwise_scale_inv");
  // One exponent byte changed: exactly one scale differs, named at its byte of the packed tensor.
  auto g = fbgemm_vector("mxfp4_fbgemm_mx4_ceil_f32_normal_64x96.safetensors");
  tensor(g, "rowwise_data").bytes[3 * 51 + 17 + 16] ^= 0x01;  // row 3, group 1's exponent byte
  const FileResult e = run(g);
  ASSERT_EQ(e.verdict, Verdict::kFail) << all_text(e);
  expect_contains(e.message, "rowwise_scale_inv: 1 of 192 elements differ; first at [3, 33] (compact [3, 1])");
}

TEST(FbgemmMx4, RefusalsNameTheRule) {
  // A separate scale tensor beside the packed rows.
  auto f = fbgemm_vector("mxfp4_fbgemm_mx4_ceil_f32_ties_32x64.safetensors");
  f.put(qtc::io::Tensor{"rowwise_scale_inv", "U8", {32, 2}, std::vector<uint8_t>(64, 127)});
  FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kError);
  expect_contains(r.message, "tensor 'rowwise_scale_inv' is not a tensor of layout=fbgemm_mx4 (rule 'layout-fbgemm_mx4')");
  // Another kind.
  auto n = shared("nvfp4_1x16_normal_16x48.te.safetensors");
  n.metadata["layout"] = "fbgemm_mx4";
  r = run(n);
  ASSERT_EQ(r.verdict, Verdict::kError);
  expect_contains(r.message, "rule 'layout-fbgemm_mx4'");
  expect_contains(r.message, "holds MXFP4 planes only");
  // A compact data plane under the packed layout.
  auto c = fbgemm_vector("mxfp4_fbgemm_mx4_ceil_f32_tiny_5x70.safetensors");
  ASSERT_EQ(tensor(c, "rowwise_data").shape, (std::vector<int64_t>{5, 51}));
  tensor(c, "rowwise_data").shape = {5, 35};
  tensor(c, "rowwise_data").bytes.resize(175);
  r = run(c);
  ASSERT_EQ(r.verdict, Verdict::kError);
  expect_contains(r.message, "has shape [5, 35], expected [5, 51] (layout=fbgemm_mx4: FBGEMM's MX4 rows");
  // The scale-buffer paths (a quantized tensor's planes, the kernels) have no such form.
  const qtc::Recipe mx = qtc::Recipe::from_metadata({{"recipe", "mxfp4"}, {"profile", "fbgemm"}, {"scale_rule", "ceil"}});
  const qtc::PlaneSpec ps = qtc::describe_plane(mx, qtc::PlaneKind::kRowwise, 8, 64);
  EXPECT_FALSE(ps.has_layout(Layout::kFbgemmMx4));
  EXPECT_TRUE(ps.has_file_layout(Layout::kFbgemmMx4));
  try {
    (void)ps.geometry(Layout::kFbgemmMx4);
    ADD_FAILURE() << "a scale buffer in layout fbgemm_mx4 was made";
  } catch (const qtc::Error& e) {
    expect_contains(e.what(), "rule 'layout-fbgemm_mx4'");
    expect_contains(e.what(), "quantize with compact scales and convert");
  }
}

// The byte map written out from FBGEMM's code: per data row, group g is bytes [17g, 17g + 16) of codes (element 2j of
// the group in the low nibble of byte j), then its exponent byte at 17g + 16; a ragged row's last group is padded.
TEST(FbgemmMx4, PacksAsFbgemmByHand) {
  const qtc::Recipe mx = qtc::Recipe::from_metadata({{"recipe", "mxfp4"}});
  const int64_t M = 2, K = 45;  // 23 data bytes, 2 groups: row width 34
  std::vector<uint8_t> data(M * 23), scales{0x10, 0x11, 0x20, 0x21};
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(0x21 + i);
  data[22] &= 0x0F;  // K odd: the last high nibble is 0
  data[45] &= 0x0F;
  const std::vector<qtc::io::Tensor> compact = {{"rowwise_data", "U8", {M, 23}, data}, {"rowwise_scale_inv", "U8", {M, 2}, scales}};
  const auto packed = qtc::ref::outputs_to_layout(compact, mx, M, K, Layout::kFbgemmMx4, 0xEE);
  ASSERT_EQ(packed.size(), 1u);
  ASSERT_EQ(packed[0].name, "rowwise_data");
  ASSERT_EQ(packed[0].shape, (std::vector<int64_t>{2, 34}));
  const auto& b = packed[0].bytes;
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t j = 0; j < 16; ++j) EXPECT_EQ(b[r * 34 + j], data[r * 23 + j]);
    EXPECT_EQ(b[r * 34 + 16], scales[r * 2]);
    for (int64_t j = 0; j < 7; ++j) EXPECT_EQ(b[r * 34 + 17 + j], data[r * 23 + 16 + j]);
    for (int64_t j = 7; j < 16; ++j) EXPECT_EQ(b[r * 34 + 17 + j], 0xEE) << "padding";
    EXPECT_EQ(b[r * 34 + 33], scales[r * 2 + 1]);
  }
  const auto back = qtc::ref::outputs_to_compact(packed, mx, M, K, Layout::kFbgemmMx4);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].bytes, data);
  EXPECT_EQ(back[1].name, "rowwise_scale_inv");
  EXPECT_EQ(back[1].bytes, scales);
  // Its padding: the 9 unused code bytes of each row's last group, not the exponent bytes.
  const auto L = OutputLayout::find("rowwise_data", mx, M, K, Layout::kFbgemmMx4);
  ASSERT_TRUE(L.has_value());
  const auto pad = L->nonzero_padding(b);
  ASSERT_TRUE(pad.has_value());
  EXPECT_EQ(pad->total, 18);
  EXPECT_EQ(pad->nonzero, 18);
  EXPECT_EQ(pad->first, (std::vector<int64_t>{0, 24}));
  // Packing needs both tensors of the plane.
  EXPECT_THROW((void)qtc::ref::outputs_to_layout({compact[0]}, mx, M, K, Layout::kFbgemmMx4), qtc::Error);
  EXPECT_THROW((void)qtc::ref::outputs_to_layout({compact[1]}, mx, M, K, Layout::kFbgemmMx4), qtc::Error);
}

}  // namespace
