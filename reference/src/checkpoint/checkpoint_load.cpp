/// \file checkpoint_load.cpp
/// \brief Loading checkpoints: the index, shard files checked against it, resharding to any world size.
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
#include "checkpoint_internal.hpp"
#include "qtc/untrusted.hpp"

namespace qtc::ref {

using namespace ckpt_detail;

namespace {

constexpr uint64_t kMaxIndexBytes = 256ull << 20;

/// Opens `path` and returns its size; `what` names the file in messages.
uint64_t open_sized(std::ifstream& f, const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  QTC_CHECK(!ec && fs::exists(st), "checkpoint: ", what, " ", path, " is missing");
  QTC_CHECK(fs::is_regular_file(st), "checkpoint: ", what, " ", path, " is not a regular file");
  const uint64_t size = fs::file_size(path, ec);
  QTC_CHECK(!ec, "checkpoint: cannot size ", what, " ", path, ": ", ec.message());
  f.open(path, std::ios::binary);
  QTC_CHECK(f.good(), "checkpoint: cannot open ", what, " ", path);
  return size;
}

/// Reads `n` bytes at the current position of `f` into `out` starting at `at` (resizing it).
void read_exact(std::ifstream& f, std::vector<uint8_t>& out, size_t at, uint64_t n, const std::string& path) {
  try {
    out.resize(at + static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    QTC_FAIL("checkpoint: cannot allocate ", bytes_text(n), " to read ", path, " (resource limit)");
  }
  f.read(reinterpret_cast<char*>(out.data() + at), static_cast<std::streamsize>(n));
  QTC_CHECK(static_cast<uint64_t>(f.gcount()) == n, "checkpoint: error reading ", path, " (", f.gcount(), " of ", n,
            " bytes; the file changed while reading?)");
}

/// Checks a shard file's preamble and header (b holds at least both; the file has file_size bytes) and
/// returns the parsed header.
json parse_shard_head(std::span<const uint8_t> b, uint64_t file_size, const std::string& path) {
  QTC_CHECK(file_size >= kPreamble && b.size() >= kPreamble, "checkpoint: shard file ", path, " is truncated (", file_size,
            " bytes, shorter than its preamble)");
  QTC_CHECK(std::memcmp(b.data(), kMagic, 8) == 0, "checkpoint: shard file ", path, " has bad magic (not a qtc shard file)");
  QTC_CHECK(read_u32(b.data() + 8) == kVersion, "checkpoint: shard file ", path, " has unsupported version ", read_u32(b.data() + 8));
  const uint64_t hl = read_u64(b.data() + 16), hh = read_u64(b.data() + 24);
  QTC_CHECK(hl <= file_size - kPreamble && hl <= b.size() - kPreamble, "checkpoint: shard file ", path, " is truncated (header of ", hl,
            " bytes, file has ", file_size - kPreamble, " after the preamble)");
  QTC_CHECK(XXH3_64bits(b.data() + kPreamble, hl) == hh, "checkpoint: shard file ", path, ": header checksum mismatch (corrupt header)");
  json h;
  try {
    h = json::parse(b.begin() + kPreamble, b.begin() + static_cast<ptrdiff_t>(kPreamble + hl));
  } catch (const json::exception& e) {
    QTC_FAIL("checkpoint: shard file ", path, ": malformed header: ", e.what());
  }
  QTC_CHECK(h.is_object() && h.value("format", "") == "qtc-shard", "checkpoint: shard file ", path, ": bad format field");
  QTC_CHECK(h.contains("tensors") && h.at("tensors").is_array(), path, ": 'tensors' must be an array");
  return h;
}

/// The payload bytes the header's tensors declare (the sum of their lengths, checked).
uint64_t declared_payload(const json& h, const std::string& path) {
  int64_t used = 0;
  for (const json& t : h.at("tensors")) {
    const uint64_t len = get<uint64_t>(t, "length", path);
    QTC_CHECK(len <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "checkpoint: shard file ", path, ": tensor length ",
              len, " is out of range");
    used = checked_add(used, static_cast<int64_t>(len), "checkpoint: shard file " + path + ": tensor lengths");
  }
  return static_cast<uint64_t>(used);
}

}  // namespace

CheckpointIndex parse_index(std::span<const uint8_t> b, const std::string& path) {
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

CheckpointIndex read_index(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIndexName).string();
  std::ifstream f;
  const uint64_t size = open_sized(f, path, "index");
  QTC_CHECK(size <= kMaxIndexBytes, "checkpoint index ", path, " is ", bytes_text(size), ", more than the ", bytes_text(kMaxIndexBytes),
            " an index may have (not a qtc index?)");
  std::vector<uint8_t> b;
  read_exact(f, b, 0, size, path);
  return parse_index(b, path);
}

std::vector<TensorShard> parse_shard_file(std::span<const uint8_t> b, const std::string& path, const ShardFileInfo& expected,
                                          const CheckpointIndex& index) {
  const json h = parse_shard_head(b, b.size(), path);
  const uint64_t hl = read_u64(b.data() + 16);
  const uint64_t gen = get<uint64_t>(h, "generation", path);
  const int rank = get<int>(h, "rank", path), world = get<int>(h, "world", path);
  QTC_CHECK(gen == index.generation && rank == expected.rank && world == index.world, "checkpoint: shard file ", path, " is generation ",
            gen, " rank ", rank, " of ", world, ", the index expects generation ", index.generation, " rank ", expected.rank, " of ",
            index.world);
  const uint8_t* payload = b.data() + kPreamble + hl;
  const uint64_t psize = b.size() - kPreamble - hl;
  const uint64_t used = declared_payload(h, path);
  QTC_CHECK(used == psize, "checkpoint: shard file ", path, " has ", psize, " payload bytes, its tensors account for ", used,
            used > psize ? " (truncated)" : " (trailing bytes)");
  std::vector<TensorShard> out;
  for (const json& t : h.at("tensors")) out.push_back(parse_tensor(t, payload, psize, "checkpoint: shard file " + path));
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
              "checkpoint: shard file ", path, " tensor ", i, " is ", printable_name(s.name), " rows [", s.row_offset, ", ",
              s.row_offset + s.tensor.rows, ") of ", s.global_rows, " x ", s.tensor.cols, "; the index says ", printable_name(e.name),
              " rows [", e.row_offset, ", ", e.row_offset + e.rows, ") of ", e.global_rows, " x ", e.cols);
    QTC_CHECK(parse_hex64(get<std::string>(h.at("tensors").at(i), "xxh3", path), path) == e.checksum, "checkpoint: shard file ", path,
              " tensor ", printable_name(e.name), ": checksum disagrees with the index");
  }
  return out;
}

