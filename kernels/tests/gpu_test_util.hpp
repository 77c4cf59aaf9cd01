/// \file gpu_test_util.hpp
/// \brief What the GPU conformance tests add to the verdict library (qtc/test_support.hpp: first-mismatch
///        assertions, the GPU gate, QTC_SEED, the input families): the device's reason, env flags, hex.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "qtc/cuda/quantize.hpp"
#include "qtc/test_support.hpp"

namespace qtc::test {

using qtc::testing::Family;
using qtc::testing::make_input;
using qtc::testing::mix;
using qtc::testing::normal;
using qtc::testing::uniform01;

/// The seed of the GPU quantize suite: QTC_SEED, or this default.
inline uint64_t test_seed() { return qtc::testing::test_seed(0x5EED2026ull); }

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

/// Empty when a CUDA device is usable; otherwise the reason (the first argument of QTC_GPU_GATE).
inline std::string gpu_unavailable_reason() {
  return cuda::device_count() > 0 ? std::string() : std::string("no CUDA device");
}

inline std::string hex(uint64_t v, int width) {
  std::ostringstream os;
  os << "0x" << std::hex;
  os.width(width);
  os.fill('0');
  os << v;
  return os.str();
}

}  // namespace qtc::test
