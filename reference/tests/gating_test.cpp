/// \file gating_test.cpp
/// \brief The capability table against the rules of TE_FORMATS.md §7.7/§7.6.
///
/// Covers: every feature has a row and a stable name; Hopper (9.0, cuBLAS 13.1) gets FP8 tensor/block and
/// NVFP4 emulation but not MXFP8/NVFP4 native nor cuBLAS grouped GEMM; Blackwell 10.0 gets MXFP8/NVFP4;
/// SM 12.x excluded from grouped and MXFP8; version parsing; reasons name the rule and what was found.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "qtc/error.hpp"
#include "qtc/gating.hpp"

namespace qtc::gating {
namespace {

Capability cap(std::string_view cc, std::string_view cublas) {
  Capability c;
  parse_compute_capability(cc, c);
  c.cublas = parse_cublas_version(cublas);
  return c;
}

TEST(Gating, EveryFeatureHasOneRowAndAUniqueName) {
  std::set<std::string_view> names;
  ASSERT_EQ(table().size(), static_cast<size_t>(Feature::kCount));
  for (size_t i = 0; i < table().size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(table()[i].feature), i);
    EXPECT_TRUE(names.insert(table()[i].name).second) << "duplicate name " << table()[i].name;
    EXPECT_EQ(feature_from_name(table()[i].name), table()[i].feature);
  }
  EXPECT_FALSE(feature_from_name("gemm.nonsense").has_value());
}

TEST(Gating, ParsesVersions) {
  EXPECT_EQ(parse_cublas_version("13.1"), 130100);
  EXPECT_EQ(parse_cublas_version("12.1.3"), 120103);
  EXPECT_EQ(parse_cublas_version("130400"), 130400);
  EXPECT_THROW(parse_cublas_version("13.x"), qtc::Error);
  EXPECT_THROW(parse_cublas_version("131"), qtc::Error);
  Capability c;
  parse_compute_capability("10.3", c);
  EXPECT_EQ(c.sm(), 103);
  EXPECT_THROW(parse_compute_capability("90", c), qtc::Error);
  EXPECT_EQ(cublas_version_string(130100), "13.1.0");
}

TEST(Gating, HopperH200WithCublas131) {
  const Capability h = cap("9.0", "13.1");
  EXPECT_TRUE(query(Feature::kGemmFp8Tensor, h));
  EXPECT_TRUE(query(Feature::kGemmFp8Block, h));
  EXPECT_TRUE(query(Feature::kGemmNvfp4Emulated, h));
  EXPECT_TRUE(query(Feature::kGemmNvfp4RowScaled, h));
  EXPECT_TRUE(query(Feature::kGemmGroupedNvfp4RowScaled, h));
  EXPECT_FALSE(query(Feature::kGemmFp8TensorNonTn, h));
  const Support mx = query(Feature::kGemmMxfp8, h);
  EXPECT_FALSE(mx);
  EXPECT_NE(mx.reason.find("SM 10.x-11.x"), std::string::npos) << mx.reason;
  EXPECT_NE(mx.reason.find("found SM 9.0"), std::string::npos) << mx.reason;
  EXPECT_FALSE(query(Feature::kGemmNvfp4, h));
  const Support g = query(Feature::kGemmGrouped, h);
  EXPECT_FALSE(g);
  EXPECT_NE(g.reason.find("cuBLAS >= 13.4.0"), std::string::npos) << g.reason;
  EXPECT_NE(g.reason.find("found 13.1.0"), std::string::npos) << g.reason;
  EXPECT_TRUE(query(Feature::kGemmGrouped, cap("9.0", "13.4")));
  EXPECT_FALSE(query(Feature::kGemmGroupedFp8Tensor, cap("9.0", "13.4")));
  EXPECT_TRUE(query(Feature::kGemmGroupedFp8Tensor, cap("9.0", "13.5")));
  EXPECT_FALSE(query(Feature::kQuantizeNvfp4RhtCastFusion, h));
  EXPECT_TRUE(query(Feature::kQuantizeNvfp4, h));
}

TEST(Gating, FP8BlockNeedsCublas129OnHopperAndIsHopperOnly) {
  EXPECT_FALSE(query(Feature::kGemmFp8Block, cap("9.0", "12.8")));
  EXPECT_TRUE(query(Feature::kGemmFp8Block, cap("9.0", "12.9")));
  const Support b = query(Feature::kGemmFp8Block, cap("10.0", "13.1"));
  EXPECT_FALSE(b);
  EXPECT_NE(b.reason.find("MXFP8"), std::string::npos) << b.reason;
}

TEST(Gating, Blackwell) {
  const Capability b = cap("10.0", "12.8");
  EXPECT_TRUE(query(Feature::kGemmMxfp8, b));
  EXPECT_TRUE(query(Feature::kGemmNvfp4, b));
  EXPECT_FALSE(query(Feature::kGemmNvfp4Emulated, b));
  EXPECT_TRUE(query(Feature::kGemmFp8TensorNonTn, b));
  EXPECT_FALSE(query(Feature::kGemmMxfp8, cap("10.0", "12.6")));
  EXPECT_FALSE(query(Feature::kGemmGrouped, b));
  EXPECT_TRUE(query(Feature::kGemmGrouped, cap("10.0", "13.3")));
  EXPECT_TRUE(query(Feature::kGemmGroupedPerGroupAlpha, cap("10.0", "13.3")));
  EXPECT_FALSE(query(Feature::kGemmGroupedNvfp4, cap("10.0", "13.3")));
  EXPECT_TRUE(query(Feature::kGemmGroupedNvfp4, cap("11.0", "13.4")));
  EXPECT_TRUE(query(Feature::kQuantizeNvfp4StochasticHw, cap("10.3", "13.1")));
  EXPECT_TRUE(query(Feature::kQuantizeNvfp4StochasticHw, cap("10.7", "13.1")));
  EXPECT_FALSE(query(Feature::kQuantizeNvfp4StochasticHw, cap("11.0", "13.1")));
}

TEST(Gating, Sm12xExcludedWhereTEExcludesIt) {
  const Capability c = cap("12.0", "13.5");
  EXPECT_FALSE(query(Feature::kGemmMxfp8, c));
  const Support g = query(Feature::kGemmGrouped, c);
  EXPECT_FALSE(g);
  EXPECT_NE(g.reason.find("SM 12.x"), std::string::npos) << g.reason;
  EXPECT_TRUE(query(Feature::kGemmNvfp4, c));  // is_nvfp4_available: CC >= 10.0 includes 12.x
  EXPECT_FALSE(query(Feature::kGemmFp8TensorNonTn, c));
  EXPECT_FALSE(query(Feature::kQuantizeNvfp4RhtCastFusion, c));
}

TEST(Gating, AdaFp8NeedsCublas1213) {
  EXPECT_FALSE(query(Feature::kGemmFp8Tensor, cap("8.9", "12.1.2")));
  EXPECT_TRUE(query(Feature::kGemmFp8Tensor, cap("8.9", "12.1.3")));
  EXPECT_FALSE(query(Feature::kGemmFp8Tensor, cap("8.0", "13.1")));
}

TEST(Gating, NoDeviceIsNeverSupported) {
  const Capability none{};
  for (const auto& row : table()) {
    const Support s = query(row.feature, none);
    EXPECT_FALSE(s) << row.name;
    EXPECT_FALSE(s.reason.empty()) << row.name;
  }
}

TEST(Gating, FormatTablePrintsEveryRow) {
  const std::string t = format_table(cap("9.0", "13.1"));
  for (const auto& row : table()) EXPECT_NE(t.find(row.name), std::string::npos) << row.name;
}

}  // namespace
}  // namespace qtc::gating
