/// \file checkpoint_internal.hpp
/// \brief What the checkpoint sources share: the on-disk format's constants and names, JSON conversion of
///        index entries, typed JSON access that turns every surprise into a qtc::Error, and the parser of
///        one tensor of a shard file.
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "qtc/checkpoint.hpp"
#include "qtc/error.hpp"

namespace qtc::ref::ckpt_detail {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kMagic[8] = {'Q', 'T', 'C', 'S', 'H', 'A', 'R', 'D'};
constexpr uint32_t kVersion = 1;
constexpr size_t kPreamble = 32;  // magic 8, version 4, flags 4, header length 8, header xxh3 8
constexpr const char* kIndexName = "index.json";
constexpr int64_t kMaxDim = int64_t{1} << 40;

std::string hex64(uint64_t v);
uint64_t parse_hex64(const std::string& s, const std::string& where);
std::string shard_file_name(uint64_t gen, int rank, int world);
const char* plane_key(PlaneKind p);
const char* scale_type_name(ScaleType t);
std::string checkpoint_layout_name(ScaleLayout l);
DType dtype_from_name(const std::string& s, const std::string& where);

json plane_json(const Plane& p, PlaneKind k);
json entry_json(const ShardEntry& e);
json info_json(const ShardFileInfo& f);

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

ShardEntry entry_from_json(const json& j, const std::string& where);
ShardFileInfo info_from_json(const json& j, const std::string& where);


/// Parses and validates one tensor of a shard file; `payload` is the file's payload region.
TensorShard parse_tensor(const json& j, const uint8_t* payload, uint64_t payload_size, const std::string& where0);

uint64_t read_u64(const uint8_t* p);
uint32_t read_u32(const uint8_t* p);
bool plane_bits_equal(const std::optional<Plane>& a, const std::optional<Plane>& b);

/// Checks that the files form one consistent checkpoint: ranks 0..world-1 once each, and every tensor's
/// shards cover its rows exactly once with one column count.
void check_consistent(int world, std::span<const ShardFileInfo> files, const std::string& where);

}  // namespace qtc::ref::ckpt_detail
