/// \file untrusted.hpp
/// \brief Helpers for numbers and names read from files (safetensors vectors, checkpoint indexes and
///        shard files): size arithmetic that cannot wrap, a memory bound for what a file asks to hold,
///        and names made safe to print. Every parser of qtc computes sizes derived from a file through
///        these functions and compares them with the bytes actually present.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "qtc/error.hpp"

namespace qtc {

/// a * b for a, b >= 0, or nullopt when either is negative or the product overflows int64.
inline std::optional<int64_t> mul_nonneg(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return std::nullopt;
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a + b for a, b >= 0, or nullopt on overflow or a negative operand.
inline std::optional<int64_t> add_nonneg(int64_t a, int64_t b) {
  if (a < 0 || b < 0) return std::nullopt;
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// The product of sizes (element counts, element sizes) as a byte or element count; throws qtc::Error
/// naming `what` when a factor is negative or the product does not fit in int64.
inline int64_t checked_size(std::initializer_list<int64_t> factors, const std::string& what) {
  int64_t r = 1;
  for (int64_t f : factors) {
    const auto p = mul_nonneg(r, f);
    if (!p) {
      std::string s;
      for (int64_t g : factors) s += (s.empty() ? "" : " x ") + std::to_string(g);
      throw Error(what + ": the size " + s + (f < 0 ? " has a negative factor" : " overflows a 64-bit count"));
    }
    r = *p;
  }
  return r;
}

/// Sum of two sizes, checked like checked_size.
inline int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  const auto s = add_nonneg(a, b);
  if (!s) throw Error(what + ": the size " + std::to_string(a) + " + " + std::to_string(b) + " overflows a 64-bit count");
  return *s;
}

/// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b.
inline int64_t ceil_div_nonneg(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

/// Bytes of physical memory of this machine (0 when unknown).
inline uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

/// "1.5 GiB" style text of a byte count.
inline std::string bytes_text(uint64_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 6) v /= 1024.0, ++u;
  char b[48];
  if (u == 0)
    std::snprintf(b, sizeof b, "%llu bytes", static_cast<unsigned long long>(n));
  else
    std::snprintf(b, sizeof b, "%.1f %s", v, units[u]);
  return b;
}

/// Throws qtc::Error (a resource limit, not a crash) when `bytes` that `what` asks to hold in memory
/// exceed the machine's physical memory.
inline void check_fits_in_memory(uint64_t bytes, const std::string& what) {
  const uint64_t mem = physical_memory_bytes();
  if (mem != 0 && bytes > mem)
    throw Error(what + " needs " + bytes_text(bytes) + " (" + std::to_string(bytes) + " bytes) in memory, more than this machine's " +
                bytes_text(mem) + " (resource limit)");
}

/// A name read from a file, quoted for a message: control and non-ASCII bytes escaped as \xNN, a
/// backslash or quote escaped, cut after `max_chars` characters with the full length noted.
inline std::string printable_name(std::string_view s, size_t max_chars = 80) {
  std::string out = "'";
  size_t n = 0;
  for (char c : s) {
    if (n == max_chars) {
      out += "'... (" + std::to_string(s.size()) + " bytes)";
      return out;
    }
    ++n;
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7F || c == '\\' || c == '\'') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "'";
}

/// Text for a terminal or a log line that may hold bytes from a file (a message quoting a name, a metadata value,
/// a path): control bytes (C0, DEL) escaped as \xNN, so no escape sequence, carriage return, bell or line break
/// from a file reaches the output; everything else (UTF-8 included) as it is.
inline std::string printable_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace qtc
