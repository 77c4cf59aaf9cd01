/// \file test_codec.cpp
/// \brief Scalar codecs, exhaustively.
///
/// | what                                   | how                                                            |
/// |----------------------------------------|----------------------------------------------------------------|
/// | every E2M1/E4M3/E5M2/E8M0 code         | decoded, re-encoded, equal (NaN codes: canonical NaN)          |
/// | every one of the 65536 BF16 values     | encoded to E2M1, E4M3, E5M2, E8M0, checked against a brute-force |
/// |                                        | nearest-code search written here (independent of codec.hpp)   |
/// | fast encoders vs generic round_pack    | every BF16 value, every F16 value, 2^22 random floats          |
/// | boundary tables of TE_FORMATS.md       | E2M1 ties ±1 ulp, E4M3 464, E5M2 61440, E8M0 edges, §2.2 exceptions |
/// | numeric.hpp (shared with the kernels)  | bit decoders vs decode_generic on every code; the FMA E2M1     |
/// |                                        | encoder vs the brute force on every BF16/F16 value and vs the  |
/// |                                        | comparison encoder on every 61st float; the constants' bits    |
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "qtc/codec.hpp"
#include "qtc/numeric.hpp"

namespace {

using namespace qtc;

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%02X", v);
  return b;
}

/// A deliberately simple encoder: scan every finite code of the format, take the nearest value; on a tie
/// take the code whose mantissa LSB is 0; beyond the largest finite value saturate. `vals` are the decoded
/// values of codes 0..n-1 (NaN for NaN codes); `man_lsb` the code bit that is the mantissa LSB.
uint32_t brute_force_encode(double x, const std::vector<double>& vals, uint32_t sign_bit, uint32_t nan_code) {
  if (std::isnan(x)) return nan_code;
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  uint32_t best = 0;
  double best_err = INFINITY;
  double max_finite = 0.0;
  uint32_t max_code = 0;
  for (uint32_t c = 0; c < vals.size(); ++c)
    if (!(c & sign_bit) && std::isfinite(vals[c]) && vals[c] > max_finite) {
      max_finite = vals[c];
      max_code = c;
    }
  if (a >= max_finite) return max_code | (neg ? sign_bit : 0u);  // satfinite
  for (uint32_t c = 0; c < vals.size(); ++c) {
    if ((c & sign_bit) || std::isnan(vals[c]) || std::isinf(vals[c])) continue;
    const double err = std::fabs(vals[c] - a);
    if (err < best_err || (err == best_err && (c & 1u) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return best | (neg ? sign_bit : 0u);
}

template <typename F>
std::vector<double> table(int n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) v[static_cast<size_t>(c)] = decode_generic<F>(static_cast<uint32_t>(c));
  return v;
}

TEST(CodecRoundTrip, EveryE2M1Code) {
  for (uint32_t c = 0; c < 16; ++c) {
    const float v = decode_e2m1(static_cast<uint8_t>(c));
    EXPECT_EQ(decode_generic<fmt::E2M1>(c), v) << "code " << hex(c);
    EXPECT_EQ(encode_e2m1(v), c) << "code " << hex(c) << " value " << v;
    EXPECT_EQ(round_pack<fmt::E2M1>(v), c) << "code " << hex(c);
  }
}

TEST(CodecRoundTrip, EveryE4M3Code) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float v = decode_e4m3(static_cast<uint8_t>(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << hex(c);
      EXPECT_EQ(encode_e4m3(v), 0x7F);
      continue;
    }
    EXPECT_EQ(encode_e4m3(v), c) << "code " << hex(c) << " value " << v;
    EXPECT_EQ(round_pack<fmt::E4M3>(v), c) << "code " << hex(c);
  }
}

TEST(CodecRoundTrip, EveryE5M2Code) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float v = decode_e5m2(static_cast<uint8_t>(c));
    if ((c & 0x7F) > 0x7C) {
      EXPECT_TRUE(std::isnan(v)) << hex(c);
      continue;
    }
    if ((c & 0x7F) == 0x7C) {
      EXPECT_TRUE(std::isinf(v)) << hex(c);
      EXPECT_EQ(encode_e5m2(v, Overflow::kNaN), c);
      EXPECT_EQ(encode_e5m2(v), (c & 0x80) | 0x7B) << "satfinite Inf -> max";
      continue;
    }
    EXPECT_EQ(encode_e5m2(v), c) << "code " << hex(c) << " value " << v;
    EXPECT_EQ(round_pack<fmt::E5M2>(v), c) << "code " << hex(c);
  }
}

