/// \file checkpoint_save.cpp
/// \brief Saving checkpoints: atomic file writes (temp file, fsync, rename, fsync of the directory), shard
///        files, the index as commit point, removal of older generations, asynchronous saves.
#include "qtc/checkpoint.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <optional>
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
  // Unique per process and call: concurrent writers never share a temporary file.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
  sys_check(fd >= 0, "create", tmp);
  // A write that fails (ENOSPC, EFBIG, EIO, a hook that throws) removes its temporary: a retry finds the space
  // and the directory as they were.
  struct RemoveUnlessRenamed {
    const std::string& path;
    bool renamed = false;
    ~RemoveUnlessRenamed() {
      if (!renamed) ::unlink(path.c_str());
    }
  } cleanup{tmp};
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
  cleanup.renamed = true;
  step("renamed " + tmp + " -> " + path);
  if (opt.fsync) {
    fsync_dir(dir);
    step("fsynced directory " + dir);
  }
  return {size, h};
}

constexpr const char* kLockName = ".qtc-lock";
constexpr const char* kClaimPrefix = "claim-g";

/// An exclusive lock on a checkpoint directory: flock on dir/.qtc-lock, held by a whole save (or a claim,
/// or a commit). flock locks belong to open file descriptions, so two threads of one process exclude each
/// other as two processes do; a process that dies releases its lock.
class DirLock {
 public:
  explicit DirLock(const std::string& dir) : path_((fs::path(dir) / kLockName).string()) {
    // O_NOFOLLOW: a symbolic link at the lock's name is refused (ELOOP), never followed to create or lock a file
    // outside the checkpoint directory.
    fd_ = ::open(path_.c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0644);
    sys_check(fd_ >= 0, "open lock file (a regular file, not a link)", path_);
    struct stat st{};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      QTC_FAIL("checkpoint: the lock file ", path_, " is not a regular file (rule 'lock-regular-file')");
    }
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd_);
      errno = e;
      sys_check(false, "lock (flock)", path_);
    }
  }
  ~DirLock() { ::close(fd_); }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

/// Generations above this are not qtc's (a name claiming one is someone else's file): g + 1 never overflows.
constexpr uint64_t kMaxGeneration = uint64_t{1} << 62;

/// A decimal number of qtc's names: digits only, no sign, no leading zero, at most `max`.
std::optional<uint64_t> name_number(std::string_view s, uint64_t max) {
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v <= max ? std::optional<uint64_t>(v) : std::nullopt;
}

/// `n` without a temporary's suffix ".tmp.<pid>.<counter>" (write_atomic), or nullopt when it has none.
std::optional<std::string_view> strip_tmp_suffix(std::string_view n) {
  const size_t t = n.find(".tmp.");
  if (t == std::string_view::npos) return std::nullopt;
  const std::string_view rest = n.substr(t + 5);
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || !name_number(rest.substr(0, dot), UINT64_MAX) ||
      !name_number(rest.substr(dot + 1), UINT64_MAX))
    return std::nullopt;
  return n.substr(0, t);
}

/// The generation of a name that is exactly one of qtc's: shard-g<N>-r<R>-of-<W>.qtc (as shard_file_name writes it),
/// claim-g<N>, or a temporary of a shard file (<shard>.tmp.<pid>.<counter>); nullopt for any other name, so that
/// a user's file that merely looks like one (shard-g1-r0-of-1.qtc.bak, claim-g1-README, shard-g-1-x,
/// claim-g99999999999999999999) is neither taken for a generation nor removed.
std::optional<uint64_t> generation_of(const std::string& name) {
  std::string_view n = name;
  const auto base = strip_tmp_suffix(n);
  if (base) n = *base;
  if (!base && n.starts_with(kClaimPrefix)) return name_number(n.substr(std::string_view(kClaimPrefix).size()), kMaxGeneration);
  if (!n.starts_with("shard-g") || !n.ends_with(".qtc")) return std::nullopt;
  const std::string_view body = n.substr(7, n.size() - 7 - 4);  // <N>-r<R>-of-<W>
  const size_t r = body.find("-r"), of = body.find("-of-");
  if (r == std::string_view::npos || of == std::string_view::npos || of < r) return std::nullopt;
  const auto g = name_number(body.substr(0, r), kMaxGeneration);
  const auto rank = name_number(body.substr(r + 2, of - r - 2), INT32_MAX);
  const auto world = name_number(body.substr(of + 4), INT32_MAX);
  if (!g || !rank || !world || *rank >= *world) return std::nullopt;
  if (shard_file_name(*g, static_cast<int>(*rank), static_cast<int>(*world)) != n) return std::nullopt;
  return g;
}

