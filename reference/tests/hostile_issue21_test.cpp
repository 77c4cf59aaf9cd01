/// \file hostile_issue21_test.cpp
/// \brief Hostile inputs of issue 21 (same executable as hostile_test.cpp): a linear pass over the safetensors
///        header (100k tensors, duplicates, depth), output files that are not regular files or fail mid-write, the
///        footprint's checked sizes, checkpoint folders with stray names, failed saves and a linked lock.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>

#include "qtc/checkpoint.hpp"
#include "qtc/footprint.hpp"
#include "qtc/output_file.hpp"
#include "qtc/recipe.hpp"
#include "qtc/quantize.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/sharding.hpp"
#include "qtc/test_support.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/test_fixtures.hpp"

namespace qtc {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using qtc::test::TempDir;  // qtc/test_fixtures.hpp

// ---- Issue 21 ----------------------------------------------------------------------------------

/// A safetensors file of n one-byte tensors, written by hand (names t000000...).
std::vector<uint8_t> many_tensor_file(int n) {
  std::string h = "{";
  for (int i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "t%06d", i);
    h += (i ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
         std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  }
  h += "}";
  while (h.size() % 8) h += ' ';
  std::vector<uint8_t> b(8);
  const uint64_t n8 = h.size();
  std::memcpy(b.data(), &n8, 8);
  b.insert(b.end(), h.begin(), h.end());
  for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(i));
  return b;
}

// The sanitizer stage (ASan at -O0) parses about 25x slower: it checks 20k tensors, the release build 100k.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QTC_HOSTILE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define QTC_HOSTILE_ASAN 1
#endif
#ifdef QTC_HOSTILE_ASAN
constexpr int kManyTensors = 20000;
#else
constexpr int kManyTensors = 100000;
#endif

// Before: the parser callback made nlohmann scan the parent object at the end of every entry: 20k tensors took
// 3.3 s, 40k about a minute, 100k did not finish in 10 minutes (release). Now: 100k in 0.8 s (release), 20k in
// about 4 s under ASan.
TEST(LinearHeader, HundredThousandTensorsParseInAboutASecond) {
  const int n = kManyTensors;
  const auto bytes = many_tensor_file(n);
  const auto t0 = std::chrono::steady_clock::now();
  const io::File f = io::parse(bytes, "many.safetensors");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(f.tensors.size(), static_cast<size_t>(n));
  char last[16];
  std::snprintf(last, sizeof last, "t%06d", n - 1);
  EXPECT_EQ(f.tensors.back().name, last);
  EXPECT_EQ(f.tensors.back().bytes.at(0), static_cast<uint8_t>((n - 1) & 0xFF));
  std::printf("%d tensors (%zu header bytes) parsed in %.3f s\n", n, bytes.size(), s);
  EXPECT_LT(s, 15.0) << "the header parser is not linear (release: 100k tensors in under a second)";
}

TEST(LinearHeader, DuplicatesAndDepthStillRefused) {
  auto file = [](std::string h) {
    while (h.size() % 8) h += ' ';
    std::vector<uint8_t> b(8);
    const uint64_t n = h.size();
    std::memcpy(b.data(), &n, 8);
    b.insert(b.end(), h.begin(), h.end());
    return b;
  };
  const std::string e = R"({"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  try {
    io::parse(file("{\"a\":" + e + ",\"b\":" + e + ",\"a\":" + e + "}"), "dup");
    ADD_FAILURE() << "a duplicate tensor name was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("duplicate key 'a' (tensor names must be unique)"), std::string::npos) << err.what();
  }
  try {
    io::parse(file(R"({"__metadata__":{"k":"1","k":"2"}})"), "dupmeta");
    ADD_FAILURE() << "a duplicate metadata key was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("duplicate key 'k'"), std::string::npos) << err.what();
  }
  try {
    io::parse(file(std::string(40, '[') + std::string(40, ']')), "deep");
    ADD_FAILURE() << "a deep header was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("nested deeper than"), std::string::npos) << err.what();
  }
  try {
    io::parse(file(R"({"a":)"), "syntax");
    ADD_FAILURE() << "a truncated header was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("header is not valid JSON"), std::string::npos) << err.what();
  }
}

io::File tiny_vector() {
  io::File f;
  f.metadata["recipe"] = "mxfp8";
  f.tensors.push_back(io::from_f32("x", std::vector<float>{1, 2, 3, 4}, {2, 2}));
  return f;
}

