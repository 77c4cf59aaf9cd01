/// \file sharding_rows.cpp
/// \brief Row slicing and concatenation of quantized tensors (block-aligned), and the row split of a tensor over ranks.
#include "qtc/sharding.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/kind.hpp"
#include "sharding_internal.hpp"

namespace qtc::ref {

using namespace shard_detail;

namespace {

Plane slice_plane(const Plane& pl, const QuantizedTensor& q, PlaneKind pk, int64_t r0, int64_t r1) {
  const Recipe& r = q.recipe;
  Plane out;
  // Data.
  const Axis da = data_m_axis(r, pk);
  const int64_t d0 = data_extent(r, pk, r0), d1 = data_extent(r, pk, r1);
  out.data = slice_matrix(pl.data, pl.data_rows, pl.data_cols, 1, da, d0, d1);
  out.data_rows = da == Axis::kRows ? d1 - d0 : pl.data_rows;
  out.data_cols = da == Axis::kRows ? pl.data_cols : d1 - d0;
  // Scales (through the compact layout).
  if (kind_info(r).per_tensor_scale) {
    out.scale = pl.scale;
  } else {
    const ScaleMatrix c = compact_of(pl.scale, r, pk, q.rows, q.cols);
    const Axis sa = scale_m_axis(r, pk);
    const int64_t s0 = scale_extent(r, pk, r0, q.cols), s1 = scale_extent(r, pk, r1, q.cols);
    ScaleMatrix s;
    s.type = c.type;
    s.layout = ScaleLayout::kCompact;
    s.rows = sa == Axis::kRows ? s1 - s0 : c.rows;
    s.cols = sa == Axis::kRows ? c.cols : s1 - s0;
    s.bytes = slice_matrix(c.bytes, c.rows, c.cols, c.elem_size(), sa, s0, s1);
    out.scale = to_layout(s, pl.scale.layout, r, pk, r1 - r0, q.cols);
  }
  // Amax.
  if (r.nvfp4_row_scaled()) {
    QTC_CHECK(pk == PlaneKind::kRowwise,
              "slice_rows: a row-scaled columnwise plane has one amax per column over all rows; it cannot be sliced");
    QTC_CHECK(static_cast<int64_t>(pl.amax.size()) == q.rows, "slice_rows: a row-scaled plane has ", pl.amax.size(),
              " amax values for ", q.rows, " rows");
    out.amax.assign(pl.amax.begin() + r0, pl.amax.begin() + r1);
  } else {
    out.amax = pl.amax;
  }
  return out;
}

}  // namespace

int64_t row_granularity(const Recipe& r, bool rowwise, bool columnwise) {
  (void)rowwise;  // the rowwise plane's blocks are counted either way (its 2-D tiles span rows too)
  int64_t g = 1;
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    if (pk == PlaneKind::kColumnwise && !columnwise) continue;
    const PlaneSpec s = describe_plane(r, pk, 0, 0);  // block heights do not depend on the shape
    if (!s.per_tensor) g = std::max(g, s.block_rows);
    g = std::max<int64_t>(g, kind_info(r).input_rows_multiple);  // NVFP4 tensors need M % 16 == 0 in any case (§1.1)
  }
  return g;
}

int64_t row_granularity(const QuantizedTensor& q) {
  return row_granularity(q.recipe, q.rowwise.has_value(), q.columnwise.has_value());
}

QuantizedTensor slice_rows(const QuantizedTensor& q, int64_t r0, int64_t r1) {
  QTC_CHECK(0 <= r0 && r0 <= r1 && r1 <= q.rows, "slice_rows: rows [", r0, ", ", r1, ") are outside [0, ", q.rows, ")");
  const int64_t g = row_granularity(q);
  QTC_CHECK((r0 % g == 0 || r0 == q.rows) && (r1 % g == 0 || r1 == q.rows), "slice_rows: ", q.recipe.name(), " needs slice boundaries at multiples of ",
            g, " rows (so no block straddles them), got [", r0, ", ", r1, ")");
  if (kind_info(q.recipe).e2m1_data && kind_info(q.recipe).columnwise_transposed && q.columnwise) {
    QTC_CHECK(r0 % 2 == 0 && r1 % 2 == 0, "slice_rows: ", kind_info(q.recipe).title, " columnwise data packs two rows per byte; odd boundary");
  }
  check_shape_consistency(q);
  QuantizedTensor out;
  out.recipe = q.recipe;
  out.input_dtype = q.input_dtype;
  out.rows = r1 - r0;
  out.cols = q.cols;
  out.scale_inv = q.scale_inv;
  if (q.rowwise) out.rowwise = slice_plane(*q.rowwise, q, PlaneKind::kRowwise, r0, r1);
  if (q.columnwise) out.columnwise = slice_plane(*q.columnwise, q, PlaneKind::kColumnwise, r0, r1);
  return out;
}