/// Whether `n` is a temporary of the index (write_atomic of index.json), exactly.
bool is_index_temporary(const std::string& n) {
  const auto base = strip_tmp_suffix(n);
  return base && *base == kIndexName;
}

/// The committed generation (0 when there is no readable index).
uint64_t committed_generation(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / kIndexName, ec)) return 0;
  try {
    return read_index(dir).generation;
  } catch (const Error&) {
    return 0;  // an unreadable index does not stop a new save; generations stay apart by their names
  }
}

/// Claims a new generation (the lock is held): one more than the committed one and than any generation a
/// file in the directory belongs to, recorded by a claim file so that no other save takes it.
uint64_t claim_generation_locked(const std::string& dir, StepCounter* sc) {
  uint64_t g = committed_generation(dir);
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec))
    if (const auto v = generation_of(de.path().filename().string())) g = std::max<uint64_t>(g, *v);
  const uint64_t gen = g + 1;
  const std::string claim = (fs::path(dir) / (kClaimPrefix + std::to_string(gen))).string();
  const int fd = ::open(claim.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  sys_check(fd >= 0, "create claim file", claim);
  ::close(fd);
  if (sc) (*sc)("claimed generation " + std::to_string(gen) + " (" + claim + ")");
  return gen;
}

/// Removes `doomed` paths, one hook step each.
void remove_all_of(std::vector<fs::path> doomed, StepCounter& sc) {
  std::sort(doomed.begin(), doomed.end());
  std::error_code ec;
  for (const fs::path& p : doomed) {
    fs::remove(p, ec);
    sc("removed " + p.string());
  }
}

/// The commit (the lock is held): refuses a generation that is not newer than the committed one (another save
/// committed first) and files that are not there as recorded; writes the index; removes what is garbage now.
void commit_locked(const std::string& dir, uint64_t generation, int world, std::span<const ShardFileInfo> files, StepCounter& sc) {
  const SaveOptions& opt = sc.opt;
  check_consistent(world, files, "commit_checkpoint");
  const uint64_t committed = committed_generation(dir);
  std::error_code ec;
  if (generation <= committed) {
    // Superseded: this save's own files (its generation only) go; the committed checkpoint stays as it is.
    std::vector<fs::path> own;
    for (const auto& de : fs::directory_iterator(dir, ec))
      if (generation_of(de.path().filename().string()) == generation) own.push_back(de.path());
    remove_all_of(own, sc);
    QTC_FAIL("commit_checkpoint: generation ", generation, " of ", dir, " is not newer than the committed generation ", committed,
             ": another save committed after this one began; this save is not committed (its files are removed) and the ",
             "committed checkpoint is unchanged");
  }
  for (const ShardFileInfo& f : files) {
    const fs::path p = fs::path(dir) / f.file;
    QTC_CHECK(generation_of(f.file) == generation, "commit_checkpoint: file ", printable_name(f.file), " does not belong to generation ",
              generation);
    const uint64_t size = fs::file_size(p, ec);
    QTC_CHECK(!ec && size == f.size, "commit_checkpoint: shard file ", p.string(), " of rank ", f.rank,
              ec ? " is missing" : " has another size than its writer recorded",
              " (removed or replaced by another process?); this save is not committed");
  }
  json fl = json::array();
  for (const ShardFileInfo& f : files) fl.push_back(info_json(f));
  const json body{{"format", "qtc-checkpoint"}, {"version", kVersion}, {"generation", generation}, {"world", world}, {"files", fl}};
  const std::string bs = body.dump();
  const std::string text = json{{"body", body}, {"xxh3", hex64(XXH3_64bits(bs.data(), bs.size()))}}.dump(1) + "\n";
  write_atomic(dir, kIndexName, {{reinterpret_cast<const uint8_t*>(text.data()), text.size()}}, opt, sc);
  // Committed. Older generations (their shard files, claims and temporaries) and index temporaries are
  // garbage now; newer generations belong to saves still under way and stay.
  std::set<std::string> keep{kIndexName, kLockName};
  for (const ShardFileInfo& f : files) keep.insert(f.file);
  std::vector<fs::path> doomed;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string n = de.path().filename().string();
    if (keep.count(n)) continue;
    const auto g = generation_of(n);
    if ((g && *g <= generation) || is_index_temporary(n)) doomed.push_back(de.path());
  }
  remove_all_of(doomed, sc);
}

}  // namespace

