/// \file test_vectors.cpp
/// \brief Every bundled vector (conformance/vectors/te, a copy of shared/vectors/te) passes `qtc verify`'s logic
///        on the CPU reference, one test per file.
///
/// Covers: NVFP4 (1x16, 16x16, row-scaled, RHT, 4over6), FP8 block (1x128, 128x128, pow2, E4M3/E5M2), FP8
/// per-tensor, MXFP8 OCP (dequantized values) and MXFP8 rceil (TE's C++ reference incl. NaN/Inf/-0, partial
/// blocks): whatever each file carries, bit for bit.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "qtc/verify.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> bundled() {
  std::vector<qtc::conformance::FileResult> problems;
  auto files = qtc::conformance::collect_vector_files({QTC_BUNDLED_VECTORS_DIR}, problems);
  return files;
}

class BundledVector : public testing::TestWithParam<fs::path> {};

TEST_P(BundledVector, PassesOnCpu) {
  auto cpu = qtc::make_cpu_backend();
  const auto r = qtc::conformance::verify_file(GetParam(), *cpu);
  EXPECT_EQ(r.verdict, qtc::conformance::Verdict::kPass) << qtc::conformance::result_line(r) << [&] {
    std::string d;
    for (const auto& s : detail_lines(r)) d += "\n    " + s;
    return d;
  }();
}

INSTANTIATE_TEST_SUITE_P(Te, BundledVector, testing::ValuesIn(bundled()), [](const testing::TestParamInfo<fs::path>& i) {
  std::string n;
  for (char c : i.param.stem().string())
    if (std::isalnum(static_cast<unsigned char>(c))) n += c;
  return n;
});

TEST(BundledVectors, AllPresent) { EXPECT_EQ(bundled().size(), 135u) << "conformance/vectors/te should hold the 135 TE vectors"; }

}  // namespace
