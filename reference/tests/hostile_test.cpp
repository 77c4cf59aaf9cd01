/// \file hostile_test.cpp
/// \brief Regression tests of the hostile inputs of issue 14, one or more per defect, each failing before its fix:
///
/// | defect | input                                                                   | test                         |
/// |--------|-------------------------------------------------------------------------|------------------------------|
/// | 1      | shard declaring a 2^32 x 2^32 plane (columnwise / rowwise), checksums ok | CraftedShard.*              |
/// | 1      | a quantized tensor whose shape wraps a 64-bit byte count, sliced        | Sharding.SizesThatWrap...    |
/// | 5      | safetensors header with bytes after a NUL, or a non-space padding       | SafetensorsHeader.*          |
/// | 7, 8   | 1 TiB sparse safetensors file / shard file: refused from its sizes      | SparseFiles.*                |
/// | 9      | a rank left without rows (memcpy to null: the sanitizer stage catches it) | EmptyRanks.*               |
/// | 7      | names from files printed escaped and shortened                           | Names.*                      |
///
/// Issue 21 (hostile inputs beyond verify), each test failing before its fix:
///
/// | defect | input                                                                   | test                         |
/// |--------|-------------------------------------------------------------------------|------------------------------|
/// | 3      | safetensors header of 100k tensors (the duplicate-key check was O(n^2))  | LinearHeader.*               |
/// | 4      | output path that is a FIFO, a symlink, a directory; a failed write       | OutputFile.*                 |
/// | 2      | sizes of a quantize that wrap int64, zero extents, memory                | Footprint.*                  |
/// | 6      | stray and look-alike names in a checkpoint folder, a failed save, a     | CheckpointDir.*              |
/// |        | symlinked lock file                                                      |                              |
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

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// Writes a one-rank checkpoint by hand: a shard file holding `tensors` (header JSON of each, checksums
/// filled in) over `payload`, and an index that agrees with it, every checksum sealed.
void craft_checkpoint(const fs::path& dir, json tensors, const std::vector<uint8_t>& payload) {
  json entries = json::array();
  for (json& t : tensors) {
    const uint64_t off = t["offset"], len = t["length"];
    t["xxh3"] = hex64(XXH3_64bits(payload.data() + off, len));
    entries.push_back({{"name", t["name"]}, {"global_rows", t["global_rows"]}, {"row_offset", t["row_offset"]},
                       {"rows", t["rows"]}, {"cols", t["cols"]}, {"xxh3", t["xxh3"]}});
  }
  const std::string header =
      json{{"format", "qtc-shard"}, {"generation", 1}, {"rank", 0}, {"world", 1}, {"tensors", tensors}}.dump();
  std::vector<uint8_t> file(32, 0);
  std::memcpy(file.data(), "QTCSHARD", 8);
  const uint32_t version = 1;
  std::memcpy(file.data() + 8, &version, 4);
  const uint64_t hl = header.size(), hh = XXH3_64bits(header.data(), header.size());
  std::memcpy(file.data() + 16, &hl, 8);
  std::memcpy(file.data() + 24, &hh, 8);
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), payload.begin(), payload.end());
  const std::string name = "shard-g1-r0-of-1.qtc";
  write_bytes(dir / name, file);
  const json body{{"format", "qtc-checkpoint"},
                  {"version", 1},
                  {"generation", 1},
                  {"world", 1},
                  {"files", json::array({json{{"rank", 0},
                                              {"file", name},
                                              {"size", file.size()},
                                              {"xxh3", hex64(XXH3_64bits(file.data(), file.size()))},
                                              {"tensors", entries}}})}};
  const std::string bs = body.dump();
  const std::string text = json{{"body", body}, {"xxh3", hex64(XXH3_64bits(bs.data(), bs.size()))}}.dump(1);
  std::ofstream(dir / "index.json") << text;
}

json fp8_tensor_entry(int64_t M, int64_t K, const char* plane) {
  Recipe r = Recipe::of(Fp8TensorOptions{});
  json md = json::object();
  for (const auto& [k, v] : r.to_metadata()) md[k] = v;
  const bool row = std::string(plane) == "rowwise";
  return json{{"name", "w"},
              {"global_rows", M},
              {"row_offset", 0},
              {"rows", M},
              {"cols", K},
              {"input_dtype", "F32"},
              {"recipe", md},
              {"scale_inv_bits", 0x3f800000u},
              {"planes", json::array({json{{"kind", plane},
                                           {"data_rows", row ? M : K},
                                           {"data_cols", row ? K : M},
                                           {"scale_type", "f32"},
                                           {"scale_layout", "compact"},
                                           {"scale_rows", 1},
                                           {"scale_cols", 1},
                                           {"amax_count", 1}}})},
              {"offset", 0},
              {"length", 8}};
}

