/// \file checkpoint.cpp
/// \brief Checkpoints of quantized tensors: per-rank shard files plus an index, atomic writes with xxHash3
///        checksums, resharding on load, and loading that checks every byte it relies on.
#include "qtc/checkpoint.hpp"

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

namespace qtc::ref {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kMagic[8] = {'Q', 'T', 'C', 'S', 'H', 'A', 'R', 'D'};
constexpr uint32_t kVersion = 1;
constexpr size_t kPreamble = 32;  // magic 8, version 4, flags 4, header length 8, header xxh3 8
constexpr const char* kIndexName = "index.json";
constexpr int64_t kMaxDim = int64_t{1} << 40;

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

uint64_t parse_hex64(const std::string& s, const std::string& where) {
  QTC_CHECK(s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos, where, ": checksum '", s,
            "' is not 16 lowercase hex digits");
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
const char* layout_name(ScaleLayout l) {
  switch (l) {
    case ScaleLayout::kCompact: return "compact";
    case ScaleLayout::kPadded: return "padded";
    case ScaleLayout::kSwizzled: return "swizzled";
  }
  return "?";
}

ScaleType expected_scale_type(const Recipe& r) {
  switch (r.kind) {
    case RecipeKind::kNVFP4: return ScaleType::kE4M3;
    case RecipeKind::kMXFP8: return ScaleType::kE8M0;
    default: return ScaleType::kF32;
  }
}

DType dtype_from_name(const std::string& s, const std::string& where) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kU8})
    if (dtype_name(t) == s) return t;
  QTC_FAIL(where, ": unknown input dtype '", s, "'");
}

// ---- Writing -----------------------------------------------------------------------------------

void sys_check(bool ok, const std::string& what, const std::string& path) {
  if (!ok) QTC_FAIL("checkpoint: ", what, " ", path, " failed: ", std::strerror(errno));
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  sys_check(fd >= 0, "open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  sys_check(rc == 0, "fsync directory", dir);
}

struct StepCounter {
  const SaveOptions& opt;
  int* step;
  void operator()(const std::string& what) {
    if (opt.hook) opt.hook(*step, what);
    ++*step;
  }
};

/// Writes pieces to dir/name atomically: temp file, fsync, rename, fsync of the directory. Returns
/// {size, xxh3 of the content}.
std::pair<uint64_t, uint64_t> write_atomic(const std::string& dir, const std::string& name,
                                           const std::vector<std::pair<const uint8_t*, size_t>>& pieces, const SaveOptions& opt,
                                           StepCounter& step) {
  const std::string path = (fs::path(dir) / name).string();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  sys_check(fd >= 0, "create", tmp);
  step("created " + tmp);
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  uint64_t size = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint8_t* p = pieces[i].first;
    size_t n = pieces[i].second;
    XXH3_64bits_update(st, p, n);
    size += n;
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ::close(fd);
        XXH3_freeState(st);
        sys_check(false, "write", tmp);
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    step("wrote piece " + std::to_string(i) + " of " + tmp);
  }
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  if (opt.fsync) {
    const int rc = ::fsync(fd);
    if (rc != 0) ::close(fd);
    sys_check(rc == 0, "fsync", tmp);
    step("fsynced " + tmp);
  }
  sys_check(::close(fd) == 0, "close", tmp);
  sys_check(::rename(tmp.c_str(), path.c_str()) == 0, "rename to " + path + " of", tmp);
  step("renamed " + tmp + " -> " + path);
  if (opt.fsync) {
    fsync_dir(dir);
    step("fsynced directory " + dir);
  }
  return {size, h};
}

