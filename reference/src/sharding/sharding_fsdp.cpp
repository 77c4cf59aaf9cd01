/// \file sharding_fsdp.cpp
/// \brief FSDP2 protocol for quantized parameters (TE_FORMATS.md §8): pre-all-gather buffers, gathered byte
///        layout, post-all-gather rebuild.
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

int64_t ShardPayload::wire_bytes() const {
  int64_t n = 0;
  for (const GatherBuffer& b : buffers) n += static_cast<int64_t>(b.bytes.size());
  return n;
}

namespace {


void check_fsdp_recipe(const Recipe& r, int64_t shard_M, bool columnwise_usage) {
  detail::kind_module(r.kind()).check_fsdp(r, shard_M, columnwise_usage);  // the kind's shard constraints
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
  const int64_t rows = describe_plane(r, pk, M, K).compact.rows;
  return take_rows(name, padded.bytes, rows, padded.cols * static_cast<int64_t>(padded.elem_size()));
}

}  // namespace

ShardPayload fsdp_pre_all_gather(const QuantizedTensor& shard, const FsdpOptions& opt) {
  const Recipe& r = shard.recipe;
  QTC_CHECK(shard.rowwise.has_value(), "FSDP2 pre-all-gather: the shard of ", r.name(),
            " has no rowwise plane; FSDP2 gathers rowwise data (TE_FORMATS.md §8.1)");
  for (const auto* p : {&shard.rowwise, &shard.columnwise})
    if (*p)
      QTC_CHECK(!layout_is_tiled((*p)->scale.layout), "FSDP2 pre-all-gather: ", layout_name((*p)->scale.layout),
                " scales are refused (row order is scrambled inside tiles, so a dim-0 all-gather would interleave them); "
                "un-swizzle first (TE_FORMATS.md §8.1, §8.3)");
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
  // A columnwise plane in x's orientation (MXFP8) with 1D blocks is gathered by rows; the others are derived.
  m.columnwise_gathered = col_usage && !kind_info(r).columnwise_transposed && !r.is_2d();
  m.amax_rowwise = shard.rowwise->amax;
  m.amax_columnwise = shard.columnwise ? shard.columnwise->amax : shard.rowwise->amax;
  m.scale_inv = shard.scale_inv;
  m.layout = opt.out_layout.value_or(kind_info(r).per_tensor_scale ? ScaleLayout::kCompact : shard.rowwise->scale.layout);
  QTC_CHECK(!layout_is_tiled(m.layout), "FSDP2: the gathered tensor's scales cannot be requested in layout ", layout_name(m.layout));

  const Plane& rw = *shard.rowwise;
  p.buffers.push_back(take_rows("rowwise_data", rw.data, rw.data_rows, rw.data_cols));
  if (!kind_info(r).per_tensor_scale)
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
  // Each plane's data rows and its scale rows (un-padded in dim 0) of padded width, as describe_plane says.
  const PlaneSpec rs = describe_plane(r, PlaneKind::kRowwise, M, K), cs = describe_plane(r, PlaneKind::kColumnwise, M, K);
  add("rowwise_data", rs.data_rows, rs.data_cols);
  if (!rs.per_tensor) add("rowwise_scale_inv", rs.compact.rows, rs.padded.cols * static_cast<int64_t>(rs.scale_elem_bytes));
  if (m.columnwise_gathered) {
    add("columnwise_data", cs.data_rows, cs.data_cols);
    add("columnwise_scale_inv", cs.compact.rows, cs.padded.cols * static_cast<int64_t>(cs.scale_elem_bytes));
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
  const PlaneSpec spec = describe_plane(r, pk, M, K);
  if (spec.per_tensor) {
    p.scale.type = spec.scale_type;
    p.scale.layout = ScaleLayout::kCompact;
    p.scale.rows = p.scale.cols = 1;
    p.scale.bytes.resize(4);
    p.scale.set_f32(0, 0, m.scale_inv);
  } else {
    const ScaleShape ps = spec.padded;
    const size_t e = spec.scale_elem_bytes;
    QTC_CHECK(scale->row_bytes == ps.cols * static_cast<int64_t>(e) && scale->rows == spec.compact.rows &&
                  static_cast<int64_t>(scale->bytes.size()) == scale->rows * scale->row_bytes,
              "FSDP2 post-all-gather: ", scale->name, " is ", scale->rows, " x ", scale->row_bytes, " bytes, the full tensor [", M,
              ", ", K, "] needs ", spec.compact.rows, " x ", ps.cols * static_cast<int64_t>(e));
    ScaleMatrix padded;
    padded.type = spec.scale_type;
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
  const GatherBuffer* rs = kind_info(r).per_tensor_scale ? nullptr : &find_buffer(gathered, "rowwise_scale_inv");
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

}  // namespace qtc::ref