TEST(CodecRoundTrip, EveryE8M0Code) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float v = decode_e8m0(static_cast<uint8_t>(c));
    if (c == 0xFF) {
      EXPECT_TRUE(std::isnan(v));
      EXPECT_EQ(encode_e8m0(v), 0xFF);
      continue;
    }
    EXPECT_EQ(static_cast<double>(v), std::ldexp(1.0, static_cast<int>(c) - 127)) << hex(c);
    for (auto mode : {E8m0Rounding::kUp, E8m0Rounding::kDown, E8m0Rounding::kNearest})
      EXPECT_EQ(encode_e8m0(v, mode), c) << "code " << hex(c) << " mode " << static_cast<int>(mode);
  }
}

class EveryBf16 : public ::testing::Test {
 protected:
  template <typename Fn>
  void for_each(Fn fn) {
    for (uint32_t h = 0; h < 65536; ++h) fn(static_cast<uint16_t>(h), bf16_to_f32(static_cast<uint16_t>(h)));
  }
};

TEST_F(EveryBf16, ToE2M1MatchesBruteForce) {
  const auto vals = table<fmt::E2M1>(16);
  int64_t bad = 0;
  for_each([&](uint16_t h, float x) {
    const uint32_t want = brute_force_encode(x, vals, 0x8, 0x7);
    const uint32_t got = encode_e2m1(x);
    if (got != want && bad++ < 10) ADD_FAILURE() << "bf16 " << hex(h) << " = " << x << ": got " << hex(got) << " want " << hex(want);
    if (round_pack<fmt::E2M1>(x) != want && bad++ < 10) ADD_FAILURE() << "round_pack bf16 " << hex(h);
  });
  EXPECT_EQ(bad, 0);
}

TEST_F(EveryBf16, ToE4M3MatchesBruteForce) {
  const auto vals = table<fmt::E4M3>(256);
  int64_t bad = 0;
  for_each([&](uint16_t h, float x) {
    const uint32_t want = brute_force_encode(x, vals, 0x80, 0x7F);
    // satfinite; the brute force saturates because it only considers finite codes
    const uint32_t got = encode_e4m3(x);
    if (got != want && bad++ < 10) ADD_FAILURE() << "bf16 " << hex(h) << " = " << x << ": got " << hex(got) << " want " << hex(want);
    if (round_pack<fmt::E4M3>(x) != want && bad++ < 10) ADD_FAILURE() << "round_pack bf16 " << hex(h);
  });
  EXPECT_EQ(bad, 0);
}

TEST_F(EveryBf16, ToE5M2MatchesBruteForce) {
  const auto vals = table<fmt::E5M2>(256);
  int64_t bad = 0;
  for_each([&](uint16_t h, float x) {
    const uint32_t want = brute_force_encode(x, vals, 0x80, 0x7F);
    const uint32_t got = encode_e5m2(x);
    if (got != want && bad++ < 10) ADD_FAILURE() << "bf16 " << hex(h) << " = " << x << ": got " << hex(got) << " want " << hex(want);
    if (round_pack<fmt::E5M2>(x) != want && bad++ < 10) ADD_FAILURE() << "round_pack bf16 " << hex(h);
  });
  EXPECT_EQ(bad, 0);
}