json plane_json(const Plane& p, PlaneKind k) {
  return json{{"kind", plane_key(k)},
              {"data_rows", p.data_rows},
              {"data_cols", p.data_cols},
              {"scale_type", scale_type_name(p.scale.type)},
              {"scale_layout", layout_name(p.scale.layout)},
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

// ---- Reading: typed access that turns every surprise into a qtc::Error naming the file --------------

template <typename T>
T get(const json& j, const char* key, const std::string& where) {
  QTC_CHECK(j.is_object() && j.contains(key), where, ": missing field '", key, "'");
  const json& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    QTC_CHECK(v.is_string(), where, ": field '", key, "' must be a string");
    return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    QTC_CHECK(v.is_boolean(), where, ": field '", key, "' must be a boolean");
    return v.get<bool>();
  } else {
    QTC_CHECK(v.is_number_integer(), where, ": field '", key, "' must be an integer");
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      QTC_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<T>::max()), where, ": field '", key, "' is out of range");
      return static_cast<T>(u);
    }
    const int64_t s = v.get<int64_t>();
    QTC_CHECK(s >= 0 && static_cast<uint64_t>(s) <= static_cast<uint64_t>(std::numeric_limits<T>::max()), where, ": field '", key,
              "' is out of range (", s, ")");
    return static_cast<T>(s);
  }
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
            where, ": tensor '", e.name, "' rows [", e.row_offset, ", ", e.row_offset + e.rows, ") do not fit in ", e.global_rows);
  return e;
}

ShardFileInfo info_from_json(const json& j, const std::string& where) {
  ShardFileInfo f;
  f.rank = get<int>(j, "rank", where);
  f.file = get<std::string>(j, "file", where);
  QTC_CHECK(!f.file.empty() && f.file.find('/') == std::string::npos && f.file[0] != '.', where, ": file name '", f.file,
            "' must be a plain name inside the checkpoint directory");
  f.size = get<uint64_t>(j, "size", where);
  f.checksum = parse_hex64(get<std::string>(j, "xxh3", where), where);
  QTC_CHECK(j.contains("tensors") && j.at("tensors").is_array(), where, ": 'tensors' must be an array");
  for (const json& t : j.at("tensors")) f.tensors.push_back(entry_from_json(t, where));
  return f;
}

/// Expected (data_rows, data_cols) of a plane.
std::pair<int64_t, int64_t> expected_data_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  if (p == PlaneKind::kRowwise) return {M, r.kind == RecipeKind::kNVFP4 ? K / 2 : K};
  switch (r.kind) {
    case RecipeKind::kNVFP4: return {K, M / 2};
    case RecipeKind::kMXFP8: return {M, K};
    default: return {K, M};
  }
}

int64_t expected_amax_count(const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  if (r.kind == RecipeKind::kNVFP4) return r.row_scaled ? (p == PlaneKind::kRowwise ? M : K) : 1;
  if (r.kind == RecipeKind::kFP8Tensor) return 1;
  return 0;
}

