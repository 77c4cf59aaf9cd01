/// \file sharding_common.cpp
/// \brief The helpers of sharding_internal.hpp: plane axes, matrix slicing and concatenation, layouts.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/recipe_policy.hpp"
#include "sharding_internal.hpp"

namespace qtc::ref::shard_detail {

int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // no overflow at 2^63 - 1 (issue 14)


namespace {
Axis axis_of(MAxis a) { return a == MAxis::kRows ? Axis::kRows : a == MAxis::kCols ? Axis::kCols : Axis::kNone; }
}  // namespace

// The axes and extents are the recipe policy's (describe_plane); the shape does not change them.
Axis scale_m_axis(const Recipe& r, PlaneKind p) { return axis_of(describe_plane(r, p, 0, 0).scale_m_axis); }

Axis data_m_axis(const Recipe& r, PlaneKind p) { return axis_of(describe_plane(r, p, 0, 0).data_m_axis); }

/// Extent along the M axis of a plane's compact scale matrix for a tensor of M rows.
int64_t scale_extent(const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const PlaneSpec s = describe_plane(r, p, M, K);
  return s.scale_m_axis == MAxis::kRows ? s.compact.rows : s.compact.cols;
}

/// Extent along the M axis of a plane's data matrix (bytes for the columns axis).
int64_t data_extent(const Recipe& r, PlaneKind p, int64_t M) {
  const PlaneSpec s = describe_plane(r, p, M, 0);
  return s.data_m_axis == MAxis::kRows ? s.data_rows : s.data_cols;
}

/// Copies elements [b0, b1) along `axis` of a row-major matrix of rows x cols elements of `elem` bytes.
std::vector<uint8_t> slice_matrix(const std::vector<uint8_t>& src, int64_t rows, int64_t cols, size_t elem, Axis axis,
                                  int64_t b0, int64_t b1) {
  // Sizes come from tensors that may have been read from a file: checked, and compared with the bytes present.
  const int64_t e = static_cast<int64_t>(elem);
  const int64_t total = checked_size({rows, cols, e}, "slice of a quantized plane");
  QTC_CHECK(static_cast<int64_t>(src.size()) == total, "slice of a quantized plane: the buffer has ", src.size(), " bytes, its shape ",
            rows, " x ", cols, " x ", elem, " needs ", total);
  const int64_t extent = axis == Axis::kRows ? rows : cols;
  QTC_CHECK(0 <= b0 && b0 <= b1 && b1 <= extent, "slice of a quantized plane: [", b0, ", ", b1, ") is outside [0, ", extent, ")");
  std::vector<uint8_t> out;
  if (axis == Axis::kRows) {
    const size_t rb = static_cast<size_t>(cols) * elem;
    out.assign(src.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b0) * rb),
               src.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b1) * rb));
    return out;
  }
  const size_t w = static_cast<size_t>(b1 - b0) * elem;
  if (w == 0 || rows == 0) return out;  // an empty slice (a rank without rows): nothing to copy
  out.resize(static_cast<size_t>(rows) * w);
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(out.data() + static_cast<size_t>(i) * w,
                src.data() + (static_cast<size_t>(i) * static_cast<size_t>(cols) + static_cast<size_t>(b0)) * elem, w);
  return out;
}

std::vector<uint8_t> concat_matrices(const std::vector<const std::vector<uint8_t>*>& parts,
                                     const std::vector<std::pair<int64_t, int64_t>>& shapes, size_t elem, Axis axis) {
  std::vector<uint8_t> out;
  if (axis == Axis::kRows) {
    for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
  }
  const int64_t rows = shapes.empty() ? 0 : shapes[0].first;
  int64_t total = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    QTC_CHECK(shapes[k].first == rows, "concat of quantized planes: part ", k, " has ", shapes[k].first, " rows, part 0 has ", rows);
    QTC_CHECK(static_cast<int64_t>(parts[k]->size()) ==
                  checked_size({shapes[k].first, shapes[k].second, static_cast<int64_t>(elem)}, "concat of quantized planes"),
              "concat of quantized planes: part ", k, " has ", parts[k]->size(), " bytes, its shape ", shapes[k].first, " x ",
              shapes[k].second, " disagrees");
    total = checked_add(total, shapes[k].second, "concat of quantized planes");
  }
  const int64_t bytes = checked_size({rows, total, static_cast<int64_t>(elem)}, "concat of quantized planes");
  if (bytes == 0) return out;
  out.resize(static_cast<size_t>(bytes));
  int64_t off = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const size_t w = static_cast<size_t>(shapes[k].second) * elem;
    if (w != 0)
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(out.data() + (static_cast<size_t>(i) * static_cast<size_t>(total) + static_cast<size_t>(off)) * elem,
                    parts[k]->data() + static_cast<size_t>(i) * w, w);
    off += shapes[k].second;
  }
  return out;
}

bool same_recipe(const Recipe& a, const Recipe& b) {
  // Every option (also the seed of a recipe without stochastic rounding) and the metadata text (eps -0 vs 0).
  return a == b && a.to_metadata() == b.to_metadata();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

/// Scales of a plane in the compact layout (FP8 tensor: its 1x1 matrix as is).
ScaleMatrix compact_of(const ScaleMatrix& s, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  if (s.layout == ScaleLayout::kCompact || describe_plane(r, p, M, K).per_tensor) return s;
  return convert_layout(s, ScaleLayout::kCompact, r, p, M, K);
}

ScaleMatrix to_layout(const ScaleMatrix& compact, ScaleLayout to, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  if (to == ScaleLayout::kCompact || describe_plane(r, p, M, K).per_tensor) return compact;
  return convert_layout(compact, to, r, p, M, K);
}

void check_shape_consistency(const QuantizedTensor& q) {
  QTC_CHECK(q.rows >= 0 && q.cols >= 0, "quantized tensor ", q.recipe.name(), ": negative shape [", q.rows, ", ", q.cols, "]");
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const auto& p = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
    if (!p) continue;
    const std::string what = std::string("quantized tensor ") + q.recipe.name() + ": " + std::string(plane_kind_name(pk));
    const int64_t nd = checked_size({p->data_rows, p->data_cols}, what + " data");
    QTC_CHECK(static_cast<int64_t>(p->data.size()) == nd, "quantized tensor ", q.recipe.name(), ": ", plane_kind_name(pk), " data has ",
              p->data.size(), " bytes, shape says ", p->data_rows, " x ", p->data_cols);
    const int64_t ns = checked_size({p->scale.rows, p->scale.cols, static_cast<int64_t>(p->scale.elem_size())}, what + " scales");
    QTC_CHECK(static_cast<int64_t>(p->scale.bytes.size()) == ns, "quantized tensor ", q.recipe.name(), ": ", plane_kind_name(pk),
              " scales have ", p->scale.bytes.size(), " bytes, their shape says ", p->scale.rows, " x ", p->scale.cols);
  }
}

}  // namespace qtc::ref::shard_detail
