/// \file test_testing.cpp
/// \brief qtc::testing: conforms() passes the reference's own outputs in every layout (TE padding holding junk)
///        and every bundled TE-layout vector, fails on a flipped byte with the very line `qtc verify` prints for the
///        same tensors in a file, names the expected shape for a wrong buffer, wants zero padding when strict;
///        within_error_bound() passes the reference's dequantization and fails with the element, its bound and
///        its block scale when a code or a scale is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "qtc/backend.hpp"
#include "qtc/codec.hpp"
#include "qtc/layouts.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/quantize.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/testing.hpp"
#include "qtc/testing_gemm.hpp"
#include "qtc/verify.hpp"

namespace {

using qtc::DType;
using qtc::PlaneKind;
using qtc::testing::Layout;
using qtc::testing::Outputs;

/// A ragged input: M rows, K columns of normal values with a few large ones and an all-zero row.
qtc::HostMatrix make_x(int64_t M, int64_t K, uint32_t seed) {
  qtc::HostMatrix x(DType::kF32, M, K);
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) x.as<float>()[i * K + j] = i == 3 ? 0.0f : n(g) * ((j % 29 == 0) ? 40.0f : 1.0f);
  return x;
}

/// The reference's outputs in `layout`, every padding entry filled with 0xA5 bytes (TE never writes padding).
struct Produced {
  std::vector<uint8_t> rd, rs, cd, cs;
  std::vector<bool> rs_pad;  ///< which bytes of rs are padding
  std::vector<float> ar, ac, si, am;
};

std::vector<uint8_t> scales_in(const qtc::ScaleMatrix& c, const qtc::Recipe& r, PlaneKind p, int64_t M, int64_t K, Layout l,
                               bool swz, std::vector<bool>* pad = nullptr) {
  if (l == Layout::kCompact) {
    if (pad) pad->assign(c.bytes.size(), false);
    return c.bytes;
  }
  qtc::ScaleMatrix pd = qtc::ref::to_padded(c, r, p, M, K);
  qtc::ScaleMatrix junk = pd;
  std::fill(junk.bytes.begin(), junk.bytes.end(), uint8_t{0xA5});
  if (swz) {
    const qtc::ScaleMatrix s = qtc::ref::swizzle(pd, r, p, M, K);
    const qtc::ScaleMatrix zero = qtc::ref::swizzle(qtc::ref::to_padded(c, r, p, M, K), r, p, M, K);
    // Swizzled padding: wherever the valid entries leave a slot (found by swizzling an all-0x01 matrix), junk.
    qtc::ScaleMatrix ones = pd;
    std::fill(ones.bytes.begin(), ones.bytes.end(), uint8_t{0x01});
    const qtc::ScaleMatrix mark = qtc::ref::swizzle(ones, r, p, M, K);
    std::vector<uint8_t> out = s.bytes;
    if (pad) pad->assign(out.size(), false);
    for (size_t i = 0; i < out.size(); ++i)
      if (mark.bytes[i] == 0) {
        out[i] = 0xA5;
        if (pad) (*pad)[i] = true;
      }
    (void)zero;
    return out;
  }
  // Padded: valid entries from pd, the rest junk. The valid region is where to_padded of an all-ones compact
  // matrix is non-zero.
  qtc::ScaleMatrix ones = c;
  std::fill(ones.bytes.begin(), ones.bytes.end(), uint8_t{0x01});
  const qtc::ScaleMatrix mark = qtc::ref::to_padded(ones, r, p, M, K);
  std::vector<uint8_t> out = pd.bytes;
  if (pad) pad->assign(out.size(), false);
  for (size_t i = 0; i < out.size(); ++i)
    if (mark.bytes[i] == 0) {
      out[i] = 0xA5;
      if (pad) (*pad)[i] = true;
    }
  return out;
}

