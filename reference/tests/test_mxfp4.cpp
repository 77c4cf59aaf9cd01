/// \file test_mxfp4.cpp
/// \brief Recipe kind mxfp4 (VECTORS.md): the policy (validation rules, metadata, plane geometry of ragged shapes),
///        torchao 0.18.0's to_mx(elem_dtype=torch.float4_e2m1fn_x2) on single blocks (values measured on torch 2.11,
///        CPU), the te / ocp rules (OCP floor, RCEIL from bamax * RN(1/6), non-finite blocks, -0, E2M1 ties and
///        saturation), dequantize, layouts, the exact GEMM operand, FSDP2's refusal of the columnwise plane.
///        Part of the test_torchao_rules executable.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <vector>

#include <unistd.h>

#include <filesystem>

#include "qtc/checkpoint.hpp"
#include "qtc/cpu_path.hpp"
#include "qtc/gemm.hpp"
#include "qtc/layouts.hpp"
#include "qtc/mxfp4_codec.hpp"
#include "qtc/path_rules.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/sharding.hpp"

using namespace qtc;

namespace {

Recipe mx4(MxScaleRule rule, Profile p = Profile::kTE, bool rowwise = true, bool columnwise = true) {
  return Recipe::of(Mxfp4Options{.scale_rule = rule}, p, rowwise, columnwise);
}

std::string rule_of(const Recipe& r) { return std::string(r.broken_rule()); }

struct Mx4Case {
  MxScaleRule rule;
  float v;         ///< x[0] = v, x[1] = float32(v / 3) (1.0 when v is NaN), x[2] = -0.0, the rest 0
  uint8_t scale;   ///< torchao's E8M0 byte
  uint8_t b0, b1;  ///< torchao's packed bytes 0 (x[0], x[1]) and 1 (x[2], x[3])
};

// to_mx(x, torch.float4_e2m1fn_x2, 32, scaling_mode=...) on torchao 0.18.0 / torch 2.11 (CPU).
const Mx4Case kAo[] = {
    {MxScaleRule::kOcpFloor, 6.0f, 127, 0x47, 0x08},     {MxScaleRule::kOcpFloor, 7.0f, 127, 0x47, 0x08},
    {MxScaleRule::kOcpFloor, 8.0f, 128, 0x36, 0x08},     {MxScaleRule::kOcpFloor, 0x1p-130f, 0, 0x00, 0x08},
    {MxScaleRule::kOcpFloor, 1e-38f, 0, 0x12, 0x08},     {MxScaleRule::kOcpFloor, 3e38f, 252, 0x47, 0x08},
    {MxScaleRule::kOcpFloor, INFINITY, 253, 0x77, 0x08}, {MxScaleRule::kOcpFloor, NAN, 255, 0x03, 0x08},
    {MxScaleRule::kOcpFloor, 0.0f, 0, 0x00, 0x08},       {MxScaleRule::kOcpFloor, 5.0f, 127, 0x36, 0x08},
    {MxScaleRule::kOcpFloor, 0.75f, 124, 0x47, 0x08},    {MxScaleRule::kCeil, 6.0f, 128, 0x25, 0x08},
    {MxScaleRule::kCeil, 7.0f, 128, 0x26, 0x08},         {MxScaleRule::kCeil, 8.0f, 128, 0x36, 0x08},
    {MxScaleRule::kCeil, 1e-38f, 0, 0x12, 0x08},         {MxScaleRule::kCeil, 3e38f, 253, 0x26, 0x08},
    {MxScaleRule::kCeil, INFINITY, 253, 0x77, 0x08},     {MxScaleRule::kCeil, NAN, 255, 0x03, 0x08},
    {MxScaleRule::kCeil, 12.0f, 129, 0x25, 0x08},        {MxScaleRule::kEven, 6.0f, 127, 0x47, 0x08},
    {MxScaleRule::kEven, 7.0f, 128, 0x26, 0x08},         {MxScaleRule::kEven, 6.5f, 127, 0x47, 0x08},
    {MxScaleRule::kEven, 3e38f, 253, 0x26, 0x08},        {MxScaleRule::kEven, NAN, 255, 0x03, 0x08},
    {MxScaleRule::kRceil, 6.0f, 127, 0x47, 0x08},        {MxScaleRule::kRceil, 6.5f, 128, 0x25, 0x08},
    {MxScaleRule::kRceil, 1e-38f, 0, 0x00, 0x08},        {MxScaleRule::kRceil, 3e38f, 253, 0x26, 0x08},
    {MxScaleRule::kRceil, INFINITY, 254, 0x77, 0x08},    {MxScaleRule::kRceil, NAN, 255, 0x33, 0x33},
    {MxScaleRule::kRceil, 0.0f, 0, 0x00, 0x08},          {MxScaleRule::kRceil, 0.75f, 124, 0x47, 0x08},
};

TEST(Mxfp4TorchAO, SingleBlocksAgainstTorchao) {
  for (const Mx4Case& c : kAo) {
    std::vector<float> x(32, 0.0f);
    x[0] = c.v;
    x[1] = c.v != c.v ? 1.0f : c.v / 3.0f;
    x[2] = -0.0f;
    const QuantizedTensor q = ref::quantize(MatrixView{x.data(), DType::kF32, 1, 32}, mx4(c.rule, Profile::kTorchAO, true, false));
    const std::string what = std::string(mx_scale_rule_name(c.rule)) + " v=" + std::to_string(c.v);
    EXPECT_EQ(q.rowwise->scale.bytes.at(0), c.scale) << what;
    EXPECT_EQ(q.rowwise->data.at(0), c.b0) << what;
    EXPECT_EQ(q.rowwise->data.at(1), c.b1) << what;
  }
}

TEST(Mxfp4Policy, RulesMetadataAndNames) {
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kOcpFloor)), "");
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kRceil, Profile::kOCP)), "mxfp4-profile-scale-rule");
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kCeil, Profile::kTE)), "mxfp4-profile-scale-rule");
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kEven, Profile::kTorchAO)), "");
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kOcpFloor, Profile::kTEPyRef)), "mxfp4-profile-scale-rule");  // rceil only
  try {
    mx4(MxScaleRule::kCeil, Profile::kOCP).validate();
    FAIL() << "validate() accepted ceil under ocp";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rule 'mxfp4-profile-scale-rule'"), std::string::npos) << e.what();
  }
  const Recipe r = mx4(MxScaleRule::kEven, Profile::kTorchAO);
  EXPECT_EQ(r.name(), "mxfp4_even_torchao");
  EXPECT_EQ(Recipe::from_metadata(r.to_metadata()), r);
  const Recipe d = Recipe::from_metadata({{"recipe", "mxfp4"}});  // default scale_rule ocp_floor, profile te
  EXPECT_EQ(d, mx4(MxScaleRule::kOcpFloor));
  EXPECT_THROW(Recipe::from_metadata({{"recipe", "mxfp4"}, {"fp8_dtype", "e4m3"}}), Error);  // not an MXFP4 key
  EXPECT_THROW(Recipe::from_metadata({{"recipe", "mxfp4"}, {"scale_rule", "floor"}}), Error);
  EXPECT_THROW((void)r.fp8_type(), Error);  // E2M1 data: no FP8 element type
  EXPECT_FALSE(ref::simd_supports(r, DType::kF32));
}

