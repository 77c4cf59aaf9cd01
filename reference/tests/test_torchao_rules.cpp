/// \file test_torchao_rules.cpp
/// \brief Profile torchao against values measured from torchao 0.18.0 on torch 2.15 (CPU): to_mx under
///        FLOOR, CEIL, EVEN and RCEIL (E4M3 and E5M2), nvfp4_quantize with and without a per-tensor scale
///        (NaN payloads included), and the profile records themselves (profile.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "qtc/path_rules.hpp"
#include "qtc/peer_codec.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/rcp_approx.hpp"
#include "qtc/torchao_codec.hpp"

using namespace qtc;

namespace {

struct MxCase {
  MxScaleRule rule;
  Fp8Type fp8;
  float v;          ///< x[0] = v, x[1] = v / 3, the other 30 elements 0
  uint8_t scale;    ///< torchao's E8M0 byte
  uint8_t d0, d1;   ///< torchao's data bytes of x[0] and x[1]
};

// to_mx(x, float8_*, 32, scaling_mode=...) on torch 2.15 / torchao 0.18.0.
const MxCase kMx[] = {
    {MxScaleRule::kOcpFloor, Fp8Type::kE4M3, 448.0f, 127, 0x7e, 0x71},
    {MxScaleRule::kOcpFloor, Fp8Type::kE4M3, 496.0f, 127, 0x7e, 0x72},
    {MxScaleRule::kOcpFloor, Fp8Type::kE4M3, 0x1p-120f, 0, 0x68, 0x5b},  // code 0, data divided by 2^-126
    {MxScaleRule::kOcpFloor, Fp8Type::kE5M2, 61440.0f, 127, 0x7b, 0x75},
    {MxScaleRule::kCeil, Fp8Type::kE4M3, 448.0f, 128, 0x76, 0x69},
    {MxScaleRule::kCeil, Fp8Type::kE4M3, 256.0f, 127, 0x78, 0x6b},
    {MxScaleRule::kCeil, Fp8Type::kE4M3, 257.0f, 128, 0x70, 0x63},
    {MxScaleRule::kCeil, Fp8Type::kE4M3, 1e-38f, 0, 0x36, 0x29},
    {MxScaleRule::kCeil, Fp8Type::kE5M2, 448.0f, 121, 0x77, 0x71},
    {MxScaleRule::kCeil, Fp8Type::kE5M2, 57344.0f, 128, 0x77, 0x71},
    {MxScaleRule::kEven, Fp8Type::kE4M3, 480.0f, 127, 0x7e, 0x72},
    {MxScaleRule::kEven, Fp8Type::kE4M3, 496.0f, 128, 0x78, 0x6a},  // 1.9375 rounds to 2 at 3 mantissa bits
    {MxScaleRule::kEven, Fp8Type::kE5M2, 448.0f, 120, 0x7b, 0x75},
    {MxScaleRule::kEven, Fp8Type::kE5M2, 480.0f, 121, 0x78, 0x71},  // 1.875 rounds to 2 at 2 mantissa bits
    {MxScaleRule::kEven, Fp8Type::kE5M2, 61440.0f, 128, 0x78, 0x71},
    {MxScaleRule::kRceil, Fp8Type::kE4M3, 480.0f, 128, 0x77, 0x6a},
    {MxScaleRule::kRceil, Fp8Type::kE4M3, 1e-38f, 0, 0x00, 0x00},  // descale < 2^-127: code 0, data times 1.0
    {MxScaleRule::kRceil, Fp8Type::kE4M3, 0x1.000002p+13f * 1.75f, 132, 0x7e, 0x71},  // log2f rounds 5+1.7e-7 to 5
    {MxScaleRule::kRceil, Fp8Type::kE5M2, 61440.0f, 128, 0x78, 0x71},
};

Recipe ao_mx(MxScaleRule rule, Fp8Type t) {
  Recipe r = Recipe::of(Mxfp8Options{.fp8 = t, .scale_rule = rule});
  r.profile = Profile::kTorchAO;
  r.columnwise = false;
  return r;
}

TEST(TorchAOMx, ScaleAndDataAgainstTorchao) {
  for (const MxCase& c : kMx) {
    std::vector<float> x(32, 0.0f);
    x[0] = c.v;
    x[1] = c.v / 3.0f;
    const auto q = ref::quantize(MatrixView{x.data(), DType::kF32, 1, 32}, ao_mx(c.rule, c.fp8));
    SCOPED_TRACE(std::string(mx_scale_rule_name(c.rule)) + (c.fp8 == Fp8Type::kE4M3 ? " e4m3 " : " e5m2 ") + std::to_string(c.v));
    EXPECT_EQ(q.rowwise->scale.byte(0, 0), c.scale);
    EXPECT_EQ(q.rowwise->data[0], c.d0);
    EXPECT_EQ(q.rowwise->data[1], c.d1);
  }
}

TEST(TorchAOMx, NonFiniteBlocks) {
  std::vector<float> x(64, 1.0f);
  x[3] = NAN;
  x[40] = INFINITY;
  for (MxScaleRule rule : {MxScaleRule::kOcpFloor, MxScaleRule::kCeil, MxScaleRule::kEven, MxScaleRule::kRceil}) {
    const auto q = ref::quantize(MatrixView{x.data(), DType::kF32, 1, 64}, ao_mx(rule, Fp8Type::kE4M3));
    SCOPED_TRACE(std::string(mx_scale_rule_name(rule)));
    EXPECT_EQ(q.rowwise->scale.byte(0, 0), 0xFF) << "a NaN block: NaN scale";
    EXPECT_EQ(q.rowwise->data[3], 0x7F);
    // x / +Inf = 0 (floor/ceil/even); under rceil x * NaN = NaN
    EXPECT_EQ(q.rowwise->data[0], rule == MxScaleRule::kRceil ? 0x7F : 0x00);
    // An Inf block gets a finite scale (rceil: 0xFE): Inf saturates to 448, the rest underflows to 0.
    EXPECT_EQ(q.rowwise->scale.byte(0, 1), rule == MxScaleRule::kRceil ? 0xFE : 247) << "Inf: 2^(128 - 8)";
    EXPECT_EQ(q.rowwise->data[40], 0x7E);
    EXPECT_EQ(q.rowwise->data[41], 0x00);
  }
}

TEST(TorchAOMx, ScaleRulesAreTorchaoOnly) {
  Recipe r = ao_mx(MxScaleRule::kCeil, Fp8Type::kE4M3);
  EXPECT_NO_THROW(r.validate());
  r.profile = Profile::kTE;
  EXPECT_THROW(r.validate(), Error);
  r.profile = Profile::kOCP;
  EXPECT_THROW(r.validate(), Error);
  const auto md = ao_mx(MxScaleRule::kEven, Fp8Type::kE5M2).to_metadata();
  EXPECT_EQ(md.at("scale_rule"), "even");
  EXPECT_EQ(Recipe::from_metadata(md).mxfp8().scale_rule, MxScaleRule::kEven);
}

Recipe ao_nv(bool two_level) {
  Recipe r = Recipe::of(Nvfp4Options{.per_tensor_scale = two_level});
  r.profile = Profile::kTorchAO;
  r.columnwise = false;
  return r;
}

/// The scale bytes of the first two rows (NVFP4 needs M % 16 == 0: the tests pad with zero rows).
std::vector<uint8_t> scales(const QuantizedTensor& q) {
  return std::vector<uint8_t>(q.rowwise->scale.bytes.begin(), q.rowwise->scale.bytes.begin() + 2);
}

TEST(TorchAONvfp4, Bf16NanPayloads) {
  // x = arange(32) / 7 - 2 as [2, 16] bfloat16, x[0, 3] = NaN (torch's bf16 NaN is 0xFFFF).
  std::vector<uint16_t> xb(16 * 16, 0);
  for (int i = 0; i < 32; ++i) xb[static_cast<size_t>(i)] = f32_to_bf16(static_cast<float>(i) / 7.0f - 2.0f);
  xb[3] = 0xFFFF;
  const MatrixView v{xb.data(), DType::kBF16, 16, 16};
  // Two-level: every per-tensor quantity is NaN (torch.max gives 0x7FC00000 for bf16): codes 0x3 (+NaN's bits).
  const auto q2 = ref::quantize(v, ao_nv(true));
  EXPECT_EQ(scales(q2), (std::vector<uint8_t>{0x7F, 0x7F}));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(q2.rowwise->data[static_cast<size_t>(i)], 51);
  // Block scales only: the NaN block's scale decodes to 0x7FF00000, whose E2M1 bits are 0x4.
  const auto q1 = ref::quantize(v, ao_nv(false));
  EXPECT_EQ(scales(q1), (std::vector<uint8_t>{0x7F, 45}));
  const std::vector<uint8_t> row1 = {33, 67, 68, 85, 102, 102, 118, 119};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(q1.rowwise->data[static_cast<size_t>(i)], 68);
    EXPECT_EQ(q1.rowwise->data[static_cast<size_t>(8 + i)], row1[static_cast<size_t>(i)]);
  }
}