Produced produce(const qtc::HostMatrix& x, const qtc::Recipe& r, Layout l, bool swz) {
  const qtc::QuantizedTensor q = qtc::ref::quantize(x.view(), r);
  Produced p;
  if (q.rowwise) {
    p.rd = q.rowwise->data;
    if (r.kind() != qtc::RecipeKind::kFP8Tensor) p.rs = scales_in(q.rowwise->scale, r, PlaneKind::kRowwise, x.rows, x.cols, l, swz, &p.rs_pad);
    p.ar = q.rowwise->amax;
  }
  if (q.columnwise) {
    p.cd = q.columnwise->data;
    if (r.kind() != qtc::RecipeKind::kFP8Tensor)
      p.cs = scales_in(q.columnwise->scale, r, PlaneKind::kColumnwise, x.rows, x.cols, l, swz);
    p.ac = q.columnwise->amax;
  }
  if (r.kind() == qtc::RecipeKind::kFP8Tensor) {
    p.si = {q.scale_inv};
    p.am = {q.rowwise ? q.rowwise->amax.at(0) : q.columnwise->amax.at(0)};
  }
  return p;
}

Outputs outputs_of(const Produced& p, const qtc::Recipe& r, Layout l, bool swz) {
  Outputs o;
  o.layout = swz ? Layout::kSwizzled : l;
  o.rowwise_data = p.rd;
  if (!p.rs.empty()) o.rowwise_scale_inv = p.rs;
  if (!p.cd.empty()) o.columnwise_data = p.cd;
  if (!p.cs.empty()) o.columnwise_scale_inv = p.cs;
  if (r.kind() == qtc::RecipeKind::kNVFP4) {
    o.amax_rowwise = p.ar;
    o.amax_columnwise = p.ac;
  }
  if (r.kind() == qtc::RecipeKind::kFP8Tensor) {
    o.scale_inv = p.si;
    o.amax = p.am;
  }
  return o;
}

struct Case {
  const char* name;
  std::map<std::string, std::string> md;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> k = {
      {"nvfp4_1x16", {{"recipe", "nvfp4"}}},
      {"nvfp4_16x16_rowscaled", {{"recipe", "nvfp4"}, {"tile", "16x16"}}},
      {"nvfp4_row_scaled", {{"recipe", "nvfp4"}, {"row_scaled", "1"}}},
      {"mxfp8", {{"recipe", "mxfp8"}}},
      {"mxfp8_e5m2", {{"recipe", "mxfp8"}, {"fp8_dtype", "e5m2"}}},
      {"fp8block_1x128", {{"recipe", "fp8_block"}}},
      {"fp8block_128x128", {{"recipe", "fp8_block"}, {"tile", "128x128"}}},
      {"fp8tensor", {{"recipe", "fp8_tensor"}}},
  };
  return k;
}

bool swizzles(const qtc::Recipe& r) { return r.kind() == qtc::RecipeKind::kNVFP4 || r.kind() == qtc::RecipeKind::kMXFP8; }

constexpr int64_t kM = 144, kK = 176;  // not multiples of 128, nor of 32 (K; M: 144 % 32 = 16)

TEST(Conforms, ReferenceOutputsPassInEveryLayout) {
  const qtc::HostMatrix x = make_x(kM, kK, 7);
  for (const Case& c : cases()) {
    const qtc::Recipe r = qtc::testing::recipe(c.md);
    for (Layout l : {Layout::kCompact, Layout::kPadded})
      for (bool swz : {false, true}) {
        if (swz && (l != Layout::kPadded || !swizzles(r))) continue;
        const Produced p = produce(x, r, l, swz);
        EXPECT_TRUE(qtc::testing::conforms(x.view(), r, outputs_of(p, r, l, swz))) << c.name << " layout " << int(l) << " swizzled " << swz;
      }
    if (swizzles(r)) {  // FlashInfer's 8x4 layout: the scales rewritten by the reference's layout conversion
      const qtc::QuantizedTensor q = qtc::ref::quantize(x.view(), r);
      Outputs o;
      o.layout = Layout::kSwizzled8x4;
      std::vector<uint8_t> rs, cs;
      if (q.rowwise) {
        o.rowwise_data = q.rowwise->data;
        rs = qtc::ref::convert_layout(q.rowwise->scale, Layout::kSwizzled8x4, r, PlaneKind::kRowwise, kM, kK).bytes;
        o.rowwise_scale_inv = rs;
      }
      if (q.columnwise) {
        o.columnwise_data = q.columnwise->data;
        cs = qtc::ref::convert_layout(q.columnwise->scale, Layout::kSwizzled8x4, r, PlaneKind::kColumnwise, kM, kK).bytes;
        o.columnwise_scale_inv = cs;
      }
      EXPECT_TRUE(qtc::testing::conforms(x.view(), r, o)) << c.name << " layout swizzled_8x4";
      if (!rs.empty()) {
        rs[1] ^= 0x01;  // entry (0, 1) of the 8x4 tile
        const auto res = qtc::testing::conforms(x.view(), r, o);
        EXPECT_FALSE(res) << c.name;
        EXPECT_NE(std::string(res.message()).find("rowwise_scale_inv: 1 of "), std::string::npos) << res.message();
      }
    }
  }
}