std::string load_error(const std::string& dir, int world = 1) {
  try {
    (void)ref::load_checkpoint(dir, 0, world);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- Defect 1: sizes that wrap -----------------------------------------------------------------------

// A shard whose plane is 2^32 x 2^32 bytes over 8 payload bytes, all checksums matching: the 64-bit byte
// count wrapped to 0 and the load went on to a 4 GiB memcpy (columnwise) or "loaded" an empty 2^32 x 2^32
// tensor (rowwise). It must be refused, naming the overflow.
TEST(CraftedShard, PlaneOf2To32By2To32IsRefused) {
  for (const char* plane : {"columnwise", "rowwise"}) {
    SCOPED_TRACE(plane);
    TempDir d(std::string("wrap-") + plane);
    const int64_t big = int64_t{1} << 32;
    std::vector<uint8_t> payload(8, 0);
    const float one = 1.0f;
    std::memcpy(payload.data(), &one, 4);
    craft_checkpoint(d.path, json::array({fp8_tensor_entry(big, big, plane)}), payload);
    const std::string e = load_error(d.str());
    ASSERT_NE(e, "") << "a 2^32 x 2^32 plane over 8 bytes loaded";
    EXPECT_NE(e.find("overflows a 64-bit count"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string(plane) + " plane"), std::string::npos) << e;
  }
}

// The same tensor shape with a byte count that does not wrap but exceeds the bytes present.
TEST(CraftedShard, PlaneLargerThanItsBytesIsRefused) {
  TempDir d("overrun");
  std::vector<uint8_t> payload(8, 0);
  craft_checkpoint(d.path, json::array({fp8_tensor_entry(16, 1 << 20, "rowwise")}), payload);
  const std::string e = load_error(d.str());
  EXPECT_NE(e.find("overrun"), std::string::npos) << e;
}

// A well-formed crafted checkpoint loads (the crafting itself is right, so the refusals above are the checks).
TEST(CraftedShard, AWellFormedCraftedShardLoads) {
  TempDir d("ok");
  std::vector<uint8_t> payload(2 * 3 + 8, 0x38);
  json t = fp8_tensor_entry(2, 3, "rowwise");
  t["length"] = payload.size();
  const float s = 0.5f, a = 3.0f;
  std::memcpy(payload.data() + 6, &s, 4);
  std::memcpy(payload.data() + 10, &a, 4);
  craft_checkpoint(d.path, json::array({t}), payload);
  const auto m = ref::load_checkpoint_full(d.str());
  ASSERT_EQ(m.count("w"), 1u);
  EXPECT_EQ(m.at("w").rows, 2);
  EXPECT_EQ(m.at("w").rowwise->data.size(), 6u);
}

// Slicing a tensor whose shape says 2^32 x 2^32 bytes over an empty buffer: a signed overflow, a resize to 0
// and a 4 GiB memcpy before; now an error naming the size.
TEST(Sharding, SizesThatWrapAreRefusedBySlicing) {
  QuantizedTensor q;
  q.recipe.set_options(Fp8TensorOptions{});
  q.rows = q.cols = int64_t{1} << 32;
  Plane p;
  p.data_rows = p.data_cols = int64_t{1} << 32;
  p.scale.type = ScaleType::kF32;
  p.scale.rows = p.scale.cols = 1;
  p.scale.bytes.assign(4, 0);
  p.amax = {1.0f};
  q.columnwise = p;
  try {
    (void)ref::slice_rows(q, 0, 16);
    FAIL() << "sliced a tensor whose shape wraps";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overflows a 64-bit count"), std::string::npos) << e.what();
  }
}

TEST(CheckedSize, Arithmetic) {
  EXPECT_EQ(checked_size({3, 5, 7}, "t"), 105);
  EXPECT_EQ(checked_size({int64_t{1} << 62, 0}, "t"), 0);
  EXPECT_THROW(checked_size({int64_t{1} << 32, int64_t{1} << 32}, "t"), Error);
  EXPECT_THROW(checked_size({-1, 2}, "t"), Error);
  EXPECT_THROW(checked_add(INT64_MAX, 1, "t"), Error);
  EXPECT_EQ(ceil_div_nonneg(INT64_MAX, 2), int64_t{1} << 62);
  EXPECT_EQ(ceil_div_nonneg(INT64_MAX, 1), INT64_MAX);
  EXPECT_EQ(ceil_div_nonneg(0, 16), 0);
}

// ---- Defect 5: header padding -----------------------------------------------------------------------

std::vector<uint8_t> with_header(const std::string& h, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> b(8);
  const uint64_t n = h.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::string parse_error(const std::vector<uint8_t>& b) {
  try {
    (void)io::parse(b, "h.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsHeader, BytesAfterANulAreRefused) {
  const std::string json_part = R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  const std::string e = parse_error(with_header(json_part + std::string(1, '\0') + " this is not JSON ]]]", {1, 2}));
  EXPECT_NE(e.find("NUL byte at offset " + std::to_string(json_part.size())), std::string::npos) << e;
  // NUL padding alone (what the safetensors library refuses too).
  EXPECT_NE(parse_error(with_header(json_part + std::string(3, '\0'), {1, 2})).find("NUL byte"), std::string::npos);
}

TEST(SafetensorsHeader, OnlySpacesMayPad) {
  const std::string json_part = R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  EXPECT_EQ(parse_error(with_header(json_part + "      ", {1, 2})), "");
  for (const char* pad : {"\n", "\t  ", " \r", "\n   "}) {
    const std::string e = parse_error(with_header(json_part + pad, {1, 2}));
    EXPECT_NE(e.find("only spaces may pad the header"), std::string::npos) << "padding " << json::string_t(pad).size() << ": " << e;
  }
}

// ---- Defects 7 and 8: sizes checked before reading; a huge sparse file gets a clear message -------------

/// A file of `size` bytes (sparse) starting with `head`; false when the filesystem refuses the size.
bool sparse_file(const fs::path& p, const std::vector<uint8_t>& head, uint64_t size) {
  write_bytes(p, head);
  std::error_code ec;
  fs::resize_file(p, size, ec);
  return !ec;
}

TEST(SparseFiles, HugeSafetensorsFileWithSmallHeaderIsRefusedFromItsSizes) {
  TempDir d("sparse-st");
  const fs::path p = d.path / "big.safetensors";
  const std::string json_part = R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  if (!sparse_file(p, with_header(json_part, {1, 2}), uint64_t{1} << 40)) GTEST_SKIP() << "no 1 TiB sparse file here";
  // Before: the whole 1 TiB was allocated first (std::bad_alloc, or 6 GiB read for a 6 GiB file).
  try {
    (void)io::read_file(p);
    FAIL() << "accepted a 1 TiB file of 2 declared bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trailing bytes"), std::string::npos) << e.what();
  }
}

TEST(SparseFiles, HugeSafetensorsTensorIsAResourceLimit) {
  TempDir d("sparse-st2");
  const fs::path p = d.path / "big.safetensors";
  const uint64_t n = uint64_t{1} << 40;
  std::string h = R"({"t":{"dtype":"U8","shape":[)" + std::to_string(n) + R"(],"data_offsets":[0,)" + std::to_string(n) + "]}}";
  while ((8 + h.size()) % 8) h += ' ';
  if (!sparse_file(p, with_header(h), 8 + h.size() + n)) GTEST_SKIP() << "no 1 TiB sparse file here";
  try {
    (void)io::read_file(p);
    FAIL() << "read a 1 TiB tensor";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("1.0 TiB"), std::string::npos) << w;
    EXPECT_NE(w.find("resource limit"), std::string::npos) << w;
  }
}

TEST(SparseFiles, HugeShardFileIsRefusedFromItsSizeBeforeReading) {
  TempDir d("sparse-ckpt");
  Recipe r = Recipe::of(Fp8TensorOptions{});
  HostMatrix x(DType::kF32, 4, 4);
  QuantizedTensor q = ref::quantize(x.view(), r);
  std::vector<std::vector<ref::TensorShard>> per{{ref::TensorShard{"w", 4, 0, q}}};
  ref::save_checkpoint(d.str(), per);
  const auto idx = ref::read_index(d.str());
  const fs::path shard = d.path / idx.files[0].file;
  std::error_code ec;
  fs::resize_file(shard, uint64_t{1} << 40, ec);
  if (ec) GTEST_SKIP() << "no 1 TiB sparse file here";
  const std::string e = load_error(d.str());
  EXPECT_NE(e.find("the index says " + std::to_string(idx.files[0].size) + " (trailing bytes)"), std::string::npos) << e;
}

// ---- Defect 9: ranks without rows ---------------------------------------------------------------------

// Loading at a world size that leaves ranks empty: slices of zero rows (and, for columnwise planes of
// [K, M] data, zero-width column slices). Before, a memcpy to a null pointer (UBSan aborts the sanitizer
// stage); the rows must come back bit-exact in any case.
TEST(EmptyRanks, LoadingAtAWorldThatLeavesRanksEmpty) {
  TempDir d("empty-ranks");
  std::vector<std::pair<std::string, Recipe>> recipes;
  Recipe blk = Recipe::of(Fp8BlockOptions{});
  blk.columnwise = true;
  recipes.push_back({"fp8block", blk});
  Recipe ten = Recipe::of(Fp8TensorOptions{});
  ten.columnwise = true;
  recipes.push_back({"fp8tensor", ten});
  Recipe mx = Recipe::of(Mxfp8Options{});
  mx.columnwise = true;
  recipes.push_back({"mxfp8", mx});
  std::map<std::string, QuantizedTensor> state;
  std::vector<std::vector<ref::TensorShard>> per(1);
  for (auto& [name, r] : recipes) {
    HostMatrix x(DType::kF32, 128, 48);
    for (int64_t i = 0; i < 128; ++i)
      for (int64_t j = 0; j < 48; ++j) x.set(i, j, static_cast<float>((i * 7 + j * 3) % 23) - 11.0f);
    state[name] = ref::quantize(x.view(), r);
    per[0].push_back(ref::TensorShard{name, 128, 0, state[name]});
  }
  ref::save_checkpoint(d.str(), per);
  const int world = 4;  // fp8block (128-row granularity): ranks 1..3 get no rows
  for (int rank = 0; rank < world; ++rank) {
    const auto shards = ref::load_checkpoint(d.str(), rank, world);
    for (const auto& s : shards) {
      const auto [b, e] = ref::shard_row_range(128, world, rank, ref::row_granularity(state[s.name]));
      ASSERT_EQ(s.tensor.rows, e - b) << s.name << " rank " << rank;
      EXPECT_TRUE(qtc::testing::quantized_equal(ref::slice_rows(state[s.name], b, e), s.tensor)) << s.name << " rank " << rank;
    }
  }
}

// A tensor whose row count is not a multiple of its granularity, split over more ranks than it has blocks:
// the last ranks start at row M (130 for a 128-row granularity). Their empty slice was refused ("boundaries at
// multiples of 128"), so such a state could not be saved at that world size.
TEST(EmptyRanks, EmptySliceAtTheEndOfARaggedTensor) {
  Recipe r = Recipe::of(Fp8BlockOptions{.tile_2d = true});
  r.columnwise = true;
  HostMatrix x(DType::kF32, 130, 20);
  const QuantizedTensor q = ref::quantize(x.view(), r);
  for (int rank = 0; rank < 3; ++rank) {
    const auto [b, e] = ref::shard_row_range(130, 3, rank, ref::row_granularity(q));
    const QuantizedTensor s = ref::slice_rows(q, b, e);
    EXPECT_EQ(s.rows, e - b) << rank;
  }
  TempDir d("ragged");
  std::vector<std::vector<ref::TensorShard>> per(3);
  for (int rank = 0; rank < 3; ++rank) {
    const auto [b, e] = ref::shard_row_range(130, 3, rank, 128);
    per[static_cast<size_t>(rank)].push_back(ref::TensorShard{"w", 130, b, ref::slice_rows(q, b, e)});
  }
  ref::save_checkpoint(d.str(), per);
  EXPECT_TRUE(ref::bitwise_equal(ref::load_checkpoint_full(d.str()).at("w"), q));
}

// ---- Defect 7: names from files ------------------------------------------------------------------------

TEST(Names, EscapedAndShortened) {
  const std::string hostile = "\x1b[31mred\x1b[0m" + std::string(100000, 'a');
  const std::string p = printable_name(hostile);
  EXPECT_EQ(p.find('\x1b'), std::string::npos) << p;
  EXPECT_LT(p.size(), 200u) << p.size();
  EXPECT_NE(p.find("\\x1b[31mred"), std::string::npos) << p;
  EXPECT_NE(p.find("(100012 bytes)"), std::string::npos) << p;
  EXPECT_EQ(printable_name("rowwise_data"), "'rowwise_data'");
  // In a safetensors error message.
  const std::string h = "{\"" + std::string("\\u001b[2J") + std::string(5000, 'n') + "\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  const std::string e = parse_error(with_header(h, {0}));
  EXPECT_EQ(e.find('\x1b'), std::string::npos);
  EXPECT_LT(e.size(), 400u) << e;
}

}  // namespace
}  // namespace qtc