std::vector<TensorShard> read_shard_file(const std::string& dir, const ShardFileInfo& expected, const CheckpointIndex& index) {
  const std::string path = (fs::path(dir) / expected.file).string();
  std::error_code ec;
  QTC_CHECK(fs::exists(path, ec), "checkpoint: shard file ", path, " of rank ", expected.rank,
            " is missing (the index names it; the checkpoint is incomplete)");
  // Sizes first: the file against the index, the header against the file; only then the payload is read.
  std::ifstream f;
  const uint64_t size = open_sized(f, path, "shard file");
  QTC_CHECK(size == expected.size, "checkpoint: shard file ", path, " has ", size, " bytes, the index says ", expected.size,
            size < expected.size ? " (truncated)" : " (trailing bytes)");
  QTC_CHECK(size >= kPreamble, "checkpoint: shard file ", path, " is truncated (", size, " bytes, shorter than its preamble)");
  std::vector<uint8_t> b;
  read_exact(f, b, 0, kPreamble, path);
  const uint64_t hl = read_u64(b.data() + 16);
  QTC_CHECK(hl <= size - kPreamble, "checkpoint: shard file ", path, " is truncated (header of ", hl, " bytes, file has ",
            size - kPreamble, " after the preamble)");
  read_exact(f, b, kPreamble, hl, path);
  const uint64_t declared = declared_payload(parse_shard_head(b, size, path), path);
  QTC_CHECK(declared == size - kPreamble - hl, "checkpoint: shard file ", path, " has ", size - kPreamble - hl,
            " payload bytes, its tensors account for ", declared, declared > size - kPreamble - hl ? " (truncated)" : " (trailing bytes)");
  check_fits_in_memory(size, "checkpoint: shard file " + path);
  read_exact(f, b, static_cast<size_t>(kPreamble + hl), declared, path);
  return parse_shard_file(b, path, expected, index);
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
    QTC_CHECK(proto != nullptr, "load_checkpoint: tensor ", printable_name(name), " missing from its shard file");
    const int64_t g = row_granularity(*proto);
    for (auto& [r, e] : olds)
      QTC_CHECK(e->row_offset % g == 0 || e->row_offset == M, "load_checkpoint: tensor ", printable_name(name), " was saved with a shard boundary at row ", e->row_offset,
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
      QTC_CHECK(t != nullptr, "load_checkpoint: tensor ", printable_name(name), " missing from the shard file of rank ", r);
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
