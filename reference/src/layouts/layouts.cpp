/// \file layouts.cpp
/// \brief Scale layouts: any layout <-> any other, through the plane's ScaleGeometry (layout.hpp).
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

/// Layout `from` (s) -> layout `to`, both through the plane's geometry; padding of `to` zero.
ScaleMatrix relayout(const ScaleMatrix& s, Layout from, Layout to, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const PlaneSpec spec = describe_plane(r, p, M, K);
  QTC_CHECK(!spec.per_tensor, r.name(), ": per-tensor FP8 has a single scale_inv, no scale layout");
  QTC_CHECK(s.layout == from, r.name(), " ", plane_kind_name(p), " scales: expected layout ", layout_name(from), ", got ",
            layout_name(s.layout));
  QTC_CHECK(spec.has_layout(from), r.name(), " ", plane_kind_name(p), " scales: ", spec.layout_refusal(from));
  QTC_CHECK(spec.has_layout(to), r.name(), " ", plane_kind_name(p), " scales: ", spec.layout_refusal(to));
  const ScaleGeometry gf = spec.geometry(from), gt = spec.geometry(to);
  check_shape(s, {gf.buf_rows, gf.buf_cols}, r, p, layout_name(from).data());
  ScaleMatrix out = blank(s, to, {gt.buf_rows, gt.buf_cols});
  const size_t es = s.elem_size();
  for (int64_t i = 0; i < gf.rows; ++i)
    for (int64_t j = 0; j < gf.cols; ++j)
      std::memcpy(out.bytes.data() + static_cast<size_t>(gt.offset(i, j)) * es,
                  s.bytes.data() + static_cast<size_t>(gf.offset(i, j)) * es, es);
  return out;
}

}  // namespace

ScaleShape compact_scale_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K) { return describe_plane(r, p, M, K).compact; }

ScaleShape padded_scale_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K) { return describe_plane(r, p, M, K).padded; }

ScaleMatrix to_padded(const ScaleMatrix& c, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  return relayout(c, Layout::kCompact, Layout::kPadded, r, p, M, K);
}

ScaleMatrix to_compact(const ScaleMatrix& pd, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  return relayout(pd, Layout::kPadded, Layout::kCompact, r, p, M, K);
}

ScaleMatrix swizzle(const ScaleMatrix& pd, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  return relayout(pd, Layout::kPadded, Layout::kSwizzled, r, p, M, K);
}

ScaleMatrix unswizzle(const ScaleMatrix& sw, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  return relayout(sw, Layout::kSwizzled, Layout::kPadded, r, p, M, K);
}

ScaleMatrix convert_layout(const ScaleMatrix& s, Layout to, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  if (s.layout == to) return s;
  return relayout(s, s.layout, to, r, p, M, K);
}

void convert_layout(QuantizedTensor& q, Layout to) {
  if (describe_plane(q.recipe, PlaneKind::kRowwise, q.rows, q.cols).per_tensor) return;  // a single scale_inv: nothing to lay out
  if (q.rowwise) q.rowwise->scale = convert_layout(q.rowwise->scale, to, q.recipe, PlaneKind::kRowwise, q.rows, q.cols);
  if (q.columnwise) q.columnwise->scale = convert_layout(q.columnwise->scale, to, q.recipe, PlaneKind::kColumnwise, q.rows, q.cols);
}

}  // namespace qtc::ref
