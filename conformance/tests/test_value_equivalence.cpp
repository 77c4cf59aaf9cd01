/// \file test_value_equivalence.cpp
/// \brief Value equivalence (issue 26): compare_values on planted encodings, and the round trip
///        quantize(dequantize(q)) against q per recipe x profile x dequantized dtype, with the blocks where the bytes
///        cannot stay the same predicted exactly.
///
/// Derivation (elem_max = 448 for E4M3, 57344 for E5M2; a block's largest code magnitude c, its scale 2^s):
///  * MXFP8 `rceil` (te): s = ceil(log2(amax / elem_max)), so amax / 2^s lies in (elem_max / 2, elem_max] and rounds to c in
///    [elem_max / 2, elem_max]. Dequantized, the block's amax is c * 2^s; quantized again, s' = s + ceil(log2(c / elem_max)):
///    s' = s when c > elem_max / 2, s' = s - 1 when c = elem_max / 2 (amax / 2^s in (224, 232] rounds down to 224 for
///    E4M3): every code doubles, the values stay. So the bytes of a nonzero block change iff c <= elem_max / 2
///    (Megatron-LM #6666), and the decoded values never change.
///  * MXFP8 `ocp_floor` (ocp): s = floor(log2 amax) - emax_elem puts amax / 2^s in [2^emax, 2^(emax+1)), c >= 2^emax (satfinite
///    caps it at elem_max), and again floor(log2(c * 2^s)) - emax = s: every block is a fixed point.
///  * FP8 block / tensor with power-of-two scales: scale = 2^floor(log2(elem_max / amax)) puts amax * scale in (elem_max / 2,
///    elem_max], the same rule as rceil: the bytes change iff c <= elem_max / 2.
/// The dequantized values are exact in F32 and BF16 (E4M3 / E5M2 times a power of two within range), so both dtypes give the
/// same prediction. NVFP4's two-level scale and MXFP4 (every profile and scale rule, F32 / BF16 / F16) are characterized in
/// property_tests/prop_roundtrip.cpp; non-power-of-two FP8 block scales (amax' = 448 * (1 / (448 / amax)) is one rounding
/// away from amax) in property_tests/prop_roundtrip_fp8.cpp (F32 dequantized), the MXFP8 peers in prop_roundtrip_mx.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "qtc/codec.hpp"
#include "qtc/quantize.hpp"
#include "qtc/value_equivalence.hpp"
#include "qtc/backend.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {
namespace {

struct Case {
  std::map<std::string, std::string> md;
  bool halves_change;  ///< true: blocks with c <= elem_max / 2 change bytes; false: every block is a fixed point
};

HostMatrix input(int64_t M, int64_t K, uint64_t seed, float elem_max) {
  HostMatrix x(DType::kF32, M, K);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < M * K; ++i) x.as<float>()[i] = n(rng) * std::exp(n(rng));
  // Rows whose block maxima sit at 230 / 448 of a power of two (E4M3: rounds to the half-max code 224) and at the
  // top of the range.
  for (int64_t j = 0; j < K; ++j) {
    x.as<float>()[1 * K + j] = (j % 32 == 5) ? elem_max * (230.0f / 448.0f) * 0.25f : 0.01f * static_cast<float>(j % 7);
    x.as<float>()[2 * K + j] = (j % 32 == 0) ? elem_max : 0.5f;
    x.as<float>()[3 * K + j] = 0.0f;  // zero blocks: a fixed point
  }
  return x;
}

float code_value(const QuantizedTensor& q, uint8_t b) { return q.recipe.fp8_type() == Fp8Type::kE4M3 ? kE4M3Table[b] : kE5M2Table[b]; }

