/// \file fuzz_ckpt_index.cpp
/// \brief Fuzz target: a checkpoint's index.json. The index carries an xxHash3 of its body; the target re-seals
///        it (recomputes the checksum of whatever body the input holds) so the fuzzer reaches the checks behind
///        it: types, ranges, file names, the file list's consistency.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "qtc/checkpoint.hpp"
#include "qtc/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  // Re-seal: a JSON object with a body gets the body's true checksum (other inputs go in as they are).
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.is_object() && j.contains("body")) {
      const std::string bs = j.at("body").dump();
      char h[17];
      std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bs.data(), bs.size())));
      j["xxh3"] = h;
      text = j.dump(1);
    }
  } catch (const nlohmann::json::exception&) {
  }
  try {
    const qtc::ref::CheckpointIndex idx =
        qtc::ref::parse_index(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), "fuzz/index.json");
    (void)idx;
  } catch (const qtc::Error&) {
  }
  return 0;
}