/// Parses and validates one tensor of a shard file; `payload` is the file's payload region.
TensorShard parse_tensor(const json& j, const uint8_t* payload, uint64_t payload_size, const std::string& where0) {
  TensorShard s;
  s.name = get<std::string>(j, "name", where0);
  const std::string where = where0 + ", tensor '" + s.name + "'";
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
    QTC_CHECK(it.value().is_string(), where, ": recipe key '", it.key(), "' must be a string");
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
    QTC_CHECK(kind == "rowwise" || kind == "columnwise", where, ": unknown plane kind '", kind, "'");
    const PlaneKind pk = kind == "rowwise" ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
    auto& slot = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
    QTC_CHECK(!slot.has_value(), where, ": plane ", kind, " appears twice");
    const std::string pw = where + ", " + kind + " plane";
    Plane p;
    p.data_rows = get<int64_t>(pj, "data_rows", pw);
    p.data_cols = get<int64_t>(pj, "data_cols", pw);
    const auto [er, ec] = expected_data_shape(r, pk, q.rows, q.cols);
    QTC_CHECK(p.data_rows == er && p.data_cols == ec, pw, ": data is ", p.data_rows, " x ", p.data_cols, ", a ", r.name(), " tensor [",
              q.rows, ", ", q.cols, "] has ", er, " x ", ec);
    const std::string st = get<std::string>(pj, "scale_type", pw), sl = get<std::string>(pj, "scale_layout", pw);
    p.scale.type = expected_scale_type(r);
    QTC_CHECK(st == scale_type_name(p.scale.type), pw, ": scale type '", st, "', ", r.name(), " has ", scale_type_name(p.scale.type));
    if (sl == "compact") p.scale.layout = ScaleLayout::kCompact;
    else if (sl == "padded") p.scale.layout = ScaleLayout::kPadded;
    else if (sl == "swizzled") p.scale.layout = ScaleLayout::kSwizzled;
    else QTC_FAIL(pw, ": unknown scale layout '", sl, "'");
    p.scale.rows = get<int64_t>(pj, "scale_rows", pw);
    p.scale.cols = get<int64_t>(pj, "scale_cols", pw);
    int64_t xr = 1, xc = 1;
    if (r.kind != RecipeKind::kFP8Tensor) {
      const ScaleShape ss = p.scale.layout == ScaleLayout::kCompact ? compact_scale_shape(r, pk, q.rows, q.cols)
                                                                    : padded_scale_shape(r, pk, q.rows, q.cols);
      xr = ss.rows;
      xc = ss.cols;
    } else {
      QTC_CHECK(p.scale.layout == ScaleLayout::kCompact, pw, ": FP8 per-tensor scales have only the compact layout");
    }
    QTC_CHECK(p.scale.rows == xr && p.scale.cols == xc, pw, ": scales are ", p.scale.rows, " x ", p.scale.cols, " in the ", sl,
              " layout, expected ", xr, " x ", xc);
    const int64_t na = get<int64_t>(pj, "amax_count", pw);
    QTC_CHECK(na == expected_amax_count(r, pk, q.rows, q.cols), pw, ": ", na, " amax values, expected ",
              expected_amax_count(r, pk, q.rows, q.cols));
    const uint64_t nd = static_cast<uint64_t>(p.data_rows) * static_cast<uint64_t>(p.data_cols);
    const uint64_t ns = static_cast<uint64_t>(p.scale.rows) * static_cast<uint64_t>(p.scale.cols) * p.scale.elem_size();
    const uint64_t nb = static_cast<uint64_t>(na) * 4;
    QTC_CHECK(nd <= len && ns <= len && nb <= len && pos + nd + ns + nb <= len, pw, ": the plane's ", nd + ns + nb,
              " bytes overrun the tensor's ", len, " bytes");
    const uint8_t* b = payload + off + pos;
    p.data.assign(b, b + nd);
    p.scale.bytes.assign(b + nd, b + nd + ns);
    p.amax.resize(static_cast<size_t>(na));
    if (na) std::memcpy(p.amax.data(), b + nd + ns, nb);
    pos += nd + ns + nb;
    slot = std::move(p);
  }
  QTC_CHECK(pos == len, where, ": planes hold ", pos, " bytes, the header says ", len);
  QTC_CHECK(q.rowwise || q.columnwise, where, ": no plane");
  return s;
}

std::vector<uint8_t> read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  QTC_CHECK(fs::exists(path, ec), "checkpoint: ", what, " ", path, " is missing");
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  QTC_CHECK(f.good(), "checkpoint: cannot open ", what, " ", path);
  const std::streamoff n = f.tellg();
  QTC_CHECK(n >= 0, "checkpoint: cannot size ", path);
  std::vector<uint8_t> b(static_cast<size_t>(n));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(b.data()), n);
  QTC_CHECK(f.gcount() == n, "checkpoint: error reading ", path, " (", f.gcount(), " of ", n, " bytes)");
  return b;
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

}  // namespace

// ---- Saving -------------------------------------------------------------------------------------

uint64_t next_generation(const std::string& dir) {
  uint64_t g = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 1;
  try {
    g = read_index(dir).generation;
  } catch (const Error&) {
    // An unreadable index does not stop a new save; file names below keep generations apart.
  }
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string n = de.path().filename().string();
    unsigned long long v = 0;
    if (std::sscanf(n.c_str(), "shard-g%llu-", &v) == 1) g = std::max<uint64_t>(g, v);
  }
  return g + 1;
}

