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

/// A capability with the build fields set explicitly (the defaults are this build's own).
Capability build(std::string_view cc, std::string_view cublas, int headers, bool cutlass) {
  Capability c = cap(cc, cublas);
  c.cublas_headers = headers;
  c.cutlass_sm90 = cutlass;
  return c;
}

TEST(Gating, GroupedRowScaledPathHopperGetsQtcsOwnKernel) {
  // Hopper with cuBLAS < 13.4 (the H200 here: 13.1): qtc's CUTLASS sm_90a kernel; the reason names the cuBLASLt row.
  for (const char* cublas : {"13.1", "13.4", "13.5"}) {
    SCOPED_TRACE(cublas);
    const GroupedPath p = grouped_row_scaled_path(build("9.0", cublas, 130100, true));
    ASSERT_TRUE(p.engine.has_value()) << p.why;
    EXPECT_EQ(*p.engine, Feature::kGemmGroupedRowScaledSm90);
    EXPECT_NE(p.why.find("gemm.grouped_nvfp4_row_scaled_cublaslt needs SM 10.0-11.0"), std::string::npos) << p.why;
  }
  // sm_90a code runs on SM 9.0 only
  EXPECT_TRUE(query(Feature::kGemmGroupedRowScaledSm90, build("9.0", "13.1", 0, true)));
  const Support s = query(Feature::kGemmGroupedRowScaledSm90, build("8.9", "13.1", 130100, true));
  EXPECT_FALSE(s);
  EXPECT_NE(s.reason.find("found SM 8.9"), std::string::npos) << s.reason;
}

TEST(Gating, GroupedRowScaledPathBuildWithoutCutlassHasNone) {
  const GroupedPath p = grouped_row_scaled_path(build("9.0", "13.1", 130100, false));
  EXPECT_FALSE(p.engine.has_value());
  EXPECT_NE(p.why.find("no CUTLASS sm_90a grouped GEMM"), std::string::npos) << p.why;
  EXPECT_NE(p.why.find("-DQTC_CUTLASS=ON"), std::string::npos) << p.why;
  // the per-group path with host sizes stays
  EXPECT_TRUE(query(Feature::kGemmGroupedNvfp4RowScaled, build("9.0", "13.1", 130100, false)));
}

TEST(Gating, GroupedRowScaledPathBlackwellGetsCublasLtWithCublas134) {
  // Blackwell with cuBLAS >= 13.4 and a build against >= 13.4 headers: cuBLASLt's grouped NVFP4 GEMM.
  for (const char* cc : {"10.0", "10.3", "11.0"}) {
    SCOPED_TRACE(cc);
    const GroupedPath p = grouped_row_scaled_path(build(cc, "13.4", 130400, true));
    ASSERT_TRUE(p.engine.has_value()) << p.why;
    EXPECT_EQ(*p.engine, Feature::kGemmGroupedRowScaledCublasLt);
  }
  // cuBLAS 13.3 on the card: refused, and the sm_90a kernel does not run there: none
  const GroupedPath old = grouped_row_scaled_path(build("10.0", "13.3", 130400, true));
  EXPECT_FALSE(old.engine.has_value());
  EXPECT_NE(old.why.find("needs cuBLAS >= 13.4.0 on SM 10.0"), std::string::npos) << old.why;
  EXPECT_NE(old.why.find("found SM 10.0"), std::string::npos) << old.why;
  // this build's headers (13.1 here) lack the grouped API: unavailable, with that reason
  const GroupedPath hdr = grouped_row_scaled_path(build("10.0", "13.4", 130100, true));
  EXPECT_FALSE(hdr.engine.has_value());
  EXPECT_NE(hdr.why.find("cuBLASLt 13.1.0 headers, which lack the grouped GEMM API"), std::string::npos) << hdr.why;
  const Support none = query(Feature::kGemmGroupedRowScaledCublasLt, build("10.0", "13.4", 0, true));
  EXPECT_NE(none.reason.find("no cuBLASLt headers"), std::string::npos) << none.reason;
  // SM 12.x: neither
  EXPECT_FALSE(grouped_row_scaled_path(build("12.0", "13.4", 130400, true)).engine.has_value());
}

TEST(Gating, TablePrintsTheGroupedPathLine) {
  const std::string t = format_table(build("9.0", "13.1", 130100, true));
  EXPECT_NE(t.find("grouped row-scaled NVFP4 with device group sizes -> gemm.grouped_nvfp4_row_scaled_sm90"),
            std::string::npos) << t;
  const std::string b = format_table(build("10.0", "13.4", 130400, true));
  EXPECT_NE(b.find("-> gemm.grouped_nvfp4_row_scaled_cublaslt"), std::string::npos) << b;
  const std::string n = format_table(build("10.0", "13.4", 130100, true));
  EXPECT_NE(n.find("-> none"), std::string::npos) << n;
}

TEST(Gating, BuildFieldsDefaultToThisBuild) {
  const Capability c;
  EXPECT_EQ(c.cublas_headers, build_cublas_headers());
  EXPECT_EQ(c.cutlass_sm90, build_cutlass_sm90());
}

}  // namespace
}  // namespace qtc::gating