TEST(Mxfp4Policy, RaggedGeometry) {
  const Recipe r = mx4(MxScaleRule::kRceil);
  const PlaneSpec row = describe_plane(r, PlaneKind::kRowwise, 37, 45);
  EXPECT_EQ(row.data_rows, 37);
  EXPECT_EQ(row.data_cols, 23);  // ceil(45 / 2): the last byte's high nibble is padding
  EXPECT_EQ(row.compact, (ScaleShape{37, 2}));
  EXPECT_EQ(row.padded, (ScaleShape{128, 4}));
  const PlaneSpec col = describe_plane(r, PlaneKind::kColumnwise, 37, 45);
  EXPECT_TRUE(col.data_transposed);
  EXPECT_EQ(col.data_rows, 45);
  EXPECT_EQ(col.data_cols, 19);
  EXPECT_EQ(col.compact, (ScaleShape{45, 2}));
  EXPECT_EQ(col.padded, (ScaleShape{128, 4}));
  EXPECT_EQ(col.scale_entry(33, 7), (Index2{7, 1}));
  EXPECT_EQ(col.block_of(33, 7), (XRegion{32, 37, 7, 8}));
  EXPECT_EQ(describe_tensor(r, "amax_rowwise", 37, 45), std::nullopt);
}

// te / ocp: OCP floor, RCEIL from bamax * RN(1/6), -0, E2M1 ties (RN-even) and saturation, non-finite blocks.
TEST(Mxfp4Te, ScaleRulesTiesAndSpecials) {
  EXPECT_EQ(mxfp4::scale_te(6.0f, MxScaleRule::kOcpFloor, false), 127);    // floor(log2 6) - 2 = 0
  EXPECT_EQ(mxfp4::scale_te(7.99f, MxScaleRule::kOcpFloor, false), 127);   // 7.99 -> saturates to 6
  EXPECT_EQ(mxfp4::scale_te(8.0f, MxScaleRule::kOcpFloor, false), 128);
  EXPECT_EQ(mxfp4::scale_te(6.0f, MxScaleRule::kRceil, false), 127);  // 6 * RN(1/6) rounds to exactly 1.0
  EXPECT_EQ(mxfp4::scale_te(std::nextafter(6.0f, 7.0f), MxScaleRule::kRceil, false), 128);
  EXPECT_EQ(mxfp4::scale_te(3.0f, MxScaleRule::kRceil, false), 126);
  EXPECT_EQ(mxfp4::scale_te(0.0f, MxScaleRule::kRceil, false), 0);
  EXPECT_EQ(mxfp4::scale_te(INFINITY, MxScaleRule::kRceil, false), 0xFE);  // TE satfinite
  EXPECT_EQ(mxfp4::scale_te(INFINITY, MxScaleRule::kOcpFloor, true), 0xFF);  // OCP: NaN scale
  EXPECT_EQ(mxfp4::scale_te(NAN, MxScaleRule::kOcpFloor, true), 0xFF);
  EXPECT_EQ(mxfp4::scale_te(0x1p-149f, MxScaleRule::kOcpFloor, false), 0);  // clamped at 2^-127
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, -0.0f, -0.1f, NAN, -INFINITY};
  const uint8_t want[] = {0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x7, 0x8, 0x8, 0x7, 0xF};
  for (size_t i = 0; i < std::size(ties); ++i) EXPECT_EQ(mxfp4::code_te(ties[i], 127), want[i]) << ties[i];
  // Whole tensors: a NaN is ignored by te's amax (its element -> 0x7), propagates into ocp's (scale 0xFF).
  std::vector<float> x(64, 1.0f);
  x[3] = NAN;
  x[40] = -0.0f;
  const MatrixView v{x.data(), DType::kF32, 1, 64};
  const QuantizedTensor te = ref::quantize(v, mx4(MxScaleRule::kOcpFloor, Profile::kTE, true, false));
  EXPECT_EQ(te.rowwise->scale.bytes[0], 125);  // 1.0: floor(0) - 2
  EXPECT_EQ(te.rowwise->data[1] & 0xF0, 0x70);
  EXPECT_EQ(te.rowwise->data[20] & 0x0F, 0x08);
  const QuantizedTensor ocp = ref::quantize(v, mx4(MxScaleRule::kOcpFloor, Profile::kOCP, true, false));
  EXPECT_EQ(ocp.rowwise->scale.bytes[0], 0xFF);
  EXPECT_EQ(ocp.rowwise->scale.bytes[1], 125);
  EXPECT_TRUE(std::isnan(ref::dequantize(ocp, PlaneKind::kRowwise, DType::kF32).get(0, 0)));
}