ShardFileInfo write_shard_file(const std::string& dir, uint64_t generation, int rank, int world,
                               std::span<const TensorShard> shards, const SaveOptions& opt, int* step) {
  QTC_CHECK(world >= 1 && rank >= 0 && rank < world, "write_shard_file: rank ", rank, " outside world of ", world);
  std::error_code ec;
  fs::create_directories(dir, ec);
  QTC_CHECK(fs::is_directory(dir), "checkpoint: cannot create directory ", dir);
  int local_step = 0;
  StepCounter sc{opt, step ? step : &local_step};

  ShardFileInfo info;
  info.rank = rank;
  info.file = shard_file_name(generation, rank, world);
  std::vector<std::pair<const uint8_t*, size_t>> body;
  json tensors = json::array();
  uint64_t off = 0;
  std::set<std::string> names;
  for (const TensorShard& s : shards) {
    const QuantizedTensor& q = s.tensor;
    QTC_CHECK(names.insert(s.name).second, "write_shard_file: tensor '", s.name, "' appears twice");
    QTC_CHECK(s.row_offset >= 0 && q.rows >= 0 && s.row_offset + q.rows <= s.global_rows, "write_shard_file: tensor '", s.name,
              "' rows [", s.row_offset, ", ", s.row_offset + q.rows, ") exceed ", s.global_rows);
    // The tensor's bytes are written straight from its buffers (no staging copy), hashed as they are listed.
    json planes = json::array();
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    uint64_t length = 0;
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      const auto& p = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
      if (!p) continue;
      QTC_CHECK(static_cast<int64_t>(p->data.size()) == p->data_rows * p->data_cols &&
                    p->scale.bytes.size() == static_cast<size_t>(p->scale.rows * p->scale.cols) * p->scale.elem_size(),
                "write_shard_file: tensor '", s.name, "' ", plane_key(pk), " plane's buffers disagree with its shape");
      for (auto piece : {std::pair<const uint8_t*, size_t>{p->data.data(), p->data.size()},
                         std::pair<const uint8_t*, size_t>{p->scale.bytes.data(), p->scale.bytes.size()},
                         std::pair<const uint8_t*, size_t>{reinterpret_cast<const uint8_t*>(p->amax.data()), p->amax.size() * 4}}) {
        XXH3_64bits_update(st, piece.first, piece.second);
        length += piece.second;
        body.push_back(piece);
      }
      planes.push_back(plane_json(*p, pk));
    }
    ShardEntry e{s.name, s.global_rows, s.row_offset, q.rows, q.cols, XXH3_64bits_digest(st)};
    XXH3_freeState(st);
    json md = json::object();
    for (const auto& [k, v] : q.recipe.to_metadata()) md[k] = v;
    uint32_t si_bits;
    std::memcpy(&si_bits, &q.scale_inv, 4);
    tensors.push_back(json{{"name", s.name},
                           {"global_rows", s.global_rows},
                           {"row_offset", s.row_offset},
                           {"rows", q.rows},
                           {"cols", q.cols},
                           {"input_dtype", std::string(dtype_name(q.input_dtype))},
                           {"recipe", md},
                           {"scale_inv_bits", si_bits},
                           {"planes", planes},
                           {"offset", off},
                           {"length", length},
                           {"xxh3", hex64(e.checksum)}});
    off += length;
    info.tensors.push_back(e);
  }
  const std::string header =
      json{{"format", "qtc-shard"}, {"generation", generation}, {"rank", rank}, {"world", world}, {"tensors", tensors}}.dump();
  std::vector<uint8_t> pre(kPreamble, 0);
  std::memcpy(pre.data(), kMagic, 8);
  std::memcpy(pre.data() + 8, &kVersion, 4);
  const uint64_t hl = header.size(), hh = XXH3_64bits(header.data(), header.size());
  std::memcpy(pre.data() + 16, &hl, 8);
  std::memcpy(pre.data() + 24, &hh, 8);
  std::vector<std::pair<const uint8_t*, size_t>> pieces;
  pieces.emplace_back(pre.data(), pre.size());
  pieces.emplace_back(reinterpret_cast<const uint8_t*>(header.data()), header.size());
  pieces.insert(pieces.end(), body.begin(), body.end());
  const auto [size, h] = write_atomic(dir, info.file, pieces, opt, sc);
  info.size = size;
  info.checksum = h;
  return info;
}

namespace {

/// Checks that the files form one consistent checkpoint: ranks 0..world-1 once each, and every tensor's
/// shards cover its rows exactly once with one column count.
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
      QTC_CHECK(e->global_rows == es[0]->global_rows && e->cols == es[0]->cols, where, ": tensor '", name,
                "' has shards of different global shapes");
      QTC_CHECK(e->row_offset == next, where, ": tensor '", name, "' rows ", next, "..", e->row_offset,
                e->row_offset > next ? " are in no shard" : " are in two shards");
      next += e->rows;
    }
    QTC_CHECK(next == es[0]->global_rows, where, ": tensor '", name, "' shards cover ", next, " of ", es[0]->global_rows, " rows");
  }
}

}  // namespace

