/// \file grouped_test.cpp
/// \brief Grouped tensors (grouped.hpp): each group quantized alone; grouped row-scaled NVFP4 fprop/wgrad
///        equal per-group GEMMs; the cases TransformerEngine's grouped row-scaled work had to fix, by name.
///
/// | test                                   | case                                                              |
/// |----------------------------------------|-------------------------------------------------------------------|
/// | QuantizeEachGroupAlone                  | uneven + empty groups, every recipe family                         |
/// | GroupSizesSumToFewerRowsThanTheTensor   | only live rows quantized and scaled; padding rows untouched, finite |
/// | MoreThan64GroupsAndOddLastDim           | 70 groups, last dim 80 (not % 128): same per-group result          |
/// | FpropEqualsPerGroupGemms                | uneven groups, capacity-padded output                              |
/// | MixedRowScaledAndPerTensorGroups        | per-group fallback, no neighbour's amax touched                    |
/// | OutputWidthsDifferRejectedBeforeGemm    | clear error, output untouched                                      |
/// | ExplicitBetaRejected, BadOffsetsRejected| clear errors                                                       |
/// | WgradEqualsPerGroupGemms                | per-column scales, empty group gives zeros                         |
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "qtc/codec.hpp"
#include "qtc/grouped.hpp"
#include "qtc/quantize.hpp"
#include "qtc/test_support.hpp"