// FBGEMM's MX4 rows (Layout::kFbgemmMx4): the packed rows in rowwise_data / columnwise_data, no scale buffers; a
// flipped exponent byte fails naming the scale tensor at its byte of the packed buffer; a scale buffer given beside
// them is refused naming the rule.
TEST(Conforms, FbgemmMx4RowsCarryTheScales) {
  const int64_t M = 37, K = 45;  // ragged: K = 45 is two groups per row, M = 37 two per x^T row
  const qtc::HostMatrix x = make_x(M, K, 11);
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "mxfp4"}, {"profile", "fbgemm"}, {"scale_rule", "ceil"}});
  const qtc::QuantizedTensor q = qtc::ref::quantize(x.view(), r);
  ASSERT_TRUE(q.rowwise && q.columnwise);
  const std::vector<qtc::io::Tensor> compact = {
      {"rowwise_data", "U8", {M, q.rowwise->data_cols}, q.rowwise->data},
      {"rowwise_scale_inv", "U8", {q.rowwise->scale.rows, q.rowwise->scale.cols}, q.rowwise->scale.bytes},
      {"columnwise_data", "U8", {K, q.columnwise->data_cols}, q.columnwise->data},
      {"columnwise_scale_inv", "U8", {q.columnwise->scale.rows, q.columnwise->scale.cols}, q.columnwise->scale.bytes}};
  std::vector<qtc::io::Tensor> packed = qtc::ref::outputs_to_layout(compact, r, M, K, Layout::kFbgemmMx4);
  ASSERT_EQ(packed.size(), 2u);
  ASSERT_EQ(packed[0].shape, (std::vector<int64_t>{M, 34}));
  ASSERT_EQ(packed[1].shape, (std::vector<int64_t>{K, 34}));
  Outputs o;
  o.layout = Layout::kFbgemmMx4;
  o.strict_padding = true;
  o.rowwise_data = packed[0].bytes;
  o.columnwise_data = packed[1].bytes;
  EXPECT_TRUE(qtc::testing::conforms(x.view(), r, o));
  packed[0].bytes[2 * 34 + 33] ^= 0x01;  // row 2, group 1's exponent byte
  const auto res = qtc::testing::conforms(x.view(), r, o);
  EXPECT_FALSE(res);
  EXPECT_NE(std::string(res.message()).find("rowwise_scale_inv: 1 of 74 elements differ; first at [2, 33] (compact [2, 1])"),
            std::string::npos) << res.message();
  packed[0].bytes[2 * 34 + 33] ^= 0x01;
  o.rowwise_scale_inv = compact[1].bytes;
  const auto refused = qtc::testing::conforms(x.view(), r, o);
  EXPECT_FALSE(refused);
  EXPECT_NE(std::string(refused.message()).find("rule 'layout-fbgemm_mx4'"), std::string::npos) << refused.message();
}

/// The assertion's message is the line `qtc verify` prints for a file holding the same tensors.
std::string verify_line_for(const qtc::HostMatrix& x, const qtc::Recipe& r, const Produced& p, const std::filesystem::path& path) {
  qtc::io::File f;
  f.metadata = r.to_metadata();
  f.put(qtc::io::from_matrix("x", x));
  f.put(qtc::io::Tensor{"rowwise_data", "U8", {x.rows, static_cast<int64_t>(p.rd.size()) / x.rows}, p.rd});
  qtc::io::write_file(path, f);
  auto cpu = qtc::make_cpu_backend();
  return qtc::conformance::result_line(qtc::conformance::verify_file(path, *cpu));
}