QuantizedTensor concat_rows(std::span<const QuantizedTensor> parts) {
  QTC_CHECK(!parts.empty(), "concat_rows: nothing to concatenate");
  const QuantizedTensor& a = parts[0];
  int64_t M = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const QuantizedTensor& b = parts[i];
    check_shape_consistency(b);
    QTC_CHECK(same_recipe(a.recipe, b.recipe), "concat_rows: part ", i, " has recipe ", b.recipe.name(), ", part 0 has ",
              a.recipe.name());
    QTC_CHECK(b.cols == a.cols, "concat_rows: part ", i, " has ", b.cols, " columns, part 0 has ", a.cols);
    QTC_CHECK(b.input_dtype == a.input_dtype, "concat_rows: part ", i, " has another input type");
    QTC_CHECK(b.rowwise.has_value() == a.rowwise.has_value() && b.columnwise.has_value() == a.columnwise.has_value(),
              "concat_rows: part ", i, " has different planes than part 0");
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      const auto& pa = pk == PlaneKind::kRowwise ? a.rowwise : a.columnwise;
      const auto& pb = pk == PlaneKind::kRowwise ? b.rowwise : b.columnwise;
      if (!pa) continue;
      QTC_CHECK(pb->scale.layout == pa->scale.layout, "concat_rows: part ", i, " has another ", plane_kind_name(pk), " scale layout");
      if (one_amax_per_tensor(a.recipe)) {
        QTC_CHECK(same_bits(pa->amax, pb->amax), "concat_rows: part ", i, " was quantized with ", plane_kind_name(pk), " amax ",
                  pb->amax.empty() ? 0.0f : pb->amax[0], ", part 0 with ", pa->amax.empty() ? 0.0f : pa->amax[0],
                  ": shards must share one global scale (all-reduce the amax with MAX before quantizing, TE_FORMATS.md §8.4)");
      }
    }
    if (kind_info(a.recipe).per_tensor_scale)
      QTC_CHECK(std::memcmp(&a.scale_inv, &b.scale_inv, 4) == 0, "concat_rows: part ", i, " has scale_inv ", b.scale_inv,
                ", part 0 has ", a.scale_inv, ": shards must share one scale (all-reduce the amax first, §8.4)");
    const int64_t g = row_granularity(b);
    QTC_CHECK(i + 1 == parts.size() || b.rows % g == 0, "concat_rows: part ", i, " has ", b.rows, " rows, not a multiple of ", g,
              " (a block would straddle the boundary)");
    M += b.rows;
  }
  const Recipe& r = a.recipe;
  QuantizedTensor out;
  out.recipe = r;
  out.input_dtype = a.input_dtype;
  out.rows = M;
  out.cols = a.cols;
  out.scale_inv = a.scale_inv;
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const auto& pa = pk == PlaneKind::kRowwise ? a.rowwise : a.columnwise;
    if (!pa) continue;
    Plane p;
    const Axis da = data_m_axis(r, pk);
    std::vector<const std::vector<uint8_t>*> dparts;
    std::vector<std::pair<int64_t, int64_t>> dshapes;
    std::vector<ScaleMatrix> compact;
    for (const QuantizedTensor& b : parts) {
      const Plane& pb = b.plane(pk);
      dparts.push_back(&pb.data);
      dshapes.emplace_back(pb.data_rows, pb.data_cols);
      if (!kind_info(r).per_tensor_scale) compact.push_back(compact_of(pb.scale, r, pk, b.rows, b.cols));
    }
    p.data = concat_matrices(dparts, dshapes, 1, da);
    p.data_rows = da == Axis::kRows ? data_extent(r, pk, M) : pa->data_rows;
    p.data_cols = da == Axis::kRows ? pa->data_cols : data_extent(r, pk, M);
    if (kind_info(r).per_tensor_scale) {
      p.scale = pa->scale;
    } else {
      const Axis sa = scale_m_axis(r, pk);
      std::vector<const std::vector<uint8_t>*> sparts;
      std::vector<std::pair<int64_t, int64_t>> sshapes;
      for (const ScaleMatrix& s : compact) {
        sparts.push_back(&s.bytes);
        sshapes.emplace_back(s.rows, s.cols);
      }
      ScaleMatrix s;
      s.type = compact[0].type;
      s.layout = ScaleLayout::kCompact;
      const ScaleShape full = describe_plane(r, pk, M, a.cols).compact;
      s.rows = full.rows;
      s.cols = full.cols;
      s.bytes = concat_matrices(sparts, sshapes, s.elem_size(), sa);
      QTC_CHECK(s.bytes.size() == static_cast<size_t>(s.rows * s.cols) * s.elem_size(), "concat_rows: ", plane_kind_name(pk),
                " scales of the parts do not add up to the full tensor's compact shape ", s.rows, " x ", s.cols);
      p.scale = to_layout(s, pa->scale.layout, r, pk, M, a.cols);
    }
    if (r.nvfp4_row_scaled()) {
      QTC_CHECK(pk == PlaneKind::kRowwise,
                "concat_rows: a row-scaled columnwise plane has one amax per column over all rows; shards cannot be joined");
      for (const QuantizedTensor& b : parts) p.amax.insert(p.amax.end(), b.rowwise->amax.begin(), b.rowwise->amax.end());
    } else {
      p.amax = pa->amax;
    }
    (pk == PlaneKind::kRowwise ? out.rowwise : out.columnwise) = std::move(p);
  }
  return out;
}

std::pair<int64_t, int64_t> shard_row_range(int64_t M, int world, int rank, int64_t granularity) {
  QTC_CHECK(world >= 1 && rank >= 0 && rank < world, "shard_row_range: rank ", rank, " outside world of ", world);
  QTC_CHECK(granularity >= 1 && M >= 0, "shard_row_range: bad arguments");
  int64_t chunk = cdiv(M, world);
  chunk = cdiv(chunk, granularity) * granularity;
  const int64_t b = std::min<int64_t>(M, chunk * rank), e = std::min<int64_t>(M, chunk * (rank + 1));
  return {b, e};
}

}  // namespace qtc::ref