void commit_checkpoint(const std::string& dir, uint64_t generation, int world, std::span<const ShardFileInfo> files,
                       const SaveOptions& opt, int* step) {
  check_consistent(world, files, "commit_checkpoint");
  int local_step = 0;
  StepCounter sc{opt, step ? step : &local_step};
  json fl = json::array();
  for (const ShardFileInfo& f : files) fl.push_back(info_json(f));
  const json body{{"format", "qtc-checkpoint"}, {"version", kVersion}, {"generation", generation}, {"world", world}, {"files", fl}};
  const std::string bs = body.dump();
  const std::string text = json{{"body", body}, {"xxh3", hex64(XXH3_64bits(bs.data(), bs.size()))}}.dump(1) + "\n";
  write_atomic(dir, kIndexName, {{reinterpret_cast<const uint8_t*>(text.data()), text.size()}}, opt, sc);
  // Committed. Files of other generations and temporaries of interrupted saves are garbage now.
  std::set<std::string> keep{kIndexName};
  for (const ShardFileInfo& f : files) keep.insert(f.file);
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string n = de.path().filename().string();
    if (keep.count(n)) continue;
    if (n.rfind("shard-g", 0) == 0 || n.find(".tmp.") != std::string::npos) doomed.push_back(de.path());
  }
  std::sort(doomed.begin(), doomed.end());
  for (const fs::path& p : doomed) {
    fs::remove(p, ec);
    sc("removed " + p.string());
  }
}

void save_checkpoint(const std::string& dir, std::span<const std::vector<TensorShard>> per_rank, const SaveOptions& opt) {
  const int world = static_cast<int>(per_rank.size());
  QTC_CHECK(world >= 1, "save_checkpoint: no ranks");
  std::error_code ec;
  fs::create_directories(dir, ec);
  const uint64_t gen = next_generation(dir);
  int step = 0;
  std::vector<ShardFileInfo> infos;
  for (int r = 0; r < world; ++r) infos.push_back(write_shard_file(dir, gen, r, world, per_rank[static_cast<size_t>(r)], opt, &step));
  commit_checkpoint(dir, gen, world, infos, opt, &step);
}

std::future<void> save_checkpoint_async(const std::string& dir, std::span<const std::vector<TensorShard>> per_rank, SaveOptions opt) {
  // The snapshot: deep copies of every buffer, taken before this function returns.
  std::vector<std::vector<TensorShard>> snapshot(per_rank.begin(), per_rank.end());
  return std::async(std::launch::async, [dir, snap = std::move(snapshot), opt = std::move(opt)]() {
    save_checkpoint(dir, snap, opt);
  });
}

std::string shard_info_to_json(const ShardFileInfo& info) { return info_json(info).dump(); }

ShardFileInfo shard_info_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    QTC_FAIL("shard_info_from_json: malformed JSON: ", e.what());
  }
  return info_from_json(j, "shard info");
}

// ---- Loading ------------------------------------------------------------------------------------

CheckpointIndex read_index(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIndexName).string();
  const std::vector<uint8_t> b = read_file(path, "index");
  json j;
  try {
    j = json::parse(b.begin(), b.end());
  } catch (const json::exception& e) {
    QTC_FAIL("checkpoint index ", path, " is not valid JSON (truncated or corrupt): ", e.what());
  }
  QTC_CHECK(j.is_object() && j.contains("body") && j.contains("xxh3"), "checkpoint index ", path, ": missing 'body' or 'xxh3'");
  const std::string bs = j.at("body").dump();
  const uint64_t want = parse_hex64(get<std::string>(j, "xxh3", path), path);
  QTC_CHECK(XXH3_64bits(bs.data(), bs.size()) == want, "checkpoint index ", path, ": checksum mismatch (the index is corrupt)");
  const json& body = j.at("body");
  QTC_CHECK(body.is_object() && body.value("format", "") == "qtc-checkpoint", "checkpoint index ", path,
            ": not a qtc checkpoint index (bad format field)");
  QTC_CHECK(get<uint32_t>(body, "version", path) == kVersion, "checkpoint index ", path, ": unsupported version");
  CheckpointIndex idx;
  idx.generation = get<uint64_t>(body, "generation", path);
  idx.world = get<int>(body, "world", path);
  QTC_CHECK(body.contains("files") && body.at("files").is_array(), path, ": 'files' must be an array");
  for (const json& f : body.at("files")) idx.files.push_back(info_from_json(f, path));
  check_consistent(idx.world, idx.files, "checkpoint index " + path);
  return idx;
}