// triton_kernels' _downcast_to_mxfp (profile triton_kernels, mxfp4_codec.hpp): ROUND_UP = rceil from the bits of
// bamax * RN(1/6) plus 0x7FFFFF, ROUND_DOWN = ocp_floor from the bits of bamax / 4; byte 0x00 and 0xFF zero the data;
// max.f32 amax (NaN ignored unless the block is all NaN); E2M1 RN-even saturating, NaN -> 0x7 whatever its sign.
TEST(Mxfp4Triton, ScaleBitsDataAndNaNBlocks) {
  using mxfp4::scale_triton;
  EXPECT_EQ(scale_triton(6.0f, MxScaleRule::kRceil), 127);  // 6 * RN(1/6) rounds to exactly 1.0
  EXPECT_EQ(scale_triton(std::nextafter(6.0f, 7.0f), MxScaleRule::kRceil), 128);
  EXPECT_EQ(scale_triton(6.0f, MxScaleRule::kOcpFloor), 127);  // 1.5 -> 1.0
  EXPECT_EQ(scale_triton(7.99f, MxScaleRule::kOcpFloor), 127);
  EXPECT_EQ(scale_triton(8.0f, MxScaleRule::kOcpFloor), 128);
  EXPECT_EQ(scale_triton(0.0f, MxScaleRule::kRceil), 0);
  EXPECT_EQ(scale_triton(0.0f, MxScaleRule::kOcpFloor), 0);
  EXPECT_EQ(scale_triton(NAN, MxScaleRule::kRceil), 0);  // 0x7FC00000 + 0x7FFFFF carries out of the exponent
  EXPECT_EQ(scale_triton(NAN, MxScaleRule::kOcpFloor), 0xFF);
  EXPECT_EQ(scale_triton(INFINITY, MxScaleRule::kRceil), 0xFF);
  EXPECT_EQ(scale_triton(INFINITY, MxScaleRule::kOcpFloor), 0xFF);
  EXPECT_EQ(scale_triton(FLT_MAX, MxScaleRule::kRceil), 253);  // 2^125.4 up to 2^126
  EXPECT_EQ(scale_triton(FLT_MAX, MxScaleRule::kOcpFloor), 252);
  EXPECT_EQ(scale_triton(1e-38f, MxScaleRule::kRceil), 1);       // a subnormal ds rounds up to 2^-126
  EXPECT_EQ(scale_triton(0x1p-125f, MxScaleRule::kOcpFloor), 0);  // 2^-127 is subnormal: the exponent field is 0
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, -0.0f, -0.1f, NAN, -NAN, -INFINITY};
  const uint8_t want[] = {0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0x7, 0x8, 0x8, 0x7, 0x7, 0xF};
  for (size_t i = 0; i < std::size(ties); ++i) EXPECT_EQ(mxfp4::code_triton(ties[i], 127), want[i]) << ties[i];
  EXPECT_EQ(mxfp4::code_triton(1.0f, 0x00), 0x0);  // quant_scale 0: the data of a 0x00 block is +-0
  EXPECT_EQ(mxfp4::code_triton(-1.0f, 0x00), 0x8);
  EXPECT_EQ(mxfp4::code_triton(-1.0f, 0xFF), 0x8);      // 1 / Inf = 0
  EXPECT_EQ(mxfp4::code_triton(INFINITY, 0xFF), 0x7);   // Inf * 0 = NaN
  EXPECT_EQ(mxfp4::code_triton(0x1p-125f, 1), 0x4);     // 2^-125 * 2^126 = 2
  // Whole tensors: block 0 of 1.0 with one NaN (ignored), block 1 all NaN (the amax stays NaN).
  std::vector<float> x(64, 1.0f);
  x[3] = NAN;
  for (int j = 32; j < 64; ++j) x[j] = j % 2 ? -NAN : NAN;
  x[7] = -0.0f;
  const MatrixView v{x.data(), DType::kF32, 1, 64};
  const QuantizedTensor up = ref::quantize(v, mx4(MxScaleRule::kRceil, Profile::kTritonKernels, true, false));
  EXPECT_EQ(up.rowwise->scale.bytes[0], 125);  // 1 * RN(1/6) up to 2^-2
  EXPECT_EQ(up.rowwise->scale.bytes[1], 0);
  EXPECT_EQ(up.rowwise->data[0], 0x66);
  EXPECT_EQ(up.rowwise->data[1], 0x76);
  EXPECT_EQ(up.rowwise->data[3], 0x86);
  EXPECT_EQ(up.rowwise->data[16], 0x77);
  const QuantizedTensor down = ref::quantize(v, mx4(MxScaleRule::kOcpFloor, Profile::kTritonKernels, true, false));
  EXPECT_EQ(down.rowwise->scale.bytes[0], 125);
  EXPECT_EQ(down.rowwise->scale.bytes[1], 0xFF);
  EXPECT_EQ(down.rowwise->data[31], 0x77);
  // A block whose bamax / 4 is subnormal: byte 0 under both triton_kernels' ROUND_DOWN and OCP's floor, but the
  // kernel zeroes the data where OCP scales it by 2^127.
  std::vector<float> t(32, 0x1p-125f);
  const MatrixView tv{t.data(), DType::kF32, 1, 32};
  EXPECT_EQ(ref::quantize(tv, mx4(MxScaleRule::kOcpFloor, Profile::kTritonKernels, true, false)).rowwise->data[0], 0x00);
  EXPECT_EQ(ref::quantize(tv, mx4(MxScaleRule::kOcpFloor, Profile::kOCP, true, false)).rowwise->data[0], 0x66);
  // The profile defines mxfp4 only, with ROUND_UP / ROUND_DOWN; paths without the order refuse it by its name.
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kRceil, Profile::kTritonKernels)), "");
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kEven, Profile::kTritonKernels)), "mxfp4-profile-scale-rule");
  const Recipe r = mx4(MxScaleRule::kOcpFloor, Profile::kTritonKernels);
  EXPECT_EQ(Recipe::from_metadata(r.to_metadata()), r);
  EXPECT_EQ(Recipe::from_metadata({{"recipe", "mxfp4"}, {"profile", "triton_kernels"}, {"scale_rule", "rceil"}}),
            mx4(MxScaleRule::kRceil, Profile::kTritonKernels));
  EXPECT_EQ(rule_of(Recipe::of(Mxfp8Options{}, Profile::kTritonKernels)), "profile-defines-kind");
  const std::string why = unimplemented_rule(r, PathRules{.path = "a test path"});
  EXPECT_NE(why.find("rule mxfp4.order triton_kernels (profile 'triton_kernels') is not implemented by a test path"),
            std::string::npos) << why;
  EXPECT_EQ(unimplemented_rule(r, PathRules{.path = "p", .mx_order_triton_kernels = true}), "");
  EXPECT_NE(unimplemented_rule(Recipe::of(Mxfp8Options{}, Profile::kTritonKernels), PathRules{.path = "p", .mx_order_triton_kernels = true}),
            "");
}