TEST(Conforms, FlippedDataByteFailsWithQtcVerifysLine) {
  const qtc::HostMatrix x = make_x(kM, kK, 8);
  const auto dir = std::filesystem::temp_directory_path() / ("qtc_testing_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const Case& c : cases()) {
    const qtc::Recipe r = qtc::testing::recipe(c.md);
    Produced p = produce(x, r, Layout::kCompact, false);
    p.rd[5 * p.rd.size() / kM + 3] ^= 0x10;  // row 5
    Outputs o;
    o.rowwise_data = p.rd;
    const std::string file = (dir / (std::string(c.name) + ".safetensors")).string();
    const ::testing::AssertionResult res = qtc::testing::conforms(x.view(), r, o, file);
    ASSERT_FALSE(res) << c.name;
    const std::string want = verify_line_for(x, r, p, file);
    EXPECT_EQ(std::string(res.message()), want) << c.name;
    EXPECT_NE(want.find("rowwise_data: 1 of "), std::string::npos) << want;
    EXPECT_NE(want.find("first at [5, "), std::string::npos) << want;
  }
  std::filesystem::remove_all(dir);
}

TEST(Conforms, FlippedScaleFailsAndPaddingIsNotCompared) {
  const qtc::HostMatrix x = make_x(kM, kK, 9);
  for (const Case& c : cases()) {
    const qtc::Recipe r = qtc::testing::recipe(c.md);
    if (r.kind() == qtc::RecipeKind::kFP8Tensor) continue;
    for (bool swz : {false, true}) {
      if (swz && !swizzles(r)) continue;
      Produced p = produce(x, r, Layout::kPadded, swz);
      // Padding bytes (0xA5 junk) may change freely.
      for (size_t i = 0; i < p.rs.size(); ++i)
        if (p.rs_pad[i]) p.rs[i] = 0x5A;
      EXPECT_TRUE(qtc::testing::conforms(x.view(), r, outputs_of(p, r, Layout::kPadded, swz))) << c.name;
      // The first valid scale entry of row 0 (padded and swizzled layouts both keep entry (0, 0) at offset 0).
      p.rs[0] ^= 0x01;
      const auto res = qtc::testing::conforms(x.view(), r, outputs_of(p, r, Layout::kPadded, swz), "te_dump.safetensors");
      ASSERT_FALSE(res) << c.name;
      // The same buffers in a layout=te file: qtc verify prints the same line.
      {
        qtc::io::File f;
        f.metadata = r.to_metadata();
        f.metadata["layout"] = "te";
        if (swz) f.metadata["swizzled"] = "1";
        f.put(qtc::io::from_matrix("x", x));
        const auto lo = qtc::ref::OutputLayout::find("rowwise_scale_inv", r, kM, kK,
                                                     swz ? Layout::kSwizzled : Layout::kPadded);
        f.put(qtc::io::Tensor{"rowwise_scale_inv", lo->dtype(), lo->shape(), p.rs});
        const auto path = std::filesystem::temp_directory_path() / ("qtc_te_dump_" + std::to_string(::getpid()) + ".safetensors");
        qtc::io::write_file(path, f);
        auto cpu = qtc::make_cpu_backend();
        const std::string line = qtc::conformance::result_line(qtc::conformance::verify_file(path, *cpu));
        std::filesystem::remove(path);
        Outputs only_scale;
        only_scale.layout = swz ? Layout::kSwizzled : Layout::kPadded;
        only_scale.rowwise_scale_inv = p.rs;
        const auto one = qtc::testing::conforms(x.view(), r, only_scale, path.string());
        EXPECT_EQ(std::string(one.message()), line) << c.name;
      }
      EXPECT_NE(std::string(res.message()).find("rowwise_scale_inv: 1 of "), std::string::npos) << res.message();
      EXPECT_NE(std::string(res.message()).find("first at [0, 0]"), std::string::npos) << res.message();
    }
  }
}

