/// \file sharding.cpp
/// \brief FSDP2 protocol for quantized parameters (TE_FORMATS.md §8), row slicing/concatenation of
///        quantized tensors, columnwise derivation (§1.7, §1.8, §3.3), amax reduction and Adam on shards.
#include "qtc/sharding.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"

namespace qtc::ref {

namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const char* plane_name(PlaneKind p) { return p == PlaneKind::kRowwise ? "rowwise" : "columnwise"; }

/// Along which axis of a plane's (compact) scale matrix, and of its data matrix, the tensor's M index runs.
enum class Axis { kRows, kCols, kNone };

Axis scale_m_axis(const Recipe& r, PlaneKind p) {
  if (r.kind == RecipeKind::kFP8Tensor) return Axis::kNone;
  if (p == PlaneKind::kRowwise) return Axis::kRows;
  return r.kind == RecipeKind::kMXFP8 ? Axis::kRows : Axis::kCols;
}

Axis data_m_axis(const Recipe& r, PlaneKind p) {
  if (p == PlaneKind::kRowwise || r.kind == RecipeKind::kMXFP8) return Axis::kRows;
  return Axis::kCols;  // NVFP4 [K, M/2], FP8 block / tensor [K, M]
}

/// Extent along the M axis of a plane's compact scale matrix for a tensor of M rows.
int64_t scale_extent(const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const ScaleShape s = compact_scale_shape(r, p, M, K);
  return scale_m_axis(r, p) == Axis::kRows ? s.rows : s.cols;
}

/// Extent along the M axis of a plane's data matrix (bytes for the columns axis).
int64_t data_extent(const Recipe& r, PlaneKind p, int64_t M) {
  if (data_m_axis(r, p) == Axis::kCols && r.kind == RecipeKind::kNVFP4) return M / 2;
  return M;
}

/// Copies elements [b0, b1) along `axis` of a row-major matrix of rows x cols elements of `elem` bytes.
std::vector<uint8_t> slice_matrix(const std::vector<uint8_t>& src, int64_t rows, int64_t cols, size_t elem, Axis axis,
                                  int64_t b0, int64_t b1) {
  std::vector<uint8_t> out;
  if (axis == Axis::kRows) {
    const size_t rb = static_cast<size_t>(cols) * elem;
    out.assign(src.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b0) * rb),
               src.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(b1) * rb));
    return out;
  }
  const size_t w = static_cast<size_t>(b1 - b0) * elem;
  out.resize(static_cast<size_t>(rows) * w);
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(out.data() + static_cast<size_t>(i) * w,
                src.data() + (static_cast<size_t>(i * cols) + static_cast<size_t>(b0)) * elem, w);
  return out;
}

/// Concatenates row-major matrices (rows_i x cols_i elements) along `axis`.
std::vector<uint8_t> concat_matrices(const std::vector<const std::vector<uint8_t>*>& parts,
                                     const std::vector<std::pair<int64_t, int64_t>>& shapes, size_t elem, Axis axis) {
  std::vector<uint8_t> out;
  if (axis == Axis::kRows) {
    for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
  }
  const int64_t rows = shapes.empty() ? 0 : shapes[0].first;
  int64_t total = 0;
  for (const auto& s : shapes) total += s.second;
  out.resize(static_cast<size_t>(rows * total) * elem);
  int64_t off = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const size_t w = static_cast<size_t>(shapes[k].second) * elem;
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(out.data() + (static_cast<size_t>(i * total + off)) * elem, parts[k]->data() + static_cast<size_t>(i) * w, w);
    off += shapes[k].second;
  }
  return out;
}

