/// \file hybrid_test.cpp
/// \brief Hybrid planes in the reference (qtc/hybrid.hpp): the recipe's metadata and rules, the composition of TE's
///        HybridQuantizer (each plane equals its recipe run alone on its source; the source is the rowwise plane
///        dequantized in the input's dtype), TE's fused grouped MXFP8 requantization against a model of its kernel
///        written from fused_group_requantize.cu (float path), and grouped == whole under the alignment rule.
///        Part of test_grouped_ref.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <functional>
#include <cmath>
#include <cstring>

#include "qtc/codec.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/quantize.hpp"
#include "qtc/test_support.hpp"

namespace qtc {
namespace {

HybridRecipe make_hybrid(const RecipeOptions& row, const RecipeOptions& col, ColumnwiseSource src) {
  HybridRecipe h;
  h.rowwise = Recipe::of(row, Profile::kTE, true, false);
  h.columnwise = Recipe::of(col, Profile::kTE, false, true);
  h.source = src;
  return h;
}

/// The input of TE's test_fused_group_requantize_mxfp8.cu: ((131 r + 17 c + (r c) % 29) % 257 - 128) / 32.
HostMatrix te_requantize_input(int64_t m, int64_t k) {
  HostMatrix x(DType::kF32, m, k);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c)
      x.as<float>()[r * k + c] = static_cast<float>(static_cast<int>((131 * r + 17 * c + (r * c) % 29) % 257) - 128) / 32.0f;
  return x;
}

std::string rule_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    const std::string w = e.what();
    const auto a = w.find("rule '");
    if (a == std::string::npos) return "no rule named: " + w;
    return w.substr(a + 6, w.find('\'', a + 6) - a - 6);
  }
  return "no error";
}

TEST(Hybrid, MetadataRoundTrip) {
  for (const HybridRecipe& h :
       {make_hybrid(Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kOriginal),
        make_hybrid(Nvfp4Options{}, Mxfp8Options{}, ColumnwiseSource::kRowwiseDequantized),
        make_hybrid(Mxfp8Options{}, Fp8TensorOptions{}, ColumnwiseSource::kRowwiseDequantized),
        HybridRecipe::te_group_requantize(Fp8Type::kE5M2, true, {128, 0, 256})}) {
    const auto md = h.to_metadata();
    EXPECT_EQ(md.at("recipe"), "hybrid");
    const HybridRecipe back = HybridRecipe::from_metadata(md);
    EXPECT_TRUE(back == h) << h.name() << " -> " << back.name();
    EXPECT_EQ(back.name(), h.name());
  }
  const auto md = HybridRecipe::te_group_requantize(Fp8Type::kE4M3, false, {256, 128}).to_metadata();
  EXPECT_EQ(md.at("rowwise.recipe"), "mxfp8");
  EXPECT_EQ(md.at("columnwise.fp8_dtype"), "e4m3");
  EXPECT_EQ(md.at("columnwise_source"), "rowwise_dequantized");
  EXPECT_EQ(md.at("columnwise_source_dtype"), "f32");
  EXPECT_EQ(md.at("group_rows"), "256,128");
}