TEST(Conforms, WrongBufferSizeNamesTheExpectedShape) {
  const qtc::HostMatrix x = make_x(kM, kK, 10);
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "nvfp4"}});
  Produced p = produce(x, r, Layout::kCompact, false);  // compact scales given as TE buffers
  const auto res = qtc::testing::conforms(x.view(), r, outputs_of(p, r, Layout::kPadded, false));
  ASSERT_FALSE(res);
  EXPECT_NE(std::string(res.message()).find("buffer 'rowwise_scale_inv' holds 1584 bytes, expected 3072 (U8 [256, 12]"),
            std::string::npos)
      << res.message();
  Outputs none;
  EXPECT_NE(std::string(qtc::testing::conforms(x.view(), r, none).message()).find("no buffer"), std::string::npos);
  Outputs strict_compact;
  strict_compact.strict_padding = true;
  strict_compact.rowwise_data = p.rd;
  EXPECT_NE(std::string(qtc::testing::conforms(x.view(), r, strict_compact).message()).find("needs a padded layout"), std::string::npos);
}

// gemm_within_error_bound: the exact product and the FP64 Eigen GEMM rounded once pass under every accumulation
// model; an output off by a relative 2^-10 in one element, a doubled output and a wrong shape fail, naming what.
TEST(GemmErrorBound, PassesTheReferenceGemmsAndFailsAPerturbedOutput) {
  const qtc::HostMatrix w = make_x(32, 96, 21), xin = make_x(48, 96, 22);  // A = W [N, K], B = X [M, K] (fprop)
  for (const char* kind : {"nvfp4", "mxfp8", "fp8_tensor"}) {
    const qtc::Recipe r = qtc::testing::recipe({{"recipe", kind}});
    const qtc::QuantizedTensor a = qtc::ref::quantize(w.view(), r), b = qtc::ref::quantize(xin.view(), r);
    for (DType out : {DType::kF32, DType::kBF16}) {
      const qtc::ref::GemmArgs args = qtc::ref::GemmArgs::of(qtc::ref::GemmKind::kFprop, out);
      const qtc::HostMatrix exact = qtc::ref::gemm_exact(a, b, args), eigen = qtc::ref::gemm_eigen(a, b, args);
      ASSERT_EQ(exact.rows, 48);
      ASSERT_EQ(exact.cols, 32);
      for (auto acc : {qtc::testing::GemmAccumulation::fp64(), qtc::testing::GemmAccumulation::fp32(),
                       qtc::testing::GemmAccumulation::fp8_hopper()}) {
        EXPECT_TRUE(qtc::testing::gemm_within_error_bound(a, b, args, exact.view(), acc)) << kind;
        EXPECT_TRUE(qtc::testing::gemm_within_error_bound(a, b, args, eigen.view(), acc)) << kind;
      }
      if (out != DType::kF32) continue;
      qtc::HostMatrix bad = exact;
      bad.as<float>()[5 * 32 + 7] *= 1.0f + 0x1p-10f;
      const auto res = qtc::testing::gemm_within_error_bound(a, b, args, bad.view());
      ASSERT_FALSE(res) << kind;
      EXPECT_NE(std::string(res.message()).find("1 of 1536 elements outside the error bound; first at [5, 7]"), std::string::npos)
          << res.message();
      qtc::HostMatrix twice = exact;
      for (int64_t i = 0; i < twice.numel(); ++i) twice.as<float>()[i] *= 2.0f;
      EXPECT_FALSE(qtc::testing::gemm_within_error_bound(a, b, args, twice.view())) << kind;
      const qtc::HostMatrix wrong = make_x(32, 48, 23);  // transposed shape
      const auto shape = qtc::testing::gemm_within_error_bound(a, b, args, wrong.view());
      EXPECT_NE(std::string(shape.message()).find("the output has shape [32, 48], the GEMM's is [48, 32]"), std::string::npos)
          << shape.message();
    }
  }
}

