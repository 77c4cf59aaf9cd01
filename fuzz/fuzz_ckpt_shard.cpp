/// \file fuzz_ckpt_shard.cpp
/// \brief Fuzz target: one shard file of a checkpoint, then what loading does with its tensors (row slices at
///        every block boundary, and concatenation back). Shard files are sealed three times (an xxHash3 of the
///        header, of each tensor's bytes, of the whole file, the last two recorded by the index); the target
///        re-seals all three for whatever the input holds, and builds the index entry the file claims, so the
///        fuzzer reaches every size, offset and shape check behind the checksums.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "qtc/checkpoint.hpp"
#include "qtc/error.hpp"
#include "qtc/sharding.hpp"

namespace {

using json = nlohmann::json;
constexpr size_t kPreamble = 32;

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

template <typename T>
T num(const json& j, const char* k) {
  if (!j.is_object() || !j.contains(k) || !j.at(k).is_number_integer()) return T{};
  return j.at(k).get<T>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> b(data, data + size);
  qtc::ref::ShardFileInfo expected;
  qtc::ref::CheckpointIndex index;
  index.world = 1;
  if (b.size() >= kPreamble) {
    uint64_t hl;
    std::memcpy(&hl, b.data() + 16, 8);
    if (hl <= b.size() - kPreamble) {
      try {
        json h = json::parse(b.begin() + kPreamble, b.begin() + static_cast<ptrdiff_t>(kPreamble + hl));
        const std::vector<uint8_t> payload(b.begin() + static_cast<ptrdiff_t>(kPreamble + hl), b.end());
        if (h.is_object() && h.contains("tensors") && h["tensors"].is_array()) {
          for (json& t : h["tensors"]) {
            const uint64_t off = num<uint64_t>(t, "offset"), len = num<uint64_t>(t, "length");
            if (t.is_object() && off <= payload.size() && len <= payload.size() - off)
              t["xxh3"] = hex64(XXH3_64bits(payload.data() + off, len));
          }
        }
        const std::string hs = h.dump();
        const uint64_t nhl = hs.size(), hh = XXH3_64bits(hs.data(), hs.size());
        std::vector<uint8_t> nb(b.begin(), b.begin() + kPreamble);
        std::memcpy(nb.data() + 16, &nhl, 8);
        std::memcpy(nb.data() + 24, &hh, 8);
        nb.insert(nb.end(), hs.begin(), hs.end());
        nb.insert(nb.end(), payload.begin(), payload.end());
        b = std::move(nb);
        // The index entry this file claims to be.
        index.generation = num<uint64_t>(h, "generation");
        index.world = num<int>(h, "world");
        expected.rank = num<int>(h, "rank");
        if (h.is_object() && h.contains("tensors") && h["tensors"].is_array())
          for (const json& t : h["tensors"]) {
            qtc::ref::ShardEntry e;
            if (t.is_object() && t.contains("name") && t["name"].is_string()) e.name = t["name"].get<std::string>();
            e.global_rows = num<int64_t>(t, "global_rows");
            e.row_offset = num<int64_t>(t, "row_offset");
            e.rows = num<int64_t>(t, "rows");
            e.cols = num<int64_t>(t, "cols");
            if (t.is_object() && t.contains("xxh3") && t["xxh3"].is_string())
              e.checksum = std::strtoull(t["xxh3"].get<std::string>().c_str(), nullptr, 16);
            expected.tensors.push_back(e);
          }
      } catch (const json::exception&) {
      }
    }
  }
  expected.file = "fuzz.qtc";
  expected.size = b.size();
  expected.checksum = XXH3_64bits(b.data(), b.size());
  std::vector<qtc::ref::TensorShard> shards;
  try {
    shards = qtc::ref::parse_shard_file(b, "fuzz.qtc", expected, index);
  } catch (const qtc::Error&) {
    return 0;
  }
  // What loading at another world size does with a parsed tensor: slices at its block granularity, and back.
  for (const qtc::ref::TensorShard& s : shards) {
    try {
      const qtc::QuantizedTensor& q = s.tensor;
      const int64_t g = qtc::ref::row_granularity(q);
      if (q.rows > 4 * g) continue;  // bounded work per input
      std::vector<qtc::QuantizedTensor> parts;
      parts.push_back(qtc::ref::slice_rows(q, 0, 0));  // a rank without rows
      for (int64_t r0 = 0; r0 < q.rows; r0 += g) parts.push_back(qtc::ref::slice_rows(q, r0, std::min(q.rows, r0 + g)));
      const qtc::QuantizedTensor back = qtc::ref::concat_rows(parts);
      // Slicing and joining must be lossless (padded and swizzled layouts may carry padding bytes the file
      // chose; they are rebuilt as zeros, so only compact planes are compared bit for bit).
      bool compact = true;
      for (const auto* p : {&q.rowwise, &q.columnwise})
        if (*p && (*p)->scale.layout != qtc::ScaleLayout::kCompact) compact = false;
      if (compact && !qtc::ref::bitwise_equal(back, q)) __builtin_trap();
    } catch (const qtc::Error&) {
    }
  }
  return 0;
}