namespace qtc::ref {
namespace {

/// BF16 input of the shared input families (test_support.hpp); QTC_SEED offsets every seed.
HostMatrix random_bf16(int64_t rows, int64_t cols, uint64_t seed) {
  return qtc::testing::make_input(qtc::testing::Family::kNormal, DType::kBF16, rows, cols, seed + qtc::testing::test_seed(0));
}

/// Rows [r0, r0 + n) of m, as a matrix (for first-mismatch comparisons of a group's rows).
HostMatrix rows_copy(const HostMatrix& m, int64_t r0, int64_t n) {
  HostMatrix out(m.dtype, n, m.cols);
  const size_t row = static_cast<size_t>(m.cols) * dtype_size(m.dtype);
  std::memcpy(out.bytes.data(), m.bytes.data() + static_cast<size_t>(r0) * row, static_cast<size_t>(n) * row);
  return out;
}

MatrixView rows_of(const HostMatrix& x, int64_t r0, int64_t n) {
  MatrixView v = x.view();
  v.data = x.bytes.data() + r0 * x.cols * 2;
  v.rows = n;
  return v;
}

Recipe nvfp4(bool row_scaled) {
  Recipe r = Recipe::of(Nvfp4Options{.row_scaled = row_scaled});
  return r;
}

void expect_same(const QuantizedTensor& a, const QuantizedTensor& b, int64_t g) {
  EXPECT_EQ(a.rows, b.rows) << "group " << g;
  EXPECT_TRUE(qtc::testing::outputs_equal(b, a)) << "group " << g;
}

TEST(Grouped, QuantizeEachGroupAlone) {
  const GroupedRows rows = GroupedRows::packed({32, 0, 64, 96, 32}, 128);
  const HostMatrix x = random_bf16(rows.capacity, 128, 1);
  std::vector<Recipe> recipes{nvfp4(false), nvfp4(true)};
  Recipe mx = Recipe::of(Mxfp8Options{});
  Recipe blk = Recipe::of(Fp8BlockOptions{});
  Recipe ten = Recipe::of(Fp8TensorOptions{});
  recipes.insert(recipes.end(), {mx, blk, ten});
  for (const Recipe& r : recipes) {
    SCOPED_TRACE(r.name());
    const auto q = quantize_grouped(x.view(), rows, r);
    ASSERT_EQ(q.size(), 5u);
    EXPECT_EQ(q[1].rows, 0);
    for (int64_t g = 0; g < rows.groups(); ++g)
      if (rows.first_dims[static_cast<size_t>(g)] > 0)
        expect_same(q[static_cast<size_t>(g)], quantize(rows_of(x, rows.row_offset(g), rows.first_dims[static_cast<size_t>(g)]), r), g);
  }
}

TEST(Grouped, GroupSizesSumToFewerRowsThanTheTensor) {
  // 3 groups totalling 96 rows in a 160-row buffer whose tail is NaN: the tail is never read.
  GroupedRows rows = GroupedRows::packed({32, 48, 16}, 64, 160);
  HostMatrix x = random_bf16(160, 64, 2);
  for (int64_t i = 96 * 64; i < 160 * 64; ++i) x.as<uint16_t>()[i] = 0x7FC0;  // NaN
  const auto q = quantize_grouped(x.view(), rows, nvfp4(true));
  for (int64_t g = 0; g < 3; ++g) {
    for (float a : q[static_cast<size_t>(g)].rowwise->amax) EXPECT_FALSE(std::isnan(a)) << "group " << g;
    expect_same(q[static_cast<size_t>(g)], quantize(rows_of(x, rows.row_offset(g), rows.first_dims[static_cast<size_t>(g)]), nvfp4(true)), g);
  }
}

TEST(Grouped, MoreThan64GroupsAndOddLastDim) {
  std::vector<int64_t> sizes(70, 16);
  sizes[3] = 0;
  sizes[40] = 48;
  const GroupedRows rows = GroupedRows::packed(sizes, 80);
  const HostMatrix x = random_bf16(rows.capacity, 80, 3);
  Recipe r = nvfp4(true);
  r.columnwise = false;  // row-scaled columnwise needs dims % 32 (§1.11); 80 is not
  const auto q = quantize_grouped(x.view(), rows, r);
  ASSERT_EQ(q.size(), 70u);
  for (int64_t g = 0; g < 70; ++g)
    if (sizes[static_cast<size_t>(g)] > 0)
      expect_same(q[static_cast<size_t>(g)], quantize(rows_of(x, rows.row_offset(g), sizes[static_cast<size_t>(g)]), r), g);
}

struct Moe {
  GroupedRows rows;
  std::vector<QuantizedTensor> w, x;
};

/// Experts with uneven token counts, inside a capacity-padded buffer (explicit offsets with gaps).
Moe make_moe(int64_t N, int64_t K, bool mixed = false) {
  Moe m;
  m.rows.first_dims = {32, 0, 48, 16, 64};
  m.rows.tensor_offsets = {0, 64 * K, 64 * K, 128 * K, 160 * K};
  m.rows.last_dim = K;
  m.rows.capacity = 256;
  const HostMatrix xall = random_bf16(256, K, 4);
  Recipe rx = nvfp4(true);
  rx.columnwise = false;
  for (int64_t g = 0; g < m.rows.groups(); ++g) {
    m.w.push_back(quantize(random_bf16(N, K, 10 + static_cast<uint64_t>(g)).view(), nvfp4(false)));
    const int64_t n = m.rows.first_dims[static_cast<size_t>(g)];
    Recipe r = rx;
    if (mixed && g == 2) r = nvfp4(false);  // one group quantized per-tensor
    if (n == 0) {
      QuantizedTensor e;
      e.recipe = r;
      e.cols = K;
      m.x.push_back(e);
    } else {
      m.x.push_back(quantize(rows_of(xall, m.rows.row_offset(g), n), r));
    }
  }
  return m;
}

TEST(Grouped, FpropEqualsPerGroupGemms) {
  const int64_t N = 64, K = 128;
  const Moe m = make_moe(N, K);
  HostMatrix out(DType::kBF16, 256, N);
  for (auto& b : out.bytes) b = 0x3F;  // sentinel (finite bf16 0x3F3F)
  GemmArgs args = GemmArgs::of(GemmKind::kFprop, DType::kBF16);
  args.bias.assign(N, 0.5f);
  gemm_nvfp4_row_scaled_grouped_fprop(m.w, m.x, m.rows, args, out);
  std::vector<uint8_t> live(256, 0);
  for (int64_t g = 0; g < m.rows.groups(); ++g) {
    const int64_t n = m.rows.first_dims[static_cast<size_t>(g)];
    if (n == 0) continue;
    const HostMatrix d = gemm_nvfp4_row_scaled(m.w[static_cast<size_t>(g)], m.x[static_cast<size_t>(g)], args);
    const int64_t off = m.rows.row_offset(g);
    EXPECT_TRUE(qtc::testing::matrices_equal("group output", d, rows_copy(out, off, n))) << "group " << g;
    for (int64_t i = 0; i < n; ++i) live[static_cast<size_t>(off + i)] = 1;
  }
  for (int64_t i = 0; i < 256; ++i)
    if (!live[static_cast<size_t>(i)])
      for (int64_t j = 0; j < N * 2; ++j) ASSERT_EQ(out.bytes[static_cast<size_t>(i * N * 2 + j)], 0x3F) << "padding row " << i << " written";
}

TEST(Grouped, MixedRowScaledAndPerTensorGroups) {
  const int64_t N = 32, K = 64;
  const Moe m = make_moe(N, K, /*mixed=*/true);
  const std::vector<float> amax_before = m.x[3].rowwise->amax;
  HostMatrix out(DType::kF32, 256, N);
  gemm_nvfp4_row_scaled_grouped_fprop(m.w, m.x, m.rows, GemmArgs::of(GemmKind::kFprop), out);
  const HostMatrix d2 = gemm_nvfp4_row_scaled(m.w[2], m.x[2], GemmArgs::of(GemmKind::kFprop));
  EXPECT_TRUE(qtc::testing::matrices_equal("group 2 output", d2, rows_copy(out, m.rows.row_offset(2), d2.rows)));
  EXPECT_EQ(m.x[3].rowwise->amax, amax_before);  // the neighbour's amax is not written
  EXPECT_EQ(m.x[2].rowwise->amax.size(), 1u);
}

TEST(Grouped, OutputWidthsDifferRejectedBeforeGemm) {
  const int64_t N = 32, K = 64;
  Moe m = make_moe(N, K);
  m.w[4] = quantize(random_bf16(48, K, 99).view(), nvfp4(false));  // expert 4 has 48 outputs
  HostMatrix out(DType::kF32, 256, N);
  std::fill(out.bytes.begin(), out.bytes.end(), 0x11);
  try {
    gemm_nvfp4_row_scaled_grouped_fprop(m.w, m.x, m.rows, GemmArgs::of(GemmKind::kFprop), out);
    FAIL() << "accepted groups of different output widths";
  } catch (const qtc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("output width"), std::string::npos) << e.what();
  }
  for (uint8_t b : out.bytes) ASSERT_EQ(b, 0x11);  // rejected before any group ran
}

TEST(Grouped, ExplicitBetaRejected) {
  const Moe m = make_moe(32, 64);
  HostMatrix out(DType::kF32, 256, 32), c(DType::kF32, 256, 32);
  GemmArgs args = GemmArgs::of(GemmKind::kFprop);
  args.beta = 0.5f;
  args.c = &c;
  EXPECT_THROW(gemm_nvfp4_row_scaled_grouped_fprop(m.w, m.x, m.rows, args, out), qtc::Error);
}

TEST(Grouped, BadOffsetsRejected) {
  GroupedRows r = GroupedRows::packed({16, 16}, 64, 64);
  r.tensor_offsets = {0, 8 * 64};  // group 1 starts inside group 0
  EXPECT_THROW(r.validate(), qtc::Error);
  r.tensor_offsets = {0, 16 * 64 + 3};  // not a multiple of last_dim
  EXPECT_THROW(r.validate(), qtc::Error);
  r.tensor_offsets = {0, 56 * 64};  // past capacity
  EXPECT_THROW(r.validate(), qtc::Error);
}

TEST(Grouped, WgradEqualsPerGroupGemms) {
  const int64_t N = 32, K = 64;
  const std::vector<int64_t> sizes{32, 0, 64};
  std::vector<QuantizedTensor> x, dy;
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (sizes[g] == 0) {
      QuantizedTensor ex, ed;
      ex.recipe = ed.recipe = nvfp4(true);
      ex.cols = K;
      ed.cols = N;
      x.push_back(ex);
      dy.push_back(ed);
      continue;
    }
    x.push_back(quantize(random_bf16(sizes[g], K, 50 + g).view(), nvfp4(true)));
    dy.push_back(quantize(random_bf16(sizes[g], N, 60 + g).view(), nvfp4(false)));
  }
  const auto res = gemm_nvfp4_row_scaled_grouped_wgrad(x, dy, DType::kF32);
  ASSERT_EQ(res.size(), 3u);
  for (size_t g = 0; g < 3; ++g) {
    ASSERT_EQ(res[g].rows, N);
    ASSERT_EQ(res[g].cols, K);
    if (sizes[g] == 0) {
      for (uint8_t b : res[g].bytes) EXPECT_EQ(b, 0);
      continue;
    }
    const HostMatrix d = gemm_nvfp4_row_scaled(x[g], dy[g], GemmArgs::of(GemmKind::kWgrad));
    EXPECT_TRUE(qtc::testing::matrices_equal("wgrad", d, res[g])) << "group " << g;
  }
}

}  // namespace
}  // namespace qtc::ref
