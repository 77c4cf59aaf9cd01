/// \file checkpoint_test.cpp
/// \brief Checkpoints of quantized tensors: round trips, resharding across world sizes, async snapshots,
///        corruption of every kind, and a save killed at every write step.
///
/// | what                                    | covered by                                   |
/// |-----------------------------------------|----------------------------------------------|
/// | bit-for-bit round trip, every recipe     | RoundTrip (compact, padded, swizzled scales) |
/// | world 4 -> 2, 4 -> 1, 2 -> 4, 1 -> 4     | Reshard                                      |
/// | async save snapshots the buffers        | AsyncSnapshot                                 |
/// | bad magic, checksum, truncation, missing shard, index disagreeing, corrupt index/header | Corruption |
/// | kill at every write step of a save      | KillDuringSave (fork + SIGKILL)              |
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "qtc/checkpoint.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "qtc/sharding.hpp"
#include "qtc/test_fixtures.hpp"
#include "sharding_fixtures.hpp"

namespace qtc {
namespace {

namespace fs = std::filesystem;
using ref::TensorShard;

/// A fresh directory under the build's temp area, removed at the end.
using qtc::test::TempDir;  // qtc/test_fixtures.hpp

/// The state dict of the tests: one tensor of each recipe family, both planes where the recipe has them,
/// scales in different layouts.
std::map<std::string, QuantizedTensor> make_state(uint64_t seed) {
  std::map<std::string, QuantizedTensor> m;
  Recipe fp8_1d = Recipe::of(Fp8BlockOptions{});
  Recipe rs = testing::make_nvfp4(false, false);
  rs.nvfp4().row_scaled = true;
  const int64_t M = 512;
  auto add = [&](const std::string& name, const Recipe& r, int64_t K, ScaleLayout lay, DType t = DType::kF32) {
    const HostMatrix x = testing::weight_rows(seed + m.size(), 0, M, K, t);
    QuantizedTensor q = ref::quantize(x.view(), r);
    if (lay != ScaleLayout::kCompact) ref::convert_layout(q, lay);
    m.emplace(name, std::move(q));
  };
  add("layer0.nvfp4_1x16", testing::make_nvfp4(false, true), 128, ScaleLayout::kCompact);
  add("layer0.nvfp4_16x16_padded", testing::make_nvfp4(true, true), 64, ScaleLayout::kPadded, DType::kBF16);
  add("layer1.nvfp4_swizzled", testing::make_nvfp4(false, false), 96, ScaleLayout::kSwizzled);
  add("layer1.nvfp4_row_scaled", rs, 64, ScaleLayout::kCompact);
  add("layer2.mxfp8", testing::make_mxfp8(true), 160, ScaleLayout::kCompact);
  add("layer2.mxfp8_swizzled", testing::make_mxfp8(true), 64, ScaleLayout::kSwizzled);
  add("layer3.fp8_block_2d", testing::make_fp8_block_2d(true), 200, ScaleLayout::kPadded);
  add("layer3.fp8_block_1d", fp8_1d, 256, ScaleLayout::kCompact);
  add("layer4.fp8_tensor", testing::make_fp8_tensor(true), 48, ScaleLayout::kCompact);
  return m;
}

/// Splits every tensor into world row shards (FSDP2 chunks rounded to the tensor's granularity).
std::vector<std::vector<TensorShard>> shard_state(const std::map<std::string, QuantizedTensor>& state, int world) {
  std::vector<std::vector<TensorShard>> per(static_cast<size_t>(world));
  for (const auto& [name, q] : state) {
    const int64_t g = ref::row_granularity(q);
    for (int r = 0; r < world; ++r) {
      const auto [b, e] = ref::shard_row_range(q.rows, world, r, g);
      per[static_cast<size_t>(r)].push_back(TensorShard{name, q.rows, b, ref::slice_rows(q, b, e)});
    }
  }
  return per;
}

/// Loads at `world` and checks every rank's rows against the full tensors.
void expect_loads_as(const std::string& dir, const std::map<std::string, QuantizedTensor>& state, int world) {
  for (int r = 0; r < world; ++r) {
    const std::vector<TensorShard> got = ref::load_checkpoint(dir, r, world);
    ASSERT_EQ(got.size(), state.size());
    for (const TensorShard& s : got) {
      const QuantizedTensor& full = state.at(s.name);
      const auto [b, e] = ref::shard_row_range(full.rows, world, r, ref::row_granularity(full));
      EXPECT_EQ(s.row_offset, b) << s.name;
      EXPECT_TRUE(qtc::testing::quantized_equal(ref::slice_rows(full, b, e), s.tensor)) << s.name << " rank " << r << " of " << world;
    }
  }
}

TEST(Checkpoint, RoundTripEveryRecipeAndLayout) {
  TempDir d("roundtrip");
  const auto state = make_state(testing::test_seed());
  for (int world : {1, 2, 4}) {
    ref::save_checkpoint(d.str(), shard_state(state, world));
    expect_loads_as(d.str(), state, world);
    const auto full = ref::load_checkpoint_full(d.str());
    for (const auto& [name, q] : state) EXPECT_TRUE(qtc::testing::quantized_equal(q, full.at(name))) << name << " saved at world " << world;
    // Only the committed generation's files remain.
    int files = 0;
    for (const auto& de : fs::directory_iterator(d.path)) files += de.path().filename().string().rfind("shard-", 0) == 0;
    EXPECT_EQ(files, world);
  }
}

TEST(Checkpoint, ReshardOnLoad) {
  const auto state = make_state(testing::test_seed() + 1);
  for (auto [save_world, load_worlds] : std::vector<std::pair<int, std::vector<int>>>{{4, {2, 1, 4}}, {2, {4, 1}}, {1, {4, 2}}}) {
    TempDir d("reshard" + std::to_string(save_world));
    ref::save_checkpoint(d.str(), shard_state(state, save_world));
    for (int w : load_worlds) {
      SCOPED_TRACE(::testing::Message() << "saved at " << save_world << ", loaded at " << w);
      expect_loads_as(d.str(), state, w);
    }
  }
}

TEST(Checkpoint, AsyncSaveSnapshotsBuffersFirst) {
  TempDir d("async");
  auto state = make_state(testing::test_seed() + 2);
  const auto original = state;
  auto shards = shard_state(state, 2);
  std::future<void> f = ref::save_checkpoint_async(d.str(), shards);
  // Scribble over every buffer right after the call returns, while the save may still be writing.
  for (auto& rank : shards)
    for (TensorShard& s : rank) {
      std::fill(s.tensor.rowwise->data.begin(), s.tensor.rowwise->data.end(), 0xAB);
      if (s.tensor.rowwise->amax.size()) s.tensor.rowwise->amax[0] = -1.0f;
    }
  f.get();
  const auto loaded = ref::load_checkpoint_full(d.str());
  for (const auto& [name, q] : original) EXPECT_TRUE(qtc::testing::quantized_equal(q, loaded.at(name))) << name;
}

// ---- Corruption ------------------------------------------------------------------------------

std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::string load_error(const std::string& dir) {
  try {
    for (int r = 0; r < 2; ++r) ref::load_checkpoint(dir, r, 2);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct CorruptionCase {
  std::string name;
  std::function<void(const fs::path& dir, const fs::path& shard1)> damage;
  std::string expect;  ///< a phrase the error must contain
};

void PrintTo(const CorruptionCase& c, std::ostream* os) { *os << c.name; }

class Corruption : public ::testing::TestWithParam<CorruptionCase> {};

/// Rewrites index.json through `edit` and re-seals its checksum, so only the disagreement remains.
void edit_index(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto b = slurp(dir / "index.json");
  nlohmann::json j = nlohmann::json::parse(b.begin(), b.end());
  edit(j["body"]);
  const std::string bs = j["body"].dump();
  char h[17];
  std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bs.data(), bs.size())));
  j["xxh3"] = h;
  const std::string t = j.dump(1);
  spit(dir / "index.json", std::vector<uint8_t>(t.begin(), t.end()));
}

TEST_P(Corruption, LoadingFailsWithAClearError) {
  const CorruptionCase& c = GetParam();
  TempDir d("corrupt-" + c.name);
  const auto state = make_state(testing::test_seed() + 3);
  ref::save_checkpoint(d.str(), shard_state(state, 2));
  ASSERT_EQ(load_error(d.str()), "");
  const ref::CheckpointIndex idx = ref::read_index(d.str());
  c.damage(d.path, d.path / idx.files[1].file);
  const std::string e = load_error(d.str());
  std::printf("[%s] %s\n", c.name.c_str(), e.c_str());
  ASSERT_NE(e, "") << "loading a damaged checkpoint must fail";
  EXPECT_NE(e.find(c.expect), std::string::npos) << e;
}

INSTANTIATE_TEST_SUITE_P(
    Damage, Corruption,
    ::testing::Values(
        CorruptionCase{"BadMagic", [](const fs::path&, const fs::path& s) { auto b = slurp(s); b[0] = 'X'; spit(s, b); }, "bad magic"},
        CorruptionCase{"PayloadBitFlip", [](const fs::path&, const fs::path& s) { auto b = slurp(s); b[b.size() - 100] ^= 0x10; spit(s, b); },
                       "checksum mismatch"},
        CorruptionCase{"HeaderBitFlip", [](const fs::path&, const fs::path& s) { auto b = slurp(s); b[40] ^= 0x01; spit(s, b); },
                       "header checksum"},
        CorruptionCase{"Truncated", [](const fs::path&, const fs::path& s) { auto b = slurp(s); b.resize(b.size() - 777); spit(s, b); },
                       "truncated"},
        CorruptionCase{"TruncatedToPreamble", [](const fs::path&, const fs::path& s) { auto b = slurp(s); b.resize(20); spit(s, b); },
                       "truncated"},
        CorruptionCase{"TrailingGarbage", [](const fs::path&, const fs::path& s) { auto b = slurp(s); b.push_back(0); spit(s, b); },
                       "trailing bytes"},
        CorruptionCase{"MissingShard", [](const fs::path&, const fs::path& s) { fs::remove(s); }, "missing"},
        CorruptionCase{"IndexMissing", [](const fs::path& d, const fs::path&) { fs::remove(d / "index.json"); }, "missing"},
        CorruptionCase{"IndexBitFlip",
                       [](const fs::path& d, const fs::path&) { auto b = slurp(d / "index.json"); b[b.size() / 2] ^= 0x04; spit(d / "index.json", b); },
                       "index"},
        CorruptionCase{"IndexTruncated",
                       [](const fs::path& d, const fs::path&) { auto b = slurp(d / "index.json"); b.resize(b.size() / 2); spit(d / "index.json", b); },
                       "not valid JSON"},
        CorruptionCase{"IndexDisagreesOnRows",
                       [](const fs::path& d, const fs::path&) {
                         edit_index(d, [](nlohmann::json& b) {
                           auto& t = b["files"][0]["tensors"][0];
                           t["rows"] = t["rows"].get<int64_t>() - 16;
                           b["files"][1]["tensors"][0]["row_offset"] = b["files"][1]["tensors"][0]["row_offset"].get<int64_t>() - 16;
                           b["files"][1]["tensors"][0]["rows"] = b["files"][1]["tensors"][0]["rows"].get<int64_t>() + 16;
                         });
                       },
                       "the index says"},
        CorruptionCase{"IndexDisagreesOnSize",
                       [](const fs::path& d, const fs::path&) {
                         edit_index(d, [](nlohmann::json& b) { b["files"][1]["size"] = b["files"][1]["size"].get<uint64_t>() + 1; });
                       },
                       "the index says"},
        CorruptionCase{"IndexLeavesAGap",
                       [](const fs::path& d, const fs::path&) {
                         edit_index(d, [](nlohmann::json& b) { b["files"][1]["tensors"][0]["row_offset"] = 999999; });
                       },
                       "rows"},
        CorruptionCase{"ShardOfAnotherSave",
                       [](const fs::path& d, const fs::path& s) {
                         // A shard file from another save of the same shapes, under this save's name.
                         TempDir other("other");
                         ref::save_checkpoint(other.str(), shard_state(make_state(12345), 2));
                         const auto oi = ref::read_index(other.str());
                         fs::copy_file(other.path / oi.files[1].file, s, fs::copy_options::overwrite_existing);
                         (void)d;
                       },
                       "index"}),
    [](const auto& info) { return info.param.name; });

// ---- Kill at every step of a save -------------------------------------------------------------

TEST(Checkpoint, KillAtEveryWriteStepLeavesALoadableCheckpoint) {
  TempDir d("kill");
  const auto old_state = make_state(testing::test_seed() + 4);
  const auto new_state = make_state(testing::test_seed() + 5);
  // Count the steps of one save (a dry run in a scratch directory).
  int steps = 0, commit_step = -1;
  {
    TempDir scratch("kill-count");
    ref::SaveOptions o;
    o.hook = [&](int step, const std::string& what) {
      steps = step + 1;
      if (commit_step < 0 && what.find("index.json") != std::string::npos && what.rfind("renamed", 0) == 0) commit_step = step;
    };
    ref::save_checkpoint(scratch.str(), shard_state(new_state, 2), o);
  }
  ASSERT_GT(steps, 10);
  ASSERT_GT(commit_step, 0);
  std::printf("a save of %zu tensors at world 2 has %d write steps; the index rename (commit) is step %d\n", new_state.size(), steps,
              commit_step);
  const auto old_shards = shard_state(old_state, 2), new_shards = shard_state(new_state, 2);
  ref::save_checkpoint(d.str(), old_shards);
  int saw_old = 0, saw_new = 0;
  // A clean directory has no old files to remove; here the previous generation's files add removal steps.
  for (int kill_at = 0; kill_at <= steps + 3; ++kill_at) {
    SCOPED_TRACE(::testing::Message() << "killed after step " << kill_at);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ref::SaveOptions o;
      o.hook = [&](int step, const std::string&) {
        if (step == kill_at) ::kill(::getpid(), SIGKILL);
      };
      try {
        ref::save_checkpoint(d.str(), new_shards, o);
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (kill_at < steps) {
      ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child should have been killed";
    } else {
      ASSERT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    // Whatever was interrupted, one whole checkpoint loads: the previous one before the commit, the new one after.
    std::map<std::string, QuantizedTensor> got;
    ASSERT_NO_THROW(got = ref::load_checkpoint_full(d.str()));
    bool is_old = true, is_new = true;
    for (const auto& [name, q] : got) {
      is_old = is_old && ref::bitwise_equal(q, old_state.at(name));
      is_new = is_new && ref::bitwise_equal(q, new_state.at(name));
    }
    EXPECT_TRUE(is_old || is_new);
    if (kill_at < commit_step) EXPECT_TRUE(is_old) << "before the index is replaced the previous checkpoint must load";
    if (kill_at >= commit_step) EXPECT_TRUE(is_new);
    saw_old += is_old;
    saw_new += is_new;
    // Put the old checkpoint back for the next round (its save also clears the leftovers).
    if (is_new) ref::save_checkpoint(d.str(), old_shards);
  }
  std::printf("kill points: %d left the previous checkpoint, %d the new one\n", saw_old, saw_new);
}

}  // namespace
}  // namespace qtc