// vLLM's UE8M0 FP4 quantizer (profile vllm_cutlass, the threshold rule `even`): bamax rounded up from a mantissa of
// 0.75, exponent - 2 clamped to [0, 254]; an all-NaN block 0x00; byte 0x00 zeroes the data.
TEST(Mxfp4VllmCutlass, ThresholdRuleAndZeroScale) {
  using mxfp4::scale_vllm_cutlass;
  EXPECT_EQ(scale_vllm_cutlass(6.0f), 127);   // 1.5 * 2^2: below the threshold
  EXPECT_EQ(scale_vllm_cutlass(7.0f), 128);   // 1.75 * 2^2 rounds up to 2^3
  EXPECT_EQ(scale_vllm_cutlass(std::nextafter(7.0f, 0.0f)), 127);
  EXPECT_EQ(scale_vllm_cutlass(0.0f), 0);
  EXPECT_EQ(scale_vllm_cutlass(0x1p-126f), 0);  // exponent 1 - 2 clamped to 0
  EXPECT_EQ(scale_vllm_cutlass(0x1p-124f), 1);
  EXPECT_EQ(scale_vllm_cutlass(INFINITY), 253);
  EXPECT_EQ(scale_vllm_cutlass(FLT_MAX), 253);
  EXPECT_EQ(scale_vllm_cutlass(NAN), 0);
  std::vector<float> x(64, 0x1p-125f);  // block 0: byte 0 (2^-125 -> exponent 2 - 2), data zeroed
  for (int j = 32; j < 64; ++j) x[j] = j == 40 ? NAN : 7.0f;  // block 1: the NaN is ignored, 7 -> byte 128, 7/2 -> 4
  x[1] = -0x1p-125f;
  const MatrixView v{x.data(), DType::kF32, 1, 64};
  const QuantizedTensor q = ref::quantize(v, mx4(MxScaleRule::kEven, Profile::kVllmCutlass, true, false));
  EXPECT_EQ(q.rowwise->scale.bytes[0], 0);
  EXPECT_EQ(q.rowwise->scale.bytes[1], 128);
  EXPECT_EQ(q.rowwise->data[0], 0x80);
  EXPECT_EQ(q.rowwise->data[16], 0x66);
  EXPECT_EQ(q.rowwise->data[20], 0x67);  // element 40: NaN -> 0x7 (low nibble), 41: 4 -> 0x6
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kRceil, Profile::kVllmCutlass)), "mxfp4-profile-scale-rule");
  EXPECT_EQ(unimplemented_rule(mx4(MxScaleRule::kEven, Profile::kVllmCutlass), PathRules{.path = "p", .mx_order_triton_kernels = true}), "");
}