TEST(TorchAONvfp4, TinyAndZero) {
  std::vector<float> x(16 * 16, 0.0f);
  for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i) / 7.0f - 2.0f;
  x[21] = 1e-6f;  // row 1: a tiny block, clamped up to 2^-6
  const auto q = ref::quantize(MatrixView{x.data(), DType::kF32, 16, 16}, ao_nv(true));
  EXPECT_EQ(scales(q), (std::vector<uint8_t>{126, 8}));
  const std::vector<uint8_t> row0 = {255, 239, 238, 221, 205, 187, 154, 16};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.rowwise->data[static_cast<size_t>(i)], row0[static_cast<size_t>(i)]);
  for (int i = 8; i < 16; ++i) EXPECT_EQ(q.rowwise->data[static_cast<size_t>(i)], 0);
  // An all-zero tensor: pts = 0, 0/0 gives x86's default NaN (negative): scale 0xFF, codes 0xC.
  std::vector<float> z(16 * 16, 0.0f);
  const auto qz = ref::quantize(MatrixView{z.data(), DType::kF32, 16, 16}, ao_nv(true));
  EXPECT_EQ(qz.rowwise->scale.bytes[0], 0xFF);
  for (uint8_t b : qz.rowwise->data) EXPECT_EQ(b, 204);
}

