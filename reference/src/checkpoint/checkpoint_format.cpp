/// \file checkpoint_format.cpp
/// \brief The checkpoint format: names, JSON of index entries, and the parser of one tensor of a shard file,
///        which checks every size, offset, shape and checksum it relies on.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"
#include "qtc/sharding.hpp"
#include "checkpoint_internal.hpp"
#include "qtc/untrusted.hpp"

namespace qtc::ref::ckpt_detail {

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

uint64_t parse_hex64(const std::string& s, const std::string& where) {
  QTC_CHECK(s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos, where, ": checksum ", printable_name(s),
            " is not 16 lowercase hex digits");
  return std::stoull(s, nullptr, 16);
}

std::string shard_file_name(uint64_t gen, int rank, int world) {
  return "shard-g" + std::to_string(gen) + "-r" + std::to_string(rank) + "-of-" + std::to_string(world) + ".qtc";
}

const char* plane_key(PlaneKind p) { return p == PlaneKind::kRowwise ? "rowwise" : "columnwise"; }

const char* scale_type_name(ScaleType t) {
  switch (t) {
    case ScaleType::kE4M3: return "e4m3";
    case ScaleType::kE8M0: return "e8m0";
    case ScaleType::kF32: return "f32";
  }
  return "?";
}
/// The checkpoint schema's `scale_layout` value: layout.hpp's name, except the two names the schema had before the
/// layout value (kept so that checkpoints written then still read): "padded", "swizzled".
std::string checkpoint_layout_name(ScaleLayout l) {
  if (l == ScaleLayout::kPadded) return "padded";
  if (l == ScaleLayout::kSwizzled) return "swizzled";
  return std::string(::qtc::layout_name(l));
}

DType dtype_from_name(const std::string& s, const std::string& where) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kU8})
    if (dtype_name(t) == s) return t;
  QTC_FAIL(where, ": unknown input dtype ", printable_name(s));
}

json plane_json(const Plane& p, PlaneKind k) {
  return json{{"kind", plane_key(k)},
              {"data_rows", p.data_rows},
              {"data_cols", p.data_cols},
              {"scale_type", scale_type_name(p.scale.type)},
              {"scale_layout", checkpoint_layout_name(p.scale.layout)},
              {"scale_rows", p.scale.rows},
              {"scale_cols", p.scale.cols},
              {"amax_count", p.amax.size()}};
}

json entry_json(const ShardEntry& e) {
  return json{{"name", e.name},         {"global_rows", e.global_rows}, {"row_offset", e.row_offset},
              {"rows", e.rows},         {"cols", e.cols},               {"xxh3", hex64(e.checksum)}};
}

json info_json(const ShardFileInfo& f) {
  json t = json::array();
  for (const ShardEntry& e : f.tensors) t.push_back(entry_json(e));
  return json{{"rank", f.rank}, {"file", f.file}, {"size", f.size}, {"xxh3", hex64(f.checksum)}, {"tensors", t}};
}

ShardEntry entry_from_json(const json& j, const std::string& where) {
  ShardEntry e;
  e.name = get<std::string>(j, "name", where);
  e.global_rows = get<int64_t>(j, "global_rows", where);
  e.row_offset = get<int64_t>(j, "row_offset", where);
  e.rows = get<int64_t>(j, "rows", where);
  e.cols = get<int64_t>(j, "cols", where);
  e.checksum = parse_hex64(get<std::string>(j, "xxh3", where), where);
  QTC_CHECK(e.global_rows <= kMaxDim && e.cols <= kMaxDim && e.row_offset <= e.global_rows && e.rows <= e.global_rows - e.row_offset,
            where, ": tensor ", printable_name(e.name), " rows [", e.row_offset, ", ", e.row_offset + e.rows, ") do not fit in ", e.global_rows);
  return e;
}

ShardFileInfo info_from_json(const json& j, const std::string& where) {
  ShardFileInfo f;
  f.rank = get<int>(j, "rank", where);
  f.file = get<std::string>(j, "file", where);
  QTC_CHECK(!f.file.empty() && f.file.find('/') == std::string::npos && f.file[0] != '.', where, ": file name ", printable_name(f.file),
            " must be a plain name inside the checkpoint directory");
  f.size = get<uint64_t>(j, "size", where);
  f.checksum = parse_hex64(get<std::string>(j, "xxh3", where), where);
  QTC_CHECK(j.contains("tensors") && j.at("tensors").is_array(), where, ": 'tensors' must be an array");
  for (const json& t : j.at("tensors")) f.tensors.push_back(entry_from_json(t, where));
  return f;
}