TEST(Hybrid, MetadataErrorsNameTheKeyOrRule) {
  auto md = make_hybrid(Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kOriginal).to_metadata();
  auto with = [&](const std::string& k, const std::string& v) {
    auto m = md;
    m[k] = v;
    return m;
  };
  auto msg = [](const std::map<std::string, std::string>& m) {
    try {
      (void)HybridRecipe::from_metadata(m);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg(with("tile", "1x16")).find("'tile' is not a parameter of recipe 'hybrid'"), std::string::npos);
  EXPECT_NE(msg(with("columnwise_source", "weird")).find("'columnwise_source': unknown value 'weird'"), std::string::npos);
  EXPECT_NE(msg(with("columnwise.tile", "3x3")).find("columnwise plane"), std::string::npos);
  EXPECT_NE(msg(with("rowwise.recipe", "hybrid")).find("'rowwise.recipe'"), std::string::npos);
  EXPECT_NE(msg(with("rowwise.columnwise", "1")).find("the prefix fixes the plane"), std::string::npos);
  EXPECT_NE(msg(with("group_rows", "1,x")).find("'group_rows'"), std::string::npos);
  EXPECT_NE(msg(with("columnwise_source_dtype", "f32")).find("rule 'hybrid-source-dtype'"), std::string::npos);
  auto no_col = md;
  for (auto it = no_col.begin(); it != no_col.end();) it = it->first.rfind("columnwise.", 0) == 0 ? no_col.erase(it) : std::next(it);
  EXPECT_NE(msg(no_col).find("'columnwise.recipe' is missing"), std::string::npos);
  // A sub-recipe's own rule, named through the hybrid rule.
  Nvfp4Options bad;
  bad.row_scaled = true;
  bad.tile_2d = true;
  EXPECT_EQ(rule_of([&] { make_hybrid(Mxfp8Options{}, bad, ColumnwiseSource::kOriginal).validate(); }), "hybrid-sub-recipe");
}

TEST(Hybrid, GroupRules) {
  HybridRecipe h = make_hybrid(Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kOriginal);
  h.group_rows = {128};
  EXPECT_EQ(rule_of([&] { h.validate(); }), "hybrid-grouped-local");  // NVFP4's global amax per group
  HybridRecipe r = HybridRecipe::te_group_requantize(Fp8Type::kE4M3, false, {96, 32});
  EXPECT_EQ(rule_of([&] { r.validate_input(DType::kF32, 128, 64); }), "no error");
  r.group_rows = {100, 28};
  EXPECT_EQ(rule_of([&] { r.validate_input(DType::kF32, 128, 64); }), "hybrid-group-aligned");
  r.group_rows = {96, 64};
  EXPECT_EQ(rule_of([&] { r.validate_input(DType::kF32, 128, 64); }), "hybrid-group-aligned");  // sum != M
}

TEST(Hybrid, EachPlaneIsItsRecipeOnItsSource) {
  const uint64_t seed = testing::test_seed(0x4B1D);
  QTC_SEED_TRACE(seed);
  Nvfp4Options rs;
  rs.row_scaled = true;
  for (const HybridRecipe& h : {make_hybrid(Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kOriginal),
                                make_hybrid(Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kRowwiseDequantized),
                                make_hybrid(Nvfp4Options{}, Nvfp4Options{}, ColumnwiseSource::kRowwiseDequantized),
                                make_hybrid(rs, Mxfp8Options{}, ColumnwiseSource::kRowwiseDequantized),
                                make_hybrid(Mxfp8Options{}, Fp8TensorOptions{}, ColumnwiseSource::kRowwiseDequantized),
                                make_hybrid(Mxfp4Options{}, Fp8BlockOptions{}, ColumnwiseSource::kRowwiseDequantized)})
    for (DType dt : {DType::kF32, DType::kBF16})
      for (testing::Family fam : testing::kAllFamilies) {
        SCOPED_TRACE(h.name() + " " + std::string(dtype_name(dt)) + " family " + std::to_string(static_cast<int>(fam)));
        const HostMatrix x = testing::make_input(fam, dt, 96, 80, seed);
        const HybridQuantized q = ref::quantize_hybrid(x.view(), h);
        // Only its own plane in each sub-tensor.
        ASSERT_TRUE(q.rowwise.rowwise && !q.rowwise.columnwise);
        ASSERT_TRUE(q.columnwise.columnwise && !q.columnwise.rowwise);
        // The rowwise plane: the rowwise recipe alone on x (both planes asked: the rowwise one does not change).
        Recipe both_row = h.rowwise;
        both_row.rowwise = both_row.columnwise = true;
        EXPECT_TRUE(*q.rowwise.rowwise == *ref::quantize(x.view(), both_row).rowwise);
        // The source: x, or the rowwise plane dequantized in x's dtype (TE: dequantize(dtype=tensor.dtype)).
        if (h.source == ColumnwiseSource::kOriginal) {
          EXPECT_FALSE(q.source.has_value());
        } else {
          ASSERT_TRUE(q.source.has_value());
          EXPECT_EQ(q.source->dtype, dt);
          EXPECT_TRUE(q.source->bytes == ref::dequantize(q.rowwise, PlaneKind::kRowwise, dt).bytes);
        }
        const MatrixView src = q.source ? q.source->view() : x.view();
        Recipe both_col = h.columnwise;
        both_col.rowwise = both_col.columnwise = true;
        const QuantizedTensor alone = ref::quantize(src, both_col);
        EXPECT_TRUE(*q.columnwise.columnwise == *alone.columnwise);
        EXPECT_EQ(std::bit_cast<uint32_t>(q.columnwise.scale_inv), std::bit_cast<uint32_t>(alone.scale_inv));
      }
}

/// TE's fused grouped requantization, float path, as fused_group_requantize.cu computes it: value = 2^(e-127) *
/// fp8 in float; per 32-row column block amax; E8M0 = float_to_e8m0(amax * RN(1/448)) (exponent rounded up);
/// data = cvt.satfinite.e4m3(value * 2^(127-e)). Written from the kernel, independent of ref::quantize.
TEST(Hybrid, FusedGroupRequantizeMatchesTheKernelsArithmetic) {
  for (Fp8Type in : {Fp8Type::kE4M3, Fp8Type::kE5M2}) {
    const HybridRecipe h = HybridRecipe::te_group_requantize(in, false, {256, 0, 128, 128});
    const int64_t M = 512, K = 256;
    const HostMatrix x = te_requantize_input(M, K);
    const std::vector<HybridQuantized> g = ref::quantize_hybrid_grouped(x.view(), ref::hybrid_groups(h, M, K), h);
    ASSERT_EQ(g.size(), 4u);
    const std::array<float, 256>& table = in == Fp8Type::kE4M3 ? kE4M3Table : kE5M2Table;
    int64_t row0 = 0, checked = 0;
    for (const HybridQuantized& q : g) {
      const int64_t n = q.rowwise.rows;
      if (n == 0) continue;
      const Plane& rp = *q.rowwise.rowwise;
      const Plane& cp = *q.columnwise.columnwise;
      ASSERT_EQ(cp.data_rows, n);
      for (int64_t c = 0; c < K; ++c)
        for (int64_t b = 0; b < n / 32; ++b) {
          float v[32];
          float amax = 0.0f;
          for (int i = 0; i < 32; ++i) {
            const int64_t r = b * 32 + i;
            const uint8_t e = rp.scale.byte(r, c / 32);
            v[i] = std::ldexp(1.0f, e - 127) * table[rp.data[static_cast<size_t>(r * K + c)]];
            amax = std::fmax(amax, std::fabs(v[i]));
          }
          const float t = amax * 0x1.24924ap-9f;  // RN(1/448)
          const uint32_t u = std::bit_cast<uint32_t>(t);
          uint32_t e = u >> 23;
          const uint32_t man = u & 0x7FFFFF;
          if (t == 0.0f) e = 0;
          else if (man > 0 && e != 0xFE && !(e == 0 && man <= 0x400000)) ++e;
          ASSERT_EQ(cp.scale.byte(b, c), e) << "columnwise scale, group row " << row0 << " block " << b << " col " << c;
          const float mul = std::ldexp(1.0f, 127 - static_cast<int>(e));
          for (int i = 0; i < 32; ++i) {
            const uint8_t want = static_cast<uint8_t>(round_pack<fmt::E4M3>(static_cast<double>(v[i] * mul)));
            ASSERT_EQ(cp.data[static_cast<size_t>((b * 32 + i) * K + c)], want) << "row " << b * 32 + i << " col " << c;
            ++checked;
          }
        }
      row0 += n;
    }
    EXPECT_EQ(checked, M * K);
  }
}

TEST(Hybrid, AlignedGroupsEqualTheWholeTensor) {
  const uint64_t seed = testing::test_seed(0x6A0);
  QTC_SEED_TRACE(seed);
  for (bool fast : {false, true}) {
    const HybridRecipe h = HybridRecipe::te_group_requantize(Fp8Type::kE4M3, fast, {128, 0, 64, 192});
    const HostMatrix x = testing::make_input(testing::Family::kHeavy, DType::kBF16, 384, 96, seed);
    HybridRecipe whole = h;
    whole.group_rows.clear();
    const HybridQuantized w = ref::quantize_hybrid(x.view(), whole);
    const auto g = ref::quantize_hybrid_grouped(x.view(), ref::hybrid_groups(h, 384, 96), h);
    int64_t row = 0;
    for (const HybridQuantized& q : g) {
      const int64_t n = q.rowwise.rows;
      if (n == 0) continue;
      EXPECT_EQ(0, std::memcmp(q.rowwise.rowwise->data.data(), w.rowwise.rowwise->data.data() + row * 96, n * 96));
      EXPECT_EQ(0, std::memcmp(q.columnwise.columnwise->data.data(), w.columnwise.columnwise->data.data() + row * 96, n * 96));
      EXPECT_EQ(0, std::memcmp(q.columnwise.columnwise->scale.bytes.data(),
                               w.columnwise.columnwise->scale.bytes.data() + row / 32 * 96, n / 32 * 96));
      EXPECT_EQ(0, std::memcmp(q.source->bytes.data(), w.source->bytes.data() + row * 96 * (fast ? 2 : 4), n * 96 * (fast ? 2 : 4)))
          << "source dtype " << dtype_name(q.source->dtype);
      row += n;
    }
    EXPECT_EQ(row, 384);
  }
  // NVFP4 keeps one global amax per group: a grouped NVFP4 hybrid is refused by rule rather than silently differing.
  const HostMatrix x = testing::make_input(testing::Family::kHeavy, DType::kF32, 64, 32, seed);
  HybridRecipe n = make_hybrid(Mxfp8Options{}, Nvfp4Options{}, ColumnwiseSource::kOriginal);
  n.group_rows = {32, 32};
  EXPECT_EQ(rule_of([&] { (void)ref::quantize_hybrid_grouped(x.view(), ref::hybrid_groups(n, 64, 32), n); }),
            "hybrid-grouped-local");
}

}  // namespace
}  // namespace qtc