uint64_t next_generation(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  QTC_CHECK(fs::is_directory(dir, ec), "checkpoint: cannot create directory ", dir);
  DirLock lock(dir);
  return claim_generation_locked(dir, nullptr);
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
  try {
    const auto [size, h] = write_atomic(dir, info.file, pieces, opt, sc);
    info.size = size;
    info.checksum = h;
  } catch (const Error& e) {
    // A save that committed a newer generation while this file was written removes this (older) generation's
    // files, the temporary included; the rename then fails. Say so instead of reporting a missing file.
    const uint64_t committed = committed_generation(dir);
    if (generation <= committed)
      QTC_FAIL("write_shard_file: generation ", generation, " of ", dir, " is not newer than the committed generation ", committed,
               ": another save committed after this one began, and its commit removed this generation's files (",
               e.what(), "); this save cannot be committed and the committed checkpoint is unchanged");
    throw;
  }
  return info;
}

void commit_checkpoint(const std::string& dir, uint64_t generation, int world, std::span<const ShardFileInfo> files,
                       const SaveOptions& opt, int* step) {
  int local_step = 0;
  StepCounter sc{opt, step ? step : &local_step};
  DirLock lock(dir);
  commit_locked(dir, generation, world, files, sc);
}

void save_checkpoint(const std::string& dir, std::span<const std::vector<TensorShard>> per_rank, const SaveOptions& opt) {
  const int world = static_cast<int>(per_rank.size());
  QTC_CHECK(world >= 1, "save_checkpoint: no ranks");
  std::error_code ec;
  fs::create_directories(dir, ec);
  QTC_CHECK(fs::is_directory(dir, ec), "checkpoint: cannot create directory ", dir);
  // One save at a time per directory: concurrent saves (threads or processes) wait here and then commit in
  // turn, each a newer generation; the last committed checkpoint is never touched by another's commit.
  DirLock lock(dir);
  int step = 0;
  StepCounter sc{opt, &step};
  const uint64_t gen = claim_generation_locked(dir, &sc);
  std::vector<ShardFileInfo> infos;
  try {
    for (int r = 0; r < world; ++r) infos.push_back(write_shard_file(dir, gen, r, world, per_rank[static_cast<size_t>(r)], opt, &step));
    commit_locked(dir, gen, world, infos, sc);
  } catch (...) {
    // A save that fails before its commit (ENOSPC, EFBIG, EIO, a refused tensor) removes what it wrote: its
    // shard files, their temporaries and its claim, so that a retry finds the directory as it was. A failure
    // after the index was renamed into place leaves the (committed) generation as it is.
    if (committed_generation(dir) < gen) {
      std::error_code ec;
      std::vector<fs::path> own;
      for (const auto& de : fs::directory_iterator(dir, ec))
        if (generation_of(de.path().filename().string()) == gen) own.push_back(de.path());
      for (const fs::path& p : own) fs::remove(p, ec);
    }
    throw;
  }
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

}  // namespace qtc::ref