TEST(ErrorBound, ReferenceDequantizationIsWithinTheBound) {
  const qtc::HostMatrix x = make_x(kM, kK, 11);
  for (const Case& c : cases())
    for (PlaneKind pl : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      const qtc::Recipe r = qtc::testing::recipe(c.md);
      if (pl == PlaneKind::kColumnwise && r.kind() == qtc::RecipeKind::kFP8Tensor) continue;
      const qtc::QuantizedTensor q = qtc::ref::quantize(x.view(), r);
      for (DType out : {DType::kF32, DType::kBF16}) {
        const qtc::HostMatrix d = qtc::ref::dequantize(q, pl, out);
        EXPECT_TRUE(qtc::testing::within_error_bound(x.view(), r, d.view(), pl)) << c.name;
      }
    }
}

TEST(ErrorBound, WrongCodeOrScaleFails) {
  const qtc::HostMatrix x = make_x(kM, kK, 12);
  for (const Case& c : cases()) {
    const qtc::Recipe r = qtc::testing::recipe(c.md);
    qtc::QuantizedTensor q = qtc::ref::quantize(x.view(), r);
    // One code one step up in magnitude (the next code), at row 7 column 2 (x(7, 2) is not zero).
    qtc::QuantizedTensor bumped = q;
    const int64_t idx = r.kind() == qtc::RecipeKind::kNVFP4 ? 7 * bumped.rowwise->data_cols + 1 : 7 * kK + 2;
    bumped.rowwise->data[idx] += r.kind() == qtc::RecipeKind::kNVFP4 ? 0x01 : 0x02;
    const qtc::HostMatrix d = qtc::ref::dequantize(bumped, PlaneKind::kRowwise, DType::kF32);
    const auto res = qtc::testing::within_error_bound(x.view(), r, d.view());
    ASSERT_FALSE(res) << c.name;
    EXPECT_NE(std::string(res.message()).find("1 of " + std::to_string(kM * kK) + " elements outside the error bound; first at [7, 2]"),
              std::string::npos)
        << res.message();
    // A doubled output everywhere.
    qtc::HostMatrix twice = qtc::ref::dequantize(q, PlaneKind::kRowwise, DType::kF32);
    for (int64_t i = 0; i < twice.numel(); ++i) twice.as<float>()[i] *= 2.0f;
    EXPECT_FALSE(qtc::testing::within_error_bound(x.view(), r, twice.view())) << c.name;
  }
}

// torchao's NVFP4 (profile torchao) dequantizes with (amax / 2688) * sf, or sf alone without a per-tensor scale
// (metadata per_tensor_scale=0): the bound uses the scale ref::dequantize applies, in both forms.
TEST(ErrorBound, TorchaoNvfp4WithAndWithoutPerTensorScale) {
  const qtc::HostMatrix x = make_x(kM, kK, 13);
  for (const char* pts : {"1", "0"}) {
    const qtc::Recipe r = qtc::testing::recipe({{"recipe", "nvfp4"}, {"profile", "torchao"}, {"per_tensor_scale", pts}});
    qtc::Recipe row = r;
    row.columnwise = false;
    const qtc::QuantizedTensor q = qtc::ref::quantize(x.view(), row);
    const qtc::HostMatrix d = qtc::ref::dequantize(q, PlaneKind::kRowwise, DType::kF32);
    EXPECT_TRUE(qtc::testing::within_error_bound(x.view(), r, d.view())) << "per_tensor_scale=" << pts;
    qtc::HostMatrix twice = d;
    for (int64_t i = 0; i < twice.numel(); ++i) twice.as<float>()[i] *= 2.0f;
    EXPECT_FALSE(qtc::testing::within_error_bound(x.view(), r, twice.view())) << "per_tensor_scale=" << pts;
  }
}

TEST(ErrorBound, BoundFollowsTheElementSpacing) {
  const qtc::Recipe nv = qtc::testing::recipe({{"recipe", "nvfp4"}});
  // E2M1 at scale 1: spacing 0.5 below 2, 1 in [2, 4), 2 in [4, 6]: half of it, plus the fp32 allowances.
  EXPECT_NEAR(qtc::testing::element_error_bound(nv, 1.7f, 1.0), 0.25, 1e-5);
  EXPECT_NEAR(qtc::testing::element_error_bound(nv, 3.0f, 1.0), 0.5, 1e-5);
  EXPECT_NEAR(qtc::testing::element_error_bound(nv, 5.0f, 1.0), 1.0, 1e-5);
  EXPECT_NEAR(qtc::testing::element_error_bound(nv, 7.0f, 1.0), 2.0, 1e-5);  // saturation: 1 + (7 - 6)
  const qtc::Recipe mx = qtc::testing::recipe({{"recipe", "mxfp8"}});
  EXPECT_NEAR(qtc::testing::element_error_bound(mx, 300.0f, 1.0), 16.0 + 300.0 / (1 << 20), 1e-6);  // E4M3 spacing 32 at 256
  EXPECT_NEAR(qtc::testing::element_error_bound(mx, 0.001f, 1.0), std::ldexp(1.0, -10), 1e-6);  // subnormal step 2^-9
}

