/// \file prop_columnwise.cpp
/// \brief Property 3: under 2-D blocks the columnwise plane derived from the rowwise plane equals quantizing
///        the columnwise plane directly, bit for bit; 1-D recipes refuse the derivation.
///
/// | property                  | recipes                                                        | edges |
/// |---------------------------|----------------------------------------------------------------|-------|
/// | DerivedEqualsDirect       | NVFP4 16x16 (te, te_pyref, 4over6), FP8 block 128x128, MXFP8 32x32, FP8 tensor | partial tiles, NaN/Inf/-0, zero tiles, ties |
/// | DerivationRefusedFor1D    | NVFP4 1x16, RHT, row-scaled, SR (1x16 and 16x16), MXFP8 1x32, FP8 block 1x128 | cases where a transpose would be wrong |
#include <gtest/gtest.h>

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

Recipe with_planes(Recipe r, bool row, bool col) {
  r.rowwise = row;
  r.columnwise = col;
  return r;
}

// Guards against: a derived columnwise plane that is not what the quantizer would produce (nibble order
// of the transpose, scale transpose off by a tile, partial tiles at M or K not a multiple of the tile,
// the amax not copied, MXFP8 32x32 scales not repeated per 32-row block), and a columnwise-only
// quantization that differs from the columnwise half of a both-planes one (TE §1.7, §10.1).
TEST(ColumnwiseProperty, DerivedEqualsDirect) {
  check_property({"nvfp4_16x16", "fp8_block_128x128", "mxfp8_32x32", "fp8_tensor", "partial_tile", "nvfp4_4over6_2d", "te_pyref",
                  "input_nan", "input_neg_zero", "zero_block", "padded_layout"},
                 [] {
    RecipeSpace sp;
    sp.nvfp4_1d = sp.mx_1d = sp.block_1d = false;
    sp.row_scaled = sp.rht = sp.stochastic = false;
    sp.plane_subsets = false;
    const Recipe r = *gen_recipe(sp);
    const int64_t M = *gen_dim(r.kind()), K = *gen_dim(r.kind());
    const DataSpec d = *gen_data(r, kNaN | kInf | kNegZero | kSubnormal | kHuge);
    const HostMatrix x = build(d, r, M, K);
    const int64_t tile = r.kind() == RecipeKind::kNVFP4 ? 16 : r.kind() == RecipeKind::kMXFP8 ? 32 : 128;
    tag(r.kind() == RecipeKind::kNVFP4 ? "nvfp4_16x16" : r.kind() == RecipeKind::kMXFP8 ? "mxfp8_32x32"
        : r.kind() == RecipeKind::kFP8Block ? "fp8_block_128x128" : "fp8_tensor");
    tag_if(r.kind() != RecipeKind::kFP8Tensor && (M % tile != 0 || K % tile != 0), "partial_tile");
    tag_if(r.kind() == RecipeKind::kNVFP4 && r.nvfp4().fourover6, "nvfp4_4over6_2d");
    tag_if(r.profile != Profile::kTE, "te_pyref");
    for (const auto& t : classify_input(x, r)) tag(t);

    const QuantizedTensor q_row = ref::quantize(x.view(), with_planes(r, true, false));
    const QuantizedTensor q_col = ref::quantize(x.view(), with_planes(r, false, true));
    const QuantizedTensor q_both = ref::quantize(x.view(), with_planes(r, true, true));
    // Columnwise-only equals the columnwise half of both planes; rowwise-only equals the rowwise half.
    std::string diff = diff_plane(*q_col.columnwise, *q_both.columnwise, "columnwise-only vs both");
    if (!diff.empty()) RC_FAIL(diff);
    diff = diff_plane(*q_row.rowwise, *q_both.rowwise, "rowwise-only vs both");
    if (!diff.empty()) RC_FAIL(diff);
    // The test's own derivation.
    diff = diff_plane(derive_columnwise_oracle(q_row), *q_col.columnwise, "derived (oracle) vs direct");
    if (!diff.empty()) RC_FAIL(diff);
#ifdef QTC_PROP_HAVE_SHARDING
    // The reference's derivation (sharding.hpp), in the compact and the padded layout.
    const ScaleLayout layout = r.kind() == RecipeKind::kFP8Tensor ? ScaleLayout::kCompact
                                                                : *rc::gen::element(ScaleLayout::kCompact, ScaleLayout::kPadded);
    tag_if(layout == ScaleLayout::kPadded, "padded_layout");
    QuantizedTensor derived = q_row;
    QuantizedTensor direct = q_col;
    if (layout != ScaleLayout::kCompact) {
      ref::convert_layout(derived, layout);
      ref::convert_layout(direct, layout);
    }
    ref::derive_columnwise(derived);
    RC_ASSERT(derived.columnwise.has_value());
    diff = diff_plane(*derived.columnwise, *direct.columnwise, "ref::derive_columnwise vs direct");
    if (!diff.empty()) RC_FAIL(diff);
#else
    tag("padded_layout");
#endif
  });
}

