/// \file test_ct_rules.cpp
/// \brief Profile compressed_tensors' NVFP4, MXFP8 and MXFP4 orders (ct_peers.cpp) against values measured from
///        compressed-tensors 0.20.0 on torch 2.11 (CPU; the presets' weight arguments through
///        compute_dynamic_scales_and_zp, quantize, pack_fp4_to_uint8 and compress_mx_scale), and the rules that
///        refuse what the profile does not define. Part of the test_torchao_rules executable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qtc/cpu_path.hpp"
#include "qtc/error.hpp"
#include "qtc/numeric.hpp"
#include "qtc/path_rules.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"

using namespace qtc;

namespace {

/// x = {v, v / 3, -v / 1000, 0 x 29} in dtype t (BF16 / F16 given as their float32 values, rounded here).
std::vector<uint16_t> half_bits(const std::vector<float>& v, DType t) {
  std::vector<uint16_t> h;
  for (float f : v) h.push_back(t == DType::kBF16 ? f32_to_bf16(f) : f32_to_f16(f));
  return h;
}

struct MxCase {
  bool fp4;
  DType t;
  float v;
  uint8_t scale, d0, d1, d2;  ///< MXFP8: codes of x[0..2]; MXFP4: packed bytes 0 and 1 (d2 unused)
};

// compute_dynamic_scales_and_zp + quantize (+ pack_fp4_to_uint8) + compress_mx_scale on x = [v, v/3, -v/1000, 0...].
const MxCase kMx[] = {
    {false, DType::kF32, 448.0f, 128, 118, 105, 166},  // 448 = 1.75 * 2^8 rounds up to 2^9: scale 2^1
    {false, DType::kF32, 447.0f, 127, 126, 113, 174},  // mantissa below 1.75: scale 2^0
    {false, DType::kBF16, 447.0f, 128, 118, 105, 166},  // 447 is 448 in BF16
    {false, DType::kF32, 1e-5f, 102, 122, 110, 171},
    {false, DType::kF16, 1e-5f, 127, 0, 0, 0},  // scale 2^-25 is 0 in F16 -> replaced by 1.0
    {false, DType::kF16, 60000.0f, 127, 0, 0, 0},  // 1.83 * 2^15 rounds to 2^16 = Inf in F16: scale Inf
    {false, DType::kF32, 3.0e38f, 127, 0, 0, 0},  // rounds to 2^128: e = 255, scale Inf, stored 0x7F, data 0
    {true, DType::kF32, 448.0f, 134, 38, 8, 0},
    {true, DType::kF32, 7.0f, 128, 38, 8, 0},
    {true, DType::kF32, 1e-5f, 108, 55, 8, 0},
    {true, DType::kBF16, 1e-5f, 108, 71, 8, 0},  // v / 3 rounded to BF16 first
    {true, DType::kF16, 1e-5f, 127, 0, 0, 0},
};

TEST(CompressedTensors, MxAgainstMeasured) {
  for (const MxCase& c : kMx) {
    std::vector<float> x(32, 0.0f);
    x[0] = c.v;
    x[1] = c.v / 3.0f;
    x[2] = -c.v / 1000.0f;
    const std::vector<uint16_t> h = half_bits(x, c.t);
    const MatrixView in{c.t == DType::kF32 ? static_cast<const void*>(x.data()) : h.data(), c.t, 1, 32};
    Recipe r = c.fp4 ? Recipe::of(Mxfp4Options{.scale_rule = MxScaleRule::kPow2Round})
                     : Recipe::of(Mxfp8Options{.scale_rule = MxScaleRule::kPow2Round});
    r.profile = Profile::kCompressedTensors;
    r.columnwise = false;
    const QuantizedTensor q = ref::quantize(in, r);
    const std::string what = std::string(c.fp4 ? "MXFP4 " : "MXFP8 ") + std::string(dtype_name(c.t)) + " v=" + std::to_string(c.v);
    EXPECT_EQ(q.rowwise->scale.bytes[0], c.scale) << what;
    EXPECT_EQ(q.rowwise->data[0], c.d0) << what;
    EXPECT_EQ(q.rowwise->data[1], c.d1) << what;
    if (!c.fp4) {
      EXPECT_EQ(q.rowwise->data[2], c.d2) << what;
    }
  }
}

TEST(CompressedTensors, Nvfp4AgainstMeasured) {
  struct Case {
    DType t;
    std::vector<float> x;
    uint8_t scale;
    std::vector<uint8_t> data;
  };
  const std::vector<float> fill12(12, 0.5f);
  std::vector<float> f32 = {1.0f, -0.04f, 0.3f, -0.0f};
  f32.insert(f32.end(), fill12.begin(), fill12.end());
  std::vector<float> bf16 = {3.0f, -0.04f, 0.3f, -0.0f};
  bf16.insert(bf16.end(), 12, 0.75f);
  std::vector<float> f16 = {0.01f};
  f16.insert(f16.end(), 15, -0.001f);
  const Case cases[] = {
      {DType::kF32, std::vector<float>(16, 0.0f), 0x20, {0, 0, 0, 0, 0, 0, 0, 0}},  // gs 1 (2688 / tiny is Inf), 0 -> 0.125
      {DType::kF32, f32, 126, {135, 4, 85, 85, 85, 85, 85, 85}},  // -0.04 rounds to -0.0: code 0x8; -0.0 -> 0x0
      {DType::kBF16, bf16, 126, {135, 1, 51, 51, 51, 51, 51, 51}},  // gs = BF16(BF16(1 / 3) * 2688) = 896
      {DType::kF16, f16, 1, {151, 153, 153, 153, 153, 153, 153, 153}},  // 2688 / 0.01 overflows F16: gs = 1
  };
  for (const Case& c : cases) {
    const std::vector<uint16_t> h = half_bits(c.x, c.t);
    const MatrixView in{c.t == DType::kF32 ? static_cast<const void*>(c.x.data()) : h.data(), c.t, 1, 16};
    Recipe r = Recipe::of(Nvfp4Options{});
    r.profile = Profile::kCompressedTensors;
    r.columnwise = false;
    const QuantizedTensor q = ref::quantize(in, r);
    EXPECT_EQ(q.rowwise->scale.bytes[0], c.scale) << dtype_name(c.t);
    EXPECT_EQ(q.rowwise->data, c.data) << dtype_name(c.t);
  }
}

TEST(CompressedTensors, RulesItDoesNotDefineAreRefusedByName) {
  // The CUDA kernels' rule set (kernels/src/backend/quantize.cpp): te's and torchao's orders only (path_rules.hpp).
  const PathRules kernels{.path = "the CUDA kernels", .nvfp4_order_torchao = true, .mx_order_torchao = true};
  auto starts = [](const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; };
  Recipe nv = Recipe::of(Nvfp4Options{});
  nv.profile = Profile::kCompressedTensors;
  EXPECT_TRUE(starts(unimplemented_rule(nv, kernels), "rule nvfp4.order compressed_tensors (profile 'compressed_tensors')"))
      << unimplemented_rule(nv, kernels);
  Recipe mx8 = Recipe::of(Mxfp8Options{.scale_rule = MxScaleRule::kPow2Round});
  mx8.profile = Profile::kCompressedTensors;
  EXPECT_TRUE(starts(unimplemented_rule(mx8, kernels), "rule mxfp8.order compressed_tensors (profile 'compressed_tensors')"))
      << unimplemented_rule(mx8, kernels);
  Recipe mx4 = Recipe::of(Mxfp4Options{.scale_rule = MxScaleRule::kPow2Round});
  mx4.profile = Profile::kCompressedTensors;
  EXPECT_TRUE(starts(unimplemented_rule(mx4, kernels), "rule mxfp4.order compressed_tensors (profile 'compressed_tensors')"))
      << unimplemented_rule(mx4, kernels);
  std::string why;
  EXPECT_FALSE(ref::simd_supports(mx4, DType::kBF16, &why));

  auto refused = [](Recipe r, const std::string& rule) {
    try {
      r.validate();
    } catch (const Error& e) {
      return std::string(e.what()).find(rule) != std::string::npos;
    }
    return false;
  };
  Recipe e5 = mx8;
  e5.mxfp8().fp8 = Fp8Type::kE5M2;
  EXPECT_TRUE(refused(e5, "mxfp8-profile-order-ct"));
  Recipe t2 = mx8;
  t2.mxfp8().tile_2d = true;
  EXPECT_TRUE(refused(t2, "mxfp8-profile-order-ct"));
  Recipe rc = mx8;
  rc.mxfp8().scale_rule = MxScaleRule::kRceil;
  EXPECT_TRUE(refused(rc, "mxfp8-profile-scale-rule"));
  Recipe te = Recipe::of(Mxfp8Options{.scale_rule = MxScaleRule::kPow2Round});  // profile te has no pow2_round
  EXPECT_TRUE(refused(te, "mxfp8-profile-scale-rule"));
  Recipe nv2 = nv;
  nv2.nvfp4().tile_2d = true;
  EXPECT_TRUE(refused(nv2, "nvfp4-profile-order-1x16"));
  EXPECT_NO_THROW(mx8.validate());
  EXPECT_NO_THROW(mx4.validate());
}

}  // namespace