bool same_recipe(const Recipe& a, const Recipe& b) {
  return a.to_metadata() == b.to_metadata() && a.rowwise == b.rowwise && a.columnwise == b.columnwise &&
         a.seed == b.seed && a.rht_sign_mask == b.rht_sign_mask;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

bool per_tensor_amax(const Recipe& r) {
  return (r.kind == RecipeKind::kNVFP4 && !r.row_scaled) || r.kind == RecipeKind::kFP8Tensor;
}

/// Scales of a plane in the compact layout (FP8 tensor: its 1x1 matrix as is).
ScaleMatrix compact_of(const ScaleMatrix& s, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  if (r.kind == RecipeKind::kFP8Tensor || s.layout == ScaleLayout::kCompact) return s;
  return convert_layout(s, ScaleLayout::kCompact, r, p, M, K);
}

ScaleMatrix to_layout(const ScaleMatrix& compact, ScaleLayout to, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  if (r.kind == RecipeKind::kFP8Tensor || to == ScaleLayout::kCompact) return compact;
  return convert_layout(compact, to, r, p, M, K);
}

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
  if (r.kind == RecipeKind::kFP8Tensor) {
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
  if (r.kind == RecipeKind::kNVFP4 && r.row_scaled) {
    QTC_CHECK(pk == PlaneKind::kRowwise,
              "slice_rows: a row-scaled columnwise plane has one amax per column over all rows; it cannot be sliced");
    out.amax.assign(pl.amax.begin() + r0, pl.amax.begin() + r1);
  } else {
    out.amax = pl.amax;
  }
  return out;
}

void check_shape_consistency(const QuantizedTensor& q) {
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const auto& p = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
    if (!p) continue;
    QTC_CHECK(static_cast<int64_t>(p->data.size()) == p->data_rows * p->data_cols, "quantized tensor ", q.recipe.name(),
              ": ", plane_name(pk), " data has ", p->data.size(), " bytes, shape says ", p->data_rows, " x ", p->data_cols);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

int64_t row_granularity(const Recipe& r, bool rowwise, bool columnwise) {
  (void)rowwise;
  switch (r.kind) {
    case RecipeKind::kNVFP4: return 16;  // NVFP4 tensors need M % 16 == 0 in any case (§1.1)
    case RecipeKind::kMXFP8: return (columnwise || r.mx_2d) ? 32 : 1;
    case RecipeKind::kFP8Block: return (columnwise || r.block_2d) ? 128 : 1;
    case RecipeKind::kFP8Tensor: return 1;
  }
  return 1;
}

int64_t row_granularity(const QuantizedTensor& q) {
  return row_granularity(q.recipe, q.rowwise.has_value(), q.columnwise.has_value());
}

QuantizedTensor slice_rows(const QuantizedTensor& q, int64_t r0, int64_t r1) {
  QTC_CHECK(0 <= r0 && r0 <= r1 && r1 <= q.rows, "slice_rows: rows [", r0, ", ", r1, ") are outside [0, ", q.rows, ")");
  const int64_t g = row_granularity(q);
  QTC_CHECK(r0 % g == 0 && (r1 % g == 0 || r1 == q.rows), "slice_rows: ", q.recipe.name(), " needs slice boundaries at multiples of ",
            g, " rows (so no block straddles them), got [", r0, ", ", r1, ")");
  if (q.recipe.kind == RecipeKind::kNVFP4 && q.columnwise) {
    QTC_CHECK(r0 % 2 == 0 && r1 % 2 == 0, "slice_rows: NVFP4 columnwise data packs two rows per byte; odd boundary");
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
      QTC_CHECK(pb->scale.layout == pa->scale.layout, "concat_rows: part ", i, " has another ", plane_name(pk), " scale layout");
      if (per_tensor_amax(a.recipe)) {
        QTC_CHECK(same_bits(pa->amax, pb->amax), "concat_rows: part ", i, " was quantized with ", plane_name(pk), " amax ",
                  pb->amax.empty() ? 0.0f : pb->amax[0], ", part 0 with ", pa->amax.empty() ? 0.0f : pa->amax[0],
                  ": shards must share one global scale (all-reduce the amax with MAX before quantizing, TE_FORMATS.md §8.4)");
      }
    }
    if (a.recipe.kind == RecipeKind::kFP8Tensor)
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
      if (r.kind != RecipeKind::kFP8Tensor) compact.push_back(compact_of(pb.scale, r, pk, b.rows, b.cols));
    }
    p.data = concat_matrices(dparts, dshapes, 1, da);
    p.data_rows = da == Axis::kRows ? data_extent(r, pk, M) : pa->data_rows;
    p.data_cols = da == Axis::kRows ? pa->data_cols : data_extent(r, pk, M);
    if (r.kind == RecipeKind::kFP8Tensor) {
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
      const ScaleShape full = compact_scale_shape(r, pk, M, a.cols);
      s.rows = full.rows;
      s.cols = full.cols;
      s.bytes = concat_matrices(sparts, sshapes, s.elem_size(), sa);
      QTC_CHECK(s.bytes.size() == static_cast<size_t>(s.rows * s.cols) * s.elem_size(), "concat_rows: ", plane_name(pk),
                " scales of the parts do not add up to the full tensor's compact shape ", s.rows, " x ", s.cols);
      p.scale = to_layout(s, pa->scale.layout, r, pk, M, a.cols);
    }
    if (r.kind == RecipeKind::kNVFP4 && r.row_scaled) {
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

// ---------------------------------------------------------------------------------------------------

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
  auto no = [&](const char* s) {
    if (why) *why = s;
    return false;
  };
  switch (r.kind) {
    case RecipeKind::kNVFP4:
      if (!r.tile_2d)
        return no("NVFP4 1x16: rowwise and columnwise blocks differ (16 consecutive elements of a row vs of a column), so the "
                  "columnwise plane is not a transpose of the rowwise one (TE_FORMATS.md §1.8); only 16x16 (2D) recipes can "
                  "derive it");
      if (r.rht) return no("NVFP4 with RHT: the columnwise plane is of RHT(x^T), not a transpose (§1.9)");
      if (r.row_scaled) return no("row-scaled NVFP4: per-row and per-column amaxes differ (§1.11)");
      if (r.stochastic) return no("NVFP4 stochastic rounding draws different random bits per plane (§1.10)");
      return true;
    case RecipeKind::kMXFP8:
      if (!r.mx_2d)
        return no("MXFP8 1x32: columnwise blocks (32 rows) differ from rowwise blocks (32 columns); the columnwise plane must be "
                  "quantized or gathered, not derived (TE_FORMATS.md §8.3)");
      return true;
    case RecipeKind::kFP8Block:
      if (!r.block_2d)
        return no("FP8 block 1x128: columnwise blocks are 128 rows of a column, not a transpose of the rowwise plane; only "
                  "128x128 recipes can derive it (§3.3)");
      return true;
    case RecipeKind::kFP8Tensor: return true;
  }
  return no("unknown recipe");
}

void derive_columnwise(QuantizedTensor& q) {
  std::string why;
  QTC_CHECK(can_derive_columnwise(q.recipe, &why), "derive_columnwise (", q.recipe.name(), "): ", why);
  QTC_CHECK(q.rowwise.has_value(), "derive_columnwise: the tensor has no rowwise plane to derive from");
  const Recipe& r = q.recipe;
  const Plane& rw = *q.rowwise;
  const int64_t M = q.rows, K = q.cols;
  Plane cw;
  // Data.
  if (r.kind == RecipeKind::kNVFP4) {
    QTC_CHECK(M % 2 == 0 && K % 2 == 0, "derive_columnwise: NVFP4 needs even M and K");
    cw.data_rows = K;
    cw.data_cols = M / 2;
    cw.data.assign(static_cast<size_t>(K * (M / 2)), 0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const uint8_t b = rw.data[static_cast<size_t>(i * (K / 2) + k / 2)];
        const uint8_t code = (k % 2) ? (b >> 4) : (b & 0xF);
        uint8_t& o = cw.data[static_cast<size_t>(k * (M / 2) + i / 2)];
        o = static_cast<uint8_t>((i % 2) ? ((o & 0x0F) | (code << 4)) : ((o & 0xF0) | code));
      }
  } else if (r.kind == RecipeKind::kMXFP8) {
    cw.data_rows = M;  // same orientation as x (§2.1)
    cw.data_cols = K;
    cw.data = rw.data;
  } else {
    cw.data_rows = K;
    cw.data_cols = M;
    cw.data.resize(static_cast<size_t>(M * K));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) cw.data[static_cast<size_t>(k * M + i)] = rw.data[static_cast<size_t>(i * K + k)];
  }
  // Scales, built in the compact layout.
  if (r.kind == RecipeKind::kFP8Tensor) {
    cw.scale = rw.scale;
  } else {
    const ScaleMatrix rs = compact_of(rw.scale, r, PlaneKind::kRowwise, M, K);
    const ScaleShape cs = compact_scale_shape(r, PlaneKind::kColumnwise, M, K);
    ScaleMatrix s;
    s.type = rs.type;
    s.layout = ScaleLayout::kCompact;
    s.rows = cs.rows;
    s.cols = cs.cols;
    s.bytes.assign(static_cast<size_t>(cs.rows * cs.cols) * rs.elem_size(), 0);
    const size_t e = rs.elem_size();
    auto put = [&](int64_t rr, int64_t cc, int64_t sr, int64_t sc) {
      std::memcpy(s.bytes.data() + static_cast<size_t>(rr * s.cols + cc) * e, rs.bytes.data() + static_cast<size_t>(sr * rs.cols + sc) * e, e);
    };
    if (r.kind == RecipeKind::kNVFP4) {  // [k][b] = rowwise[16b][k/16]
      for (int64_t k = 0; k < cs.rows; ++k)
        for (int64_t b = 0; b < cs.cols; ++b) put(k, b, b * 16, k / 16);
    } else if (r.kind == RecipeKind::kMXFP8) {  // [b][j] = rowwise[32b][j/32]
      for (int64_t b = 0; b < cs.rows; ++b)
        for (int64_t j = 0; j < cs.cols; ++j) put(b, j, b * 32, j / 32);
    } else {  // FP8 block 2D: [kb][mb] = rowwise[mb][kb]
      for (int64_t kb = 0; kb < cs.rows; ++kb)
        for (int64_t mb = 0; mb < cs.cols; ++mb) put(kb, mb, mb, kb);
    }
    const ScaleLayout lay = rw.scale.layout == ScaleLayout::kSwizzled ? ScaleLayout::kCompact : rw.scale.layout;
    cw.scale = to_layout(s, lay, r, PlaneKind::kColumnwise, M, K);
  }
  cw.amax = rw.amax;  // §1.8: the transpose kernels copy rowwise amax -> columnwise amax
  q.columnwise = std::move(cw);
}

// ---------------------------------------------------------------------------------------------------

int64_t ShardPayload::wire_bytes() const {
  int64_t n = 0;
  for (const GatherBuffer& b : buffers) n += static_cast<int64_t>(b.bytes.size());
  return n;
}

namespace {

size_t scale_elem(const Recipe& r) { return r.kind == RecipeKind::kFP8Block ? 4 : 1; }

void check_fsdp_recipe(const Recipe& r, int64_t shard_M, bool columnwise_usage) {
  switch (r.kind) {
    case RecipeKind::kNVFP4:
      QTC_CHECK(shard_M % 16 == 0, "FSDP2 requires shard_M (", shard_M,
                ") to be a multiple of NVFP4_BLOCK_SCALING_SIZE (16): 16-row blocks must not straddle shards (TE_FORMATS.md §8.1)");
      QTC_CHECK(!r.row_scaled, "FSDP2 all-gather of row-scaled NVFP4 is not supported: the gathered tensor would carry only the "
                               "local shard's per-row amax (TE_FORMATS.md §8.1)");
      if (columnwise_usage) {
        std::string why;
        QTC_CHECK(can_derive_columnwise(r, &why), "FSDP2 with a columnwise NVFP4 plane requires 16x16 (2D) quantization, since "
                                                   "the columnwise plane is rebuilt locally as a transpose (§8.1): ", why);
      }
      break;
    case RecipeKind::kMXFP8:
      QTC_CHECK(shard_M % 32 == 0, "FSDP2 requires shard_M (", shard_M, ") of an MXFP8 tensor to be a multiple of 32 (TE_FORMATS.md §8.3)");
      break;
    case RecipeKind::kFP8Block:
      QTC_CHECK(r.block_2d, "FSDP2 all-gather of FP8 block 1x128 is not supported: the 1D scale layout has M in dim 1, which is "
                            "incompatible with a dim-0 all-gather (TE_FORMATS.md §8.2); use 128x128");
      QTC_CHECK(shard_M % 128 == 0, "FSDP2 requires shard_M (", shard_M,
                ") of an FP8 128x128 tensor to be a multiple of 128: a shard would split a 128x128 tile (§8.2)");
      break;
    case RecipeKind::kFP8Tensor: break;
  }
}

GatherBuffer take_rows(const char* name, const std::vector<uint8_t>& bytes, int64_t rows, int64_t row_bytes) {
  GatherBuffer g;
  g.name = name;
  g.rows = rows;
  g.row_bytes = row_bytes;
  QTC_CHECK(bytes.size() >= static_cast<size_t>(rows * row_bytes), "fsdp: buffer ", name, " is too small");
  g.bytes.assign(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(rows * row_bytes));
  return g;
}

/// The un-padded-in-dim-0 padded scale rows a rank sends.
GatherBuffer scale_rows(const char* name, const ScaleMatrix& s, const Recipe& r, PlaneKind pk, int64_t M, int64_t K) {
  const ScaleMatrix padded = s.layout == ScaleLayout::kPadded ? s : convert_layout(s, ScaleLayout::kPadded, r, pk, M, K);
  const int64_t rows = compact_scale_shape(r, pk, M, K).rows;
  return take_rows(name, padded.bytes, rows, padded.cols * static_cast<int64_t>(padded.elem_size()));
}

}  // namespace

ShardPayload fsdp_pre_all_gather(const QuantizedTensor& shard, const FsdpOptions& opt) {
  const Recipe& r = shard.recipe;
  QTC_CHECK(shard.rowwise.has_value(), "FSDP2 pre-all-gather: the shard of ", r.name(),
            " has no rowwise plane; FSDP2 gathers rowwise data (TE_FORMATS.md §8.1)");
  for (const auto* p : {&shard.rowwise, &shard.columnwise})
    if (*p)
      QTC_CHECK((*p)->scale.layout != ScaleLayout::kSwizzled,
                "FSDP2 pre-all-gather: swizzled scales are refused (row order is scrambled inside 128-row tiles, so a dim-0 "
                "all-gather would interleave them); un-swizzle first (TE_FORMATS.md §8.1, §8.3)");
  check_shape_consistency(shard);
  const int64_t M = shard.rows, K = shard.cols;
  const bool col_usage = opt.columnwise_usage.value_or(shard.columnwise.has_value());
  check_fsdp_recipe(r, M, col_usage);

  ShardPayload p;
  FsdpMetadata& m = p.meta;
  m.recipe = r;
  m.input_dtype = shard.input_dtype;
  m.cols = K;
  m.shard_rows = M;
  m.columnwise_usage = col_usage;
  m.columnwise_gathered = col_usage && r.kind == RecipeKind::kMXFP8 && !r.mx_2d;
  m.amax_rowwise = shard.rowwise->amax;
  m.amax_columnwise = shard.columnwise ? shard.columnwise->amax : shard.rowwise->amax;
  m.scale_inv = shard.scale_inv;
  m.layout = opt.out_layout.value_or(r.kind == RecipeKind::kFP8Tensor ? ScaleLayout::kCompact : shard.rowwise->scale.layout);
  QTC_CHECK(m.layout != ScaleLayout::kSwizzled, "FSDP2: the gathered tensor's scales cannot be requested swizzled");

  const Plane& rw = *shard.rowwise;
  p.buffers.push_back(take_rows("rowwise_data", rw.data, rw.data_rows, rw.data_cols));
  if (r.kind != RecipeKind::kFP8Tensor)
    p.buffers.push_back(scale_rows("rowwise_scale_inv", rw.scale, r, PlaneKind::kRowwise, M, K));
  if (m.columnwise_gathered) {
    QTC_CHECK(shard.columnwise.has_value(), "FSDP2 pre-all-gather: MXFP8 columnwise usage needs the shard's columnwise plane "
                                            "(it is gathered, not derived: TE_FORMATS.md §8.3)");
    const Plane& cw = *shard.columnwise;
    p.buffers.push_back(take_rows("columnwise_data", cw.data, cw.data_rows, cw.data_cols));
    p.buffers.push_back(scale_rows("columnwise_scale_inv", cw.scale, r, PlaneKind::kColumnwise, M, K));
  }
  return p;
}

std::vector<GatherBuffer> fsdp_buffer_specs(const FsdpMetadata& m) {
  const Recipe& r = m.recipe;
  const int64_t M = m.shard_rows, K = m.cols;
  std::vector<GatherBuffer> v;
  auto add = [&](const char* name, int64_t rows, int64_t rb) {
    GatherBuffer g;
    g.name = name;
    g.rows = rows;
    g.row_bytes = rb;
    v.push_back(std::move(g));
  };
  add("rowwise_data", M, r.kind == RecipeKind::kNVFP4 ? K / 2 : K);
  if (r.kind != RecipeKind::kFP8Tensor)
    add("rowwise_scale_inv", compact_scale_shape(r, PlaneKind::kRowwise, M, K).rows,
        padded_scale_shape(r, PlaneKind::kRowwise, M, K).cols * static_cast<int64_t>(scale_elem(r)));
  if (m.columnwise_gathered) {
    add("columnwise_data", M, K);
    add("columnwise_scale_inv", compact_scale_shape(r, PlaneKind::kColumnwise, M, K).rows,
        padded_scale_shape(r, PlaneKind::kColumnwise, M, K).cols * static_cast<int64_t>(scale_elem(r)));
  }
  return v;
}

std::vector<GatherBuffer> concat_gathered(std::span<const ShardPayload> per_rank) {
  QTC_CHECK(!per_rank.empty(), "concat_gathered: no ranks");
  std::vector<GatherBuffer> out = per_rank[0].buffers;
  for (auto& b : out) b.rows = 0, b.bytes.clear();
  for (size_t k = 0; k < per_rank.size(); ++k) {
    const auto& bufs = per_rank[k].buffers;
    QTC_CHECK(bufs.size() == out.size(), "concat_gathered: rank ", k, " sends ", bufs.size(), " buffers, rank 0 sends ", out.size());
    for (size_t i = 0; i < bufs.size(); ++i) {
      QTC_CHECK(bufs[i].name == out[i].name && bufs[i].row_bytes == out[i].row_bytes, "concat_gathered: rank ", k, " buffer ", i,
                " (", bufs[i].name, ", ", bufs[i].row_bytes, " bytes/row) differs from rank 0's (", out[i].name, ", ",
                out[i].row_bytes, ")");
      out[i].rows += bufs[i].rows;
      out[i].bytes.insert(out[i].bytes.end(), bufs[i].bytes.begin(), bufs[i].bytes.end());
    }
  }
  return out;
}

std::vector<uint8_t> pack_payload(const ShardPayload& p) {
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(p.wire_bytes()));
  for (const GatherBuffer& b : p.buffers) out.insert(out.end(), b.bytes.begin(), b.bytes.end());
  return out;
}