TEST(TorchAONvfp4, RaggedRowsRowwiseOnly) {
  // nvfp4_quantize blocks along K only: M = 33 is legal for the rowwise plane, the last row is its own strip.
  std::vector<float> x(33 * 16);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) - 6.0f;
  Recipe r = ao_nv(true);
  EXPECT_NO_THROW(r.validate_input(DType::kF32, 33, 16));
  const auto q = ref::quantize(MatrixView{x.data(), DType::kF32, 33, 16}, r);
  std::vector<float> last(x.end() - 16, x.end());
  last.resize(16 * 16, 0.0f);
  last[16] = 6.0f;  // same tensor amax (6): the last row's bytes equal a 16-row tensor's first row
  const auto q1 = ref::quantize(MatrixView{last.data(), DType::kF32, 16, 16}, r);
  EXPECT_EQ(q.rowwise->scale.bytes[32], q1.rowwise->scale.bytes[0]);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.rowwise->data[static_cast<size_t>(32 * 8 + i)], q1.rowwise->data[static_cast<size_t>(i)]);
  r.columnwise = true;
  EXPECT_THROW(r.validate_input(DType::kF32, 33, 16), Error) << "the columnwise plane blocks along M";
  Recipe te = Recipe::of(Nvfp4Options{});
  te.columnwise = false;
  EXPECT_THROW(te.validate_input(DType::kF32, 33, 16), Error) << "TE needs M % 16 == 0";
}

