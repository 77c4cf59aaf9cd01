/// \file test_verify_hybrid.cpp
/// \brief `qtc verify` on hybrid vectors (verify_hybrid.cpp): a vector written by make_hybrid_vector passes; a changed
///        byte of either plane, of an FP8 tensor plane's scale, or of the dequantized source fails naming the plane;
///        a wrong source dtype, an unknown tensor or a broken rule is an error naming it. Part of test_verify.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "cases.hpp"
#include "hybrid_cases.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {
namespace {

HybridRecipe hybrid_of(const RecipeOptions& row, const RecipeOptions& col, ColumnwiseSource src) {
  HybridRecipe h;
  h.rowwise = Recipe::of(row, Profile::kTE, true, false);
  h.columnwise = Recipe::of(col, Profile::kTE, false, true);
  h.source = src;
  return h;
}

io::Tensor& tensor(io::File& f, const std::string& name) {
  for (io::Tensor& t : f.tensors)
    if (t.name == name) return t;
  throw Error("no tensor " + name);
}

TEST(VerifyHybrid, EveryVariantPassesAndEveryChangeIsCaught) {
  auto cpu = make_cpu_backend();
  for (const auto& [id, h] : hybrid_variants())
    for (DType d : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(id + " " + std::string(dtype_name(d)));
      const int64_t m = h.group_rows.empty() ? 64 : 384, k = 96;
      const HostMatrix x = make_input(InputClass::kNormal, d, m, k, 7);
      const io::File f = make_hybrid_vector(h, x, *cpu);
      const FileResult ok = verify_vector(f, id, *cpu);
      ASSERT_EQ(ok.verdict, Verdict::kPass) << ok.message;
      EXPECT_EQ(ok.recipe, h.name());
      for (const io::Tensor& t : f.tensors) {
        if (t.name == "x") continue;
        io::File g = f;
        io::Tensor& c = tensor(g, t.name);
        c.bytes[c.bytes.size() / 2] ^= 0x01;  // one bit of one element (an F32's low mantissa bit)
        const FileResult r = verify_vector(g, id, *cpu);
        EXPECT_EQ(r.verdict, Verdict::kFail) << t.name << ": " << r.message;
        const bool col = t.name.find("columnwise") != std::string::npos;
        EXPECT_NE(r.message.find(col ? "columnwise" : "rowwise plane"), std::string::npos) << t.name << ": " << r.message;
      }
    }
}

TEST(VerifyHybrid, ErrorsNameTheProblem) {
  auto cpu = make_cpu_backend();
  const HybridRecipe h = hybrid_of(Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kRowwiseDequantized);
  const HostMatrix x = make_input(InputClass::kNormal, DType::kBF16, 64, 64, 3);
  const io::File f = make_hybrid_vector(h, x, *cpu);
  {
    io::File g = f;
    io::Tensor& s = tensor(g, "columnwise_source");
    s.dtype = "F16";  // TE's HybridQuantizer dequantizes in x's dtype: BF16 here
    const FileResult r = verify_vector(g, "f", *cpu);
    EXPECT_EQ(r.verdict, Verdict::kError);
    EXPECT_NE(r.message.find("'columnwise_source' must be BF16"), std::string::npos) << r.message;
  }
  {
    io::File g = f;
    g.tensors.push_back(io::Tensor{"scale_inv", "F32", {1}, std::vector<uint8_t>(4, 0)});
    const FileResult r = verify_vector(g, "f", *cpu);
    EXPECT_EQ(r.verdict, Verdict::kError);
    EXPECT_NE(r.message.find("is not an output of a hybrid vector"), std::string::npos) << r.message;
  }
  {
    io::File g = f;
    g.metadata["group_rows"] = "32,32";  // NVFP4's tensor-wide amax: rule hybrid-grouped-local
    const FileResult r = verify_vector(g, "f", *cpu);
    EXPECT_EQ(r.verdict, Verdict::kError);
    EXPECT_NE(r.message.find("rule 'hybrid-grouped-local'"), std::string::npos) << r.message;
  }
  {
    io::File g = f;
    g.metadata["columnwise_source"] = "original";  // the file's planes were quantized from the dequantized plane
    g.tensors.erase(std::remove_if(g.tensors.begin(), g.tensors.end(), [](const io::Tensor& t) { return t.name == "columnwise_source"; }),
                    g.tensors.end());
    const FileResult r = verify_vector(g, "f", *cpu);
    EXPECT_EQ(r.verdict, Verdict::kFail) << r.message;  // NVFP4 of x differs from NVFP4 of the MXFP8-rounded x
  }
  {
    io::File g;
    g.metadata = f.metadata;
    g.put(f.at("x"));
    const FileResult r = verify_vector(g, "f", *cpu);
    EXPECT_EQ(r.verdict, Verdict::kError);
    EXPECT_NE(r.message.find("no expected output"), std::string::npos) << r.message;
  }
}

/// TE's fused requantization writes each group's columnwise scale (k, mb) at group_start/32 * K +
/// gemm_swizzled_scale_idx(k, mb, Mg/128): tiles of 128 (k) x 4 (mb), row-major over (k tile, mb tile), inside a tile
/// (k % 32) * 16 + (k % 128 / 32) * 4 + mb % 4 (fused_group_requantize.cu, mxfp8/swizzle.cuh). Written from there.
TEST(VerifyHybrid, GroupedSwizzledScalesAreTesPerGroupLayout) {
  auto cpu = make_cpu_backend();
  const HybridRecipe h = HybridRecipe::te_group_requantize(Fp8Type::kE4M3, false, {128, 0, 256});
  const int64_t M = 384, K = 256;
  const HostMatrix x = make_input(InputClass::kNormal, DType::kF32, M, K, 11);
  const Layout lo = Layout::kSwizzled;
  const io::File compact = make_hybrid_vector(h, x, *cpu);
  const io::File te = make_hybrid_vector(h, x, *cpu, lo);
  const std::vector<uint8_t>& c = compact.at("columnwise_scale_inv").bytes;
  const std::vector<uint8_t>& t = te.at("columnwise_scale_inv").bytes;
  ASSERT_EQ(c.size(), static_cast<size_t>(M / 32 * K));
  ASSERT_EQ(t.size(), c.size());
  int64_t start = 0, checked = 0;
  for (int64_t mg : h.group_rows) {
    const int64_t tiles_x = mg / 128;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t mb = 0; mb < mg / 32; ++mb) {
        const int64_t idx = start / 32 * K + ((k / 128) * tiles_x + mb / 4) * 512 + (k % 32) * 16 + (k % 128 / 32) * 4 + mb % 4;
        ASSERT_EQ(t[static_cast<size_t>(idx)], c[static_cast<size_t>((start / 32 + mb) * K + k)]) << "k " << k << " mb " << mb;
        ++checked;
      }
    start += mg;
  }
  EXPECT_EQ(checked, M / 32 * K);
  const FileResult r = verify_vector(te, "te", *cpu);
  EXPECT_EQ(r.verdict, Verdict::kPass) << r.message;
  // One group's scale moved: found, in the columnwise plane.
  io::File bad = te;
  tensor(bad, "columnwise_scale_inv").bytes[5] ^= 0x01;
  EXPECT_EQ(verify_vector(bad, "te", *cpu).verdict, Verdict::kFail);
  // Groups that are not multiples of 128 have no such layout: an error naming the rule.
  io::File odd = te;
  odd.metadata["group_rows"] = "64,0,320";
  const FileResult e = verify_vector(odd, "te", *cpu);
  EXPECT_EQ(e.verdict, Verdict::kError);
  EXPECT_NE(e.message.find("rule 'hybrid-grouped-layout'"), std::string::npos) << e.message;
}