TEST_F(EveryBf16, ToE8M0MatchesPowerOfTwoSearch) {
  int64_t bad = 0;
  for_each([&](uint16_t h, float x) {
    if (std::isnan(x) || (std::signbit(x) && x != 0.0f)) {
      EXPECT_EQ(encode_e8m0(x, E8m0Rounding::kUp), 0xFF) << hex(h);
      return;
    }
    if (std::isinf(x)) {
      EXPECT_EQ(encode_e8m0(x, E8m0Rounding::kUp), 0xFE) << hex(h);
      return;
    }
    const double v = std::fabs(static_cast<double>(x));
    // Up: the smallest 2^(e-127) >= v, e in 0..254 (saturating at 254); v = 0 -> 0.
    uint32_t up = 254, down = 0, nearest = 0;
    for (uint32_t e = 0; e <= 254; ++e)
      if (std::ldexp(1.0, static_cast<int>(e) - 127) >= v) {
        up = e;
        break;
      }
    for (uint32_t e = 0; e <= 254; ++e)
      if (std::ldexp(1.0, static_cast<int>(e) - 127) <= v) down = e;
    double best = INFINITY;
    for (uint32_t e = 0; e <= 254; ++e) {
      const double err = std::fabs(std::ldexp(1.0, static_cast<int>(e) - 127) - v);
      if (err < best || (err == best && (e & 1u) == 0)) {
        best = err;
        nearest = e;
      }
    }
    if (v == 0.0) up = down = nearest = 0;
    if (encode_e8m0(x, E8m0Rounding::kUp) != up && bad++ < 10) ADD_FAILURE() << "up " << hex(h) << " " << x;
    if (encode_e8m0(x, E8m0Rounding::kDown) != down && bad++ < 10) ADD_FAILURE() << "down " << hex(h) << " " << x;
    if (encode_e8m0(x, E8m0Rounding::kNearest) != nearest && bad++ < 10)
      ADD_FAILURE() << "nearest " << hex(h) << " " << x << " got " << hex(encode_e8m0(x, E8m0Rounding::kNearest)) << " want " << hex(nearest);
  });
  EXPECT_EQ(bad, 0);
}

TEST(CodecFastPaths, MatchGenericOnRandomFloatsAndEveryF16) {
  std::mt19937 rng(1234);
  int64_t bad = 0;
  auto check = [&](float x) {
    const uint32_t e4 = round_pack<fmt::E4M3>(x), e5 = round_pack<fmt::E5M2>(x);
    if (encode_e4m3(x) != e4 && bad++ < 10) ADD_FAILURE() << "e4m3 " << std::hexfloat << x;
    if (encode_e5m2(x) != e5 && bad++ < 10) ADD_FAILURE() << "e5m2 " << std::hexfloat << x;
    if (encode_e2m1(x) != round_pack<fmt::E2M1>(x) && bad++ < 10) ADD_FAILURE() << "e2m1 " << std::hexfloat << x;
    if (!std::isnan(x)) {
      if (encode_e4m3(x, Overflow::kNaN) != round_pack<fmt::E4M3>(x, Rounding::kNearestEven, Overflow::kNaN) && bad++ < 10)
        ADD_FAILURE() << "e4m3 nan-overflow " << std::hexfloat << x;
      if (encode_e5m2(x, Overflow::kNaN) != round_pack<fmt::E5M2>(x, Rounding::kNearestEven, Overflow::kNaN) && bad++ < 10)
        ADD_FAILURE() << "e5m2 inf-overflow " << std::hexfloat << x;
      if (f32_to_bf16(x) != round_pack<fmt::BF16>(x, Rounding::kNearestEven, Overflow::kNaN) && bad++ < 10)
        ADD_FAILURE() << "bf16 " << std::hexfloat << x;
    }
  };
  for (int i = 0; i < (1 << 22); ++i) check(bits_f32(rng()));
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(x))
      EXPECT_TRUE(std::isnan(decode_generic<fmt::F16>(h))) << hex(h);
    else
      EXPECT_EQ(static_cast<double>(x), decode_generic<fmt::F16>(h)) << hex(h);
    if (!std::isnan(x)) EXPECT_EQ(f32_to_f16(x), h) << hex(h);
    check(x);
  }
  EXPECT_EQ(bad, 0);
}

// --- TE_FORMATS.md tables -------------------------------------------------------------------------------

