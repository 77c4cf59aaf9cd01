/// \file sharding_columnwise.cpp
/// \brief Identity-view checks, and derivation of the columnwise plane from the rowwise one (TE_FORMATS.md §1.7,
///        §1.8, §3.3).
#include "qtc/sharding.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "kind_module.hpp"
#include "sharding_internal.hpp"

namespace qtc::ref {

using namespace shard_detail;

void check_identity_view(const QuantizedTensor& q, std::span<const int64_t> sizes, std::span<const int64_t> strides,
                         int64_t storage_offset) {
  const bool ok = sizes.size() == 2 && strides.size() == 2 && sizes[0] == q.rows && sizes[1] == q.cols &&
                  (strides[1] == 1 || q.cols <= 1) && (strides[0] == q.cols || q.rows <= 1) && storage_offset == 0;
  if (ok) return;
  std::ostringstream got;
  got << "sizes [";
  for (size_t i = 0; i < sizes.size(); ++i) got << (i ? ", " : "") << sizes[i];
  got << "], strides [";
  for (size_t i = 0; i < strides.size(); ++i) got << (i ? ", " : "") << strides[i];
  got << "], offset " << storage_offset;
  QTC_FAIL("quantized tensor ", q.recipe.name(), " [", q.rows, ", ", q.cols, "]: only identity views are supported (sizes [",
           q.rows, ", ", q.cols, "], strides [", q.cols, ", 1], offset 0); got ", got.str(),
           ". Views that reorder or subset elements would split scale blocks; dequantize first");
}

void check_identity_slice(const QuantizedTensor& q, int dim, int64_t start, int64_t end, int64_t step) {
  QTC_CHECK(dim == 0 || dim == 1, "quantized tensor slice: dim must be 0 or 1, got ", dim);
  const int64_t size = dim == 0 ? q.rows : q.cols;
  QTC_CHECK(start == 0 && end >= size && step == 1, "quantized tensor ", q.recipe.name(), ": only identity slices are supported (dim ",
            dim, ": start 0, end >= ", size, ", step 1); got start ", start, ", end ", end, ", step ", step,
            ". Use slice_rows() for block-aligned row ranges");
}

// ---------------------------------------------------------------------------------------------------

bool can_derive_columnwise(const Recipe& r, std::string* why) {
  // The kind's shard constraint (kinds/<kind>_kind.cpp).
  const std::string no = detail::kind_module(r.kind()).columnwise_not_derivable(r);
  if (!no.empty() && why != nullptr) *why = no;
  return no.empty();
}

void derive_columnwise(QuantizedTensor& q) {
  std::string why;
  QTC_CHECK(can_derive_columnwise(q.recipe, &why), "derive_columnwise (", q.recipe.name(), "): ", why);
  QTC_CHECK(q.rowwise.has_value(), "derive_columnwise: the tensor has no rowwise plane to derive from");
  const Recipe& r = q.recipe;
  const Plane& rw = *q.rowwise;
  const int64_t M = q.rows, K = q.cols;
  const PlaneSpec spec = describe_plane(r, PlaneKind::kColumnwise, M, K);  // the plane to build
  Plane cw;
  cw.data_rows = spec.data_rows;
  cw.data_cols = spec.data_cols;
  // Data.
  if (spec.data_elem == DataElem::kE2M1) {
    QTC_CHECK(M % 2 == 0 && K % 2 == 0, "derive_columnwise: NVFP4 needs even M and K");
    cw.data.assign(static_cast<size_t>(spec.data_bytes()), 0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const uint8_t b = rw.data[static_cast<size_t>(i * (K / 2) + k / 2)];
        const uint8_t code = (k % 2) ? (b >> 4) : (b & 0xF);
        uint8_t& o = cw.data[static_cast<size_t>(k * (M / 2) + i / 2)];
        o = static_cast<uint8_t>((i % 2) ? ((o & 0x0F) | (code << 4)) : ((o & 0xF0) | code));
      }
  } else if (!spec.data_transposed) {
    cw.data = rw.data;  // MXFP8: same orientation as x (§2.1)
  } else {
    cw.data.resize(static_cast<size_t>(spec.data_bytes()));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) cw.data[static_cast<size_t>(k * M + i)] = rw.data[static_cast<size_t>(i * K + k)];
  }
  // Scales, built in the compact layout.
  if (spec.per_tensor) {
    cw.scale = rw.scale;
  } else {
    const ScaleMatrix rs = compact_of(rw.scale, r, PlaneKind::kRowwise, M, K);
    const ScaleShape cs = spec.compact;
    ScaleMatrix s;
    s.type = rs.type;
    s.layout = ScaleLayout::kCompact;
    s.rows = cs.rows;
    s.cols = cs.cols;
    s.bytes.assign(static_cast<size_t>(cs.rows * cs.cols) * rs.elem_size(), 0);
    const size_t e = rs.elem_size();
    // Entry (a, b) of the columnwise scales covers a block of x; the rowwise entry of that block's first element holds
    // the same scale (a derivable recipe's blocks are square tiles: NVFP4 16x16, MXFP8 32x32, FP8 block 128x128).
    const PlaneSpec rspec = describe_plane(r, PlaneKind::kRowwise, M, K);
    for (int64_t a = 0; a < cs.rows; ++a)
      for (int64_t b = 0; b < cs.cols; ++b) {
        const XRegion blk = spec.scale_block(a, b);
        const Index2 src = rspec.scale_entry(blk.r0, blk.c0);
        std::memcpy(s.bytes.data() + static_cast<size_t>(a * s.cols + b) * e,
                    rs.bytes.data() + static_cast<size_t>(src.row * rs.cols + src.col) * e, e);
      }
    const ScaleLayout lay = layout_is_tiled(rw.scale.layout) ? ScaleLayout::kCompact : rw.scale.layout;
    cw.scale = to_layout(s, lay, r, PlaneKind::kColumnwise, M, K);
  }
  cw.amax = rw.amax;  // §1.8: the transpose kernels copy rowwise amax -> columnwise amax
  q.columnwise = std::move(cw);
}

}  // namespace qtc::ref