TEST(TorchAONvfp4, E2m1CastIsTorchaosBitTwiddling) {
  // RN-even on the grid, saturating, -0 keeps its sign; NaN goes through the normal branch.
  EXPECT_EQ(torchao::f32_to_e2m1(0.25f), 0x0);
  EXPECT_EQ(torchao::f32_to_e2m1(0.75f), 0x2);
  EXPECT_EQ(torchao::f32_to_e2m1(2.5f), 0x4);
  EXPECT_EQ(torchao::f32_to_e2m1(5.0f), 0x6);
  EXPECT_EQ(torchao::f32_to_e2m1(7.0f), 0x7);
  EXPECT_EQ(torchao::f32_to_e2m1(-0.0f), 0x8);
  EXPECT_EQ(torchao::f32_to_e2m1(bits_f32(0x7FC00000u)), 0x3);
  EXPECT_EQ(torchao::f32_to_e2m1(bits_f32(0xFFFFFFFFu)), 0xC);
  EXPECT_EQ(torchao::f32_to_e2m1(bits_f32(0x7FF00000u)), 0x4);
}

TEST(Profiles, OneRecordEach) {
  const auto all = all_profiles();
  ASSERT_GE(all.size(), 7u);  // te, te_pyref, ocp, torchao, modelopt, jax, vllm (others may follow)
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(static_cast<size_t>(all[i].id), i) << all[i].name;
  for (const auto& p : all) {
    EXPECT_EQ(profile_rules(p.id).name, p.name);
    EXPECT_EQ(profile_from_name(p.name), p.id);
    EXPECT_FALSE(p.follows.empty());
    EXPECT_GE(p.describe().size(), 4u);
  }
  EXPECT_THROW(profile_from_name("torchao2"), Error);
  EXPECT_EQ(profile_rules(Profile::kTorchAO).mx_scale_rules.size(), 4u);
  // A registered variant is a profile of its own, read by the reference like the built-in ones.
  ProfileRules v = profile_rules(Profile::kTorchAO);
  v.name = "test_torchao_no_floor";
  v.nvfp4_tiny_block_floor = false;
  const Profile id = register_profile_variant(v);
  Recipe r = ao_nv(true);
  std::vector<float> t(16 * 16, 0.0f);
  t[0] = 1000.0f;
  t[16] = 1e-6f;
  const auto floor_on = ref::quantize(MatrixView{t.data(), DType::kF32, 16, 16}, r);
  r.profile = id;
  EXPECT_EQ(register_profile_variant(v), id) << "the same name registers once";
  EXPECT_EQ(profile_from_name("test_torchao_no_floor"), id);
  const auto floor_off = ref::quantize(MatrixView{t.data(), DType::kF32, 16, 16}, r);
  EXPECT_EQ(floor_on.rowwise->scale.bytes[1], 0x08);
  EXPECT_EQ(floor_off.rowwise->scale.bytes[1], 0x00);
}

TEST(Profiles, UnimplementedRuleIsNamedByRule) {
  // The one check every path that takes a recipe makes (the vectorized CPU path, the CUDA backend): the rule of the
  // profile the path does not implement, by name (path_rules.hpp).
  const PathRules kernels{.path = "the CUDA kernels", .nvfp4_order_torchao = true, .mx_order_torchao = true};
  const PathRules simd{.path = "the vectorized CPU path"};
  Recipe nv = Recipe::of(Nvfp4Options{});
  EXPECT_EQ(unimplemented_rule(nv, kernels), "");
  nv.profile = Profile::kTEPyRef;
  EXPECT_EQ(unimplemented_rule(nv, simd), "");
  nv.profile = Profile::kTorchAO;
  EXPECT_EQ(unimplemented_rule(nv, kernels), "");
  EXPECT_EQ(unimplemented_rule(nv, simd),
            "rule nvfp4.order torchao (profile 'torchao') is not implemented by the vectorized CPU path (nvfp4.order te only)");
  for (Profile p : {Profile::kModelOpt, Profile::kJax, Profile::kVllm}) {
    nv.profile = p;
    const std::string name = profile_rules(p).name;
    EXPECT_EQ(unimplemented_rule(nv, kernels), "rule nvfp4.order " + name + " (profile '" + name +
                                                   "') is not implemented by the CUDA kernels (nvfp4.order te and torchao only)");
  }
  Recipe mx = Recipe::of(Mxfp8Options{});
  mx.profile = Profile::kModelOpt;
  EXPECT_EQ(unimplemented_rule(mx, kernels),
            "rule mxfp8.order modelopt (profile 'modelopt') is not implemented by the CUDA kernels (te's and torchao's orders only)");
  mx.profile = Profile::kJax;
  EXPECT_NE(unimplemented_rule(mx, kernels).find("rule mxfp8.order jax (profile 'jax')"), std::string::npos);
  mx.profile = Profile::kOCP;
  mx.mxfp8().scale_rule = MxScaleRule::kOcpFloor;
  EXPECT_EQ(unimplemented_rule(mx, simd), "");
  Recipe fb = Recipe::of(Fp8BlockOptions{});
  fb.profile = Profile::kVllm;
  EXPECT_EQ(unimplemented_rule(fb, kernels).rfind("rule fp8.form s = amax / fp8_max (profile 'vllm')", 0), 0u);
}