// Before: write_file renamed its temporary over whatever was at the path (a FIFO, a device node, a symlink
// became a regular file) and left OUT.tmp behind when a write failed.
TEST(OutputFile, RefusesWhatIsNotARegularFile) {
  TempDir d("outfile");
  const fs::path fifo = d.path / "fifo", link = d.path / "link", target = d.path / "target", sub = d.path / "sub";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::create_symlink(target, link);
  fs::create_directories(sub);
  for (const auto& [p, why] : {std::pair{fifo, "is a FIFO"}, std::pair{link, "is a symbolic link"}, std::pair{sub, "is a directory"}}) {
    try {
      io::write_file(p, tiny_vector());
      ADD_FAILURE() << p << " was written";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rule 'output-regular-file'"), std::string::npos) << e.what();
    }
  }
  struct stat st{};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the symlink was replaced";
  EXPECT_FALSE(fs::exists(target)) << "the symlink was followed";
  // A regular file is replaced whole; nothing else is left in the folder.
  const fs::path out = d.path / "v.safetensors";
  std::ofstream(out) << "old";
  io::write_file(out, tiny_vector());
  EXPECT_EQ(io::read_file(out).tensors.size(), 1u);
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(d.path)) n += e.path().filename().string().find("tmp") != std::string::npos;
  EXPECT_EQ(n, 0u) << "a temporary was left behind";
}

TEST(OutputFile, FailedWriteLeavesNothing) {
  TempDir d("outfail");
  const fs::path out = d.path / "big.safetensors";
  std::ofstream(out) << "previous";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // a file size limit: write() fails with EFBIG as it would with ENOSPC
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit rl{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    io::File f;
    f.tensors.push_back(io::from_f32("x", std::vector<float>(100000, 1.0f), {100, 1000}));
    try {
      io::write_file(out, f);
    } catch (const Error&) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "the write should have failed";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d.path)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"big.safetensors"}) << "a temporary was left behind";
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "previous") << "a failed write changed the file at the path";
}

// Before: `qtc quantize --shape 4294967296x4294967296` wrapped M * K and crashed; a [2^62, 0] input that quantize
// wrote was refused by verify (4 bytes x 2^62 rows of an empty matrix counted as overflow).
TEST(Footprint, SizesAreCheckedAndZeroExtentsHoldNothing) {
  const Recipe mx = Recipe::from_metadata({{"recipe", "mxfp8"}});
  try {
    quantize_footprint(mx, DType::kF32, int64_t{1} << 32, int64_t{1} << 32, true);
    ADD_FAILURE() << "2^32 x 2^32 F32 fits in int64?";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rule 'size-overflow'"), std::string::npos) << e.what();
  }
  const Footprint z = quantize_footprint(mx, DType::kF32, int64_t{1} << 62, 0, true);
  EXPECT_EQ(z.total(), 0);
  const Footprint z2 = quantize_footprint(mx, DType::kF32, 0, int64_t{1} << 62, true);
  EXPECT_EQ(z2.total(), 0);
  const Recipe rs = Recipe::from_metadata({{"recipe", "nvfp4"}, {"row_scaled", "1"}});
  EXPECT_THROW(quantize_footprint(rs, DType::kF32, int64_t{1} << 62, 0, false), Error) << "2^62 row amaxes of 4 bytes";
  // 64 x 64 MXFP8 E4M3: x 16 KiB, data 2 x 4 KiB, scales 2 x 128 bytes, dequantized 2 x 16 KiB.
  const Footprint f = quantize_footprint(mx, DType::kF32, 64, 64, true);
  EXPECT_EQ(f.input, 64 * 64 * 4);
  EXPECT_EQ(f.outputs, 2 * 64 * 64 + 2 * 64 * 2);
  EXPECT_EQ(f.dequantized, 2 * 64 * 64 * 4);
  try {
    check_quantize_resources(mx, DType::kF32, int64_t{1} << 40, int64_t{1} << 20, false);
    ADD_FAILURE() << "4 EiB fit in memory?";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rule 'memory'"), std::string::npos) << e.what();
  }
}