TEST(ErrorBound, RefusesRhtColumnwise) {
  qtc::HostMatrix x(DType::kBF16, 32, 32);
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "nvfp4"}, {"rht", "1"}});
  const auto res = qtc::testing::within_error_bound(x.view(), r, x.view(), PlaneKind::kColumnwise);
  ASSERT_FALSE(res);
  EXPECT_NE(std::string(res.message()).find("RHT(x^T)"), std::string::npos) << res.message();
}

/// Every bundled TE-layout vector (conformance/vectors/te_layout: padded, transposed FP8 block scales, swizzled)
/// handed to conforms() as a kernel's buffers: all pass.
TEST(Conforms, EveryTeLayoutVectorPasses) {
  namespace fs = std::filesystem;
  int n = 0;
  for (const auto& e : fs::directory_iterator(QTC_TE_LAYOUT_VECTORS_DIR)) {
    if (e.path().extension() != ".safetensors") continue;
    const qtc::io::File f = qtc::io::read_file(e.path());
    std::map<std::string, std::string> md = f.metadata;
    Outputs o;
    o.layout = qtc::ref::layout_from_metadata(md);
    const qtc::Recipe r = qtc::testing::recipe(md);
    const qtc::io::Tensor& xt = f.at("x");
    const DType dt = xt.dtype == "BF16" ? DType::kBF16 : xt.dtype == "F16" ? DType::kF16 : DType::kF32;
    const qtc::MatrixView x{xt.bytes.data(), dt, xt.shape[0], xt.shape[1]};
    for (const qtc::io::Tensor& t : f.tensors) {
      const qtc::testing::Buffer b(t.bytes.data(), t.bytes.size());
      if (t.name == "rowwise_data") o.rowwise_data = b;
      else if (t.name == "rowwise_scale_inv") o.rowwise_scale_inv = b;
      else if (t.name == "columnwise_data") o.columnwise_data = b;
      else if (t.name == "columnwise_scale_inv") o.columnwise_scale_inv = b;
      else if (t.name == "amax_rowwise") o.amax_rowwise = b;
      else if (t.name == "amax_columnwise") o.amax_columnwise = b;
      else if (t.name == "scale_inv") o.scale_inv = b;
      else if (t.name == "amax") o.amax = b;
      else ASSERT_EQ(t.name, "x") << e.path();
    }
    EXPECT_TRUE(qtc::testing::conforms(x, r, o, e.path().string()));
    ++n;
  }
  EXPECT_GT(n, 100);
}

TEST(Conforms, StrictPaddingWantsZeros) {
  const qtc::HostMatrix x = make_x(kM, kK, 13);
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "mxfp8"}});
  Produced p = produce(x, r, Layout::kPadded, false);  // padding holds 0xA5
  Outputs o = outputs_of(p, r, Layout::kPadded, false);
  EXPECT_TRUE(qtc::testing::conforms(x.view(), r, o));
  o.strict_padding = true;
  const auto res = qtc::testing::conforms(x.view(), r, o);
  ASSERT_FALSE(res);
  EXPECT_NE(std::string(res.message()).find("padding"), std::string::npos) << res.message();
  for (size_t i = 0; i < p.rs.size(); ++i)
    if (p.rs_pad[i]) p.rs[i] = 0;
  Outputs z = outputs_of(p, r, Layout::kPadded, false);
  z.columnwise_scale_inv = {};  // its padding still holds 0xA5
  z.strict_padding = true;
  EXPECT_TRUE(qtc::testing::conforms(x.view(), r, z));
}

}  // namespace