// FBGEMM's MX4 (profile fbgemm, scale rule ceil): ceil of the float32 log2 (below k + 1 just above 2^k), clamp
// [-127, 125]; elements rounded half away from zero on 3 significant bits; Inf elements -> +-0; NaN blocks 0xFF.
TEST(Mxfp4Fbgemm, Log2CeilAndHalfAwayRounding) {
  using mxfp4::scale_fbgemm;
  EXPECT_EQ(scale_fbgemm(16.0f), 129);
  EXPECT_EQ(scale_fbgemm(16.0f * (1.0f + 0x1p-23f)), 129);  // log2 = 4 + 1.7e-7 rounds to 4 in float32 (exact: 5)
  EXPECT_EQ(scale_fbgemm(2.0f * (1.0f + 0x1p-23f)), 127);   // at k = 1 the float32 log2 keeps the excess: ceil 2
  EXPECT_EQ(scale_fbgemm(17.0f), 130);
  EXPECT_EQ(scale_fbgemm(0.0f), 0);  // 2^-126: -126 - 2 clamped to -127
  EXPECT_EQ(scale_fbgemm(FLT_MAX), 252);
  EXPECT_EQ(scale_fbgemm(INFINITY), 252);
  EXPECT_EQ(scale_fbgemm(NAN), 0xFF);
  const float v[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.5f, 7.0f, -0.0f, 0.2f, 0.3f, 0.74f, -1.25f,
                     INFINITY, -INFINITY, 0x1p-130f};
  const uint8_t want[] = {0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x7, 0x7, 0x8, 0x0, 0x1, 0x1, 0xB, 0x0, 0x8, 0x0};
  for (size_t i = 0; i < std::size(v); ++i) EXPECT_EQ(mxfp4::code_fbgemm(v[i], 127), want[i]) << v[i];
  EXPECT_EQ(mxfp4::code_fbgemm(3e38f, 252), 0x7);  // 3e38 / 2^125 = 7.05 saturates
  EXPECT_EQ(mxfp4::code_fbgemm(-1.0f, 0xFF), 0x0);
  std::vector<float> x(64, 1.0f);
  x[5] = NAN;  // block 0: NaN propagates (torch.max) -> 0xFF, codes 0 (qtc's choice where FBGEMM is undefined)
  x[40] = 1.25f;  // block 1: amax 1.25 -> ceil(0.32) - 2 = -1: 1.25 * 2 = 2.5 -> 3 (half away), 1.0 * 2 -> 2
  const MatrixView mv{x.data(), DType::kF32, 1, 64};
  const QuantizedTensor q = ref::quantize(mv, mx4(MxScaleRule::kCeil, Profile::kFbgemm, true, false));
  EXPECT_EQ(q.rowwise->scale.bytes[0], 0xFF);
  EXPECT_EQ(q.rowwise->data[2], 0x00);
  EXPECT_EQ(q.rowwise->scale.bytes[1], 126);
  EXPECT_EQ(q.rowwise->data[20], 0x45);
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kRceil, Profile::kFbgemm)), "mxfp4-profile-scale-rule");
  EXPECT_EQ(unimplemented_rule(mx4(MxScaleRule::kCeil, Profile::kFbgemm), PathRules{.path = "p", .mx_order_fbgemm = true}), "");
  EXPECT_NE(unimplemented_rule(mx4(MxScaleRule::kCeil, Profile::kFbgemm), PathRules{.path = "p", .mx_order_triton_kernels = true}), "");
}

// TransformerEngine's PyTorch reference (profile te_pyref, rceil): NVFP4QuantizerRef(pow_2_scales=True, (1, 32)):
// torchao's RCEIL byte, data x * (1 / 2^(e-127)) (2^127 for byte 0, where torchao multiplies by 1.0) by value buckets
// (-0.0 and NaN -> 0x0); NaN propagates into the block (0xFF, codes 0x0). Every other path refuses it by name.
TEST(Mxfp4TePyRef, TorchRceilScaleAndValueBuckets) {
  std::vector<float> x(128, 0.0f);
  x[0] = 7.0f;     // 7 / 6 -> ceil(log2) = 1: byte 128, data x / 2: 7 -> 3.5 -> 4 (tie to even, code 0x6)
  x[1] = -0.0f;    // -> 0x0
  x[2] = -0.1f;    // -0.05 -> 0x8
  x[3] = 2.5f;     // 1.25 -> 1.0 (tie to even, 0x2)
  for (int j = 32; j < 64; ++j) x[j] = j == 40 ? NAN : 1.0f;  // block 1: NaN propagates: 0xFF, codes 0x0
  x[65] = -0.0f;                                              // block 2: zeros: byte 0, codes 0x0
  for (int j = 96; j < 128; ++j) x[j] = 0x1p-128f;            // block 3: byte 0, x * 2^127 = 0.5 -> 0x1
  const MatrixView v{x.data(), DType::kF32, 1, 128};
  const QuantizedTensor q = ref::quantize(v, mx4(MxScaleRule::kRceil, Profile::kTEPyRef, true, false));
  const std::vector<uint8_t> scales(q.rowwise->scale.bytes.begin(), q.rowwise->scale.bytes.begin() + 4);
  EXPECT_EQ(scales, (std::vector<uint8_t>{128, 0xFF, 0x00, 0x00}));
  EXPECT_EQ(q.rowwise->data[0], 0x06);
  EXPECT_EQ(q.rowwise->data[1], 0x28);
  EXPECT_EQ(q.rowwise->data[20], 0x00);
  EXPECT_EQ(q.rowwise->data[32], 0x00);
  EXPECT_EQ(q.rowwise->data[48], 0x11);
  EXPECT_EQ(mxfp4::code_te_reference(0x1p-128f, 0), 0x1);
  EXPECT_EQ(mxfp4::code_torchao(0x1p-128f, 0, MxScaleRule::kRceil), 0x0);  // torchao: x * 1.0 for byte 0
  EXPECT_EQ(mxfp4::code_te_reference(-INFINITY, 0xFE), 0xF);
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kRceil, Profile::kTEPyRef)), "");
  const std::string why = unimplemented_rule(mx4(MxScaleRule::kRceil, Profile::kTEPyRef),
                                             PathRules{.path = "p", .mx_order_torchao = true, .mx_order_quark = true});
  EXPECT_NE(why.find("rule mxfp4.order te_pyref (profile 'te_pyref') is not implemented by p"), std::string::npos) << why;
  EXPECT_EQ(unimplemented_rule(Recipe::of(Mxfp8Options{}, Profile::kTEPyRef), PathRules{.path = "p"}), "");  // MXFP8: te's
}

