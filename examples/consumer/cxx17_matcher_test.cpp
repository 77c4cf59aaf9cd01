/// \file cxx17_matcher_test.cpp
/// \brief The installed headers from a C++17 project (TransformerEngine's tests/cpp are C++17): a hand-written MXFP8
///        quantizer (compact scales, 1x32 blocks) checked with the gmock matcher ConformsTo, and a corrupted
///        output rejected with conforms()'s message as the matcher's explanation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <qtc/testing.hpp>
#include <qtc/testing_gmock.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

static_assert(__cplusplus == 201703L, "this test is compiled as C++17");

namespace {

float e4m3_value(int c) {
  const int e = c >> 3, m = c & 7;
  return e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
}

uint8_t to_e4m3(float y) {
  const float a = std::fmin(std::fabs(y), 448.0f);
  int best = 0;
  for (int c = 1; c <= 126; ++c) {
    const float d = std::fabs(e4m3_value(c) - a), db = std::fabs(e4m3_value(best) - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return static_cast<uint8_t>(best | (std::signbit(y) ? 0x80 : 0));
}

/// MXFP8 E4M3 rowwise, compact [M, ceil(K/32)] E8M0 scales: amax / 448 rounded up to a power of two (rceil).
void quantize(const std::vector<float>& x, int64_t M, int64_t K, std::vector<uint8_t>& data, std::vector<uint8_t>& scales) {
  const int64_t kb = (K + 31) / 32;
  data.assign(static_cast<size_t>(M * K), 0);
  scales.assign(static_cast<size_t>(M * kb), 0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t b = 0; b < kb; ++b) {
      const int64_t end = std::min(K, b * 32 + 32);
      float amax = 0.0f;
      for (int64_t j = b * 32; j < end; ++j) amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(i * K + j)]));
      const float q = amax * (1.0f / 448.0f);
      uint32_t v = 0;
      std::memcpy(&v, &q, sizeof v);
      const int e = static_cast<int>(v >> 23) + ((v & 0x7FFFFF) != 0 ? 1 : 0);
      scales[static_cast<size_t>(i * kb + b)] = static_cast<uint8_t>(e);
      for (int64_t j = b * 32; j < end; ++j)
        data[static_cast<size_t>(i * K + j)] = to_e4m3(x[static_cast<size_t>(i * K + j)] * std::ldexp(1.0f, 127 - e));
    }
}

struct Cxx17 : ::testing::Test {
  static constexpr int64_t M = 5, K = 40;  // K not a multiple of the block
  std::vector<float> x = std::vector<float>(static_cast<size_t>(M * K));
  std::vector<uint8_t> data, scales;
  void SetUp() override {
    std::mt19937 g(7);
    std::normal_distribution<float> n(0.0f, 2.0f);
    for (float& v : x) v = n(g);
    quantize(x, M, K, data, scales);
  }
};

TEST_F(Cxx17, MatcherAcceptsConformingOutputs) {
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "mxfp8"}});
  qtc::testing::Outputs out;
  out.rowwise_data = data;
  out.rowwise_scale_inv = scales;
  EXPECT_THAT(out, qtc::testing::ConformsTo({x.data(), qtc::DType::kF32, M, K}, r));
}

TEST_F(Cxx17, MatcherExplainsAMismatch) {
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "mxfp8"}});
  data[static_cast<size_t>(3 * K + 33)] ^= 0x01;  // one code off by one, in the partial block
  qtc::testing::Outputs out;
  out.rowwise_data = data;
  out.rowwise_scale_inv = scales;
  const ::testing::Matcher<const qtc::testing::Outputs&> m = qtc::testing::ConformsTo({x.data(), qtc::DType::kF32, M, K}, r);
  ::testing::StringMatchResultListener why;
  EXPECT_FALSE(m.MatchAndExplain(out, &why));
  EXPECT_THAT(why.str(), ::testing::HasSubstr("rowwise_data: 1 of 200 elements differ; first at [3, 33]"));
  EXPECT_THAT(::testing::DescribeMatcher<const qtc::testing::Outputs&>(m), ::testing::HasSubstr("mxfp8"));
}

}  // namespace