TEST(CodecBoundaries, E2M1TiesAndNeighbours) {
  struct Tie {
    float at;
    uint8_t below, tie, above;
  };
  // §0.3: RN-even on the code grid.
  const Tie ties[] = {{0.25f, 0, 0, 1}, {0.75f, 1, 2, 2}, {1.25f, 2, 2, 3}, {1.75f, 3, 4, 4},
                      {2.5f, 4, 4, 5},  {3.5f, 5, 6, 6},  {5.0f, 6, 6, 7}};
  for (const auto& t : ties) {
    EXPECT_EQ(encode_e2m1(std::nextafter(t.at, 0.0f)), t.below) << t.at << " - ulp";
    EXPECT_EQ(encode_e2m1(t.at), t.tie) << t.at;
    EXPECT_EQ(encode_e2m1(std::nextafter(t.at, 10.0f)), t.above) << t.at << " + ulp";
    EXPECT_EQ(encode_e2m1(-t.at), t.tie | 0x8) << -t.at;
  }
  EXPECT_EQ(encode_e2m1(INFINITY), 0x7);
  EXPECT_EQ(encode_e2m1(-INFINITY), 0xF);
  EXPECT_EQ(encode_e2m1(1e30f), 0x7);
  EXPECT_EQ(encode_e2m1(NAN), 0x7) << "CUDA: NaN -> +6";
  EXPECT_EQ(encode_e2m1(-0.0f), 0x8) << "CUDA keeps the sign of zero";
  EXPECT_EQ(encode_e2m1(-0.1f), 0x8);
  EXPECT_EQ(encode_e2m1(-0.0f, NegZero::kPositiveZero), 0x0) << "TE PyTorch reference: x >= 0 for -0.0";
  EXPECT_EQ(encode_e2m1(-0.1f, NegZero::kPositiveZero), 0x8);
}

