/// \file prop_group.cpp
/// \brief Property 4: mixed quantizer groups (group.hpp) equal each member quantized alone, and no member's
///        amax, scale or data buffer is touched by another's.
///
/// | property            | groups                                                              | edges |
/// |---------------------|---------------------------------------------------------------------|-------|
/// | MixedGroupIsolation | 1-6 members mixing row-scaled and per-tensor NVFP4, MXFP8, FP8 block/tensor, RHT, 4over6, SR | empty members, members with very different amax, in-place outputs in compact and padded layouts |
/// | GroupedRowsIgnorePoisonedPadding | quantize_grouped (MoE row partition), any recipe, 1-6 groups | rows in no group (gaps, tail) NaN / ±Inf / largest finite / random bits; zero-row groups; sizes and capacity not multiples of 128 |
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "check.hpp"
#include "gen.hpp"
#include "harness.hpp"
#include "qtc/group.hpp"
#include "qtc/grouped.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"

namespace qtc::prop {
namespace {

void fill_sentinel(QuantizedTensor& q) {
  for (auto* p : {&q.rowwise, &q.columnwise}) {
    if (!*p) continue;
    std::fill((*p)->data.begin(), (*p)->data.end(), 0xA5);
    std::fill((*p)->scale.bytes.begin(), (*p)->scale.bytes.end(), 0x5A);
    std::fill((*p)->amax.begin(), (*p)->amax.end(), -1.0f);
  }
  q.scale_inv = -1.0f;
}

// Guards against: a grouped quantizer that applies one member's amax (or the group's max) to another
// member, indexes the amax/scale arrays with the wrong member offset (writing member i's scales into
// member i+1's buffer), mishandles empty members (a zero-row member shifting the offsets of the rest),
// or mixes recipes (row-scaled amax vector read as per-tensor); and an in-place update that reallocates or
// leaves stale bytes.
TEST(GroupProperty, MixedGroupIsolation) {
  check_property({"row_scaled_with_per_tensor_nvfp4", "nvfp4_with_mxfp8_and_fp8_block", "empty_member", "amax_differs",
                  "in_place_padded", "several_members"},
                 [] {
    const int n = 1 + *pick(6);
    std::vector<Recipe> recipes;
    std::vector<HostMatrix> xs;
    std::vector<DataSpec> specs;
    for (int i = 0; i < n; ++i) {
      Recipe r = *gen_recipe(RecipeSpace{});
      // Half of the NVFP4 members are row-scaled next to per-tensor ones (the case TE mixes for activations).
      const int64_t M = *pick(5) == 0 ? 0 : *gen_dim(r.kind(), 96);
      const int64_t K = *gen_dim(r.kind(), 96);
      DataSpec d = *gen_data(r, kNegZero | kSubnormal | kNaN);
      d.base_exp += 6 * i;  // members of very different magnitude
      recipes.push_back(r);
      xs.push_back(build(d, r, M, K));
    }
    bool rs = false, pt = false, nv = false, mx = false, fb = false;
    std::vector<float> amaxes;
    for (int i = 0; i < n; ++i) {
      const Recipe& r = recipes[static_cast<size_t>(i)];
      rs |= r.kind() == RecipeKind::kNVFP4 && r.nvfp4_row_scaled();
      pt |= r.kind() == RecipeKind::kNVFP4 && !r.nvfp4_row_scaled();
      nv |= r.kind() == RecipeKind::kNVFP4;
      mx |= r.kind() == RecipeKind::kMXFP8;
      fb |= r.kind() == RecipeKind::kFP8Block;
      tag_if(xs[static_cast<size_t>(i)].rows == 0, "empty_member");
      if (xs[static_cast<size_t>(i)].rows > 0) amaxes.push_back(ref::amax(xs[static_cast<size_t>(i)].view()));
    }
    tag_if(rs && pt, "row_scaled_with_per_tensor_nvfp4");
    tag_if(nv && mx && fb, "nvfp4_with_mxfp8_and_fp8_block");
    tag_if(amaxes.size() >= 2 && *std::max_element(amaxes.begin(), amaxes.end()) > *std::min_element(amaxes.begin(), amaxes.end()),
           "amax_differs");
    tag_if(n >= 3, "several_members");

    std::vector<MatrixView> views;
    for (const auto& x : xs) views.push_back(x.view());
    std::vector<QuantizedTensor> alone;
    for (int i = 0; i < n; ++i) alone.push_back(ref::quantize(views[static_cast<size_t>(i)], recipes[static_cast<size_t>(i)]));

    // 1. The group equals each member quantized alone.
    const std::vector<QuantizedTensor> group = ref::quantize_group(views, recipes);
    RC_ASSERT(group.size() == static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const std::string diff = diff_quantized(group[static_cast<size_t>(i)], alone[static_cast<size_t>(i)]);
      if (!diff.empty()) RC_FAIL("member " + std::to_string(i) + " (" + recipes[static_cast<size_t>(i)].name() + "): " + diff);
    }

    // 2. Changing one member's input changes only that member's outputs.
    const int j = *pick(n);
    std::vector<HostMatrix> xs2 = xs;
    {
      DataSpec d2 = *gen_data(recipes[static_cast<size_t>(j)], kNegZero);
      d2.base_exp += 17;
      xs2[static_cast<size_t>(j)] = build(d2, recipes[static_cast<size_t>(j)], xs[static_cast<size_t>(j)].rows, xs[static_cast<size_t>(j)].cols);
    }
    std::vector<MatrixView> views2;
    for (const auto& x : xs2) views2.push_back(x.view());
    const std::vector<QuantizedTensor> group2 = ref::quantize_group(views2, recipes);
    for (int i = 0; i < n; ++i) {
      const QuantizedTensor& want = i == j ? ref::quantize(views2[static_cast<size_t>(i)], recipes[static_cast<size_t>(i)]) : alone[static_cast<size_t>(i)];
      const std::string diff = diff_quantized(group2[static_cast<size_t>(i)], want);
      if (!diff.empty())
        RC_FAIL("after changing member " + std::to_string(j) + ", member " + std::to_string(i) + " differs from alone: " + diff);
    }

    // 3. In place: buffers keep their storage, every byte (sentinel before) is the member's own result.
    std::vector<QuantizedTensor> outs = group;
    const ScaleLayout layout = *rc::gen::element(ScaleLayout::kCompact, ScaleLayout::kPadded);
    tag_if(layout == ScaleLayout::kPadded, "in_place_padded");
    std::vector<const uint8_t*> ptrs;
    for (auto& o : outs) {
      if (layout != ScaleLayout::kCompact) ref::convert_layout(o, layout);
      fill_sentinel(o);
      for (auto* p : {&o.rowwise, &o.columnwise})
        if (*p) {
          ptrs.push_back((*p)->data.data());
          ptrs.push_back((*p)->scale.bytes.data());
        }
    }
    ref::quantize_group_into(views2, outs);
    size_t k = 0;
    for (int i = 0; i < n; ++i) {
      QuantizedTensor want = ref::quantize(views2[static_cast<size_t>(i)], recipes[static_cast<size_t>(i)]);
      if (layout != ScaleLayout::kCompact) ref::convert_layout(want, layout);
      const std::string diff = diff_quantized(outs[static_cast<size_t>(i)], want);
      if (!diff.empty()) RC_FAIL("in place, member " + std::to_string(i) + ": " + diff);
      for (auto* p : {&outs[static_cast<size_t>(i)].rowwise, &outs[static_cast<size_t>(i)].columnwise})
        if (*p) {
          RC_ASSERT((*p)->data.data() == ptrs[k++]);
          RC_ASSERT((*p)->scale.bytes.data() == ptrs[k++]);
        }
    }

    // 4. An invalid member is refused before any output is written.
    if (n >= 2) {
      std::vector<QuantizedTensor> outs3 = outs;
      std::vector<MatrixView> bad = views2;
      bad.back().cols += 1;  // shape mismatch with its output
      bool threw = false;
      try {
        ref::quantize_group_into(bad, outs3);
      } catch (const Error&) {
        threw = true;
      }
      RC_ASSERT(threw);
      for (int i = 0; i < n; ++i) RC_ASSERT(diff_quantized(outs3[static_cast<size_t>(i)], outs[static_cast<size_t>(i)]).empty());
    }
  });
}

// Guards against: a grouped quantizer that reads rows past a group's valid count (capacity rows, the gaps between
// groups, the tail), so NaN / Inf / garbage there reaches a real group's amax, scale or codes (FlashInfer #3057,
// TransformerEngine #3483, TensorRT-LLM #18765); a zero-row group that shifts the others; a group that differs from
// quantizing its rows alone.
TEST(GroupProperty, GroupedRowsIgnorePoisonedPadding) {
  check_property({"zero_row_group", "gap_rows", "size_not_multiple_of_128", "several_groups", "columnwise", "mxfp4"}, [] {
    // gen_recipe draws no MXFP4; one case in six is MXFP4 (OCP floor or RCEIL), even K (two codes a byte)
    const bool mxfp4 = *pick(6) == 0;
    Recipe r = mxfp4 ? Recipe::of(Mxfp4Options{}) : *gen_recipe(RecipeSpace{});
    if (mxfp4 && *pick(2) == 0) r.mxfp4().scale_rule = MxScaleRule::kRceil;
    int64_t K = *gen_dim(r.kind(), 96);
    if (mxfp4) K += K % 2;
    tag_if(mxfp4, "mxfp4");
    const int G = 1 + *pick(6);
    std::vector<int64_t> sizes, offs;
    int64_t at = 0;
    for (int g = 0; g < G; ++g) {
      const int64_t n = *pick(4) == 0 ? 0 : *gen_dim(r.kind(), 144);
      at += *pick(3) == 0 ? 0 : 1 + *pick(19);  // rows before the group that belong to none
      offs.push_back(at);
      sizes.push_back(n);
      at += n;
    }
    const int64_t cap = at + *pick(21);  // a tail of capacity rows
    ref::GroupedRows rows;
    rows.first_dims = sizes;
    for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
    rows.last_dim = K;
    rows.capacity = cap;
    std::vector<uint8_t> live(static_cast<size_t>(cap), 0);
    bool gap = false, not128 = false;
    for (int g = 0; g < G; ++g) {
      for (int64_t i = 0; i < sizes[static_cast<size_t>(g)]; ++i) live[static_cast<size_t>(offs[static_cast<size_t>(g)] + i)] = 1;
      tag_if(sizes[static_cast<size_t>(g)] == 0, "zero_row_group");
      not128 |= sizes[static_cast<size_t>(g)] % 128 != 0;
    }
    for (uint8_t l : live) gap |= l == 0;
    tag_if(gap, "gap_rows");
    tag_if(not128 && cap % 128 != 0, "size_not_multiple_of_128");
    tag_if(G >= 3, "several_groups");
    tag_if(r.columnwise, "columnwise");

    // the data generators know no MXFP4: its data drawn as for MXFP8 (the same 32-element blocks)
    const Recipe data_r = mxfp4 ? Recipe::of(Mxfp8Options{}) : r;
    const DataSpec d = *gen_data(data_r, kNegZero | kSubnormal | kNaN | kInf);  // specials in live rows too
    const HostMatrix x = build(d, data_r, cap, K);
    HostMatrix xp = x;  // rows in no group: NaN, +Inf, -Inf, the largest finite value, random bits
    const size_t es = dtype_size(x.dtype);
    const float big = x.dtype == DType::kF32 ? std::numeric_limits<float>::max() : (x.dtype == DType::kBF16 ? 0x1.fep127f : 65504.0f);
    for (int64_t i = 0; i < cap; ++i) {
      if (live[static_cast<size_t>(i)]) continue;
      for (int64_t j = 0; j < K; ++j) {
        switch ((i + j) % 5) {
          case 0: xp.set(i, j, std::numeric_limits<float>::quiet_NaN()); break;
          case 1: xp.set(i, j, std::numeric_limits<float>::infinity()); break;
          case 2: xp.set(i, j, -std::numeric_limits<float>::infinity()); break;
          case 3: xp.set(i, j, big); break;
          default: {
            const uint64_t bits = hash64(d.seed, static_cast<uint64_t>(i * K + j));
            std::memcpy(xp.bytes.data() + static_cast<size_t>(i * K + j) * es, &bits, es);
          }
        }
      }
    }
    const std::vector<QuantizedTensor> clean = ref::quantize_grouped(x.view(), rows, r);
    const std::vector<QuantizedTensor> poisoned = ref::quantize_grouped(xp.view(), rows, r);
    RC_ASSERT(clean.size() == static_cast<size_t>(G) && poisoned.size() == static_cast<size_t>(G));
    for (int g = 0; g < G; ++g) {
      const std::string diff = diff_quantized(poisoned[static_cast<size_t>(g)], clean[static_cast<size_t>(g)]);
      if (!diff.empty()) RC_FAIL("group " + std::to_string(g) + " (" + r.name() + "): poisoned rows outside it changed " + diff);
      const int64_t n = sizes[static_cast<size_t>(g)];
      if (n == 0) {
        RC_ASSERT(!clean[static_cast<size_t>(g)].rowwise && !clean[static_cast<size_t>(g)].columnwise);
        continue;
      }
      MatrixView part = x.view();
      part.data = x.bytes.data() + static_cast<size_t>(offs[static_cast<size_t>(g)] * K) * es;
      part.rows = n;
      const std::string alone = diff_quantized(clean[static_cast<size_t>(g)], ref::quantize(part, r));
      if (!alone.empty()) RC_FAIL("group " + std::to_string(g) + " differs from quantizing its rows alone: " + alone);
    }
  });
}

}  // namespace
}  // namespace qtc::prop