/// Every single-rule variant `qtc identify` builds (rule_toggles) of every built-in profile, for every recipe kind:
/// a path that does not list the toggled value either refuses it naming a rule or gives the same answer as for the
/// untoggled record only where the reference ignores the rule for that kind. Checked here: no path accepts a toggle
/// of the NVFP4 NaN rules under order te, of fp8.cast_overflow or of an operation order it lacks, and the refusal
/// names the toggled rule (or nan_amax, for the NVFP4 triple).
TEST(Profiles, EveryToggledRuleAPathLacksIsRefusedByName) {
  const PathRules bare{.path = "a path with te's rules only"};
  int refused = 0;
  for (const ProfileRules& base : all_profiles()) {
    for (const RuleToggle& t : rule_toggles()) {
      ProfileRules v = base;
      if (!t.apply(v)) continue;
      v.name = base.name + "+toggle:" + t.rule;
      const Profile id = register_profile_variant(v);
      for (RecipeKind k : {RecipeKind::kNVFP4, RecipeKind::kMXFP8, RecipeKind::kFP8Block, RecipeKind::kFP8Tensor, RecipeKind::kMXFP4}) {
        Recipe r = Recipe::of(Recipe::default_options(k));
        r.profile = id;
        const std::string why = unimplemented_rule(r, bare);
        SCOPED_TRACE(v.name + " " + r.name() + ": " + why);
        const bool nv_te = k == RecipeKind::kNVFP4 && v.nvfp4_order == Nvfp4Order::kTE;
        const bool nan_rules_mixed = v.nvfp4_nan_scale != v.nan_amax || v.nvfp4_neg_zero_positive != v.nan_amax;
        const bool fp8 = k == RecipeKind::kFP8Block || k == RecipeKind::kFP8Tensor;
        const bool must_refuse = (k == RecipeKind::kNVFP4 && v.nvfp4_order != Nvfp4Order::kTE) ||
                                 ((k == RecipeKind::kMXFP8 || k == RecipeKind::kMXFP4) && v.mx_order != MxOrder::kTE) ||
                                 (k == RecipeKind::kMXFP4 && v.mxfp4_te_reference) ||
                                 (nv_te && nan_rules_mixed) || (fp8 && !v.fp8_satfinite) ||
                                 (fp8 && (k == RecipeKind::kFP8Tensor ? v.fp8_tensor_form : v.fp8_form) != Fp8Form::kTE);
        EXPECT_EQ(!why.empty(), must_refuse);
        if (!why.empty()) {
          EXPECT_EQ(why.rfind("rule ", 0), 0u);
          ++refused;
        }
      }
    }
  }
  EXPECT_GT(refused, 20);
}