// amd-quark's qdq_mxfp4 (profile quark, scale rule even): the block max rounded on the input type's bits (mantissa
// >= 0.75 up), byte clamp(floor(log2) + 125, 0, 254) with Inf -> 254 and 0 -> 254 (int(-Inf) - 2 wraps as nvcc compiles
// it); F16's largest binade rounds to Inf and its subnormals to 0 or 2^-14; F16's byte 254 divides by Inf.
TEST(Mxfp4Quark, EvenOnTheInputTypeAndF16Scales) {
  using mxfp4::scale_quark;
  for (bool f16 : {false, true}) {
    EXPECT_EQ(scale_quark(6.0f, f16), 127);  // 1.5 * 2^2 stays 2^2
    EXPECT_EQ(scale_quark(7.0f, f16), 128);  // 1.75 * 2^2 rounds up to 2^3
    EXPECT_EQ(scale_quark(0.0f, f16), 254);  // INT_MIN - 2 wraps: min(INT_MAX - 1, 127) + 127
    EXPECT_EQ(scale_quark(NAN, f16), 254);   // an all-NaN block: T's NaN rounds to -0
    EXPECT_EQ(scale_quark(INFINITY, f16), 254);
  }
  EXPECT_EQ(scale_quark(0x1p-125f, false), 0);    // 2^-125: -125 - 2 + 127 = 0
  EXPECT_EQ(scale_quark(0x1p-124f, false), 1);
  EXPECT_EQ(scale_quark(0x1.8p-127f, false), 0);  // a BF16 subnormal at 0.75 of 2^-126 carries into 2^-126: 0
  EXPECT_EQ(scale_quark(0x1.7p-127f, false), 254);  // below it: 0 (-Inf), as a zero block
  EXPECT_EQ(scale_quark(0x1.FEp127f, false), 254);  // BF16's largest values round to Inf
  EXPECT_EQ(scale_quark(0x1.Cp127f, false), 254);   // from 1.75 * 2^127 on
  EXPECT_EQ(scale_quark(0x1.6p127f, false), 252);
  EXPECT_EQ(scale_quark(65504.0f, true), 254);  // F16: 1.99 * 2^15 rounds past F16's range
  EXPECT_EQ(scale_quark(57344.0f, true), 254);  // 1.75 * 2^15
  EXPECT_EQ(scale_quark(57312.0f, true), 140);  // the F16 value below it: 2^15 -> 15 - 2 + 127
  EXPECT_EQ(scale_quark(65504.0f, false), 141);  // the same value in BF16 / F32 rounds to 2^16
  EXPECT_EQ(scale_quark(0x1p-14f, true), 111);
  EXPECT_EQ(scale_quark(0x300p-24f, true), 111);  // F16 subnormal mantissa 0x300 carries into 2^-14
  EXPECT_EQ(scale_quark(0x2FFp-24f, true), 254);  // 0x2FF does not: 0, as a zero block
  EXPECT_EQ(scale_quark(0x2FFp-24f, false), 110);  // as a float32 normal it rounds to 2^-15: -15 - 2 + 127
  // Codes: te's data step where T's scale is exact; F16's bytes 0x00 (scale 0) and 254 (scale Inf).
  EXPECT_EQ(mxfp4::code_quark(1.25f, 127, true), 0x2);  // ties to even
  EXPECT_EQ(mxfp4::code_quark(-7.0f, 127, false), 0xF);
  EXPECT_EQ(mxfp4::code_quark(0x1p-128f, 0, false), 0x1);  // BF16 byte 0: x / 2^-127 = 0.5
  EXPECT_EQ(mxfp4::code_quark(0.0f, 0, false), 0x0);
  EXPECT_EQ(mxfp4::code_quark(0.0f, 0, true), 0x7);       // 0 / 0: the GPU's NaN -> +6
  EXPECT_EQ(mxfp4::code_quark(-0.0f, 0, true), 0x7);
  EXPECT_EQ(mxfp4::code_quark(-0x1p-24f, 0, true), 0xF);  // -x / 0 = -Inf -> -6
  EXPECT_EQ(mxfp4::code_quark(-60000.0f, 254, true), 0x8);  // x / Inf = -0
  EXPECT_EQ(mxfp4::code_quark(-INFINITY, 254, true), 0x7);  // Inf / Inf: NaN -> +6
  EXPECT_EQ(mxfp4::code_quark(-INFINITY, 254, false), 0xF);  // BF16: -Inf / 2^127 = -Inf -> -6
  EXPECT_EQ(mxfp4::code_quark(NAN, 130, false), 0x7);
  // Through the quantizer, F16 input: block 0 all zeros (byte 254, codes 0x0), block 1 with max 57344 (rounds to Inf:
  // 254, data +-0), block 2 a NaN among ones (ignored by the amax, code 0x7), block 3 a -Inf among ones (Inf / Inf).
  std::vector<uint16_t> h(128, 0x0000);
  for (int j = 32; j < 64; ++j) h[j] = 0xBB00;  // -0.875
  h[32] = 0x7B00;                               // 57344 = 1.75 * 2^15
  for (int j = 64; j < 128; ++j) h[j] = 0x3C00;  // 1.0
  h[70] = 0x7E00;                                // NaN
  h[97] = 0xFC00;                                // -Inf
  const MatrixView hv{h.data(), DType::kF16, 1, 128};
  const QuantizedTensor q = ref::quantize(hv, mx4(MxScaleRule::kEven, Profile::kQuark, true, false));
  EXPECT_EQ(q.rowwise->scale.bytes[0], 254);
  EXPECT_EQ(q.rowwise->data[0], 0x00);
  EXPECT_EQ(q.rowwise->scale.bytes[1], 254);
  EXPECT_EQ(q.rowwise->data[16], 0x80);  // 57344 / Inf = +0 (low nibble), -0.875 / Inf = -0
  EXPECT_EQ(q.rowwise->data[17], 0x88);
  EXPECT_EQ(q.rowwise->scale.bytes[2], 125);  // amax 1.0: 0 - 2 + 127
  EXPECT_EQ(q.rowwise->data[35], 0x67);  // element 70: NaN -> 0x7; element 71: 1.0 / 2^-2 = 4 -> 0x6
  EXPECT_EQ(q.rowwise->scale.bytes[3], 254);
  EXPECT_EQ(q.rowwise->data[48], 0x70);  // element 96: 1.0 / Inf = +0; element 97: -Inf / Inf -> 0x7
  EXPECT_EQ(rule_of(mx4(MxScaleRule::kRceil, Profile::kQuark)), "mxfp4-profile-scale-rule");
  EXPECT_EQ(rule_of(Recipe::of(Mxfp8Options{}, Profile::kQuark)), "profile-defines-kind");
  EXPECT_EQ(unimplemented_rule(mx4(MxScaleRule::kEven, Profile::kQuark), PathRules{.path = "p", .mx_order_quark = true}), "");
  const std::string why = unimplemented_rule(mx4(MxScaleRule::kEven, Profile::kQuark), PathRules{.path = "p", .mx_order_fbgemm = true});
  EXPECT_NE(why.find("rule mxfp4.order quark (profile 'quark') is not implemented by p"), std::string::npos) << why;
}

