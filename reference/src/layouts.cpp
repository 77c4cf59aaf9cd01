/// \file layouts.cpp
/// \brief Scale layouts: compact <-> padded (TE_FORMATS.md §5) <-> cuBLAS 128x4 swizzle (§6).
#include "qtc/layouts.hpp"

#include <cstring>

#include "internal.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::ref {

namespace {

void check_shape(const ScaleMatrix& s, ScaleShape want, const Recipe& r, PlaneKind p, const char* what) {
  QTC_CHECK(s.rows == want.rows && s.cols == want.cols, r.name(), " ", plane_kind_name(p), " scales: expected the ", what,
            " shape [", want.rows, ", ", want.cols, "], got [", s.rows, ", ", s.cols, "]");
  QTC_CHECK(s.bytes.size() == static_cast<size_t>(s.rows * s.cols) * s.elem_size(), r.name(), " ", plane_kind_name(p),
            " scales: byte count ", s.bytes.size(), " does not match the shape [", s.rows, ", ", s.cols, "]");
}

ScaleMatrix blank(const ScaleMatrix& like, ScaleLayout layout, ScaleShape shape) {
  ScaleMatrix out;
  out.type = like.type;
  out.layout = layout;
  out.rows = shape.rows;
  out.cols = shape.cols;
  out.bytes.assign(static_cast<size_t>(shape.rows * shape.cols) * like.elem_size(), 0);
  return out;
}

void copy_elem(const ScaleMatrix& from, int64_t fr, int64_t fc, ScaleMatrix& to, size_t to_index) {
  const size_t es = from.elem_size();
  std::memcpy(to.bytes.data() + to_index * es, from.bytes.data() + static_cast<size_t>(fr * from.cols + fc) * es, es);
}

void check_swizzlable(const Recipe& r, const PlaneSpec& s) {
  QTC_CHECK(s.swizzlable, r.name(),
            ": only NVFP4 and MXFP8 scales have the cuBLAS swizzled layout (FP8 block scales are consumed as padded "
            "F32 on Hopper; TE_FORMATS.md §6)");
}

}  // namespace

ScaleShape compact_scale_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K) { return describe_plane(r, p, M, K).compact; }

ScaleShape padded_scale_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K) { return describe_plane(r, p, M, K).padded; }

ScaleMatrix to_padded(const ScaleMatrix& c, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const PlaneSpec s = describe_plane(r, p, M, K);
  QTC_CHECK(!s.per_tensor, r.name(), ": per-tensor FP8 has a single scale_inv, no scale layout");
  QTC_CHECK(c.layout == ScaleLayout::kCompact, r.name(), " ", plane_kind_name(p), " scales: to_padded needs the compact layout");
  check_shape(c, s.compact, r, p, "compact");
  ScaleMatrix out = blank(c, ScaleLayout::kPadded, s.padded);
  const bool transpose = s.padded_transposed;  // TE's GEMM-ready layout: [kb][i] / [mb][j]
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) copy_elem(c, i, j, out, static_cast<size_t>(transpose ? j * out.cols + i : i * out.cols + j));
  return out;
}

ScaleMatrix to_compact(const ScaleMatrix& pd, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const PlaneSpec s = describe_plane(r, p, M, K);
  QTC_CHECK(!s.per_tensor, r.name(), ": per-tensor FP8 has a single scale_inv, no scale layout");
  QTC_CHECK(pd.layout == ScaleLayout::kPadded, r.name(), " ", plane_kind_name(p), " scales: to_compact needs the padded layout");
  check_shape(pd, s.padded, r, p, "padded");
  const ScaleShape cs = s.compact;
  ScaleMatrix out = blank(pd, ScaleLayout::kCompact, cs);
  const bool transpose = s.padded_transposed;
  for (int64_t i = 0; i < cs.rows; ++i)
    for (int64_t j = 0; j < cs.cols; ++j) {
      if (transpose)
        copy_elem(pd, j, i, out, static_cast<size_t>(i * cs.cols + j));
      else
        copy_elem(pd, i, j, out, static_cast<size_t>(i * cs.cols + j));
    }
  return out;
}

namespace {
/// Visits every valid compact entry with its padded coordinates and its swizzled offset.
template <typename F>
void for_each_swizzled(const PlaneSpec& s, F f) {
  const ScaleShape cs = s.compact;
  const ScaleShape ps = s.padded;
  const bool mx_col = s.swizzle_transposed;
  for (int64_t i = 0; i < cs.rows; ++i)
    for (int64_t j = 0; j < cs.cols; ++j) {
      // MXFP8 columnwise: the compact matrix is [M/32 block][K]; it is swizzled transposed (row = K index).
      const int64_t off = mx_col ? swizzled_offset(j, i, ps.rows) : swizzled_offset(i, j, ps.cols);
      f(i, j, off);
    }
}
}  // namespace

ScaleMatrix swizzle(const ScaleMatrix& pd, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const PlaneSpec s = describe_plane(r, p, M, K);
  check_swizzlable(r, s);
  QTC_CHECK(pd.layout == ScaleLayout::kPadded, r.name(), " ", plane_kind_name(p), " scales: swizzle needs the padded layout");
  check_shape(pd, s.padded, r, p, "padded");
  ScaleMatrix out = blank(pd, ScaleLayout::kSwizzled, s.padded);
  for_each_swizzled(s, [&](int64_t i, int64_t j, int64_t off) { copy_elem(pd, i, j, out, static_cast<size_t>(off)); });
  return out;
}

ScaleMatrix unswizzle(const ScaleMatrix& sw, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const PlaneSpec s = describe_plane(r, p, M, K);
  check_swizzlable(r, s);
  QTC_CHECK(sw.layout == ScaleLayout::kSwizzled, r.name(), " ", plane_kind_name(p), " scales: unswizzle needs the swizzled layout");
  check_shape(sw, s.padded, r, p, "swizzled (padded)");
  ScaleMatrix out = blank(sw, ScaleLayout::kPadded, s.padded);
  for_each_swizzled(s, [&](int64_t i, int64_t j, int64_t off) {
    out.bytes[static_cast<size_t>(i * out.cols + j)] = sw.bytes[static_cast<size_t>(off)];
  });
  return out;
}

ScaleMatrix convert_layout(const ScaleMatrix& s, ScaleLayout to, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  if (s.layout == to) return s;
  ScaleMatrix compact = s;
  if (s.layout == ScaleLayout::kSwizzled) compact = to_compact(unswizzle(s, r, p, M, K), r, p, M, K);
  else if (s.layout == ScaleLayout::kPadded) compact = to_compact(s, r, p, M, K);
  switch (to) {
    case ScaleLayout::kCompact: return compact;
    case ScaleLayout::kPadded: return to_padded(compact, r, p, M, K);
    case ScaleLayout::kSwizzled: return swizzle(to_padded(compact, r, p, M, K), r, p, M, K);
  }
  return compact;
}

void convert_layout(QuantizedTensor& q, ScaleLayout to) {
  if (describe_plane(q.recipe, PlaneKind::kRowwise, q.rows, q.cols).per_tensor) return;  // a single scale_inv: nothing to lay out
  if (q.rowwise) q.rowwise->scale = convert_layout(q.rowwise->scale, to, q.recipe, PlaneKind::kRowwise, q.rows, q.cols);
  if (q.columnwise) q.columnwise->scale = convert_layout(q.columnwise->scale, to, q.recipe, PlaneKind::kColumnwise, q.rows, q.cols);
}

}  // namespace qtc::ref