// The libraries' E8M0 casts (profiles torch_cast, ml_dtypes_cast), values checked against PyTorch 2.11 and ml_dtypes 0.7.
TEST(CastProfiles, E8m0CastsRoundAsTheLibraries) {
  using peer::cast::e8m0_ml_dtypes;
  using peer::cast::e8m0_torch;
  EXPECT_EQ(e8m0_torch(1.25f), 0x7F);
  EXPECT_EQ(e8m0_torch(1.5f), 0x80);   // a normal's exact half goes up
  EXPECT_EQ(e8m0_torch(3.0f), 0x81);   // ... also from an even exponent (not RN-even on the exponent)
  EXPECT_EQ(e8m0_torch(bits_f32(0x3FBFFFFFu)), 0x7F);
  EXPECT_EQ(e8m0_torch(-1.5f), 0x80);  // sign dropped
  EXPECT_EQ(e8m0_torch(0.0f), 0x00);
  EXPECT_EQ(e8m0_torch(bits_f32(0x00400000u)), 0x00);  // a subnormal's half stays
  EXPECT_EQ(e8m0_torch(bits_f32(0x00400038u)), 0x01);
  EXPECT_EQ(e8m0_torch(bits_f32(0x7F400000u)), 0xFF);  // 1.5 * 2^127 rounds into the NaN code
  EXPECT_EQ(e8m0_torch(bits_f32(0x7FC00000u)), 0xFF);
  EXPECT_EQ(e8m0_ml_dtypes(1.5f), 0x80);
  EXPECT_EQ(e8m0_ml_dtypes(0.0f), 0xFF);  // no zero in the type
  EXPECT_EQ(e8m0_ml_dtypes(-1.0f), 0xFF);
  EXPECT_EQ(e8m0_ml_dtypes(bits_f32(0x00400038u)), 0x00);  // subnormals: nearest of 2^-127 and 2^-126
  EXPECT_EQ(e8m0_ml_dtypes(bits_f32(0x00600000u)), 0x01);
  EXPECT_EQ(peer::cast::fp8(bits_f32(0xFFC00000u), Fp8Type::kE5M2, false), 0xFE);  // ml_dtypes' E5M2 NaN
  EXPECT_EQ(peer::cast::fp8(bits_f32(0xFFC00000u), Fp8Type::kE5M2, true), 0xFF);   // PyTorch's
  EXPECT_EQ(peer::cast::fp8(465.0f, Fp8Type::kE4M3, true), 0x7F);                  // not saturating
  // the rule other paths lack is named
  Recipe mx = Recipe::of(Mxfp8Options{});
  mx.profile = Profile::kTorchCast;
  const PathRules bare{.path = "a path with te's rules only"};
  EXPECT_EQ(unimplemented_rule(mx, bare).rfind("rule mxfp8.order torch_cast (profile 'torch_cast')", 0), 0u) << unimplemented_rule(mx, bare);
  Recipe nv = Recipe::of(Nvfp4Options{});
  nv.profile = Profile::kMlDtypesCast;
  EXPECT_EQ(unimplemented_rule(nv, bare).rfind("rule nvfp4.order ml_dtypes_cast (profile 'ml_dtypes_cast')", 0), 0u) << unimplemented_rule(nv, bare);
}

// The Triton group quantizers (H200, 2026-12-03): a NaN after the data scaling (an Inf in the group makes the scale
// Inf, and Inf * 0 NaN) leaves tl.clamp as +448 (vLLM) or -448 (SGLang); data x * RN(1 / s), s = amax * RN(1/448).
TEST(TritonProfiles, ClampNaNAndReciprocalForm) {
  std::vector<float> x(128, 1.0f);
  x[0] = INFINITY;
  x[1] = -2.0f;
  Fp8BlockOptions o;
  o.eps = 1e-10f;
  for (auto [p, code] : {std::pair{Profile::kVllmTriton, 0x7E}, {Profile::kSglangTriton, 0xFE}, {Profile::kSglangTritonColMajor, 0xFE}}) {
    Recipe r = Recipe::of(o);
    r.profile = p;
    const auto q = ref::quantize(MatrixView{x.data(), DType::kF32, 1, 128}, r);
    EXPECT_EQ(q.rowwise->data[0], code) << profile_rules(p).name;
    EXPECT_EQ(q.rowwise->data[1], 0x80) << "-2 * (1 / Inf) = -0";
  }
  // 1592 / 448 under div.full.f32 is 1592 * RN(1/448) = 0x40636DB8 (IEEE 1592 / 448: 0x40636DB7), seen on the H200
  std::vector<float> y(128, 1.0f);
  y[5] = 1592.0f;
  Recipe r = Recipe::of(o);
  r.profile = Profile::kSglangTritonColMajor;
  const auto q = ref::quantize(MatrixView{y.data(), DType::kF32, 1, 128}, r);
  EXPECT_EQ(f32_bits(q.rowwise->scale.f32(0, 0)), 0x40636DB8u);
}