TEST(ValueEquivalence, RoundTripBytesChangeExactlyWhereTheBlockMaxIsHalfTheRange) {
  const std::vector<Case> cases = {
      {{{"recipe", "mxfp8"}, {"scale_rule", "rceil"}}, true},
      {{{"recipe", "mxfp8"}, {"scale_rule", "rceil"}, {"fp8_dtype", "e5m2"}}, true},
      {{{"recipe", "mxfp8"}, {"scale_rule", "rceil"}, {"profile", "torchao"}}, true},
      {{{"recipe", "mxfp8"}, {"scale_rule", "ocp_floor"}, {"profile", "ocp"}}, false},
      {{{"recipe", "fp8_block"}, {"tile", "1x128"}, {"pow2_scales", "1"}}, true},
      {{{"recipe", "fp8_block"}, {"tile", "128x128"}, {"pow2_scales", "1"}}, true},
      {{{"recipe", "fp8_tensor"}, {"pow2_scales", "1"}}, true},
  };
  int64_t changed_total = 0;
  for (const Case& c : cases)
    for (DType dt : {DType::kF32, DType::kBF16}) {
      Recipe r = Recipe::from_metadata(c.md);
      r.columnwise = false;
      SCOPED_TRACE(r.name() + " profile " + std::string(profile_name(r.profile)) + (dt == DType::kF32 ? " F32" : " BF16"));
      const float emax = fp8_max(r.fp8_type());
      int64_t predicted = 0, changed = 0;
      for (int variant = 0; variant < 2; ++variant) {
      HostMatrix x = input(37, 300, 26, emax);  // ragged: neither a multiple of 32 nor of 128
      if (variant == 1) {  // the whole tensor's amax at 230/448 of elem_max / 8: large blocks and the tensor reach the case
        const float a = ref::amax(x.view());
        for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] *= (emax * (230.0f / 448.0f) / 8.0f) / a;
      }
      const QuantizedTensor q = ref::quantize(x.view(), r);
      const HostMatrix d = ref::dequantize(q, PlaneKind::kRowwise, dt);
      const QuantizedTensor q2 = ref::quantize(d.view(), r);
      const Equivalence e = compare_values(q, q2, {PlaneKind::kRowwise});
      EXPECT_TRUE(e.equal) << e.message;
      // Per scale entry: bytes differ (scale or any code) iff predicted.
      const Plane& p = *q.rowwise;
      const Plane& p2 = *q2.rowwise;
      const int64_t br = r.is(RecipeKind::kFP8Tensor) ? q.rows : r.block_rows();
      const int64_t bc = r.is(RecipeKind::kFP8Tensor) ? q.cols : r.block_cols();
      const int64_t nbr = (q.rows + br - 1) / br, nbc = (q.cols + bc - 1) / bc;
      for (int64_t bi = 0; bi < nbr; ++bi)
        for (int64_t bj = 0; bj < nbc; ++bj) {
          float cmax = 0.0f;
          bool differs = false;
          for (int64_t i = bi * br; i < std::min(q.rows, (bi + 1) * br); ++i)
            for (int64_t j = bj * bc; j < std::min(q.cols, (bj + 1) * bc); ++j) {
              const size_t k = static_cast<size_t>(i * q.cols + j);
              cmax = std::max(cmax, std::fabs(code_value(q, p.data[k])));
              differs = differs || p.data[k] != p2.data[k];
            }
          if (r.is(RecipeKind::kFP8Tensor)) differs = differs || q.scale_inv != q2.scale_inv;
          else if (p.scale.type == ScaleType::kF32) differs = differs || p.scale.f32(bi, bj) != p2.scale.f32(bi, bj);
          else if (r.is(RecipeKind::kMXFP8)) {
            for (int64_t i = bi * br; i < std::min(q.rows, (bi + 1) * br); ++i) differs = differs || p.scale.byte(i, bj) != p2.scale.byte(i, bj);
          }
          const bool want = c.halves_change && cmax > 0.0f && cmax <= emax / 2;
          predicted += want;
          changed += differs;
          EXPECT_EQ(differs, want) << "block [" << bi << ", " << bj << "]: largest code " << cmax;
        }
      }
      if (c.halves_change) {
        EXPECT_GT(predicted, 0) << "the input must reach the case";
      }
      changed_total += changed;
    }
  EXPECT_GT(changed_total, 0);
}