std::vector<std::vector<ref::TensorShard>> one_rank_state(int64_t rows = 64, int64_t cols = 128) {
  const Recipe r = Recipe::from_metadata({{"recipe", "mxfp8"}});
  const HostMatrix x = testing::make_input(testing::Family::kNormal, DType::kF32, rows, cols, 7);
  ref::TensorShard s;
  s.name = "w";
  s.global_rows = rows;
  s.tensor = ref::quantize(x.view(), r);
  return {{s}};
}

std::vector<std::string> names_in(const fs::path& d) {
  std::vector<std::string> n;
  for (const auto& e : fs::directory_iterator(d)) n.push_back(e.path().filename().string());
  std::sort(n.begin(), n.end());
  return n;
}

// Before: sscanf("%llu") read "shard-g-1-x" as generation 2^64-1 (the next one wrapped to 0: every save failed with
// "another save committed"), and overflowed on claim-g99999999999999999999.
TEST(CheckpointDir, StrayNamesAreNotGenerations) {
  TempDir d("ckpt-stray");
  for (const char* n : {"shard-g-1-x", "claim-g99999999999999999999", "claim-g18446744073709551615", "shard-g+5-r0-of-1.qtc",
                        "claim-g007"})
    std::ofstream(d.path / n) << "user file";
  ASSERT_NO_THROW(ref::save_checkpoint(d.str(), one_rank_state()));
  EXPECT_EQ(ref::read_index(d.str()).generation, 1u);
  ASSERT_NO_THROW(ref::save_checkpoint(d.str(), one_rank_state()));
  EXPECT_EQ(ref::read_index(d.str()).generation, 2u);
  for (const char* n : {"shard-g-1-x", "claim-g99999999999999999999", "claim-g18446744073709551615", "shard-g+5-r0-of-1.qtc", "claim-g007"})
    EXPECT_TRUE(fs::exists(d.path / n)) << n << " (not qtc's) was removed";
}

// Before: a commit removed every name that began like one of qtc's (shard-g1-..., claim-g1...).
TEST(CheckpointDir, CommitRemovesOnlyQtcsOwnNames) {
  TempDir d("ckpt-own");
  ref::save_checkpoint(d.str(), one_rank_state());
  const std::vector<std::string> users = {"shard-g1-r0-of-1.qtc.bak", "claim-g1-README", "shard-g1-notes.txt",
                                          "shard-g1-r0-of-1.qtc.tmp.x.1", "index.json.tmp.old", "claim-g1.txt"};
  for (const auto& n : users) std::ofstream(d.path / n) << "user file";
  ref::save_checkpoint(d.str(), one_rank_state());
  EXPECT_EQ(ref::read_index(d.str()).generation, 2u);
  for (const auto& n : users) EXPECT_TRUE(fs::exists(d.path / n)) << n << " (a user's file) was removed by the commit";
  EXPECT_FALSE(fs::exists(d.path / "shard-g1-r0-of-1.qtc")) << "the superseded generation stays";
  EXPECT_NO_THROW(ref::load_checkpoint_full(d.str()));
}

// Before: a save that failed on a full disk left its claim and temporaries behind.
TEST(CheckpointDir, FailedSaveRemovesWhatItWrote) {
  TempDir d("ckpt-fail");
  ref::save_checkpoint(d.str(), one_rank_state(16, 32));
  const auto before = names_in(d.path);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit rl{8192, 8192};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    try {
      ref::save_checkpoint(d.str(), one_rank_state(256, 256));
    } catch (const Error&) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 3) << "the save should have failed on the file size limit";
  EXPECT_EQ(names_in(d.path), before) << "the failed save left files behind";
  ASSERT_NO_THROW(ref::save_checkpoint(d.str(), one_rank_state(256, 256))) << "the retry";
  EXPECT_EQ(ref::load_checkpoint_full(d.str()).at("w").rows, 256);
}

// Before: the lock file was opened through a symlink, creating (and locking) a file outside the directory.
TEST(CheckpointDir, LockIsNotFollowedThroughALink) {
  TempDir d("ckpt-lock"), outside("ckpt-lock-outside");
  fs::create_symlink(outside.path / "planted", d.path / ".qtc-lock");
  EXPECT_THROW(ref::save_checkpoint(d.str(), one_rank_state()), Error);
  EXPECT_FALSE(fs::exists(outside.path / "planted")) << "the lock followed the symlink";
}

}  // namespace
}  // namespace qtc