std::vector<GatherBuffer> unpack_gathered(std::span<const uint8_t> gathered, int world, const FsdpMetadata& meta) {
  std::vector<GatherBuffer> specs = fsdp_buffer_specs(meta);
  size_t per = 0;
  for (const auto& s : specs) per += static_cast<size_t>(s.rows * s.row_bytes);
  QTC_CHECK(world >= 1 && gathered.size() == per * static_cast<size_t>(world), "unpack_gathered: got ", gathered.size(),
            " bytes, expected ", world, " ranks x ", per, " bytes");
  for (auto& s : specs) {
    s.bytes.reserve(static_cast<size_t>(s.rows * s.row_bytes * world));
  }
  for (int k = 0; k < world; ++k) {
    size_t off = per * static_cast<size_t>(k);
    for (auto& s : specs) {
      const size_t n = static_cast<size_t>(s.rows * s.row_bytes);
      s.bytes.insert(s.bytes.end(), gathered.begin() + static_cast<ptrdiff_t>(off), gathered.begin() + static_cast<ptrdiff_t>(off + n));
      off += n;
    }
  }
  for (auto& s : specs) s.rows *= world;
  return specs;
}

namespace {

const GatherBuffer& find_buffer(std::span<const GatherBuffer> g, const char* name) {
  for (const GatherBuffer& b : g)
    if (b.name == name) return b;
  QTC_FAIL("FSDP2 post-all-gather: the gathered buffers lack ", name);
}

/// Rebuilds one plane from its gathered data and (un-padded in dim 0) scale rows.
Plane rebuild_plane(const GatherBuffer& data, const GatherBuffer* scale, const FsdpMetadata& m, PlaneKind pk, int64_t M) {
  const Recipe& r = m.recipe;
  const int64_t K = m.cols;
  Plane p;
  p.data_rows = data.rows;
  p.data_cols = data.row_bytes;
  QTC_CHECK(static_cast<int64_t>(data.bytes.size()) == data.rows * data.row_bytes, "FSDP2 post-all-gather: ", data.name, " has ",
            data.bytes.size(), " bytes, expected ", data.rows, " x ", data.row_bytes);
  p.data = data.bytes;
  if (r.kind == RecipeKind::kFP8Tensor) {
    p.scale.type = ScaleType::kF32;
    p.scale.layout = ScaleLayout::kCompact;
    p.scale.rows = p.scale.cols = 1;
    p.scale.bytes.resize(4);
    p.scale.set_f32(0, 0, m.scale_inv);
  } else {
    const ScaleShape ps = padded_scale_shape(r, pk, M, K);
    const size_t e = scale_elem(r);
    QTC_CHECK(scale->row_bytes == ps.cols * static_cast<int64_t>(e) && scale->rows == compact_scale_shape(r, pk, M, K).rows &&
                  static_cast<int64_t>(scale->bytes.size()) == scale->rows * scale->row_bytes,
              "FSDP2 post-all-gather: ", scale->name, " is ", scale->rows, " x ", scale->row_bytes, " bytes, the full tensor [", M,
              ", ", K, "] needs ", compact_scale_shape(r, pk, M, K).rows, " x ", ps.cols * static_cast<int64_t>(e));
    ScaleMatrix padded;
    padded.type = r.kind == RecipeKind::kNVFP4 ? ScaleType::kE4M3 : r.kind == RecipeKind::kMXFP8 ? ScaleType::kE8M0 : ScaleType::kF32;
    padded.layout = ScaleLayout::kPadded;
    padded.rows = ps.rows;
    padded.cols = ps.cols;
    padded.bytes = scale->bytes;
    padded.bytes.resize(static_cast<size_t>(ps.rows * ps.cols) * e, 0);  // zero re-padding of dim 0 (torch pad)
    p.scale = m.layout == ScaleLayout::kPadded ? std::move(padded) : convert_layout(padded, m.layout, r, pk, M, K);
  }
  p.amax = pk == PlaneKind::kRowwise ? m.amax_rowwise : m.amax_columnwise;
  return p;
}

}  // namespace