TEST(CodecBoundaries, E4M3Saturation) {
  EXPECT_EQ(encode_e4m3(448.0f), 0x7E);
  EXPECT_EQ(encode_e4m3(464.0f), 0x7E) << "the tie 464 rounds to even 448";
  EXPECT_EQ(encode_e4m3(std::nextafter(464.0f, 0.0f)), 0x7E);
  EXPECT_EQ(encode_e4m3(std::nextafter(464.0f, 1e9f)), 0x7E) << "satfinite";
  EXPECT_EQ(encode_e4m3(std::nextafter(464.0f, 1e9f), Overflow::kNaN), 0x7F);
  EXPECT_EQ(encode_e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(encode_e4m3(NAN), 0x7F);
  EXPECT_EQ(encode_e4m3(-NAN), 0x7F) << "CUDA 13 host emulation gives 0x7F for -NaN too";
  EXPECT_EQ(encode_e4m3(0x1p-10f), 0x00) << "2^-10 ties to 0";
  EXPECT_EQ(encode_e4m3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(encode_e4m3(-0.0f), 0x80);
  EXPECT_EQ(encode_e4m3(-0x1p-11f), 0x80) << "underflow keeps the sign";
  EXPECT_EQ(encode_e4m3(0x1p-9f), 0x01);
  EXPECT_EQ(encode_e4m3(0x1.cp-7f), 0x07) << "largest subnormal 7*2^-9";
  EXPECT_EQ(encode_e4m3(0x1p-6f), 0x08) << "smallest normal";
}

TEST(CodecBoundaries, E5M2Saturation) {
  EXPECT_EQ(encode_e5m2(57344.0f), 0x7B);
  EXPECT_EQ(encode_e5m2(std::nextafter(61440.0f, 0.0f)), 0x7B);
  EXPECT_EQ(encode_e5m2(61440.0f), 0x7B) << "the tie goes to 2^16, beyond max: satfinite";
  EXPECT_EQ(encode_e5m2(61440.0f, Overflow::kNaN), 0x7C) << "without satfinite the tie becomes +Inf";
  EXPECT_EQ(encode_e5m2(-INFINITY), 0xFB);
  EXPECT_EQ(encode_e5m2(NAN), 0x7F);
  EXPECT_EQ(encode_e5m2(0x1p-16f), 0x01);
  EXPECT_EQ(encode_e5m2(0x1p-17f), 0x00);
}

TEST(CodecBoundaries, E8M0Rules) {
  // TE float_to_e8m0 (§0.4): round up, v <= 2^-127 -> 0, (2^127, 2^128) -> 0xFE, Inf -> 0xFE, NaN -> 0xFF.
  EXPECT_EQ(encode_e8m0(1.0f), 127);
  EXPECT_EQ(encode_e8m0(std::nextafter(1.0f, 2.0f)), 128);
  EXPECT_EQ(encode_e8m0(std::nextafter(1.0f, 0.0f)), 127);
  EXPECT_EQ(encode_e8m0(bits_f32(0x00400000u)), 0) << "2^-127";
  EXPECT_EQ(encode_e8m0(bits_f32(0x00400001u)), 1);
  EXPECT_EQ(encode_e8m0(bits_f32(0x00000001u)), 0);
  EXPECT_EQ(encode_e8m0(0x1.000002p127f), 0xFE);
  EXPECT_EQ(encode_e8m0(FLT_MAX), 0xFE);
  EXPECT_EQ(encode_e8m0(INFINITY), 0xFE);
  EXPECT_EQ(encode_e8m0(NAN), 0xFF);
  EXPECT_EQ(encode_e8m0(0.0f), 0x00);
  EXPECT_EQ(encode_e8m0(0x1.8p0f, E8m0Rounding::kDown), 127);
  EXPECT_EQ(encode_e8m0(0x1.8p0f, E8m0Rounding::kNearest), 128) << "1.5 ties to the even code 128";
  EXPECT_EQ(encode_e8m0(0x1.8p1f, E8m0Rounding::kNearest), 128) << "3 ties to the even code 128 (2^1)";
  // exp2f_rcp and exp2f (§0.4)
  EXPECT_EQ(f32_bits(e8m0_reciprocal(254)), 0x00400000u);
  EXPECT_EQ(e8m0_reciprocal(0), 0x1p127f);
  EXPECT_EQ(e8m0_reciprocal(127), 1.0f);
  EXPECT_TRUE(std::isnan(e8m0_reciprocal(255)));
  EXPECT_EQ(f32_bits(decode_e8m0(0)), 0x00400000u);
}

TEST(CodecBoundaries, MxScaleOfRoundedReciprocalProduct) {
  // §2.2: the scale is float_to_e8m0(bamax * RN(1/max)), which differs from ceil(log2(bamax/max)) for exactly
  // one value per format, in the subnormal range.
  const float rcp4 = bits_f32(0x3B124925u), rcp5 = bits_f32(0x37924925u);
  EXPECT_EQ(encode_e8m0(0x1.c00002p-119f * rcp4), 0x00);
  EXPECT_EQ(encode_e8m0(0x1.c00002p-112f * rcp5), 0x00);
  EXPECT_EQ(encode_e8m0(448.0f * rcp4), 127) << "bamax = 448 -> product exactly 1.0";
  EXPECT_EQ(encode_e8m0(std::nextafter(448.0f, 1e9f) * rcp4), 128);
  EXPECT_EQ(encode_e8m0(57344.0f * rcp5), 127);
}

TEST(CodecStochastic, E2M1EmulationRoundsBetweenNeighbours) {
  // Every SR result is one of the two grid neighbours; byte 0 truncates; the mean over all 256 bytes is the
  // value itself up to the 1/256 quantization of the dither.
  for (float v : {0.1f, 0.3f, 0.7f, 1.1f, 1.3f, 2.2f, 2.9f, 3.3f, 4.5f, 5.9f, -0.3f, -4.5f}) {
    double sum = 0.0;
    const float lo = decode_e2m1(encode_e2m1(v)) <= v ? decode_e2m1(encode_e2m1(v)) : 0.0f;
    (void)lo;
    for (int b = 0; b < 256; ++b) sum += decode_e2m1(encode_e2m1_stochastic(v, static_cast<uint8_t>(b)));
    EXPECT_NEAR(sum / 256.0, v, 2.0 / 256.0 + 1e-6) << v;
  }
  EXPECT_EQ(encode_e2m1_stochastic(NAN, 0), 0x7);
  EXPECT_EQ(encode_e2m1_stochastic(7.0f, 255), 0x7) << "saturates at 6";
  EXPECT_EQ(encode_e2m1_stochastic(1.25f, 0), 0x2) << "no dither: truncate";
  EXPECT_EQ(encode_e2m1_stochastic(1.25f, 128), 0x3) << "dither 0.5 of a 0.5 step pushes 1.25 to 1.5";
}

TEST(CodecStochastic, GenericRoundPackUsesRandomBits) {
  // 1 + 2^-4 in E4M3: one quarter of the way to the next value (1.125): rounds up iff rbits >= 0.75 * 2^32.
  EXPECT_EQ(round_pack<fmt::E4M3>(1.03125, Rounding::kStochastic, Overflow::kSatFinite, 0xBFFFFFFFu), 0x38u);
  EXPECT_EQ(round_pack<fmt::E4M3>(1.03125, Rounding::kStochastic, Overflow::kSatFinite, 0xC0000000u), 0x39u);
  EXPECT_EQ(round_pack<fmt::E4M3>(1.03125, Rounding::kTowardZero), 0x38u);
}

// --- numeric.hpp: the functions the CUDA kernels share -----------------------------------------------

TEST(NumericCore, BitDecodersMatchGenericDecoderOnEveryCode) {
  for (uint32_t c = 0; c < 256; ++c) {
    const double g4 = decode_generic<fmt::E4M3>(c), g5 = decode_generic<fmt::E5M2>(c);
    const float d4 = decode_e4m3(c), d5 = decode_e5m2(c);
    if (std::isnan(g4)) {
      EXPECT_EQ(f32_bits(d4), 0x7FC00000u) << "E4M3 NaN codes decode to the canonical NaN " << hex(c);
    } else {
      EXPECT_EQ(static_cast<double>(d4), g4) << hex(c);
      EXPECT_EQ(std::signbit(d4), (c & 0x80u) != 0) << hex(c);
    }
    EXPECT_EQ(f32_bits(d4), f32_bits(kE4M3Table[c])) << "table and bit decoder agree " << hex(c);
    if (std::isnan(g5)) {
      EXPECT_TRUE(std::isnan(d5)) << hex(c);
    } else {
      EXPECT_EQ(static_cast<double>(d5), g5) << hex(c);
      EXPECT_EQ(std::signbit(d5), (c & 0x80u) != 0) << hex(c);
    }
    EXPECT_EQ(f32_bits(decode_fp8(c, false)), f32_bits(d4)) << hex(c);
    EXPECT_EQ(f32_bits(decode_fp8(c, true)), f32_bits(d5)) << hex(c);
    if (c < 16) {
      EXPECT_EQ(f32_bits(decode_e2m1(c)), f32_bits(kE2M1Values[c])) << hex(c);
      EXPECT_EQ(static_cast<double>(decode_e2m1(c)), decode_generic<fmt::E2M1>(c)) << hex(c);
    }
  }
}

TEST(NumericCore, FmaE2M1EncoderMatchesBruteForceAndComparisonEncoder) {
  const auto vals = table<fmt::E2M1>(16);
  int64_t bad = 0;
  auto check = [&](float x, uint32_t want) {
    const uint32_t got = encode_e2m1_rn(x);
    if (got != want && bad++ < 10) ADD_FAILURE() << std::hexfloat << x << ": got " << hex(got) << " want " << hex(want);
  };
  for (uint32_t h = 0; h < 65536; ++h) {
    const float b = bf16_to_f32(static_cast<uint16_t>(h)), f = f16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(b)) check(b, brute_force_encode(b, vals, 0x8, 0x7));
    if (!std::isnan(f)) check(f, brute_force_encode(f, vals, 0x8, 0x7));
  }
  // Every 61st float (all exponents, mantissas and signs; 70 million values): equal to the comparison encoder,
  // NaN included for a positive NaN (0x7); a negative NaN keeps its sign bit (0xF), which GPU arithmetic
  // never produces.
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 61) {
    const float x = bits_f32(static_cast<uint32_t>(u));
    const uint32_t want = (std::isnan(x) && std::signbit(x)) ? 0xFu : encode_e2m1(x);
    check(x, want);
  }
  for (float x : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 1e30f, INFINITY, -0.0f, -5.0f, -INFINITY})
    check(x, encode_e2m1(x));
  EXPECT_EQ(bad, 0);
}

