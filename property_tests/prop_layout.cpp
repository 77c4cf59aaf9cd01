/// \file prop_layout.cpp
/// \brief Properties 2 and 6a: scale padding (TE_FORMATS.md §5) and the cuBLAS swizzle (§6).
///
/// | property          | recipes                                   | edges                                              |
/// |-------------------|-------------------------------------------|----------------------------------------------------|
/// | ScalePadding      | NVFP4, MXFP8, FP8 block 1x128 / 128x128   | M % 128 != 0, ceil(K/16) % 4 != 0, ceil(K/32) % 4 != 0, M % 4 != 0, partial 128 blocks, W shards re-padded |
/// | SwizzleRoundTrip  | NVFP4, MXFP8 and MXFP4, both planes       | rows 31/32/127/128/129, k-blocks % 4 != 0, garbage in the padding |
#include <gtest/gtest.h>

#include <cstring>

#include "check.hpp"
#include "gen.hpp"
#include "harness.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"

namespace qtc::prop {
namespace {

MatrixView rows_of(const HostMatrix& x, int64_t r0, int64_t r1) {
  return MatrixView{x.bytes.data() + static_cast<size_t>(r0 * x.cols) * dtype_size(x.dtype), x.dtype, r1 - r0, x.cols};
}

/// Planes whose padded scale matrix has the tensor's M along dim 0, so that FSDP2 gathers it by rows.
bool m_along_dim0(const Recipe& r, PlaneKind p) {
  if (r.kind() == RecipeKind::kMXFP8) return true;
  if (p != PlaneKind::kRowwise) return false;
  return r.kind() == RecipeKind::kNVFP4 || (r.kind() == RecipeKind::kFP8Block && r.is_2d());
}

int64_t m_block(const Recipe& r, PlaneKind p) {
  if (r.kind() == RecipeKind::kMXFP8) return (p == PlaneKind::kColumnwise || r.is_2d()) ? 32 : 1;
  if (r.kind() == RecipeKind::kFP8Block) return 128;
  return 16;
}

// Guards against: a padded shape that differs from TE's allocation (a buffer dumped from TE then does not
// load, or cuBLAS reads past it), padding filled with garbage instead of zeros, an unpad that reads the
// padding or the transposed FP8 1x128 layout the wrong way round, and FSDP2 re-padding that puts shard
// k's scale rows at the wrong offset (the 128-row padding interleaved between shards).
TEST(LayoutProperty, ScalePadding) {
  check_property({"nvfp4", "mxfp8", "fp8_block_1x128", "fp8_block_128x128", "M_not_multiple_of_128",
                  "scale_cols_not_multiple_of_4", "M_not_multiple_of_4", "repad_world_gt_1", "shard_not_multiple_of_128"},
                 [] {
    RecipeSpace sp;
    sp.fp8_tensor = false;
    sp.rht = sp.stochastic = false;
    Recipe r = *gen_recipe(sp);
    const int64_t M = *gen_dim(r.kind()), K = *gen_dim(r.kind());
    const DataSpec d = *gen_data(r, kNegZero | kSubnormal);
    const HostMatrix x = build(d, r, M, K);
    const QuantizedTensor q = ref::quantize(x.view(), r);
    tag(r.kind() == RecipeKind::kFP8Block ? (r.is_2d() ? "fp8_block_128x128" : "fp8_block_1x128") : recipe_kind_name(r.kind()));
    tag_if(M % 128 != 0, "M_not_multiple_of_128");
    tag_if(M % 4 != 0, "M_not_multiple_of_4");
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      const auto& pl = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
      if (!pl) continue;
      const ScaleMatrix& c = pl->scale;
      const Shape2 want = te_padded_scale_shape(r, pk, M, K);
      const ref::ScaleShape got = ref::padded_scale_shape(r, pk, M, K);
      RC_ASSERT(got.rows == want.rows);
      RC_ASSERT(got.cols == want.cols);
      tag_if(c.cols % 4 != 0 && r.kind() != RecipeKind::kFP8Block, "scale_cols_not_multiple_of_4");
      const ScaleMatrix p = ref::to_padded(c, r, pk, M, K);
      RC_ASSERT(p.rows == want.rows);
      RC_ASSERT(p.cols == want.cols);
      RC_ASSERT(p.layout == ScaleLayout::kPadded);
      const size_t es = p.elem_size();
      for (int64_t i = 0; i < p.rows; ++i)
        for (int64_t j = 0; j < p.cols; ++j) {
          int64_t ci = 0, cj = 0;
          const uint8_t* pb = p.bytes.data() + static_cast<size_t>(i * p.cols + j) * es;
          if (te_padded_valid(r, pk, M, K, i, j, &ci, &cj)) {
            if (std::memcmp(pb, c.bytes.data() + static_cast<size_t>(ci * c.cols + cj) * es, es) != 0)
              RC_FAIL("padded [" + std::to_string(i) + ", " + std::to_string(j) + "] is not compact [" + std::to_string(ci) + ", " +
                      std::to_string(cj) + "]");
          } else {
            for (size_t b = 0; b < es; ++b)
              if (pb[b] != 0) RC_FAIL("padding byte at [" + std::to_string(i) + ", " + std::to_string(j) + "] is not zero");
          }
        }
      // unpad o pad = id, and unpad ignores whatever the padding holds.
      RC_ASSERT(diff_scales(ref::to_compact(p, r, pk, M, K), c, "unpad(pad)").empty());
      ScaleMatrix dirty = p;
      for (int64_t i = 0; i < p.rows; ++i)
        for (int64_t j = 0; j < p.cols; ++j) {
          int64_t ci = 0, cj = 0;
          if (!te_padded_valid(r, pk, M, K, i, j, &ci, &cj))
            std::memset(dirty.bytes.data() + static_cast<size_t>(i * p.cols + j) * es, 0xA5, es);
        }
      RC_ASSERT(diff_scales(ref::to_compact(dirty, r, pk, M, K), c, "unpad(dirty pad)").empty());

      // FSDP2: W shards send their padded scales un-padded in dim 0; the gathered rows are zero-padded again.
      if (!m_along_dim0(r, pk) || r.nvfp4_row_scaled() || M == 0) continue;
      const int64_t g = m_block(r, pk) == 1 ? 1 : m_block(r, pk);
      const int world = *rc::gen::element(1, 2, 3, 4);
      std::vector<uint8_t> rows;  // gathered [sum of compact rows, padded cols]
      int64_t nrows = 0, r0 = 0;
      const int64_t chunk = ((M + world - 1) / world + g - 1) / g * g;
      for (int k = 0; k < world && r0 < M; ++k) {
        const int64_t r1 = std::min(M, r0 + chunk);
        tag_if(k > 0, "repad_world_gt_1");
        tag_if(r1 - r0 != M && (r1 - r0) % 128 != 0, "shard_not_multiple_of_128");
        const MatrixView xs = rows_of(x, r0, r1);
        Recipe rs = r;
        const float a = ref::amax(x.view(), r.profile == Profile::kTEPyRef);
        const QuantizedTensor qs = (r.kind() == RecipeKind::kNVFP4) ? ref::quantize_with_amax(xs, rs, a, a) : ref::quantize(xs, rs);
        const auto& sp_pl = pk == PlaneKind::kRowwise ? qs.rowwise : qs.columnwise;
        const ScaleMatrix ps = ref::to_padded(sp_pl->scale, r, pk, r1 - r0, K);
        const int64_t keep = sp_pl->scale.rows;  // compact rows along M
        rows.insert(rows.end(), ps.bytes.begin(), ps.bytes.begin() + static_cast<ptrdiff_t>(keep * ps.cols * static_cast<int64_t>(es)));
        nrows += keep;
        r0 = r1;
      }
      rows.resize(static_cast<size_t>(want.rows * want.cols) * es, 0);
      if (rows != p.bytes) RC_FAIL("re-padded gathered scales differ from the padded scales of the full tensor");
    }
  });
}

/// A padded scale matrix with random valid entries; padding zero, or 0xA5 garbage when `dirty`.
ScaleMatrix random_padded(const Recipe& r, PlaneKind pk, int64_t M, int64_t K, uint64_t seed, bool dirty) {
  const Shape2 s = te_padded_scale_shape(r, pk, M, K);
  ScaleMatrix p;
  p.type = r.kind() == RecipeKind::kNVFP4 ? ScaleType::kE4M3 : ScaleType::kE8M0;
  p.layout = ScaleLayout::kPadded;
  p.rows = s.rows;
  p.cols = s.cols;
  p.bytes.resize(static_cast<size_t>(s.rows * s.cols));
  for (int64_t i = 0; i < s.rows; ++i)
    for (int64_t j = 0; j < s.cols; ++j) {
      int64_t ci = 0, cj = 0;
      const bool valid = te_padded_valid(r, pk, M, K, i, j, &ci, &cj);
      p.bytes[static_cast<size_t>(i * s.cols + j)] = valid ? static_cast<uint8_t>(1 + hash64(seed, static_cast<uint64_t>(i * s.cols + j)) % 255)
                                                         : (dirty ? 0xA5 : 0);
    }
  return p;
}

// Guards against: a swizzle index that is off at the 32-row or 128-row tile boundaries or at k-block 4,
// MXFP8 columnwise scales swizzled without the transpose, padding copied into the swizzled buffer instead
// of zeros, and an unswizzle that is not the inverse.
TEST(LayoutProperty, SwizzleRoundTrip) {
  check_property({"nvfp4", "mxfp8", "mxfp4", "columnwise", "rows_at_32_boundary", "rows_at_128_boundary",
                  "kblocks_not_multiple_of_4", "dirty_padding", "several_row_tiles"},
                 [] {
    Recipe r;
    r.set_options(Recipe::default_options(*rc::gen::element(RecipeKind::kNVFP4, RecipeKind::kMXFP8, RecipeKind::kMXFP4)));
    const PlaneKind pk = *rc::gen::element(PlaneKind::kRowwise, PlaneKind::kColumnwise);
    const int64_t M = *gen_dim(r.kind(), 300), K = *gen_dim(r.kind(), 300);
    const bool dirty = *rc::gen::arbitrary<bool>();
    const uint64_t seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
    const ScaleMatrix p = random_padded(r, pk, M, K, seed, dirty);
    const ScaleMatrix clean = random_padded(r, pk, M, K, seed, false);
    const ref::ScaleShape cs = ref::compact_scale_shape(r, pk, M, K);
    const bool mx_col = r.kind() == RecipeKind::kMXFP8 && pk == PlaneKind::kColumnwise;
    const int64_t outer = mx_col ? cs.cols : cs.rows, kblocks = mx_col ? cs.rows : cs.cols;
    tag(recipe_kind_name(r.kind()));
    tag_if(pk == PlaneKind::kColumnwise, "columnwise");
    tag_if(outer % 32 == 0 || outer % 32 == 1 || outer % 32 == 31, "rows_at_32_boundary");
    tag_if(outer % 128 == 0 || outer % 128 == 1 || outer % 128 == 127, "rows_at_128_boundary");
    tag_if(kblocks % 4 != 0, "kblocks_not_multiple_of_4");
    tag_if(dirty, "dirty_padding");
    tag_if(outer > 128, "several_row_tiles");
    const ScaleMatrix s = ref::swizzle(p, r, pk, M, K);
    RC_ASSERT(s.layout == ScaleLayout::kSwizzled);
    const std::vector<uint8_t> want = te_swizzle(p, r, pk, M, K);
    if (s.bytes != want) {
      size_t i = 0;
      while (i < want.size() && i < s.bytes.size() && want[i] == s.bytes[i]) ++i;
      RC_FAIL("swizzle differs from TE's view/permute at byte " + std::to_string(i) + " of " + std::to_string(want.size()));
    }
    const ScaleMatrix back = ref::unswizzle(s, r, pk, M, K);
    RC_ASSERT(diff_scales(back, clean, "unswizzle(swizzle)").empty());
    const ScaleMatrix again = ref::swizzle(back, r, pk, M, K);
    RC_ASSERT(again.bytes == s.bytes);
  });
}

}  // namespace
}  // namespace qtc::prop