TEST(ValueEquivalence, PlantedEncodings) {
  const Recipe r = Recipe::from_metadata({{"recipe", "mxfp8"}});
  const HostMatrix x = input(4, 64, 1, 448.0f);
  const QuantizedTensor q = ref::quantize(x.view(), r);
  QuantizedTensor z = q;
  // -0.0 for a +0 code in the zero row 3.
  z.rowwise->data[3 * 64 + 1] = 0x80;
  Equivalence e = compare_values(q, z, {PlaneKind::kRowwise});
  EXPECT_TRUE(e.equal);
  EXPECT_NE(e.message.find("1 elements differ; first at rowwise data [3, 1]: code 0x0 vs 0x80: -0.0 and +0.0 decode to the same zero"),
            std::string::npos) << e.message;
  // A block at half range: twice the codes under half the scale.
  QuantizedTensor h = q;
  bool done = false;
  for (int64_t jb = 0; jb < 2 && !done; ++jb) {
    float cmax = 0;
    for (int j = 0; j < 32; ++j) cmax = std::max(cmax, std::fabs(kE4M3Table[q.rowwise->data[static_cast<size_t>(1 * 64 + jb * 32 + j)]]));
    if (cmax > 224.0f) continue;
    for (int j = 0; j < 32; ++j) {
      uint8_t& b = h.rowwise->data[static_cast<size_t>(1 * 64 + jb * 32 + j)];
      b = static_cast<uint8_t>(encode_e4m3(2.0f * kE4M3Table[b]));
    }
    h.rowwise->scale.bytes[static_cast<size_t>(1 * 2 + jb)] -= 1;
    done = true;
  }
  ASSERT_TRUE(done);
  e = compare_values(q, h, {PlaneKind::kRowwise});
  EXPECT_TRUE(e.equal) << e.message;
  EXPECT_NE(e.message.find("the scales are 2^1 apart and the codes compensate"), std::string::npos) << e.message;
  // A changed value is not equivalent.
  QuantizedTensor v = q;
  v.rowwise->data[0] ^= 0x01;
  e = compare_values(q, v, {PlaneKind::kRowwise});
  EXPECT_FALSE(e.equal);
  EXPECT_NE(e.message.find("rowwise plane: decoded values differ at [0, 0]"), std::string::npos) << e.message;
}

