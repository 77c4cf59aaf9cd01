/// \file my_kernel_test.cpp
/// \brief What a kernel engineer writes with the installed package: their own MXFP8 quantizer (here a plain C++
///        one standing in for a kernel, writing TransformerEngine's padded scale buffer) checked bit for bit
///        against qtc's reference, and its dequantization checked against the format's error bound.
#include <gtest/gtest.h>

#include <qtc/testing.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

/// E4M3 (OCP FP8, max 448) value of code c in 0..126.
float e4m3_value(int c) {
  const int e = c >> 3, m = c & 7;
  return e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
}

/// Round to nearest E4M3 (ties to the even code), saturating at 448.
uint8_t to_e4m3(float y) {
  const float a = std::fmin(std::fabs(y), 448.0f);
  int best = 0;
  for (int c = 1; c <= 126; ++c) {
    const float d = std::fabs(e4m3_value(c) - a), db = std::fabs(e4m3_value(best) - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return static_cast<uint8_t>(best | (std::signbit(y) ? 0x80 : 0));
}

/// "My kernel": MXFP8 E4M3 rowwise, 1x32 blocks. The E8M0 scale is amax * (1/448) rounded up to a power of two;
/// scales go to a [roundup(M, 128), roundup(ceil(K/32), 4)] buffer as TransformerEngine allocates it.
void my_mxfp8_quantize(const std::vector<float>& x, int64_t M, int64_t K, std::vector<uint8_t>& data,
                       std::vector<uint8_t>& scales, int64_t& scale_cols) {
  const int64_t kb = (K + 31) / 32;
  scale_cols = (kb + 3) / 4 * 4;
  data.assign(static_cast<size_t>(M * K), 0);
  scales.assign(static_cast<size_t>((M + 127) / 128 * 128 * scale_cols), 0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t b = 0; b < kb; ++b) {
      float amax = 0.0f;
      for (int64_t j = b * 32; j < std::min(K, b * 32 + 32); ++j) amax = std::fmax(amax, std::fabs(x[i * K + j]));
      const uint32_t v = std::bit_cast<uint32_t>(amax * (1.0f / 448.0f));
      const int e = static_cast<int>(v >> 23) + ((v & 0x7FFFFF) != 0 ? 1 : 0);  // biased exponent, rounded up
      scales[i * scale_cols + b] = static_cast<uint8_t>(e);
      for (int64_t j = b * 32; j < std::min(K, b * 32 + 32); ++j)
        data[i * K + j] = to_e4m3(x[i * K + j] * std::ldexp(1.0f, 127 - e));
    }
}

struct Fixture : ::testing::Test {
  static constexpr int64_t M = 70, K = 96;  // not multiples of 128: the scale buffer has padding rows
  std::vector<float> x = std::vector<float>(M * K);
  std::vector<uint8_t> data, scales;
  int64_t scale_cols = 0;
  void SetUp() override {
    std::mt19937 g(1);
    std::normal_distribution<float> n(0.0f, 3.0f);
    for (float& v : x) v = n(g);
    my_mxfp8_quantize(x, M, K, data, scales, scale_cols);
  }
};

TEST_F(Fixture, MatchesTheReferenceBitForBit) {
  const qtc::Recipe recipe = qtc::testing::recipe({{"recipe", "mxfp8"}, {"scale_rule", "rceil"}});
  const qtc::MatrixView input{x.data(), qtc::DType::kF32, M, K};
  qtc::testing::Outputs out;
  out.layout = qtc::testing::Layout::kPadded;  // scales exactly as TransformerEngine holds them: padded
  out.rowwise_data = data;
  out.rowwise_scale_inv = scales;
  EXPECT_TRUE(qtc::testing::conforms(input, recipe, out));
}

TEST_F(Fixture, DequantizedIsWithinTheErrorBound) {
  std::vector<float> y(M * K);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const uint8_t c = data[i * K + j];
      const float s = std::ldexp(1.0f, scales[i * scale_cols + j / 32] - 127);
      y[i * K + j] = (c & 0x80 ? -1.0f : 1.0f) * e4m3_value(c & 0x7F) * s;
    }
  const qtc::Recipe recipe = qtc::testing::recipe({{"recipe", "mxfp8"}});
  EXPECT_TRUE(qtc::testing::within_error_bound({x.data(), qtc::DType::kF32, M, K}, recipe, {y.data(), qtc::DType::kF32, M, K}));
}

}  // namespace
