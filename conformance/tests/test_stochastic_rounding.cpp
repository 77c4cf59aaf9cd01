/// \file test_stochastic_rounding.cpp
/// \brief Admissible stochastic rounding (issue 26): qtc's own SR output is admissible (seeds 1..3; 1x16, 16x16, RHT);
///        round-to-nearest, all-zero codes, always-down rounding and a changed scale are not.
#include <gtest/gtest.h>

#include <random>

#include "qtc/quantize.hpp"
#include "qtc/stochastic_rounding.hpp"

namespace qtc::conformance {
namespace {

/// variant 0: NVFP4 1x16; 1: 16x16; 2: 1x16 with RHT (BF16 input, as the rule nvfp4-input-rht-bf16 requires).
io::File sr_file(int64_t M, int64_t K, bool stochastic, uint64_t seed, int variant = 0) {
  HostMatrix x(variant == 2 ? DType::kBF16 : DType::kF32, M, K);
  std::mt19937_64 rng(seed + 100);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) x.set(i, j, n(rng));
  Recipe r;  // NVFP4 1x16, te
  r.nvfp4().tile_2d = variant == 1;
  r.nvfp4().rht = variant == 2;
  r.nvfp4().stochastic = stochastic;
  r.nvfp4().seed = seed;
  const QuantizedTensor q = ref::quantize(x.view(), r);
  io::File f;
  Recipe meta = r;
  meta.nvfp4().stochastic = true;
  meta.nvfp4().seed = seed;
  f.metadata = meta.to_metadata();
  f.put(io::from_matrix("x", x));
  f.put(io::Tensor{"rowwise_data", "U8", {M, K / 2}, q.rowwise->data});
  f.put(io::Tensor{"rowwise_scale_inv", "U8", {M, K / 16}, q.rowwise->scale.bytes});
  f.put(io::from_f32("amax_rowwise", q.rowwise->amax, {1}));
  f.put(io::Tensor{"columnwise_data", "U8", {K, M / 2}, q.columnwise->data});
  f.put(io::Tensor{"columnwise_scale_inv", "U8", {K, M / 16}, q.columnwise->scale.bytes});
  f.put(io::from_f32("amax_columnwise", q.columnwise->amax, {1}));
  return f;
}

io::Tensor& tensor(io::File& f, const std::string& name) {
  for (auto& t : f.tensors)
    if (t.name == name) return t;
  throw std::runtime_error(name);
}

TEST(StochasticRounding, QtcOwnSrIsAdmissible) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const SrResult r = check_stochastic_rounding(sr_file(128, 256, true, seed));
    EXPECT_TRUE(r.admissible) << r.message;
    EXPECT_EQ(r.elements, 2 * 128 * 256);
    EXPECT_LT(r.worst_excess, 1.0);
  }
}

// The SR qtc has beyond 1x16: 16x16 tiles and RHT's columnwise plane (the scaled values of RHT(x^T)); round-to-nearest
// is rejected there too.
TEST(StochasticRounding, TwoDimensionalAndRhtAreJudged) {
  for (int variant : {1, 2}) {
    const SrResult ok = check_stochastic_rounding(sr_file(128, 256, true, 4, variant));
    EXPECT_TRUE(ok.admissible) << "variant " << variant << ": " << ok.message;
    EXPECT_EQ(ok.elements, 2 * 128 * 256);
    const SrResult rn = check_stochastic_rounding(sr_file(128, 256, false, 4, variant));
    EXPECT_FALSE(rn.admissible) << "variant " << variant << ": " << rn.message;
    EXPECT_EQ(rn.non_neighbour, 0) << rn.message;
    EXPECT_NE(rn.message.find("unbiasedness rejected"), std::string::npos) << rn.message;
  }
  {  // the RHT plane's codes are judged: every magnitude moved (0..7 -> 7..0) is found
    io::File f = sr_file(64, 128, true, 5, 2);
    for (auto& b : tensor(f, "columnwise_data").bytes) b = static_cast<uint8_t>(b ^ 0x77u);  // every magnitude moved
    const SrResult r = check_stochastic_rounding(f);
    EXPECT_FALSE(r.admissible);
    EXPECT_GT(r.non_neighbour, 0) << r.message;
  }
}

TEST(StochasticRounding, RoundToNearestIsRejected) {
  const SrResult r = check_stochastic_rounding(sr_file(128, 256, false, 1));
  EXPECT_FALSE(r.admissible);
  EXPECT_EQ(r.non_neighbour, 0) << "nearest is a neighbour: only the statistics can tell";
  EXPECT_NE(r.message.find("unbiasedness rejected"), std::string::npos) << r.message;
}

TEST(StochasticRounding, AllZeroAlwaysDownAndChangedScaleAreRejected) {
  {  // TE #3281: software SR returning zeros
    io::File f = sr_file(64, 128, true, 1);
    for (auto& b : tensor(f, "rowwise_data").bytes) b = 0;
    const SrResult r = check_stochastic_rounding(f);
    EXPECT_FALSE(r.admissible);
    EXPECT_GT(r.non_neighbour, 0);
    EXPECT_NE(r.details.front().find("is not a neighbour of the scaled value"), std::string::npos) << r.details.front();
  }
  {  // truncation: always the neighbour nearer zero (round-to-nearest on the plane's codes, then one step down where up)
    io::File f = sr_file(128, 256, true, 2);
    io::File rn = sr_file(128, 256, false, 2);
    // Rebuild the rowwise codes as the smaller-magnitude neighbour: take min magnitude of the SR and RN codes, which is
    // the lower neighbour whenever either rounded down.
    auto& d = tensor(f, "rowwise_data").bytes;
    const auto& e = tensor(rn, "rowwise_data").bytes;
    for (size_t i = 0; i < d.size(); ++i) {
      uint8_t out = 0;
      for (int h = 0; h < 2; ++h) {
        const uint8_t a = (d[i] >> (4 * h)) & 0xF, b = (e[i] >> (4 * h)) & 0xF;
        out |= static_cast<uint8_t>(((a & 7) <= (b & 7) ? a : b) << (4 * h));
      }
      d[i] = out;
    }
    const SrResult r = check_stochastic_rounding(f);
    EXPECT_FALSE(r.admissible) << r.message;
  }
  {
    io::File f = sr_file(64, 128, true, 3);
    tensor(f, "columnwise_scale_inv").bytes[7] ^= 0x01;
    const SrResult r = check_stochastic_rounding(f);
    EXPECT_FALSE(r.admissible);
    EXPECT_EQ(r.scale_mismatch, 1);
  }
}

}  // namespace
}  // namespace qtc::conformance
