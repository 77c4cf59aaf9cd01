/// \file checkpoint.hpp
/// \brief Checkpoints of quantized tensors (TE_FORMATS.md §9): saved and loaded without dequantization
///        (data, scales, amax, recipe, profile, layout, shape), one shard file per rank plus an index,
///        loadable at another world size.
///
/// On disk, a checkpoint directory holds `index.json` (the commit point) and the shard files it names,
/// `shard-g<generation>-r<rank>-of-<world>.qtc`. Every file is written atomically: a temporary file,
/// fsync, rename, fsync of the directory. A save writes a new generation's shard files next to the
/// previous ones, then replaces the index, then removes the previous generation's files; a process
/// killed at any point therefore leaves a loadable checkpoint, the previous one until the index is
/// replaced and the new one after. Each tensor carries an xxHash3-64 checksum, each header and the
/// index their own. Loading trusts nothing: every size, offset, shape and checksum is checked (sizes with
/// overflow checks, against the bytes actually present, before anything large is read), and a failure is a
/// qtc::Error that names the file and what is wrong.
///
/// Concurrent saves of one directory (threads or processes) are safe: a save holds an exclusive lock on the
/// directory (flock on `.qtc-lock`) from claiming its generation to its commit, so saves run one after the
/// other and each commits. With the split API (next_generation, write_shard_file, commit_checkpoint, as the
/// distributed save uses it), a generation is claimed under the lock (a `claim-g<N>` file), temporary names
/// are unique per process and call, and a commit refuses, with a message, a generation that is not newer
/// than the committed one; a commit only removes older generations, so the last committed checkpoint always
/// survives and every save either commits or says why not.
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "qtc/quantized.hpp"

namespace qtc::ref {

/// Rows [row_offset, row_offset + tensor.rows) of the tensor `name`, which has global_rows rows in all.
struct TensorShard {
  std::string name;
  int64_t global_rows = 0;
  int64_t row_offset = 0;
  QuantizedTensor tensor;
};

/// One tensor entry of a shard file, as the index records it.
struct ShardEntry {
  std::string name;
  int64_t global_rows = 0;
  int64_t row_offset = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t checksum = 0;  ///< xxHash3-64 of the tensor's bytes (data, scales, amax of every plane)
  bool operator==(const ShardEntry&) const = default;
};

/// What the index records about one rank's shard file.
struct ShardFileInfo {
  int rank = 0;
  std::string file;        ///< name inside the checkpoint directory
  uint64_t size = 0;       ///< bytes
  uint64_t checksum = 0;   ///< xxHash3-64 of the whole file
  std::vector<ShardEntry> tensors;
  bool operator==(const ShardFileInfo&) const = default;
};

/// The committed index of a checkpoint directory.
struct CheckpointIndex {
  uint64_t generation = 0;
  int world = 0;
  std::vector<ShardFileInfo> files;  ///< one per rank, rank order
};

/// Called after each write step of a save (step counts from 0 over the whole save): tests kill the
/// process there to prove that a save interrupted anywhere leaves a loadable checkpoint.
using SaveHook = std::function<void(int step, const std::string& what)>;

struct SaveOptions {
  SaveHook hook;
  bool fsync = true;  ///< fsync files and the directory (tests of the format may turn it off for speed)
};

// ---- Saving -------------------------------------------------------------------------------------

/// Claims the generation a new save of `dir` uses (under the directory lock): one more than the committed
/// one and than any generation whose files are in the directory (1 for an empty dir); no other save gets it.
uint64_t next_generation(const std::string& dir);

/// Writes one rank's shard file of `generation` atomically and returns what the index records about it.
/// `step` is advanced by the number of hook steps taken (start at 0 for the whole save).
ShardFileInfo write_shard_file(const std::string& dir, uint64_t generation, int rank, int world,
                               std::span<const TensorShard> shards, const SaveOptions& opt = {}, int* step = nullptr);

/// Under the directory lock: checks that the ranks' files describe a consistent checkpoint (every tensor
/// covered once, in row order, with one shape and recipe) and are present as recorded, and that the
/// generation is newer than the committed one (else a qtc::Error: another save committed first); writes the
/// index atomically (the commit point), then removes the files of older generations.
void commit_checkpoint(const std::string& dir, uint64_t generation, int world, std::span<const ShardFileInfo> files,
                       const SaveOptions& opt = {}, int* step = nullptr);

/// The whole save in one process: per_rank[r] are rank r's shards.
void save_checkpoint(const std::string& dir, std::span<const std::vector<TensorShard>> per_rank, const SaveOptions& opt = {});

/// Asynchronous save: snapshots (deep-copies) every buffer before it returns, then writes in a
/// background thread; later changes to the caller's tensors never reach the files.
std::future<void> save_checkpoint_async(const std::string& dir, std::span<const std::vector<TensorShard>> per_rank,
                                        SaveOptions opt = {});

/// ShardFileInfo as JSON text and back (what ranks send to the rank that commits). Parsing checks types.
std::string shard_info_to_json(const ShardFileInfo& info);
ShardFileInfo shard_info_from_json(const std::string& text);

// ---- Loading ------------------------------------------------------------------------------------

/// Reads and checks index.json (its own checksum, types, file list).
CheckpointIndex read_index(const std::string& dir);

/// Parses and checks the text of an index.json (`path` names it in messages): what read_index does after
/// reading the file.
CheckpointIndex parse_index(std::span<const uint8_t> text, const std::string& path);

/// Parses and checks a whole shard file held in memory against the index: what read_shard_file does after
/// it has checked the file's size and header and read the payload they declare.
std::vector<TensorShard> parse_shard_file(std::span<const uint8_t> bytes, const std::string& path, const ShardFileInfo& expected,
                                          const CheckpointIndex& index);

/// Reads and checks one shard file against the index: magic, version, header checksum, every offset and
/// shape, every tensor checksum, file size and checksum, and that its tensors are the ones the index says.
std::vector<TensorShard> read_shard_file(const std::string& dir, const ShardFileInfo& expected, const CheckpointIndex& index);

/// Loads the rows `rank` owns when the checkpoint is read at world size `world` (any world size; rows
/// split as shard_row_range with the tensor's row granularity), reading only the shard files it needs.
std::vector<TensorShard> load_checkpoint(const std::string& dir, int rank, int world);

/// Loads every tensor whole (world size 1).
std::map<std::string, QuantizedTensor> load_checkpoint_full(const std::string& dir);

/// Bit-for-bit equality of two quantized tensors (recipe, shape, planes, scale_inv bits).
bool bitwise_equal(const QuantizedTensor& a, const QuantizedTensor& b);

}  // namespace qtc::ref