/// Parses and validates one tensor of a shard file; `payload` is the file's payload region.
TensorShard parse_tensor(const json& j, const uint8_t* payload, uint64_t payload_size, const std::string& where0) {
  TensorShard s;
  s.name = get<std::string>(j, "name", where0);
  const std::string where = where0 + ", tensor " + printable_name(s.name);
  s.global_rows = get<int64_t>(j, "global_rows", where);
  s.row_offset = get<int64_t>(j, "row_offset", where);
  QuantizedTensor& q = s.tensor;
  q.rows = get<int64_t>(j, "rows", where);
  q.cols = get<int64_t>(j, "cols", where);
  QTC_CHECK(q.rows <= kMaxDim && q.cols <= kMaxDim && s.global_rows <= kMaxDim, where, ": shape [", q.rows, ", ", q.cols, "] is too large");
  QTC_CHECK(s.row_offset <= s.global_rows && q.rows <= s.global_rows - s.row_offset, where, ": rows [", s.row_offset, ", ",
            s.row_offset + q.rows, ") do not fit in ", s.global_rows);
  q.input_dtype = dtype_from_name(get<std::string>(j, "input_dtype", where), where);
  QTC_CHECK(j.contains("recipe") && j.at("recipe").is_object(), where, ": 'recipe' must be an object of strings");
  std::map<std::string, std::string> md;
  for (auto it = j.at("recipe").begin(); it != j.at("recipe").end(); ++it) {
    QTC_CHECK(it.value().is_string(), where, ": recipe key ", printable_name(it.key()), " must be a string");
    md[it.key()] = it.value().get<std::string>();
  }
  try {
    q.recipe = Recipe::from_metadata(md);
    q.recipe.validate();
  } catch (const Error& e) {
    QTC_FAIL(where, ": bad recipe: ", e.what());
  }
  const uint32_t si_bits = get<uint32_t>(j, "scale_inv_bits", where);
  std::memcpy(&q.scale_inv, &si_bits, 4);
  const uint64_t off = get<uint64_t>(j, "offset", where), len = get<uint64_t>(j, "length", where);
  QTC_CHECK(off <= payload_size && len <= payload_size - off, where, ": bytes [", off, ", ", off + len, ") lie outside the payload of ",
            payload_size, " bytes (truncated or corrupt file)");
  const uint64_t want = parse_hex64(get<std::string>(j, "xxh3", where), where);
  const uint64_t got = XXH3_64bits(payload + off, len);
  QTC_CHECK(got == want, where, ": checksum mismatch (stored ", hex64(want), ", computed ", hex64(got), "): the tensor's bytes are corrupt");

  QTC_CHECK(j.contains("planes") && j.at("planes").is_array() && j.at("planes").size() <= 2, where, ": 'planes' must be an array of at most 2");
  uint64_t pos = 0;
  const Recipe& r = q.recipe;
  for (const json& pj : j.at("planes")) {
    const std::string kind = get<std::string>(pj, "kind", where);
    QTC_CHECK(kind == "rowwise" || kind == "columnwise", where, ": unknown plane kind ", printable_name(kind));
    const PlaneKind pk = kind == "rowwise" ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
    auto& slot = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
    QTC_CHECK(!slot.has_value(), where, ": plane ", kind, " appears twice");
    const std::string pw = where + ", " + kind + " plane";
    Plane p;
    p.data_rows = get<int64_t>(pj, "data_rows", pw);
    p.data_cols = get<int64_t>(pj, "data_cols", pw);
    const PlaneSpec spec = describe_plane(r, pk, q.rows, q.cols);  // the recipe policy's geometry
    const int64_t er = spec.data_rows, ec = spec.data_cols;
    QTC_CHECK(p.data_rows == er && p.data_cols == ec, pw, ": data is ", p.data_rows, " x ", p.data_cols, ", a ", r.name(), " tensor [",
              q.rows, ", ", q.cols, "] has ", er, " x ", ec);
    const std::string st = get<std::string>(pj, "scale_type", pw), sl = get<std::string>(pj, "scale_layout", pw);
    p.scale.type = spec.scale_type;
    QTC_CHECK(st == scale_type_name(p.scale.type), pw, ": scale type ", printable_name(st), ", ", r.name(), " has ", scale_type_name(p.scale.type));
    const std::optional<Layout> named = sl == "padded" ? Layout::kPadded : sl == "swizzled" ? Layout::kSwizzled : layout_from_name(sl);
    if (!named || checkpoint_layout_name(*named) != sl) QTC_FAIL(pw, ": unknown scale layout ", printable_name(sl));
    p.scale.layout = *named;
    p.scale.rows = get<int64_t>(pj, "scale_rows", pw);
    p.scale.cols = get<int64_t>(pj, "scale_cols", pw);
    int64_t xr = 1, xc = 1;
    if (!spec.per_tensor) {
      const ScaleShape ss = spec.scale_shape(p.scale.layout);
      xr = ss.rows;
      xc = ss.cols;
    } else {
      QTC_CHECK(p.scale.layout == ScaleLayout::kCompact, pw, ": FP8 per-tensor scales have only the compact layout");
    }
    QTC_CHECK(p.scale.rows == xr && p.scale.cols == xc, pw, ": scales are ", p.scale.rows, " x ", p.scale.cols, " in the ", sl,
              " layout, expected ", xr, " x ", xc);
    const int64_t na = get<int64_t>(pj, "amax_count", pw);
    QTC_CHECK(na == spec.amax_count, pw, ": ", na, " amax values, expected ", spec.amax_count);
    // Every size derived from the header is computed without wrapping and compared with the bytes present.
    const int64_t nd = checked_size({p.data_rows, p.data_cols}, pw + ": data");
    const int64_t ns = checked_size({p.scale.rows, p.scale.cols, static_cast<int64_t>(p.scale.elem_size())}, pw + ": scales");
    const int64_t nb = checked_size({na, 4}, pw + ": amax");
    const int64_t plane_bytes = checked_add(checked_add(nd, ns, pw), nb, pw);
    QTC_CHECK(static_cast<uint64_t>(plane_bytes) <= len - pos, pw, ": the plane's ", plane_bytes, " bytes (data ", nd, ", scales ", ns,
              ", amax ", nb, ") overrun the tensor's ", len - pos, " remaining bytes");
    const uint8_t* b = payload + off + pos;
    p.data.assign(b, b + nd);
    p.scale.bytes.assign(b + nd, b + nd + ns);
    p.amax.resize(static_cast<size_t>(na));
    if (na) std::memcpy(p.amax.data(), b + nd + ns, static_cast<size_t>(nb));
    pos += static_cast<uint64_t>(plane_bytes);
    slot = std::move(p);
  }
  QTC_CHECK(pos == len, where, ": planes hold ", pos, " bytes, the header says ", len);
  QTC_CHECK(q.rowwise || q.columnwise, where, ": no plane");
  return s;
}

uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

bool plane_bits_equal(const std::optional<Plane>& a, const std::optional<Plane>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->data_rows == b->data_rows && a->data_cols == b->data_cols && a->data == b->data && a->scale == b->scale &&
         a->amax.size() == b->amax.size() &&
         (a->amax.empty() || std::memcmp(a->amax.data(), b->amax.data(), a->amax.size() * 4) == 0);
}

void check_consistent(int world, std::span<const ShardFileInfo> files, const std::string& where) {
  QTC_CHECK(world >= 1 && static_cast<int>(files.size()) == world, where, ": ", files.size(), " shard files for world size ", world);
  std::map<std::string, std::vector<const ShardEntry*>> by_name;
  for (int r = 0; r < world; ++r) {
    QTC_CHECK(files[static_cast<size_t>(r)].rank == r, where, ": file ", r, " belongs to rank ", files[static_cast<size_t>(r)].rank);
    for (const ShardEntry& e : files[static_cast<size_t>(r)].tensors) by_name[e.name].push_back(&e);
  }
  for (auto& [name, es] : by_name) {
    std::sort(es.begin(), es.end(), [](const ShardEntry* a, const ShardEntry* b) { return a->row_offset < b->row_offset; });
    int64_t next = 0;
    for (const ShardEntry* e : es) {
      QTC_CHECK(e->global_rows == es[0]->global_rows && e->cols == es[0]->cols, where, ": tensor ", printable_name(name),
                " has shards of different global shapes");
      QTC_CHECK(e->row_offset == next, where, ": tensor ", printable_name(name), " rows ", next, "..", e->row_offset,
                e->row_offset > next ? " are in no shard" : " are in two shards");
      next += e->rows;
    }
    QTC_CHECK(next == es[0]->global_rows, where, ": tensor ", printable_name(name), " shards cover ", next, " of ", es[0]->global_rows, " rows");
  }
}

}  // namespace qtc::ref::ckpt_detail