std::vector<TensorShard> read_shard_file(const std::string& dir, const ShardFileInfo& expected, const CheckpointIndex& index) {
  const std::string path = (fs::path(dir) / expected.file).string();
  std::error_code ec;
  QTC_CHECK(fs::exists(path, ec), "checkpoint: shard file ", path, " of rank ", expected.rank,
            " is missing (the index names it; the checkpoint is incomplete)");
  const std::vector<uint8_t> b = read_file(path, "shard file");
  QTC_CHECK(b.size() >= kPreamble, "checkpoint: shard file ", path, " is truncated (", b.size(), " bytes, shorter than its preamble)");
  QTC_CHECK(std::memcmp(b.data(), kMagic, 8) == 0, "checkpoint: shard file ", path, " has bad magic (not a qtc shard file)");
  QTC_CHECK(read_u32(b.data() + 8) == kVersion, "checkpoint: shard file ", path, " has unsupported version ", read_u32(b.data() + 8));
  const uint64_t hl = read_u64(b.data() + 16), hh = read_u64(b.data() + 24);
  QTC_CHECK(hl <= b.size() - kPreamble, "checkpoint: shard file ", path, " is truncated (header of ", hl, " bytes, file has ",
            b.size() - kPreamble, " after the preamble)");
  QTC_CHECK(XXH3_64bits(b.data() + kPreamble, hl) == hh, "checkpoint: shard file ", path, ": header checksum mismatch (corrupt header)");
  json h;
  try {
    h = json::parse(b.begin() + kPreamble, b.begin() + static_cast<ptrdiff_t>(kPreamble + hl));
  } catch (const json::exception& e) {
    QTC_FAIL("checkpoint: shard file ", path, ": malformed header: ", e.what());
  }
  QTC_CHECK(h.is_object() && h.value("format", "") == "qtc-shard", "checkpoint: shard file ", path, ": bad format field");
  const uint64_t gen = get<uint64_t>(h, "generation", path);
  const int rank = get<int>(h, "rank", path), world = get<int>(h, "world", path);
  QTC_CHECK(gen == index.generation && rank == expected.rank && world == index.world, "checkpoint: shard file ", path, " is generation ",
            gen, " rank ", rank, " of ", world, ", the index expects generation ", index.generation, " rank ", expected.rank, " of ",
            index.world);
  const uint8_t* payload = b.data() + kPreamble + hl;
  const uint64_t psize = b.size() - kPreamble - hl;
  QTC_CHECK(h.contains("tensors") && h.at("tensors").is_array(), path, ": 'tensors' must be an array");
  std::vector<TensorShard> out;
  uint64_t used = 0;
  for (const json& t : h.at("tensors")) {
    out.push_back(parse_tensor(t, payload, psize, "checkpoint: shard file " + path));
    used += get<uint64_t>(t, "length", path);
  }
  QTC_CHECK(used == psize, "checkpoint: shard file ", path, " has ", psize, " payload bytes, its tensors account for ", used,
            used > psize ? " (truncated)" : " (trailing bytes)");
  QTC_CHECK(b.size() == expected.size, "checkpoint: shard file ", path, " has ", b.size(), " bytes, the index says ", expected.size);
  QTC_CHECK(XXH3_64bits(b.data(), b.size()) == expected.checksum, "checkpoint: shard file ", path,
            ": file checksum disagrees with the index");
  QTC_CHECK(out.size() == expected.tensors.size(), "checkpoint: shard file ", path, " holds ", out.size(), " tensors, the index says ",
            expected.tensors.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const ShardEntry& e = expected.tensors[i];
    const TensorShard& s = out[i];
    QTC_CHECK(s.name == e.name && s.global_rows == e.global_rows && s.row_offset == e.row_offset && s.tensor.rows == e.rows &&
                  s.tensor.cols == e.cols,
              "checkpoint: shard file ", path, " tensor ", i, " is '", s.name, "' rows [", s.row_offset, ", ", s.row_offset + s.tensor.rows,
              ") of ", s.global_rows, " x ", s.tensor.cols, "; the index says '", e.name, "' rows [", e.row_offset, ", ",
              e.row_offset + e.rows, ") of ", e.global_rows, " x ", e.cols);
    const uint64_t cs = get<uint64_t>(h.at("tensors").at(i), "length", path);
    (void)cs;
    QTC_CHECK(parse_hex64(get<std::string>(h.at("tensors").at(i), "xxh3", path), path) == e.checksum, "checkpoint: shard file ", path,
              " tensor '", e.name, "': checksum disagrees with the index");
  }
  return out;
}

