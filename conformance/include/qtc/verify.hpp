/// \file verify.hpp
/// \brief Verifying conformance vectors (VECTORS.md): re-run the recipe on a vector's input with a backend and
///        compare every expected output the file carries, bit for bit.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/backend.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::conformance {

/// VECTORS.md verdicts.
enum class Verdict { kPass, kFail, kError, kSkipped };
std::string_view verdict_name(Verdict v);

/// The verdict of one file (or one generated case) on one backend.
struct FileResult {
  std::string path;     ///< the file (or case id)
  std::string backend;  ///< "cpu", "cuda"; empty when the file could not be read
  Verdict verdict = Verdict::kError;
  std::string message;               ///< one line; empty on pass
  std::vector<std::string> details;  ///< one line per mismatching tensor (fail)
  std::string recipe;                ///< Recipe::name(), when the metadata parsed
  std::string profile;               ///< profile name, when the metadata parsed
  std::vector<std::string> checked;  ///< the tensors compared
};

/// The expected-output tensor names of VECTORS.md, in the order they are checked.
const std::vector<std::string>& expected_tensor_names();

/// How strictly a vector is checked.
struct VerifyOptions {
  /// Under layout=te, padding entries must be zero (a non-zero one is a failure naming the tensor and its
  /// coordinates); by default they are not compared (TE's quantize kernels never write them).
  bool strict_padding = false;
};

/// Verifies an in-memory vector. `source` names it in messages. Never throws: every problem is a verdict.
/// The metadata keys `layout` / `swizzled` say how the output buffers are laid out (native_layout.hpp).
FileResult verify_vector(const io::File& file, const std::string& source, QuantizeBackend& backend, const VerifyOptions& opts = {});
/// Reads and verifies a file.
FileResult verify_file(const std::filesystem::path& path, QuantizeBackend& backend, const VerifyOptions& opts = {});
/// Verifies a file with several backends (read once); an unreadable file gives one error result.
std::vector<FileResult> verify_file(const std::filesystem::path& path, const std::vector<QuantizeBackend*>& backends,
                                    const VerifyOptions& opts = {});

/// Expands files and directories (recursively: every *.safetensors below, sorted) into files. A path that
/// does not exist, or a directory without any vector, gives an error result in `problems`.
std::vector<std::filesystem::path> collect_vector_files(const std::vector<std::string>& paths,
                                                        std::vector<FileResult>& problems);

/// Counts of verdicts, the closing line and the exit code of `qtc verify`.
struct Summary {
  int passed = 0, failed = 0, skipped = 0, errors = 0;
  void add(Verdict v);
  /// "N passed, N failed" then ", N skipped" and ", N errors" when non-zero.
  std::string closing_line() const;
  /// 2 when any error, else 1 when any failure, else 0.
  int exit_code() const;
};

/// One line for a result that did not pass: "FAIL path [cpu]: message".
std::string result_line(const FileResult& r);

}  // namespace qtc::conformance
