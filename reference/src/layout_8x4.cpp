/// \file layout_8x4.cpp
/// \brief The 8x4 small-M swizzled scale layout (layout_8x4.hpp), on top of describe_plane's compact shapes.
#include "qtc/layout_8x4.hpp"

#include "qtc/error.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::ref {

namespace {

struct Geometry {
  int64_t R = 0, C = 0;     ///< S's extent: outer rows, k-blocks
  bool transposed = false;  ///< S = compact^T (MXFP8 columnwise)
  int64_t bytes() const { return (R + 7) / 8 * 8 * ((C + 3) / 4 * 4); }
};

Geometry geometry(const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const PlaneSpec s = describe_plane(r, p, M, K);
  QTC_CHECK(s.swizzlable && s.scale_type != ScaleType::kF32, "recipe ", r.name(),
            ": rule 'layout-8x4-byte-scales': the 8x4 swizzled layout holds the byte scales of NVFP4, MXFP8 and MXFP4 "
            "planes only");
  Geometry g;
  g.transposed = s.swizzle_transposed;
  g.R = g.transposed ? s.compact.cols : s.compact.rows;
  g.C = g.transposed ? s.compact.rows : s.compact.cols;
  return g;
}

}  // namespace

std::vector<uint8_t> swizzle_8x4(const ScaleMatrix& compact, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const Geometry g = geometry(r, p, M, K);
  const PlaneSpec s = describe_plane(r, p, M, K);
  QTC_CHECK(compact.layout == ScaleLayout::kCompact && compact.rows == s.compact.rows && compact.cols == s.compact.cols &&
                compact.bytes.size() == static_cast<size_t>(compact.rows * compact.cols),
            "swizzle_8x4: the ", plane_kind_name(p), " scales of ", r.name(), " [", M, ", ", K, "] must be compact [",
            s.compact.rows, ", ", s.compact.cols, "], got [", compact.rows, ", ", compact.cols, "]");
  std::vector<uint8_t> out(static_cast<size_t>(g.bytes()), 0);
  for (int64_t i = 0; i < g.R; ++i)
    for (int64_t c = 0; c < g.C; ++c)
      out[static_cast<size_t>(swizzled_8x4_offset(i, c, g.C))] = g.transposed ? compact.byte(c, i) : compact.byte(i, c);
  return out;
}

ScaleMatrix unswizzle_8x4(std::span<const uint8_t> bytes, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const Geometry g = geometry(r, p, M, K);
  QTC_CHECK(static_cast<int64_t>(bytes.size()) == g.bytes(), "unswizzle_8x4: the ", plane_kind_name(p), " scales of ",
            r.name(), " [", M, ", ", K, "] take ", g.bytes(), " bytes in the 8x4 layout ([roundup(", g.R, ", 8), roundup(",
            g.C, ", 4)]), got ", bytes.size());
  const PlaneSpec s = describe_plane(r, p, M, K);
  ScaleMatrix m;
  m.type = s.scale_type;
  m.layout = ScaleLayout::kCompact;
  m.rows = s.compact.rows;
  m.cols = s.compact.cols;
  m.bytes.assign(static_cast<size_t>(m.rows * m.cols), 0);
  for (int64_t i = 0; i < g.R; ++i)
    for (int64_t c = 0; c < g.C; ++c) {
      const uint8_t v = bytes[static_cast<size_t>(swizzled_8x4_offset(i, c, g.C))];
      m.bytes[static_cast<size_t>(g.transposed ? c * m.cols + i : i * m.cols + c)] = v;
    }
  return m;
}

}  // namespace qtc::ref