std::vector<TensorShard> load_checkpoint(const std::string& dir, int rank, int world) {
  QTC_CHECK(world >= 1 && rank >= 0 && rank < world, "load_checkpoint: rank ", rank, " outside world of ", world);
  const CheckpointIndex idx = read_index(dir);
  std::map<int, std::vector<TensorShard>> cache;  // each old shard is used once per load: moved out below
  auto file_shards = [&](int r) -> std::vector<TensorShard>& {
    auto it = cache.find(r);
    if (it == cache.end()) it = cache.emplace(r, read_shard_file(dir, idx.files[static_cast<size_t>(r)], idx)).first;
    return it->second;
  };
  // Tensor names in the order rank 0 lists them (then any only other ranks have).
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const ShardFileInfo& f : idx.files)
    for (const ShardEntry& e : f.tensors)
      if (seen.insert(e.name).second) names.push_back(e.name);
  std::vector<TensorShard> out;
  for (const std::string& name : names) {
    // The old shards of this tensor, in row order.
    std::vector<std::pair<int, const ShardEntry*>> olds;
    for (const ShardFileInfo& f : idx.files)
      for (const ShardEntry& e : f.tensors)
        if (e.name == name) olds.emplace_back(f.rank, &e);
    std::sort(olds.begin(), olds.end(), [](auto& a, auto& b) { return a.second->row_offset < b.second->row_offset; });
    const int64_t M = olds[0].second->global_rows;
    // The granularity comes from the tensor itself (recipe and planes), read from the first shard file.
    const QuantizedTensor* proto = nullptr;
    for (const TensorShard& s : file_shards(olds[0].first))
      if (s.name == name) proto = &s.tensor;
    QTC_CHECK(proto != nullptr, "load_checkpoint: tensor '", name, "' missing from its shard file");
    const int64_t g = row_granularity(*proto);
    for (auto& [r, e] : olds)
      QTC_CHECK(e->row_offset % g == 0, "load_checkpoint: tensor '", name, "' was saved with a shard boundary at row ", e->row_offset,
                ", not a multiple of its block granularity ", g);
    const auto [n0, n1] = shard_row_range(M, world, rank, g);
    std::vector<QuantizedTensor> parts;
    for (auto& [r, e] : olds) {
      const int64_t o0 = e->row_offset, o1 = e->row_offset + e->rows;
      const int64_t a = std::max(o0, n0), z = std::min(o1, n1);
      if (a >= z) continue;
      QuantizedTensor* t = nullptr;
      for (TensorShard& s : file_shards(r))
        if (s.name == name) t = &s.tensor;
      QTC_CHECK(t != nullptr, "load_checkpoint: tensor '", name, "' missing from the shard file of rank ", r);
      const bool whole = a == o0 && z == o1 && t != proto;
      parts.push_back(whole ? std::move(*t) : slice_rows(*t, a - o0, z - o0));
    }
    TensorShard s;
    s.name = name;
    s.global_rows = M;
    s.row_offset = n0;
    s.tensor = parts.empty() ? slice_rows(*proto, 0, 0) : parts.size() == 1 ? std::move(parts[0]) : concat_rows(parts);
    out.push_back(std::move(s));
  }
  return out;
}

std::map<std::string, QuantizedTensor> load_checkpoint_full(const std::string& dir) {
  std::map<std::string, QuantizedTensor> m;
  for (TensorShard& s : load_checkpoint(dir, 0, 1)) m.emplace(s.name, std::move(s.tensor));
  return m;
}

bool bitwise_equal(const QuantizedTensor& a, const QuantizedTensor& b) {
  return a.recipe.to_metadata() == b.recipe.to_metadata() && a.input_dtype == b.input_dtype && a.rows == b.rows &&
         a.cols == b.cols && std::memcmp(&a.scale_inv, &b.scale_inv, 4) == 0 && plane_bits_equal(a.rowwise, b.rowwise) &&
         plane_bits_equal(a.columnwise, b.columnwise);
}

}  // namespace qtc::ref