// Ragged shapes: the two planes and their dequantization, against a direct per-block computation, every layout.
TEST(Mxfp4Te, RaggedPlanesLayoutsAndDequantize) {
  const int64_t M = 37, K = 45;
  std::vector<float> x(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M * K; ++i) x[static_cast<size_t>(i)] = std::ldexp(static_cast<float>((i * 7919) % 201) - 100.0f, static_cast<int>(i % 11) - 5);
  const MatrixView v{x.data(), DType::kF32, M, K};
  const Recipe r = mx4(MxScaleRule::kRceil);
  const QuantizedTensor q = ref::quantize(v, r);
  const HostMatrix dr = ref::dequantize(q, PlaneKind::kRowwise, DType::kF32);
  const HostMatrix dc = ref::dequantize(q, PlaneKind::kColumnwise, DType::kF32);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      float a = 0.0f;
      for (int64_t t = j / 32 * 32; t < std::min<int64_t>(K, j / 32 * 32 + 32); ++t) a = std::max(a, std::fabs(x[static_cast<size_t>(i * K + t)]));
      const uint8_t e = mxfp4::scale_te(a, MxScaleRule::kRceil, false);
      EXPECT_EQ(dr.get(i, j), mxfp4::decode(mxfp4::code_te(x[static_cast<size_t>(i * K + j)], e), e)) << i << "," << j;
      float b = 0.0f;
      for (int64_t t = i / 32 * 32; t < std::min<int64_t>(M, i / 32 * 32 + 32); ++t) b = std::max(b, std::fabs(x[static_cast<size_t>(t * K + j)]));
      const uint8_t ec = mxfp4::scale_te(b, MxScaleRule::kRceil, false);
      EXPECT_EQ(q.columnwise->scale.byte(j, i / 32), ec);
      EXPECT_EQ(dc.get(i, j), mxfp4::decode(mxfp4::code_te(x[static_cast<size_t>(i * K + j)], ec), ec)) << i << "," << j;
    }
  EXPECT_EQ(q.rowwise->data[22] >> 4, 0);  // odd K: the last high nibble is padding
  for (ScaleLayout l : {ScaleLayout::kPadded, ScaleLayout::kSwizzled}) {
    QuantizedTensor t = q;
    ref::convert_layout(t, l);
    EXPECT_EQ(t.rowwise->scale.rows, 128);
    ref::convert_layout(t, ScaleLayout::kCompact);
    EXPECT_EQ(t.rowwise->scale.bytes, q.rowwise->scale.bytes);
    EXPECT_EQ(t.columnwise->scale.bytes, q.columnwise->scale.bytes);
  }
}

TEST(Mxfp4Te, ExactGemmOperandAndFsdpRule) {
  const int64_t M = 40, N = 24, K = 70;
  std::vector<float> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(N * K));
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i)) * 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(static_cast<float>(i) * 0.7f);
  const Recipe r = mx4(MxScaleRule::kOcpFloor);
  const QuantizedTensor qa = ref::quantize(MatrixView{a.data(), DType::kF32, M, K}, r);
  const QuantizedTensor qb = ref::quantize(MatrixView{b.data(), DType::kF32, N, K}, r);
  const HostMatrix d = ref::gemm_exact(qa, qb, ref::GemmArgs{});  // TN: D[n][m] = sum_k B[n][k] A[m][k]
  const HostMatrix da = ref::dequantize(qa, PlaneKind::kRowwise, DType::kF32);
  const HostMatrix db = ref::dequantize(qb, PlaneKind::kRowwise, DType::kF32);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double s = 0.0;  // exact: products of E2M1 x 2^e values, 70 terms, well inside 53 bits
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(da.get(m, k)) * static_cast<double>(db.get(n, k));
      EXPECT_EQ(d.get(n, m), static_cast<float>(s)) << n << "," << m;
    }
  ref::ShardPayload p;
  EXPECT_NO_THROW(p = ref::fsdp_pre_all_gather(ref::quantize(MatrixView{a.data(), DType::kF32, M, K}, mx4(MxScaleRule::kOcpFloor, Profile::kTE, true, false))));
  EXPECT_THROW((void)ref::fsdp_pre_all_gather(qa), Error);
}