TEST(ValueEquivalence, VerifyVerdictAndExitCode) {
  // A bundled NVFP4 vector with one +0 code of a zero row written as -0 (code 0x8): `qtc verify` says EQUIVALENT, with the
  // count and the reason, and exits 3; one changed nonzero code is a failure (exit 1).
  io::File f = io::read_file(std::string(QTC_BUNDLED_VECTORS_DIR) + "/nvfp4_1x16_zero_rows_32x64.safetensors");
  io::File g = f;
  auto cpu = make_cpu_backend();
  for (auto& t : f.tensors)
    if (t.name == "rowwise_data") {
      size_t i = 0;
      while ((t.bytes[i] & 0x0F) != 0) ++i;
      t.bytes[i] |= 0x08;
    }
  FileResult r = verify_vector(f, "negzero", *cpu);
  EXPECT_EQ(r.verdict, Verdict::kEquivalent) << r.message;
  EXPECT_NE(r.message.find("bytes differ, decoded values equal: 1 elements differ; first at rowwise data"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("-0.0 and +0.0 decode to the same zero"), std::string::npos) << r.message;
  Summary sum;
  sum.add(Verdict::kPass);
  sum.add(r.verdict);
  EXPECT_EQ(sum.exit_code(), 3);
  EXPECT_EQ(sum.closing_line(), "1 passed, 0 failed, 1 equivalent (bytes differ, values equal)");
  for (auto& t : g.tensors)
    if (t.name == "rowwise_data") {
      size_t i = 0;
      while ((t.bytes[i] & 0x07) == 0) ++i;
      t.bytes[i] ^= 0x01;
    }
  r = verify_vector(g, "changed", *cpu);
  EXPECT_EQ(r.verdict, Verdict::kFail) << r.message;
  sum.add(r.verdict);
  EXPECT_EQ(sum.exit_code(), 1);
}

// NVFP4 4over6 (property_tests/prop_roundtrip_4over6.cpp has the derivation): a block x chose map-to-4 for (its own
// map-to-6 scale was 0.9375 u) whose codes are 0, 1, 2, 4 under 1.5 u decodes to values map-to-6 holds under u; quantized
// again, both candidates reproduce them, their errors tie and TE takes map-to-6: the bytes change. Where the decoded floats
// are equal, `qtc verify` says EQUIVALENT naming the two candidates; where §1.14's rounding of sf * amax puts them apart,
// verify fails and compare_values says why.
TEST(ValueEquivalence, Nvfp4FourOverSixFlip) {
  const Recipe r = Recipe::from_metadata({{"recipe", "nvfp4"}, {"fourover6", "1"}, {"e4m3_max", "256"}, {"columnwise", "0"}});
  auto cpu = make_cpu_backend();
  bool equal_seen = false, apart_seen = false;
  for (float am : {1.5f, 1.25f, 1.1f, 1.7f, 1.3f})
    for (int j = -5; j <= 7; ++j) {  // (at j = -6 S6 = E4M3(0.965 * 2^-6) is 2^-6 itself: map-to-6)
      const int p = j % 3;
      const float A = std::ldexp(am, p), s_enc = 1536.0f / A;  // 6 * 256 / A
      HostMatrix x(DType::kF32, 16, 32);  // row 0 holds the blocks; rows 1-15 are zero (M % 16 == 0)
      const float u = std::ldexp(1.0f, j);
      const float w[16] = {6.0f * u * (1.0f - 0.035f), 3.0f * u, -3.0f * u, 1.5f * u, 3.0f * u, 0.0f, -1.5f * u, 3.0f * u,
                           3.0f * u, -3.0f * u, 1.5f * u, 0.0f, 3.0f * u, 3.0f * u, -1.5f * u, 3.0f * u};
      x.set(0, 0, A);
      for (int k = 0; k < 16; ++k) x.set(0, 16 + k, w[k] / s_enc);
      const QuantizedTensor q = ref::quantize(x.view(), r);
      ASSERT_EQ(kE4M3Table[q.rowwise->scale.bytes[1]], 1.5f * u) << "map-to-4 under 1.5u expected (p " << p << ", j " << j << ")";
      const HostMatrix y = ref::dequantize(q, PlaneKind::kRowwise, DType::kF32);
      const QuantizedTensor back = ref::quantize_with_amax(y.view(), r, A, A);
      ASSERT_EQ(kE4M3Table[back.rowwise->scale.bytes[1]], u) << "the round trip takes map-to-6 (p " << p << ", j " << j << ")";
      io::File f;
      f.metadata = r.to_metadata();
      f.put(io::from_matrix("x", x));
      f.put(io::Tensor{"rowwise_data", "U8", {16, 16}, back.rowwise->data});
      f.put(io::Tensor{"rowwise_scale_inv", "U8", {16, 2}, back.rowwise->scale.bytes});
      f.put(io::from_f32("amax_rowwise", back.rowwise->amax, {1}));
      const FileResult res = verify_vector(f, "4over6", *cpu);
      const Equivalence eq = compare_values(q, back, {PlaneKind::kRowwise});
      if (eq.equal) {
        equal_seen = true;
        EXPECT_EQ(res.verdict, Verdict::kEquivalent) << res.message;
        EXPECT_NE(res.message.find("are a block's map-to-4 and map-to-6 candidates"), std::string::npos) << res.message;
      } else {
        apart_seen = true;
        EXPECT_EQ(res.verdict, Verdict::kFail) << res.message;
        EXPECT_NE(eq.message.find("the dequantization rounds sf * amax first"), std::string::npos) << eq.message;
      }
    }
  EXPECT_TRUE(equal_seen && apart_seen) << "both outcomes occur over these scales";
}

TEST(ValueEquivalence, Mxfp4HalfRangeBlockAndNvfp4UnderflowedScale) {
  // MXFP4 rceil: a block whose largest magnitude 3.2 rounds to code 3 (half of E2M1's 6) under scale 2^0; decoded and
  // quantized again it takes 2^-1 with every code doubled (prop_roundtrip.cpp derives which blocks do this).
  const Recipe mx = Recipe::from_metadata({{"recipe", "mxfp4"}, {"scale_rule", "rceil"}});
  HostMatrix x(DType::kF32, 2, 64);
  for (int64_t j = 0; j < 64; ++j) {
    x.set(0, j, j == 4 ? 3.2f : (j % 3 == 0 ? 1.0f : -0.5f));
    x.set(1, j, 5.5f * std::sin(static_cast<float>(j)));
  }
  const QuantizedTensor q = ref::quantize(x.view(), mx);
  const QuantizedTensor q2 = ref::quantize(ref::dequantize(q, PlaneKind::kRowwise, DType::kF32).view(), mx);
  Equivalence e = compare_values(q, q2, {PlaneKind::kRowwise});
  EXPECT_TRUE(e.equal) << e.message;
  EXPECT_NE(e.message.find("first at rowwise scale [0, 0]: 1 vs 0.5: the scales are 2^1 apart and the codes compensate: the block's "
                           "largest code under the larger scale is 3, at most half the element maximum 6"),
            std::string::npos) << e.message;
  // A code changed in that block is no longer equivalent (MXFP4 nibbles are compared as E2M1 codes).
  QuantizedTensor bad = q2;
  bad.rowwise->data[0] ^= 0x01;
  EXPECT_FALSE(compare_values(q, bad, {PlaneKind::kRowwise}).equal);
  // NVFP4 te: a block 2^-30 below the tensor amax gets the E4M3 scale 0 and codes +-6; decoded it is zeros, which quantize
  // to codes 0 under the same global amax.
  const Recipe nv = Recipe::from_metadata({{"recipe", "nvfp4"}});
  HostMatrix z(DType::kF32, 16, 32);
  for (int64_t i = 0; i < 16; ++i)
    for (int64_t j = 0; j < 32; ++j) z.set(i, j, j < 16 && i == 0 ? 0x1p-30f * (1.0f + static_cast<float>(j)) : 1.0f + static_cast<float>(j % 5));
  Recipe row = nv;
  row.columnwise = false;
  const QuantizedTensor n1 = ref::quantize(z.view(), row);
  ASSERT_EQ(n1.rowwise->scale.byte(0, 0), 0);
  const float A = n1.rowwise->amax.at(0);
  const QuantizedTensor n2 = ref::quantize_with_amax(ref::dequantize(n1, PlaneKind::kRowwise, DType::kF32).view(), row, A, A);
  e = compare_values(n1, n2, {PlaneKind::kRowwise});
  EXPECT_TRUE(e.equal) << e.message;
  EXPECT_NE(e.message.find("16 elements differ; first at rowwise data [0, 0]: code 0x7 vs 0x0"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("an E4M3 block scale that underflowed: TE writes +-6 there"), std::string::npos) << e.message;
  // modelopt floors that block's scale at 2^-9 (codes all 0); decoded it is all zero, which modelopt scales by 1.0.
  Recipe mo = Recipe::from_metadata({{"recipe", "nvfp4"}, {"profile", "modelopt"}});
  mo.columnwise = false;
  const QuantizedTensor m1 = ref::quantize(z.view(), mo);
  ASSERT_EQ(m1.rowwise->scale.byte(0, 0), 0x01);
  const float Am = m1.rowwise->amax.at(0);
  const QuantizedTensor m2 = ref::quantize_with_amax(ref::dequantize(m1, PlaneKind::kRowwise, DType::kF32).view(), mo, Am, Am);
  e = compare_values(m1, m2, {PlaneKind::kRowwise});
  EXPECT_TRUE(e.equal) << e.message;
  EXPECT_NE(e.message.find("first at rowwise scale [0, 0]: 0.001953125 vs 1: every code of the block is zero under both scales"),
            std::string::npos) << e.message;
}

TEST(ValueEquivalence, Mxfp4VectorVerdicts) {
  // torchao's MXFP4 CEIL dump (conformance/vectors/torchao/mxfp4): a rowwise block whose largest |code| is at most 3
  // re-encoded one binade lower (scale byte - 1, every code doubled), and one +0 code written as -0: `qtc verify` says
  // EQUIVALENT with the count and the reasons; a changed code fails.
  const std::string path = std::string(QTC_BUNDLED_VECTORS_DIR) + "/../torchao/mxfp4/mxfp4_ceil_bf16_normal_33x64.safetensors";
  const io::File f = io::read_file(path);
  auto cpu = make_cpu_backend();
  ASSERT_EQ(verify_vector(f, "as dumped", *cpu).verdict, Verdict::kPass);
  io::File h = f;
  io::Tensor* data = nullptr;
  io::Tensor* scale = nullptr;
  for (auto& t : h.tensors) {
    if (t.name == "rowwise_data") data = &t;
    if (t.name == "rowwise_scale_inv") scale = &t;
  }
  ASSERT_TRUE(data != nullptr && scale != nullptr);
  const int64_t K = 64, kb = 2, bytes_per_row = K / 2;
  static const uint8_t kDouble[8] = {0, 2, 4, 5, 6, 7, 0xFF, 0xFF};  // E2M1 magnitude code of twice the value (<= 3 only)
  int64_t planted_row = -1, planted_block = -1;
  for (int64_t i = 0; i < 33 && planted_row < 0; ++i)
    for (int64_t b = 0; b < kb && planted_row < 0; ++b) {
      uint8_t maxmag = 0;
      for (int64_t j = b * 32; j < b * 32 + 32; ++j)
        maxmag = std::max<uint8_t>(maxmag, (data->bytes[static_cast<size_t>(i * bytes_per_row + j / 2)] >> (4 * (j & 1))) & 7u);
      const uint8_t e = scale->bytes[static_cast<size_t>(i * kb + b)];
      if (maxmag == 0 || maxmag > 5 || e < 2 || e == 0xFF) continue;  // magnitude code 5 is 3.0
      for (int64_t j = b * 32; j < b * 32 + 32; ++j) {
        uint8_t& byte = data->bytes[static_cast<size_t>(i * bytes_per_row + j / 2)];
        const int sh = 4 * static_cast<int>(j & 1);
        const uint8_t nib = (byte >> sh) & 0xFu;
        const uint8_t twice = static_cast<uint8_t>((nib & 8u) | kDouble[nib & 7u]);
        byte = static_cast<uint8_t>((byte & ~(0xF << sh)) | (twice << sh));
      }
      scale->bytes[static_cast<size_t>(i * kb + b)] = static_cast<uint8_t>(e - 1);
      planted_row = i;
      planted_block = b;
    }
  ASSERT_GE(planted_row, 0) << "the dump must hold a CEIL block whose largest code is at most 3";
  FileResult r = verify_vector(h, "one binade lower", *cpu);
  EXPECT_EQ(r.verdict, Verdict::kEquivalent) << r.message;
  EXPECT_NE(r.message.find(::fmt::format("first at rowwise scale [{}, {}]", planted_row, planted_block)), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("at most half the element maximum 6"), std::string::npos) << r.message;
  // -0 for +0 elsewhere: still equivalent; a changed nonzero code fails.
  io::File z = f;
  for (auto& t : z.tensors)
    if (t.name == "rowwise_data") {
      size_t i = 0;
      while ((t.bytes[i] & 0x0F) != 0) ++i;
      t.bytes[i] |= 0x08;
    }
  r = verify_vector(z, "negzero", *cpu);
  EXPECT_EQ(r.verdict, Verdict::kEquivalent) << r.message;
  EXPECT_NE(r.message.find("-0.0 and +0.0 decode to the same zero"), std::string::npos) << r.message;
  io::File c = f;
  for (auto& t : c.tensors)
    if (t.name == "rowwise_data") {
      size_t i = 0;
      while ((t.bytes[i] & 0x07) == 0 || (t.bytes[i] & 0x07) == 0x07) ++i;
      t.bytes[i] ^= 0x01;
    }
  EXPECT_EQ(verify_vector(c, "changed", *cpu).verdict, Verdict::kFail);
}

}  // namespace
}  // namespace qtc::conformance