// sm_90's rcp.approx.f32 (qtc/rcp_approx.hpp): the measured table's counts and entries, and the six H200 dumps
// (reports/h200/run_s25b_triton) that RN(1 / s) missed: the first differing code of each file, written here as its
// group's amax and the element (F32 holds the F16 / BF16 inputs exactly; the kernels compute in float32). With
// rcp = RN(1 / s) the six codes are 0x5c, 0x83, 0xe0, 0x04, 0x39, 0x68.
TEST(TritonProfiles, RcpApproxTableReproducesTheH200) {
  int plus = 0, minus = 0;
  for (uint32_t m = 0; m < (1u << 23); ++m) {
    const int e = rcp_approx_sm90_ulp(m);
    plus += e == 1;
    minus += e == -1;
  }
  EXPECT_EQ(plus, 733799);  // rcp_exceptions.npz: 1,108,522 mantissas
  EXPECT_EQ(minus, 374723);
  EXPECT_EQ(rcp_approx_sm90_ulp(0x5A9u), -1);     // the first exception
  EXPECT_EQ(rcp_approx_sm90_ulp(0x7FF410u), 1);   // the last
  EXPECT_EQ(rcp_approx_sm90_ulp(0x600000u), 0);   // 448: rcp.approx(448) = RN(1/448)
  EXPECT_EQ(rcp_approx_sm90_ulp(0u), 0);          // powers of two
  const float b = bits_f32(0x3F8005A9u);
  EXPECT_EQ(f32_bits(rcp_approx_sm90(b)), f32_bits(1.0f / b) - 1);
  const float c = -b * 0x1p-100f;  // the sign kept, the same entry at another exponent
  EXPECT_EQ(f32_bits(rcp_approx_sm90(c)), f32_bits(1.0f / c) - 1);
  EXPECT_EQ(rcp_approx_sm90(0.0f), INFINITY);
  EXPECT_EQ(f32_bits(rcp_approx_sm90(-INFINITY)), 0x80000000u);
  EXPECT_TRUE(std::isnan(rcp_approx_sm90(NAN)));
  struct Case {
    Profile p;
    uint32_t amax, x;
    uint8_t code;
  };
  const Case cases[] = {{Profile::kSglangTritonColMajor, 0x3E818000u, 0x3C54C000u, 0x5B},  // f16 heavy [50, 132]
                        {Profile::kSglangTriton, 0x7F220000u, 0xF7220000u, 0x84},          // bf16 flt_max [1, 59]
                        {Profile::kSglangTriton, 0x46E70000u, 0xC4FFC000u, 0xDF},          // f16 huge [112, 364]
                        {Profile::kVllmTriton, 0x7F6D0000u, 0x776D0000u, 0x03},            // bf16 flt_max [115, 107]
                        {Profile::kVllmTriton, 0x3E29C000u, 0x39E66000u, 0x3A},            // f16 heavy [45, 51]
                        {Profile::kVllmTriton, 0x47018000u, 0x458F6000u, 0x67}};           // f16 huge [19, 113]
  Fp8BlockOptions o;
  o.eps = 1e-10f;
  for (const Case& k : cases) {
    std::vector<float> x(128, 0.0f);
    x[0] = bits_f32(k.amax);
    x[1] = bits_f32(k.x);
    Recipe r = Recipe::of(o);
    r.profile = k.p;
    const auto q = ref::quantize(MatrixView{x.data(), DType::kF32, 1, 128}, r);
    EXPECT_EQ(q.rowwise->data[1], k.code) << profile_rules(k.p).name << " amax 0x" << std::hex << k.amax << " x 0x" << k.x;
  }
}

}  // namespace