// Checkpoints: per-rank row shards (slice_rows at a multiple of 32, the columnwise block height) saved and loaded
// whole and at another world size, bit for bit; both planes, odd K.
TEST(Mxfp4Te, CheckpointShardsRoundTrip) {
  const int64_t M = 64, K = 45;
  std::vector<float> x(static_cast<size_t>(M * K));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f) * static_cast<float>(1 + i % 9);
  const QuantizedTensor q = ref::quantize(MatrixView{x.data(), DType::kF32, M, K}, mx4(MxScaleRule::kRceil));
  EXPECT_EQ(ref::row_granularity(q), 32);
  const std::string dir = (std::filesystem::temp_directory_path() / ("qtc_mxfp4_ckpt_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  std::vector<std::vector<ref::TensorShard>> per_rank(2);
  for (int rk = 0; rk < 2; ++rk) per_rank[static_cast<size_t>(rk)].push_back({"w", M, 32 * rk, ref::slice_rows(q, 32 * rk, 32 * rk + 32)});
  ref::save_checkpoint(dir, per_rank);
  const auto full = ref::load_checkpoint_full(dir);
  ASSERT_EQ(full.count("w"), 1u);
  EXPECT_TRUE(ref::bitwise_equal(full.at("w"), q));
  const auto one = ref::load_checkpoint(dir, 0, 1);  // world size 1
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(ref::bitwise_equal(one[0].tensor, q));
  std::filesystem::remove_all(dir);
}

// The 8x4 small-M swizzle (FlashInfer / TensorRT-LLM) against an independent oracle: S padded to [R8, C4] viewed
// as (R8/8, 8, C4/4, 4) and permuted to (0, 2, 1, 3), for NVFP4, MXFP8 (columnwise: S = compact^T) and MXFP4, with
// ragged shapes; padding is zero and unswizzle inverts it.
TEST(Layout8x4, AgainstTheViewPermuteOracleAndRoundTrip) {
  EXPECT_EQ(swizzled_8x4_offset(0, 0, 3), 0);
  EXPECT_EQ(swizzled_8x4_offset(1, 2, 3), 6);
  EXPECT_EQ(swizzled_8x4_offset(9, 5, 6), 2 * 32 + 32 + 4 + 1);
  const Recipe rs[] = {Recipe::of(Nvfp4Options{}), Recipe::of(Mxfp8Options{}), mx4(MxScaleRule::kOcpFloor)};
  const int64_t shapes[][2] = {{1, 32}, {13, 96}, {48, 400}, {129, 64}};
  for (const Recipe& r : rs)
    for (const auto& sh : shapes)
      for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
        const int64_t M = sh[0], K = sh[1];
        if (r.is(RecipeKind::kNVFP4) && (M % 16 != 0 || K % 16 != 0)) continue;
        const PlaneSpec s = describe_plane(r, pk, M, K);
        ScaleMatrix c;
        c.type = s.scale_type;
        c.rows = s.compact.rows;
        c.cols = s.compact.cols;
        for (int64_t i = 0; i < c.rows * c.cols; ++i) c.bytes.push_back(static_cast<uint8_t>(1 + (i * 37) % 251));
        const bool t = s.tiles_transposed;
        const int64_t R = t ? c.cols : c.rows, C = t ? c.rows : c.cols, R8 = (R + 7) / 8 * 8, C4 = (C + 3) / 4 * 4;
        std::vector<uint8_t> want;
        for (int64_t a = 0; a < R8 / 8; ++a)
          for (int64_t d = 0; d < C4 / 4; ++d)
            for (int64_t b = 0; b < 8; ++b)
              for (int64_t e = 0; e < 4; ++e) {
                const int64_t i = a * 8 + b, j = d * 4 + e;
                want.push_back(i < R && j < C ? (t ? c.byte(j, i) : c.byte(i, j)) : 0);
              }
        const ScaleMatrix got = ref::convert_layout(c, Layout::kSwizzled8x4, r, pk, M, K);
        EXPECT_EQ(got.bytes, want) << r.name() << " " << M << "x" << K << " " << plane_kind_name(pk);
        EXPECT_EQ(got.rows, R8);
        EXPECT_EQ(got.cols, C4);
        EXPECT_EQ(ref::convert_layout(got, Layout::kCompact, r, pk, M, K).bytes, c.bytes);
        // The same bytes from every other layout, and the geometry the kernels call agrees entry by entry.
        const ScaleMatrix sw = ref::convert_layout(c, Layout::kSwizzled, r, pk, M, K);
        EXPECT_EQ(ref::convert_layout(sw, Layout::kSwizzled8x4, r, pk, M, K).bytes, want);
        const ScaleGeometry g = s.geometry(Layout::kSwizzled8x4);
        for (int64_t i = 0; i < c.rows; ++i)
          for (int64_t j = 0; j < c.cols; ++j) ASSERT_EQ(want[static_cast<size_t>(g.offset(i, j))], c.byte(i, j));
      }
  // FP8 block scales (F32) have no 8x4 layout: the error names the rule.
  const PlaneSpec fb = describe_plane(Recipe::of(Fp8BlockOptions{}), PlaneKind::kRowwise, 128, 128);
  EXPECT_FALSE(fb.has_layout(Layout::kSwizzled8x4));
  try {
    (void)fb.geometry(Layout::kSwizzled8x4);
    ADD_FAILURE() << "fp8_block has no 8x4 layout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rule 'layout-swizzled_8x4'"), std::string::npos) << e.what();
  }
}

}  // namespace
