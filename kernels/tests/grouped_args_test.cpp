/// \file grouped_args_test.cpp
/// \brief group_args (kernels/src/grouped/grouped_gemm_sm90.hpp): what the fill kernel of the device-driven grouped GEMM
///        writes for one group, checked on the CPU for fprop and wgrad, uneven, empty and misaligned groups; and the
///        routing rule every device-driven grouped call applies first (sanitize_routing, grouped_routing.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "grouped_gemm_sm90.hpp"
#include "grouped_routing.hpp"

namespace qtc::cuda::detail {
namespace {

/// fprop as gemm_grouped.cpp builds it: x [cap, K], weights [G, N, K], d [cap, N], s [cap], bias [G, N].
GroupedGemmProblem fprop(int64_t N, int64_t K, bool bias) {
  GroupedGemmProblem p;
  p.n = N;
  p.k = K;
  p.a = {nullptr, K, 0};
  p.b = {nullptr, 0, N * K};
  p.d = {nullptr, N, 0};
  p.col = {nullptr, 1, 0};
  p.row_mul = {nullptr, 0, 0};
  p.row_add = {nullptr, 0, bias ? N : 0};
  return p;
}

/// wgrad: dY [N, cap], x [K, cap] (columnwise, BF16), d [G, N, K], vectors [G, N] and [G, K].
GroupedGemmProblem wgrad(int64_t N, int64_t K) {
  GroupedGemmProblem p;
  p.wgrad = true;
  p.n = N;
  p.k = K;
  p.a = {nullptr, 1, 0};
  p.b = {nullptr, 1, 0};
  p.d = {nullptr, 0, N * K};
  p.col = {nullptr, 0, N};
  p.row_mul = {nullptr, 0, K};
  p.row_add = {nullptr, 0, 0};
  return p;
}

TEST(GroupedArgs, FpropGroupReadsItsRowsAndItsWeight) {
  const GroupedGemmProblem p = fprop(200, 272, true);
  const GroupArgs a = group_args(p, 37, 45, 3);  // 37 tokens from row 45, group 3 (sizes need not be multiples of 16)
  EXPECT_TRUE(a.live);
  EXPECT_EQ(a.m, 37);
  EXPECT_EQ(a.n, 200);
  EXPECT_EQ(a.k, 272);
  EXPECT_EQ(a.a, 45 * 272);       // x row 45
  EXPECT_EQ(a.b, 3 * 200 * 272);  // weight 3
  EXPECT_EQ(a.d, 45 * 200);       // output row 45
  EXPECT_EQ(a.col, 45);           // the row factors of its rows
  EXPECT_EQ(a.row_mul, 0);        // ones, shared
  EXPECT_EQ(a.row_add, 3 * 200);  // its own bias row
  EXPECT_EQ(group_args(fprop(200, 272, false), 37, 45, 3).row_add, 0);  // the shared -0 vector
}

TEST(GroupedArgs, EmptyGroupComputesNothing) {
  for (const GroupedGemmProblem& p : {fprop(64, 64, false), wgrad(64, 64)}) {
    const GroupArgs a = group_args(p, 0, 128, 1);
    EXPECT_FALSE(a.live);
    EXPECT_EQ(a.m, 0);
  }
  EXPECT_EQ(group_args(wgrad(64, 64), 0, 128, 1).k, 0);
}

TEST(GroupedArgs, WgradReducesOverTheGroupsTokens) {
  const GroupedGemmProblem p = wgrad(136, 200);
  const GroupArgs a = group_args(p, 160, 80, 2);  // tokens [80, 240) of group 2
  EXPECT_TRUE(a.live);
  EXPECT_EQ(a.m, 136);  // D_g [N, K]
  EXPECT_EQ(a.n, 200);
  EXPECT_EQ(a.k, 160);  // reduction over the group's tokens
  EXPECT_EQ(a.a, 80);   // column 80 of dY [N, cap]
  EXPECT_EQ(a.b, 80);   // column 80 of x [K, cap]
  EXPECT_EQ(a.d, 2 * 136 * 200);
  EXPECT_EQ(a.col, 2 * 136);
  EXPECT_EQ(a.row_mul, 2 * 200);
  EXPECT_EQ(a.row_add, 0);
}

TEST(GroupedArgs, WgradGroupOffTheTmaAlignmentIsSkipped) {
  const GroupedGemmProblem p = wgrad(64, 64);
  EXPECT_FALSE(group_args(p, 36, 0, 0).live);   // 36 tokens: K not a whole number of 16-byte chunks
  EXPECT_FALSE(group_args(p, 64, 36, 1).live);  // starts at token 36: row address not 16-byte aligned
  EXPECT_EQ(group_args(p, 64, 36, 1).m, 0);
  EXPECT_TRUE(group_args(p, 48, 16, 1).live);
  // fprop has no such rule: a row of K BF16 values (K % 16) is always aligned
  EXPECT_TRUE(group_args(fprop(64, 64, false), 37, 45, 0).live);
}

TEST(GroupedRouting, ValidRoutingIsUnchanged) {
  const std::vector<int64_t> sizes{37, 0, 128, 16, 201, 64}, offs{0, 45, 45, 173, 189, 400};
  std::vector<int64_t> out(12, -1);
  sanitize_routing(sizes.data(), offs.data(), 1, 6, 640, out.data());
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.begin() + 6), sizes);
  EXPECT_EQ(std::vector<int64_t>(out.begin() + 6, out.end()), offs);
}

TEST(GroupedRouting, HostileGroupsReadAsEmptyAndStayInsideTheCapacity) {
  // interleaved [G, 2] (stride 2): size, offset
  const int64_t big = int64_t{1} << 62;
  const std::vector<int64_t> inter{32, 0,  -16, 40,  48, 16,  big, 100,  16, 120,  64, 290,  16, -32,  big, -big,  0, 300,  1, 300};
  const int64_t G = 10, cap = 300;
  std::vector<int64_t> out(static_cast<size_t>(2 * G), -1);
  sanitize_routing(inter.data(), inter.data() + 1, 2, G, cap, out.data());
  // kept: 0 (32 at 0), 4 (16 at 120), 8 (0 rows at 300: an empty group at the end is valid); dropped: a negative
  // size, an overlap, 2^62 rows (no overflow), past the capacity, negative offsets, a row at the capacity
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.begin() + G), (std::vector<int64_t>{32, 0, 0, 0, 16, 0, 0, 0, 0, 0}));
  EXPECT_EQ(std::vector<int64_t>(out.begin() + G, out.end()), (std::vector<int64_t>{0, 32, 32, 32, 120, 136, 136, 136, 300, 300}));
  for (int64_t g = 0, end = 0; g < G; ++g) {  // kept groups in order, disjoint, inside [0, cap)
    EXPECT_GE(out[static_cast<size_t>(G + g)], end);
    end = out[static_cast<size_t>(G + g)] + out[static_cast<size_t>(g)];
    EXPECT_LE(end, cap);
  }
}

}  // namespace
}  // namespace qtc::cuda::detail