TEST(NumericCore, ConstantsAreTheRoundedValues) {
  EXPECT_EQ(f32_bits(kNvfp4Rcp6), f32_bits(1.0f / 6.0f));
  EXPECT_EQ(f32_bits(kMxRcpE4M3), 0x3B124925u);
  EXPECT_EQ(f32_bits(kMxRcpE5M2), 0x37924925u);
  EXPECT_EQ(kMxRcpE4M3, 1.0f / kE4M3Max);
  EXPECT_EQ(kMxRcpE5M2, 1.0f / kE5M2Max);
  EXPECT_EQ(kFltMax, FLT_MAX);
  EXPECT_EQ(kTorchAOPerTensorDivisor, kE4M3Max * kE2M1Max);
  EXPECT_EQ(static_cast<double>(kE4M3Max), fmt::Limits<fmt::E4M3>::kMax);
  EXPECT_EQ(static_cast<double>(kE5M2Max), fmt::Limits<fmt::E5M2>::kMax);
  EXPECT_EQ(std::ldexp(1.0, kE4M3Emax), 256.0);
  EXPECT_EQ(std::ldexp(1.0, kE5M2Emax), 32768.0);
}

TEST(NumericCore, ScaleGeometryCoversEveryLayout) {
  // compact [3, 4] (padded [4, 10]): row-major, TE's transposed padding, both swizzles, the DeepGEMM packing.
  EXPECT_EQ(make_scale_geometry(Layout::kCompact, 3, 4, 4, 10, false).offset(2, 1), 9);
  EXPECT_EQ(make_scale_geometry(Layout::kPadded, 3, 4, 4, 10, false).offset(2, 1), 21);
  EXPECT_EQ(make_scale_geometry(Layout::kPadded, 3, 4, 4, 10, true).offset(2, 1), 12);
  EXPECT_EQ(make_scale_geometry(Layout::kSwizzled, 200, 5, 256, 8, false).offset(130, 5), swizzled_offset(130, 5, 8));
  EXPECT_EQ(make_scale_geometry(Layout::kSwizzled, 5, 200, 8, 256, true).offset(5, 130), swizzled_offset(130, 5, 8));
  const ScaleGeometry g8 = make_scale_geometry(Layout::kSwizzled8x4, 13, 6, 0, 0, false);
  EXPECT_EQ(g8.buf_rows, 16);
  EXPECT_EQ(g8.buf_cols, 8);
  EXPECT_EQ(g8.offset(9, 5), 2 * 32 + 32 + 4 + 1);
  EXPECT_EQ(make_scale_geometry(Layout::kSwizzled8x4, 6, 13, 0, 0, true).offset(5, 9), 2 * 32 + 32 + 4 + 1);
  const ScaleGeometry dg = make_scale_geometry(Layout::kDeepGemmPackedUe8m0, 5, 6, 0, 0, false);
  EXPECT_EQ(dg.buf_rows, 2);
  EXPECT_EQ(dg.buf_cols, 32);
  EXPECT_EQ(dg.offset(3, 5), 32 + 12 + 1);
  for (const LayoutName& n : kLayoutNames) EXPECT_EQ(layout_from_name(n.name), n.layout);
  EXPECT_FALSE(layout_from_name("swizzled").has_value());
  // The swizzle is a bijection of each 128x4 tile onto its 512 bytes.
  std::vector<int> seen(512 * 2 * 3, 0);
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t kb = 0; kb < 12; ++kb) ++seen[static_cast<size_t>(swizzled_offset(r, kb, 12))];
  for (int v : seen) EXPECT_EQ(v, 1);
}

}  // namespace
