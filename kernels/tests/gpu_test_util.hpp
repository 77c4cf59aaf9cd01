/// \file gpu_test_util.hpp
/// \brief Shared helpers of the GPU conformance tests: the GPU gate (skip with the reason, or fail under
///        QTC_REQUIRE_GPU=1), explicit overridable seeds (QTC_SEED), input generators keyed by (seed, index),
///        and byte/float comparisons whose failure message names the first mismatch, the count, both values
///        in hex and decoded, and the recipe.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "qtc/codec.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/tensor.hpp"

namespace qtc::test {

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

/// The seed of this run: QTC_SEED, or the given default. Printed by every failure message.
inline uint64_t test_seed(uint64_t dflt = 0x5EED2026ull) {
  const char* v = std::getenv("QTC_SEED");
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 0) : dflt;
}

/// Empty when a CUDA device is usable; otherwise the reason.
inline std::string gpu_unavailable_reason() {
  return cuda::device_count() > 0 ? std::string() : std::string("no CUDA device");
}

/// At the top of a GPU test: skips with the reason, or fails when QTC_REQUIRE_GPU=1.
#define QTC_REQUIRE_GPU_OR_SKIP()                                                                     \
  do {                                                                                                \
    const std::string qtc_gpu_reason_ = ::qtc::test::gpu_unavailable_reason();                         \
    if (!qtc_gpu_reason_.empty()) {                                                                   \
      if (::qtc::test::env_flag("QTC_REQUIRE_GPU")) FAIL() << "QTC_REQUIRE_GPU=1 but " << qtc_gpu_reason_; \
      GTEST_SKIP() << qtc_gpu_reason_;                                                                \
    }                                                                                                 \
  } while (0)

/// splitmix64 of (seed, index): a counter-based source, so any slice can be regenerated.
inline uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline double uniform01(uint64_t seed, uint64_t i) { return (static_cast<double>(mix(seed, i) >> 11) + 0.5) * 0x1p-53; }
inline double normal(uint64_t seed, uint64_t i) {
  const double u1 = uniform01(seed, 2 * i), u2 = uniform01(seed, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/// Runs fn(begin, end) over [0, n) on all cores.
inline void parallel_chunks(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t t = std::min<int64_t>(hw, std::max<int64_t>(1, n / 65536));
  if (t <= 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + t - 1) / t;
  for (int64_t k = 0; k < t; ++k) {
    const int64_t b = k * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back(fn, b, e);
  }
  for (auto& th : pool) th.join();
}

inline std::string hex(uint64_t v, int width) {
  std::ostringstream os;
  os << "0x" << std::hex;
  os.width(width);
  os.fill('0');
  os << v;
  return os.str();
}

/// Compares two byte buffers viewed as [rows, cols] elements of `esize` bytes. `describe(bits)` decodes one
/// element. Returns "" when equal, else a message with the first mismatch, the count and both values.
/// F32 elements (esize 4): NaN equals NaN.
inline std::string compare_elems(const std::string& what, const std::vector<uint8_t>& want, const std::vector<uint8_t>& got,
                                 int64_t rows, int64_t cols, size_t esize,
                                 const std::function<std::string(uint64_t)>& describe) {
  std::ostringstream os;
  if (want.size() != got.size()) {
    os << what << ": size " << got.size() << " bytes, expected " << want.size();
    return os.str();
  }
  if (std::memcmp(want.data(), got.data(), want.size()) == 0) return "";
  const int64_t n = static_cast<int64_t>(want.size() / esize);
  int64_t count = 0, first = -1;
  uint64_t fw = 0, fg = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t w = 0, g = 0;
    std::memcpy(&w, want.data() + i * esize, esize);
    std::memcpy(&g, got.data() + i * esize, esize);
    if (w == g) continue;
    if (esize == 4) {
      const float fwv = bits_f32(static_cast<uint32_t>(w)), fgv = bits_f32(static_cast<uint32_t>(g));
      if (std::isnan(fwv) && std::isnan(fgv)) continue;
    }
    if (first < 0) {
      first = i;
      fw = w;
      fg = g;
    }
    ++count;
  }
  if (count == 0) return "";
  const int64_t r = cols > 0 ? first / cols : 0, c = cols > 0 ? first % cols : first;
  os << what << ": " << count << " of " << n << " elements differ; first at [" << r << ", " << c << "] (flat " << first
     << "): expected " << hex(fw, static_cast<int>(2 * esize)) << " (" << describe(fw) << "), got "
     << hex(fg, static_cast<int>(2 * esize)) << " (" << describe(fg) << ")";
  return os.str();
}

}  // namespace qtc::test