QuantizedTensor fsdp_post_all_gather(std::span<const GatherBuffer> gathered, const FsdpMetadata& m) {
  const Recipe& r = m.recipe;
  const GatherBuffer& data = find_buffer(gathered, "rowwise_data");
  const int64_t M = data.rows;
  QuantizedTensor q;
  q.recipe = r;
  q.input_dtype = m.input_dtype;
  q.rows = M;
  q.cols = m.cols;
  q.scale_inv = m.scale_inv;
  const GatherBuffer* rs = r.kind == RecipeKind::kFP8Tensor ? nullptr : &find_buffer(gathered, "rowwise_scale_inv");
  q.rowwise = rebuild_plane(data, rs, m, PlaneKind::kRowwise, M);
  if (m.columnwise_usage) {
    if (m.columnwise_gathered) {
      q.columnwise = rebuild_plane(find_buffer(gathered, "columnwise_data"), &find_buffer(gathered, "columnwise_scale_inv"), m,
                                   PlaneKind::kColumnwise, M);
    } else {
      derive_columnwise(q);
    }
  }
  return q;
}

void fsdp_post_all_gather(std::span<const GatherBuffer> gathered, const FsdpMetadata& m, QuantizedTensor& out) {
  QuantizedTensor fresh = fsdp_post_all_gather(gathered, m);
  QTC_CHECK(out.rows == fresh.rows && out.cols == fresh.cols && same_recipe(out.recipe, fresh.recipe),
            "FSDP2 post-all-gather in place: `out` is ", out.recipe.name(), " [", out.rows, ", ", out.cols, "], the gathered tensor is ",
            fresh.recipe.name(), " [", fresh.rows, ", ", fresh.cols, "]");
  auto update = [&](std::optional<Plane>& dst, const std::optional<Plane>& src, const char* what) {
    if (!src) {
      dst.reset();
      return;
    }
    if (!dst) {
      dst = src;
      return;
    }
    QTC_CHECK(dst->data.size() == src->data.size() && dst->scale.bytes.size() == src->scale.bytes.size(),
              "FSDP2 post-all-gather in place: the ", what, " buffers of `out` have other sizes than the gathered ones");
    // Overwrite in place: the buffers keep their storage (TE updates `out` without reallocating).
    std::copy(src->data.begin(), src->data.end(), dst->data.begin());
    std::copy(src->scale.bytes.begin(), src->scale.bytes.end(), dst->scale.bytes.begin());
    dst->data_rows = src->data_rows;
    dst->data_cols = src->data_cols;
    dst->scale.type = src->scale.type;
    dst->scale.layout = src->scale.layout;
    dst->scale.rows = src->scale.rows;
    dst->scale.cols = src->scale.cols;
    dst->amax = src->amax;
  };
  update(out.rowwise, fresh.rowwise, "rowwise");
  update(out.columnwise, fresh.columnwise, "columnwise");
  out.input_dtype = fresh.input_dtype;
  out.scale_inv = fresh.scale_inv;
}