// Guards against: deriving a columnwise plane by transposition where the two planes are quantized with
// different blocks (1x16 / 1x32 / 1x128), of another matrix (RHT), with per-row amax (row-scaled) or with
// different random bits (SR): the result would silently differ from the real columnwise quantization.
TEST(ColumnwiseProperty, DerivationRefusedFor1D) {
  check_property({"nvfp4_1x16", "nvfp4_rht", "nvfp4_row_scaled", "nvfp4_sr", "mxfp8_1x32", "fp8_block_1x128",
                  "transpose_would_differ"},
                 [] {
    Recipe r;
    const int variant = *pick(7);
    switch (variant) {
      case 0: r.set_options(Nvfp4Options{}); break;
      case 1: r.set_options(Nvfp4Options{}); r.nvfp4().rht = true; break;
      case 2: r.set_options(Nvfp4Options{}); r.nvfp4().row_scaled = true; break;
      case 3: r.set_options(Nvfp4Options{}); r.nvfp4().stochastic = true; r.nvfp4().tile_2d = *rc::gen::arbitrary<bool>(); r.nvfp4().seed = 7; break;
      case 4: r.set_options(Mxfp8Options{}); r.set_fp8_type(*rc::gen::element(Fp8Type::kE4M3, Fp8Type::kE5M2)); break;
      default: r.set_options(Fp8BlockOptions{}); r.set_pow2_scales(*rc::gen::arbitrary<bool>()); break;
    }
    static const char* kTags[] = {"nvfp4_1x16", "nvfp4_rht", "nvfp4_row_scaled", "nvfp4_sr", "mxfp8_1x32", "fp8_block_1x128",
                                  "fp8_block_1x128"};
    tag(kTags[variant]);
    const int64_t M = *gen_dim(r.kind(), 160), K = *gen_dim(r.kind(), 160);
    const DataSpec d = *gen_data(r, kNegZero);
    const HostMatrix x = build(d, r, M, K);
    const QuantizedTensor q_row = ref::quantize(x.view(), with_planes(r, true, false));
    const QuantizedTensor q_both = ref::quantize(x.view(), with_planes(r, true, true));
    bool oracle_refused = false;
    try {
      (void)derive_columnwise_oracle(q_row);
    } catch (const Error&) {
      oracle_refused = true;
    }
    RC_ASSERT(oracle_refused);
#ifdef QTC_PROP_HAVE_SHARDING
    QuantizedTensor q = q_row;
    std::string why;
    try {
      ref::derive_columnwise(q);
    } catch (const Error& e) {
      why = e.what();
    }
    if (why.empty()) RC_FAIL("ref::derive_columnwise accepted " + r.name());
    RC_ASSERT(!q.columnwise.has_value());
#endif
    // Why the refusal matters: the transpose differs from the real columnwise plane on generated data.
    const Plane naive = derive_columnwise_oracle(q_row, true);
    tag_if(!diff_plane(naive, *q_both.columnwise, "naive").empty(), "transpose_would_differ");
  });
}

}  // namespace
}  // namespace qtc::prop
