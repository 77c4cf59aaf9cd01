/// \file test_testing_issue26.cpp
/// \brief qtc::testing for issue 26: accept_equal_values, stochastic_admissible, checkpoint_consistent.
#include <gtest/gtest.h>

#include <random>

#include "qtc/quantize.hpp"
#include "qtc/testing.hpp"

namespace qtc::testing {
namespace {

HostMatrix random_x(int64_t M, int64_t K, uint64_t seed) {
  HostMatrix x(DType::kF32, M, K);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < M * K; ++i) x.as<float>()[i] = n(rng);
  for (int64_t j = 0; j < K; ++j) x.as<float>()[j] = 0.0f;  // a zero row: +0 codes
  return x;
}

TEST(TestingIssue26, AcceptEqualValues) {
  const HostMatrix x = random_x(32, 64, 1);
  const Recipe r = recipe({{"recipe", "mxfp8"}});
  const QuantizedTensor q = ref::quantize(x.view(), r);
  std::vector<uint8_t> data = q.rowwise->data;
  data[5] = 0x80;  // -0.0 for +0.0 in the zero row
  Outputs out;
  out.rowwise_data = data;
  out.rowwise_scale_inv = q.rowwise->scale.bytes;
  const auto strict = conforms(x.view(), r, out);
  EXPECT_FALSE(strict);
  EXPECT_NE(std::string(strict.message()).find("EQUIVALENT"), std::string::npos) << strict.message();
  out.accept_equal_values = true;
  EXPECT_TRUE(conforms(x.view(), r, out));
  data[40] ^= 0x01;  // a changed value is still a failure
  EXPECT_FALSE(conforms(x.view(), r, out));
}

TEST(TestingIssue26, StochasticAdmissible) {
  const HostMatrix x = random_x(128, 256, 2);
  Recipe r = recipe({{"recipe", "nvfp4"}, {"stochastic_rounding", "1"}, {"seed", "1"}});
  r.columnwise = false;
  Recipe other = r;
  other.nvfp4().seed = 99;  // another implementation's random numbers
  const QuantizedTensor q = ref::quantize(x.view(), other);
  Outputs out;
  out.rowwise_data = q.rowwise->data;
  out.rowwise_scale_inv = q.rowwise->scale.bytes;
  out.amax_rowwise = q.rowwise->amax;
  EXPECT_FALSE(conforms(x.view(), r, out));  // not qtc's bits
  out.stochastic_admissible = true;
  EXPECT_TRUE(conforms(x.view(), r, out));
  Recipe rn = r;
  rn.nvfp4().stochastic = false;
  const QuantizedTensor n = ref::quantize(x.view(), rn);
  out.rowwise_data = n.rowwise->data;
  const auto res = conforms(x.view(), r, out);
  EXPECT_FALSE(res);
  EXPECT_NE(std::string(res.message()).find("not admissible stochastic rounding"), std::string::npos) << res.message();
}

TEST(TestingIssue26, CheckpointConsistent) {
  const std::string dir = std::string(QTC_SOURCE_DIR) + "/conformance/checkpoints/";
  EXPECT_TRUE(checkpoint_consistent(dir + "ct_nvfp4", dir + "reference_bf16"));
  EXPECT_TRUE(checkpoint_consistent(dir + "modelopt_nvfp4", dir + "reference_bf16", "te"));
  const auto r = checkpoint_consistent(dir + "deepseek_v3_fp8", dir + "deepseek_v3_reference_bf16", "te");
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("not bit for bit"), std::string::npos) << r.message();
  EXPECT_FALSE(checkpoint_consistent(dir + "no_such_checkpoint"));
}

}  // namespace
}  // namespace qtc::testing