// ---------------------------------------------------------------------------------------------------

std::pair<float, float> local_amaxes(const MatrixView& x, const Recipe& r) {
  const bool prop = r.profile == Profile::kTEPyRef;
  const float a = amax(x, prop);
  if (r.kind == RecipeKind::kNVFP4 && r.rht && r.columnwise) {
    const HostMatrix t = rht_transform(x, r.rht_sign_mask);
    return {a, amax(t.view(), prop)};
  }
  return {a, a};
}

QuantizedTensor quantize_shard(const MatrixView& x, const Recipe& r, const AmaxAllReduce& reduce) {
  if (!per_tensor_amax(r)) return quantize(x, r);
  if (!reduce) return quantize(x, r);  // no reduction: each shard uses its own amax (the FSDP2 bug)
  auto [ar, ac] = local_amaxes(x, r);
  float v[2] = {ar, ac};
  reduce(std::span<float>(v, 2));
  return quantize_with_amax(x, r, v[0], v[1]);
}

void requantize_shard_into(QuantizedTensor& dst, const MatrixView& x, const AmaxAllReduce& reduce) {
  QTC_CHECK(x.rows == dst.rows && x.cols == dst.cols, "requantize_shard_into: input is [", x.rows, ", ", x.cols,
            "], the quantized shard is [", dst.rows, ", ", dst.cols, "]");
  Recipe r = dst.recipe;
  r.rowwise = dst.rowwise.has_value();
  r.columnwise = dst.columnwise.has_value();
  QuantizedTensor fresh = quantize_shard(x, r, reduce);
  fresh.recipe = dst.recipe;
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    auto& d = pk == PlaneKind::kRowwise ? dst.rowwise : dst.columnwise;
    auto& s = pk == PlaneKind::kRowwise ? fresh.rowwise : fresh.columnwise;
    if (!d) continue;
    const ScaleLayout lay = d->scale.layout;
    if (dst.recipe.kind != RecipeKind::kFP8Tensor && lay != ScaleLayout::kCompact)
      s->scale = convert_layout(s->scale, lay, dst.recipe, pk, dst.rows, dst.cols);
    QTC_CHECK(d->data.size() == s->data.size() && d->scale.bytes.size() == s->scale.bytes.size(),
              "requantize_shard_into: buffer sizes changed");
    std::copy(s->data.begin(), s->data.end(), d->data.begin());
    std::copy(s->scale.bytes.begin(), s->scale.bytes.end(), d->scale.bytes.begin());
    d->amax = s->amax;
  }
  dst.scale_inv = fresh.scale_inv;
}

// ---------------------------------------------------------------------------------------------------

void adam_step(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
               const AdamConfig& c, int step) {
  QTC_CHECK(param.size() == grad.size() && param.size() == m.size() && param.size() == v.size(),
            "adam_step: param, grad, m and v must have the same size");
  QTC_CHECK(step >= 1, "adam_step: step counts from 1");
  const float bc1 = 1.0f - std::pow(c.beta1, static_cast<float>(step));
  const float bc2 = 1.0f - std::pow(c.beta2, static_cast<float>(step));
  for (size_t i = 0; i < param.size(); ++i) {
    const float g = grad[i];
    m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * g;
    v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * (g * g);
    const float mh = m[i] / bc1;
    const float vh = v[i] / bc2;
    float p = param[i];
    if (c.weight_decay != 0.0f) p = p - c.lr * c.weight_decay * p;
    param[i] = p - c.lr * mh / (std::sqrt(vh) + c.eps);
  }
}

}  // namespace qtc::ref
