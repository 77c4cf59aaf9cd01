/// \file prop_shard.cpp
/// \brief Properties 1 and 6e: FSDP2 shard alignment and quantize∘shard == shard∘quantize.
///
/// | property                   | recipes                                              | edges                               |
/// |----------------------------|------------------------------------------------------|-------------------------------------|
/// | ShardAcceptance            | NVFP4 1x16/16x16/row-scaled, MXFP8 1D/2D, FP8 block, FP8 tensor | shard_M at 16k, 32k, 128k and ±1, ±8, ±16; no rowwise plane |
/// | GatheredScalesLineUp       | NVFP4 1x16/16x16, MXFP8 1D/2D, FP8 128x128, FP8 tensor | world 1..8, empty shards, M not a multiple of 128 |
/// | QuantizeCommutesWithShard  | every recipe but SR (and row-scaled columnwise)      | slices at every block boundary, shared amax |
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "check.hpp"
#include "gen.hpp"
#include "harness.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"

#if __has_include("qtc/sharding.hpp")
#include "qtc/sharding.hpp"
#define QTC_PROP_HAVE_SHARDING 1
#endif

namespace qtc::prop {
namespace {

/// Rows a shard boundary must be a multiple of so that no block of any requested plane straddles it.
int64_t boundary_multiple(const Recipe& r) {
  switch (r.kind()) {
    case RecipeKind::kNVFP4: return 16;
    case RecipeKind::kMXFP8: return (r.columnwise || r.is_2d()) ? 32 : 1;
    case RecipeKind::kFP8Block: return (r.columnwise || r.is_2d()) ? 128 : 1;
    case RecipeKind::kFP8Tensor: return 1;
  }
  return 1;
}

/// The global amaxes every shard would use after the MAX all-reduce (TE §8.4): of the whole tensor,
/// columnwise of RHT(x^T) when the recipe has RHT.
std::pair<float, float> full_amaxes(const MatrixView& x, const Recipe& r) {
  const bool prop = r.profile == Profile::kTEPyRef;
  const float a = ref::amax(x, prop);
  if (r.kind() == RecipeKind::kNVFP4 && r.nvfp4_rht() && r.columnwise && x.rows > 0) {
    const HostMatrix y = ref::rht_transform(x, r.nvfp4().rht_sign_mask);
    return {a, ref::amax(y.view(), prop)};
  }
  return {a, a};
}

bool per_tensor_scale(const Recipe& r) { return (r.kind() == RecipeKind::kNVFP4 && !r.nvfp4_row_scaled()) || r.kind() == RecipeKind::kFP8Tensor; }

MatrixView rows_of(const HostMatrix& x, int64_t r0, int64_t r1) {
  return MatrixView{x.bytes.data() + static_cast<size_t>(r0 * x.cols) * dtype_size(x.dtype), x.dtype, r1 - r0, x.cols};
}

// Guards against: quantizing shards with their local amax instead of the all-reduced one (the FSDP2
// bug of TE §8.4), blocks that straddle a shard boundary, per-row state (row-scaled amax, 2D tile
// amax, RHT 16-row groups, MXFP8/FP8 column blocks) that leaks across a slice, and partial trailing
// blocks handled differently in a slice than in the full tensor.
TEST(ShardProperty, QuantizeCommutesWithShard) {
  check_property({"nvfp4", "mxfp8", "fp8_block", "fp8_tensor", "several_shards", "boundary_not_multiple_of_128",
                  "partial_last_block", "amax_edge", "e2m1_or_fp8_ties", "zero_block"},
                 [] {
    RecipeSpace sp;
    sp.stochastic = false;  // SR draws its random bits from the element's global index: shards differ by design
    Recipe r = *gen_recipe(sp);
    if (r.nvfp4_row_scaled()) r.columnwise = false;  // per-column amax over all rows cannot be computed per shard
    const int64_t M = *gen_dim(r.kind()), K = *gen_dim(r.kind(), 160);
    DataSpec d = *gen_data(r, kNegZero | kSubnormal | kHuge | kInf | (r.profile == Profile::kTEPyRef ? 0u : kNaN));
    const HostMatrix x = build(d, r, M, K);
    // Cut points: multiples of the boundary granularity, drawn from the edges.
    const int64_t g = boundary_multiple(r);
    const int nshards = 1 + *pick(4);
    std::vector<int64_t> cuts{0, M};
    for (int s = 1; s < nshards; ++s) {
      const int64_t c = *rc::gen::inRange<int64_t>(0, M / g + 1) * g;
      if (c > 0 && c < M) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    tag(recipe_kind_name(r.kind()));
    tag_if(cuts.size() > 2, "several_shards");
    for (size_t i = 1; i + 1 < cuts.size(); ++i) tag_if(cuts[i] % 128 != 0, "boundary_not_multiple_of_128");
    tag_if(r.block_cols() > 0 && (K % r.block_cols() != 0 || (r.block_rows() > 1 && M % r.block_rows() != 0)), "partial_last_block");
    tag_if(d.anchor == Anchor::kAmaxEdge, "amax_edge");
    tag_if(d.anchor == Anchor::kTies, "e2m1_or_fp8_ties");
    for (const auto& t : classify_input(x, r)) tag(t);

    const QuantizedTensor full = ref::quantize(x.view(), r);
    const auto [ar, ac] = full_amaxes(x.view(), r);
#ifdef QTC_PROP_HAVE_SHARDING
    std::vector<QuantizedTensor> parts;
#endif
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      const MatrixView xs = rows_of(x, cuts[s], cuts[s + 1]);
      const QuantizedTensor qs = per_tensor_scale(r) ? ref::quantize_with_amax(xs, r, ar, ac) : ref::quantize(xs, r);
      const std::string diff = diff_quantized(qs, slice_oracle(full, cuts[s], cuts[s + 1]));
      if (!diff.empty()) RC_FAIL("shard rows [" + std::to_string(cuts[s]) + ", " + std::to_string(cuts[s + 1]) + "): " + diff);
#ifdef QTC_PROP_HAVE_SHARDING
      parts.push_back(qs);
#endif
    }
#ifdef QTC_PROP_HAVE_SHARDING
    if (M > 0) {
      const std::string diff = diff_quantized(ref::concat_rows(parts), full);
      if (!diff.empty()) RC_FAIL("concat_rows(shards) != quantize(full): " + diff);
    }
#endif
  });
}

#ifdef QTC_PROP_HAVE_SHARDING

/// What TE accepts for an FSDP2 all-gather of one shard (TE_FORMATS.md §8.1-§8.3), restated.
struct Verdict {
  bool accept;
  const char* needle;  ///< a word the refusal must contain
};
Verdict fsdp_verdict(const Recipe& r, int64_t shard_M, bool has_rowwise, bool has_columnwise) {
  if (!has_rowwise) return {false, "rowwise"};
  switch (r.kind()) {
    case RecipeKind::kNVFP4:
      if (shard_M % 16 != 0) return {false, "16"};
      if (r.nvfp4_row_scaled()) return {false, "row-scaled"};
      if (has_columnwise && !r.is_2d()) return {false, "2D"};
      return {true, ""};
    case RecipeKind::kMXFP8: return shard_M % 32 == 0 ? Verdict{true, ""} : Verdict{false, "32"};
    case RecipeKind::kFP8Block:
      if (!r.is_2d()) return {false, "1x128"};
      return shard_M % 128 == 0 ? Verdict{true, ""} : Verdict{false, "128"};
    case RecipeKind::kFP8Tensor: return {true, ""};
  }
  return {false, "?"};
}

/// A structurally consistent NVFP4 shard of any row count (ref::quantize refuses M % 16 != 0, but a
/// buggy slicer or transport could hand one to the FSDP2 hook).
QuantizedTensor synthetic_nvfp4(const Recipe& r, int64_t M, int64_t K, uint64_t seed) {
  QuantizedTensor q;
  q.recipe = r;
  q.rows = M;
  q.cols = K;
  auto plane = [&](int64_t rows, int64_t len) {
    Plane p;
    p.data_rows = rows;
    p.data_cols = len / 2;
    p.data.resize(static_cast<size_t>(rows * (len / 2)));
    for (size_t i = 0; i < p.data.size(); ++i) p.data[i] = static_cast<uint8_t>(hash64(seed, i));
    p.scale.type = ScaleType::kE4M3;
    p.scale.rows = rows;
    p.scale.cols = (len + 15) / 16;
    p.scale.bytes.assign(static_cast<size_t>(p.scale.rows * p.scale.cols), 0x38);
    p.amax = {1.0f};
    return p;
  };
  if (r.rowwise) q.rowwise = plane(M, K);
  if (r.columnwise) q.columnwise = plane(K, M + (M & 1));
  return q;
}

// Guards against: an FSDP2 hook that accepts a shard whose 16/32/128-row blocks would straddle the
// shard boundary (gathered scales then belong to the wrong rows), accepts a shard without the rowwise
// plane, or derives an NVFP4 1x16 columnwise plane; and refusals whose message does not name the rule.
TEST(ShardProperty, ShardAcceptance) {
  check_property({"accepted", "refused_alignment", "refused_no_rowwise", "refused_1d_columnwise", "shard_M_mult_16_not_32",
                  "shard_M_mult_32_not_128", "shard_M_mult_128", "shard_M_off_by_one"},
                 [] {
    RecipeSpace sp;
    sp.rht = sp.fourover6 = sp.stochastic = false;
    sp.te_pyref = false;
    const Recipe r = *gen_recipe(sp);
    const int64_t base = *rc::gen::element<int64_t>(16, 32, 128);
    const int64_t n = *rc::gen::inRange<int64_t>(1, 4);
    const int64_t off = *rc::gen::element<int64_t>(0, 0, 0, -1, 1, -8, 8, -16, 16);
    const int64_t shard_M = std::max<int64_t>(1, base * n + off);
    const int64_t K = r.kind() == RecipeKind::kNVFP4 ? 32 : *rc::gen::element<int64_t>(16, 32, 48, 129);
    tag_if(shard_M % 16 == 0 && shard_M % 32 != 0, "shard_M_mult_16_not_32");
    tag_if(shard_M % 32 == 0 && shard_M % 128 != 0, "shard_M_mult_32_not_128");
    tag_if(shard_M % 128 == 0, "shard_M_mult_128");
    tag_if(off == 1 || off == -1, "shard_M_off_by_one");
    QuantizedTensor shard;
    if (r.kind() == RecipeKind::kNVFP4 && shard_M % 16 != 0) {
      shard = synthetic_nvfp4(r, shard_M, K, static_cast<uint64_t>(shard_M));
    } else {
      DataSpec d;
      d.seed = static_cast<uint64_t>(shard_M * 7 + K);
      shard = ref::quantize(build(d, r, shard_M, K).view(), r);
    }
    const Verdict v = fsdp_verdict(r, shard_M, shard.rowwise.has_value(), shard.columnwise.has_value());
    bool accepted = true;
    std::string why;
    try {
      (void)ref::fsdp_pre_all_gather(shard);
    } catch (const Error& e) {
      accepted = false;
      why = e.what();
    }
    RC_ASSERT(accepted == v.accept);
    if (accepted) {
      tag("accepted");
    } else {
      if (std::string(v.needle) == "rowwise") tag("refused_no_rowwise");
      else if (std::string(v.needle) == "2D") tag("refused_1d_columnwise");
      else tag("refused_alignment");
      if (why.find(v.needle) == std::string::npos)
        RC_FAIL("refusal does not name the rule (expected '" + std::string(v.needle) + "'): " + why);
    }
  });
}

// Guards against: gathered scale rows that do not line up with the global blocks (the 128-row padding
// interleaved between shards, TE §8.1), re-padding with garbage, a derived columnwise plane that
// differs from quantizing the full tensor, and metadata (amax) of one shard that is wrong for the rest.
TEST(ShardProperty, GatheredScalesLineUp) {
  check_property({"nvfp4", "mxfp8", "fp8_block", "fp8_tensor", "world_gt_1", "empty_shard", "M_not_multiple_of_128",
                  "padded_layout", "columnwise_derived", "columnwise_gathered"},
                 [] {
    RecipeSpace sp;
    sp.rht = sp.fourover6 = sp.stochastic = sp.row_scaled = false;
    sp.te_pyref = false;
    sp.block_1d = false;
    Recipe r = *gen_recipe(sp);
    r.rowwise = true;
    if (r.kind() == RecipeKind::kNVFP4 && !r.is_2d()) r.columnwise = false;
    const int64_t g = r.kind() == RecipeKind::kNVFP4 ? 16 : r.kind() == RecipeKind::kMXFP8 ? 32 : r.kind() == RecipeKind::kFP8Block ? 128 : 1;
    const int world = *rc::gen::element(1, 2, 3, 4, 8);
    const int64_t M = *gen_multiple(g, r.kind() == RecipeKind::kFP8Block ? 4 : 12);
    const int64_t K = r.kind() == RecipeKind::kNVFP4 ? *gen_dim(r.kind(), 96) : *gen_dim(r.kind(), 140);
    const ScaleLayout layout = *rc::gen::element(ScaleLayout::kCompact, ScaleLayout::kPadded);
    const DataSpec d = *gen_data(r, kNegZero | kSubnormal);
    const HostMatrix x = build(d, r, M, K);
    tag(recipe_kind_name(r.kind()));
    tag_if(world > 1, "world_gt_1");
    tag_if(M % 128 != 0, "M_not_multiple_of_128");
    tag_if(layout == ScaleLayout::kPadded && r.kind() != RecipeKind::kFP8Tensor, "padded_layout");
    const auto amaxes = full_amaxes(x.view(), r);
    const float ar = amaxes.first, ac = amaxes.second;  // not a structured binding: clang 14 cannot capture one
    ref::AmaxAllReduce reduce = [&](std::span<float> v) {
      v[0] = ar;
      v[1] = ac;
    };
    std::vector<ref::ShardPayload> payloads;
    for (int rank = 0; rank < world; ++rank) {
      const auto [b, e] = ref::shard_row_range(M, world, rank, g);
      tag_if(b == e, "empty_shard");
      QuantizedTensor qs = ref::quantize_shard(rows_of(x, b, e), r, reduce);
      if (layout != ScaleLayout::kCompact) ref::convert_layout(qs, layout);
      payloads.push_back(ref::fsdp_pre_all_gather(qs));
    }
    const std::vector<ref::GatherBuffer> gathered = ref::concat_gathered(payloads);
    const QuantizedTensor got = ref::fsdp_post_all_gather(gathered, payloads[0].meta);
    QuantizedTensor want = ref::quantize(x.view(), r);
    tag_if(r.columnwise && !payloads[0].meta.columnwise_gathered, "columnwise_derived");
    tag_if(payloads[0].meta.columnwise_gathered, "columnwise_gathered");
    // The gathered rowwise scale rows, row by row, are the full tensor's compact rows (then padding).
    for (const auto& gb : gathered) {
      if (gb.name != "rowwise_scale_inv") continue;
      const ScaleMatrix& ws = want.rowwise->scale;  // compact
      const int64_t es = static_cast<int64_t>(ws.elem_size());
      RC_ASSERT(gb.rows == ws.rows);
      for (int64_t i = 0; i < ws.rows; ++i)
        for (int64_t c = 0; c < gb.row_bytes; ++c) {
          const uint8_t gv = gb.bytes[static_cast<size_t>(i * gb.row_bytes + c)];
          const uint8_t wv = c < ws.cols * es ? ws.bytes[static_cast<size_t>(i * ws.cols * es + c)] : 0;
          if (gv != wv && c < ws.cols * es)
            RC_FAIL("gathered rowwise scale row " + std::to_string(i) + " byte " + std::to_string(c) + " does not line up");
        }
    }
    if (layout != ScaleLayout::kCompact) ref::convert_layout(want, layout);
    const std::string diff = diff_quantized(got, want);
    if (!diff.empty()) RC_FAIL("post_all_gather(all_gather(pre_all_gather(shards))) != quantize(full): " + diff);
  });
}

#endif  // QTC_PROP_HAVE_SHARDING

}  // namespace
}  // namespace qtc::prop
