/// \file verdicts.cpp
/// \brief Verdicts as data and their text: the per-tensor mismatch record's line, element display and comparison,
///        the summary and result lines of `qtc verify` (verify.hpp). Formatting lives here, at the edge; verify.cpp
///        produces records.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "qtc/codec.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {
using Elem = ElementCode;

std::string coord_text(const std::vector<int64_t>& c) { return ref::OutputLayout::coords_text(c); }
}  // namespace

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kFail: return "fail";
    case Verdict::kError: return "error";
    case Verdict::kSkipped: return "skipped";
    case Verdict::kEquivalent: return "equivalent";
  }
  return "?";
}

FileResult error_result(std::string path, std::string message) {
  FileResult r;
  r.path = std::move(path);
  r.verdict = Verdict::kError;
  r.message = std::move(message);
  return r;
}

int64_t FileResult::mismatching_elements() const {
  int64_t n = 0;
  for (const TensorMismatch& m : mismatches) n += m.compared() ? m.count : 1;
  return n;
}

std::string mismatch_text(const TensorMismatch& m) {
  if (!m.compared()) return m.tensor + ": " + m.problem;
  std::string coord = coord_text(m.at);
  if (!m.file_at.empty()) coord = coord_text(m.file_at) + " (compact " + coord + ")";
  Mismatch mm;
  mm.count = m.count;
  mm.first = m.first;
  mm.want = m.want;
  mm.got = m.got;
  return mismatch_line(m.tensor, m.elem, mm, m.total, coord, m.block_inputs);
}

std::vector<std::string> detail_lines(const FileResult& r) {
  std::vector<std::string> out;
  out.reserve(r.mismatches.size() + r.details.size());
  for (const TensorMismatch& m : r.mismatches) out.push_back(mismatch_text(m));
  out.insert(out.end(), r.details.begin(), r.details.end());
  return out;
}

void Summary::add(Verdict v) {
  switch (v) {
    case Verdict::kPass: ++passed; break;
    case Verdict::kFail: ++failed; break;
    case Verdict::kError: ++errors; break;
    case Verdict::kSkipped: ++skipped; break;
    case Verdict::kEquivalent: ++equivalent; break;
  }
}

std::string Summary::closing_line() const {
  std::string s = ::fmt::format("{} passed, {} failed", passed, failed);
  if (skipped) s += ::fmt::format(", {} skipped", skipped);
  if (errors) s += ::fmt::format(", {} errors", errors);
  if (equivalent) s += ::fmt::format(", {} equivalent (bytes differ, values equal)", equivalent);
  return s;
}

int Summary::exit_code() const { return errors ? 2 : failed ? 1 : equivalent ? 3 : 0; }

std::string result_line(const FileResult& r) {
  std::string verdict(verdict_name(r.verdict));
  std::transform(verdict.begin(), verdict.end(), verdict.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  std::string line = verdict + " " + r.path;
  if (!r.backend.empty()) line += " [" + r.backend + "]";
  if (!r.message.empty()) line += ": " + r.message;
  // One line per file: messages from elsewhere must not break it, and nothing from a file (a name, a metadata
  // key or value quoted in a message) reaches the terminal as a control character (escape sequences, CR, BEL).
  std::replace(line.begin(), line.end(), '\n', ' ');
  return printable_text(line);
}

std::string element_text(ElementCode e, uint32_t v) {
  switch (e) {
    case Elem::kE2M1: return ::fmt::format("0x{:x} (e2m1 {})", v, decode_e2m1(static_cast<uint8_t>(v)));
    case Elem::kE4M3: return ::fmt::format("0x{:02x} (e4m3 {})", v, decode_e4m3(static_cast<uint8_t>(v)));
    case Elem::kE5M2: return ::fmt::format("0x{:02x} (e5m2 {})", v, decode_e5m2(static_cast<uint8_t>(v)));
    case Elem::kE8M0:
      return v == 0xFF ? std::string("0xff (e8m0 NaN)")
                       : ::fmt::format("0x{:02x} (e8m0 2^{} = {})", v, static_cast<int>(v) - 127, decode_e8m0(static_cast<uint8_t>(v)));
    case Elem::kF32: return ::fmt::format("0x{:08x} ({})", v, bits_f32(v));
    case Elem::kBF16: return ::fmt::format("0x{:04x} (bf16 {})", v, bits_f32(v << 16));
    case Elem::kF16: return ::fmt::format("0x{:04x} (f16 {})", v, f16_to_f32(static_cast<uint16_t>(v)));
    case Elem::kU8: return ::fmt::format("0x{:02x}", v);
  }
  return "?";
}

uint32_t element_at(ElementCode e, const uint8_t* p, int64_t i) {
  switch (e) {
    case Elem::kE2M1: return (p[i / 2] >> (4 * (i % 2))) & 0xFu;
    case Elem::kF32: {
      uint32_t u;
      std::memcpy(&u, p + 4 * i, 4);
      return u;
    }
    case Elem::kBF16:
    case Elem::kF16: {
      uint16_t u;
      std::memcpy(&u, p + 2 * i, 2);
      return u;
    }
    default: return p[i];
  }
}

int64_t element_bytes(ElementCode e, int64_t n) {
  switch (e) {
    case Elem::kE2M1: return (n + 1) / 2;
    case Elem::kF32: return 4 * n;
    case Elem::kBF16:
    case Elem::kF16: return 2 * n;
    default: return n;
  }
}

Mismatch find_mismatch(ElementCode e, const uint8_t* want, const uint8_t* got, int64_t n, bool nan_equal) {
  Mismatch m;
  // Equal bytes mean equal elements (a NaN equals itself); only a difference needs the element loop.
  const int64_t nbytes = element_bytes(e, n);
  if (nbytes == 0 || std::memcmp(want, got, static_cast<size_t>(nbytes)) == 0) return m;
  auto is_nan = [e](uint32_t v) {
    switch (e) {
      case Elem::kF32: return std::isnan(bits_f32(v));
      case Elem::kBF16: return std::isnan(bits_f32(v << 16));
      case Elem::kF16: return (v & 0x7C00u) == 0x7C00u && (v & 0x3FFu) != 0;
      default: return false;
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = element_at(e, want, i), b = element_at(e, got, i);
    if (a == b || (nan_equal && is_nan(a) && is_nan(b))) continue;
    if (m.count++ == 0) m.first = i, m.want = a, m.got = b;
  }
  return m;
}

std::string mismatch_line(std::string_view name, ElementCode e, const Mismatch& m, int64_t total, std::string_view coord,
                          std::string_view block) {
  std::string line = ::fmt::format("{}: {} of {} elements differ; first at {}: expected {}, got {}", name, m.count, total, coord,
                                   element_text(e, m.want), element_text(e, m.got));
  if (!block.empty()) line += ::fmt::format("; block {}", block);
  return line;
}

}  // namespace qtc::conformance