TEST(VerifyHybrid, ConvertRoundTripsThroughTesLayout) {
  auto cpu = make_cpu_backend();
  const Layout te = Layout::kPadded, swz = Layout::kSwizzled;
  int converted = 0;
  auto variants = hybrid_variants();
  variants.emplace_back("te_group_requantize_128", HybridRecipe::te_group_requantize(Fp8Type::kE5M2, false, {128, 0, 256}));
  for (const auto& [id, h] : variants)
    for (const Layout lo : {te, swz}) {
      SCOPED_TRACE(id + " " + std::string(layout_name(lo)));
      const int64_t m = h.group_rows.empty() ? 96 : 384, k = 128;
      const HostMatrix x = make_input(InputClass::kHeavy, DType::kBF16, m, k, 5);
      const io::File f = make_hybrid_vector(h, x, *cpu);
      io::File t;
      try {
        t = convert_hybrid_vector(f, lo);
      } catch (const Error& e) {  // a layout the planes do not have (no swizzled FP8 block scales; groups of 32)
        const std::string w = e.what();
        EXPECT_TRUE(w.find("hybrid-grouped-layout") != std::string::npos || w.find("swizzle") != std::string::npos) << w;
        continue;
      }
      EXPECT_EQ(verify_vector(t, id, *cpu).verdict, Verdict::kPass);
      const io::File back = convert_hybrid_vector(t, Layout::kCompact);
      for (const io::Tensor& a : f.tensors) EXPECT_TRUE(back.at(a.name).bytes == a.bytes) << a.name;
      ++converted;
    }
  EXPECT_GE(converted, 15);
}

}  // namespace
}  // namespace qtc::conformance
