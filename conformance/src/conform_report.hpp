/// \file conform_report.hpp
/// \brief The report of `qtc conform`: report.json (everything) and report.md (summary, matrix, failures,
///        per-file verdicts), both from the same records.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "qtc/identify.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

/// One verdict of a conform run.
struct ConformRecord {
  std::string suite;  ///< "bundled" or "generated"
  std::string check;  ///< "verify" (vector against a backend), "roundtrip" (safetensors write/read), "bound" (error bound)
  FileResult result;
};

/// Run-level facts written at the top of the report.
struct ConformRun {
  std::string version;
  std::string started;       ///< UTC, ISO 8601
  double seconds = 0.0;
  uint64_t seed = 0;
  std::string vectors_dir;
  std::vector<std::string> backends;  ///< "cpu", "cuda (skipped: reason)"
  int recipes = 0;                    ///< generated recipe variants
  int cases = 0;                      ///< generated cases
  std::vector<std::string> foreign_dirs;  ///< --foreign paths
  /// Attribution of every bundled and foreign vector to the profiles that reproduce it (identify.hpp); the
  /// divergence table of the report groups them.
  std::vector<std::pair<std::string, VectorIdentity>> identities;  ///< (suite, identity)
};

/// Writes report.json and report.md into `dir`.
void write_conform_report(const std::filesystem::path& dir, const ConformRun& run, const std::vector<ConformRecord>& records);

}  // namespace qtc::conformance
