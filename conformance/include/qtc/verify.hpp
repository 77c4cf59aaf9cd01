/// \file verify.hpp
/// \brief Verifying conformance vectors (VECTORS.md): re-run the recipe on a vector's input with a backend and
///        compare every expected output the file carries, bit for bit.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "qtc/backend.hpp"
#include "qtc/safetensors.hpp"

namespace qtc {
struct HybridRecipe;  // qtc/hybrid.hpp
}  // namespace qtc

namespace qtc::conformance {

/// VECTORS.md verdicts, and kEquivalent (issue 26): bytes differ, the decoded values are all equal
/// (value_equivalence.hpp); `qtc verify` exits 3 when that is the worst verdict.
enum class Verdict { kPass, kFail, kError, kSkipped, kEquivalent };
std::string_view verdict_name(Verdict v);

/// How the elements of a compared buffer are encoded.
enum class ElementCode { kE2M1, kE4M3, kE5M2, kE8M0, kF32, kBF16, kF16, kU8 };

/// One expected tensor that the backend did not reproduce: a record, formatted only where it is shown (the CLI's
/// line, GoogleTest's message, Python's exception fields); identify and the Python module read its fields.
struct TensorMismatch {
  std::string tensor;             ///< the VECTORS.md name, e.g. "rowwise_scale_inv"
  /// Set when the tensor could not be compared element by element (the backend produced no such plane, a buffer
  /// of another shape, non-zero padding under --strict-padding): what is wrong, without the tensor's name. The
  /// element fields below are then unset (count 1, total 0).
  std::string problem;
  ElementCode elem = ElementCode::kU8;
  int64_t count = 1;              ///< differing elements
  int64_t total = 0;              ///< elements compared
  int64_t first = -1;             ///< flat index of the first differing element, in the compact order
  std::vector<int64_t> at;        ///< its compact coordinates ([i] or [i, j])
  std::vector<int64_t> file_at;   ///< where the file's buffer holds it, when the file's layout is not compact
  uint32_t want = 0, got = 0;     ///< the first differing element's bits: the file's, the backend's
  std::string block_inputs;       ///< the inputs of its quantization block: "x[0, 0:16] = {...}" (may be empty)

  bool compared() const { return problem.empty(); }
  /// count / total (1 when nothing could be compared).
  double fraction() const { return total > 0 ? static_cast<double>(count) / static_cast<double>(total) : 1.0; }
};

/// `qtc verify`'s line for a mismatch: "<tensor>: N of T elements differ; first at <coord>: expected <want>, got
/// <got>; block <inputs>", or "<tensor>: <problem>".
std::string mismatch_text(const TensorMismatch& m);

/// The verdict of one file (or one generated case) on one backend.
struct FileResult {
  std::string path;     ///< the file (or case id)
  std::string backend;  ///< "cpu", "cuda"; empty when the file could not be read
  Verdict verdict = Verdict::kError;
  std::string message;               ///< one line; empty on pass
  std::vector<std::string> details;  ///< further lines that are not per-tensor mismatches (SR checks, notes)
  std::string recipe;                ///< Recipe::name(), when the metadata parsed
  std::string profile;               ///< profile name, when the metadata parsed
  std::vector<std::string> checked;  ///< the tensors compared
  std::vector<TensorMismatch> mismatches;  ///< one per expected tensor that differs (fail, equivalent), in check order

  /// Differing elements over every mismatching tensor (a tensor that could not be compared counts one).
  int64_t mismatching_elements() const;
};

/// An error result for `path` (no backend): what a file that cannot be read or found gives.
FileResult error_result(std::string path, std::string message);
/// The lines to show under a result: one per mismatching tensor (mismatch_text), then `details`.
std::vector<std::string> detail_lines(const FileResult& r);

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
/// Verifies a hybrid vector (recipe=hybrid: hybrid.hpp, conformance/README.md "Hybrid planes"): one vector per
/// plane, each of its plane's recipe; the columnwise input is x or the rowwise plane quantized and dequantized by
/// `backend`. verify_vector calls it for such files. Never throws.
FileResult verify_hybrid_vector(const io::File& file, const std::string& source, QuantizeBackend& backend,
                                const VerifyOptions& opts = {});
// The steps of verify_hybrid_vector that a verification of device memory (qtc/cuda/verify.hpp) shares, so that both
// split, name and join a hybrid vector alike and print the same texts.
/// The plane a hybrid vector's tensor belongs to and its name in that plane's vector ('rowwise.scale_inv' is the
/// rowwise vector's 'scale_inv'); nullopt for any other name (x and columnwise_source included).
std::optional<std::pair<PlaneKind, std::string>> hybrid_tensor_plane(const std::string& name);
/// Reads a hybrid vector's recipe from its metadata into h and names res.recipe and res.profile ("P" or "P/Q") after
/// it; returns the metadata's error text when it names no valid hybrid recipe (empty: read).
std::string read_hybrid_recipe(const std::map<std::string, std::string>& md, HybridRecipe& h, FileResult& res);
/// The ERROR message for a tensor that no hybrid vector holds.
std::string not_a_hybrid_output_text(const std::string& name);
/// The metadata of one plane's vector: the plane's recipe and the file's layout keys.
std::map<std::string, std::string> hybrid_part_metadata(const HybridRecipe& h, PlaneKind plane,
                                                        const std::map<std::string, std::string>& metadata);
/// The ERROR message for a columnwise_source tensor that is not `want` [rows, cols].
std::string columnwise_source_shape_text(DType want, int64_t rows, int64_t cols, std::string_view dtype, size_t rank);
/// The FAIL message for a columnwise_source that differs from the rowwise plane dequantized by `backend`.
std::string columnwise_source_mismatch_text(int64_t bad, int64_t total, int64_t first_row, int64_t first_col, float expected,
                                            std::string_view backend);
/// Joins the per-plane results (`parts`, of the planes `planes`) into `res`: checked tensors and records under the
/// file's names, the worst verdict with its plane's prefix.
void join_hybrid_results(FileResult& res, const HybridRecipe& h, const std::vector<FileResult>& parts,
                         const std::vector<PlaneKind>& planes);
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
  int passed = 0, failed = 0, skipped = 0, errors = 0, equivalent = 0;
  void add(Verdict v);
  /// "N passed, N failed" then ", N skipped", ", N errors" and ", N equivalent (bytes differ, values equal)" when non-zero.
  std::string closing_line() const;
  /// 2 when any error, else 1 when any failure, else 3 when any file is equivalent (bytes differ, values equal), else 0.
  int exit_code() const;
};

/// One line for a result that did not pass: "FAIL path [cpu]: message".
std::string result_line(const FileResult& r);

// ---------------------------------------------------------------------------------------------------
// The first-mismatch message of `qtc verify`, shared with the test library (qtc/test_support.hpp) so that a
// failing test prints exactly the line `qtc verify` prints for the same buffers.

/// One element as `qtc verify` shows it: "0x3c (e4m3 1.5)", "0x3fc00000 (1.5)"; kU8 (a byte of unknown format): "0x3c".
std::string element_text(ElementCode e, uint32_t bits);
/// Element i of a buffer (E2M1: nibble i, low nibble first; F32: 4 bytes; BF16/F16: 2 bytes; else 1 byte).
uint32_t element_at(ElementCode e, const uint8_t* p, int64_t i);
/// Bytes that n elements occupy.
int64_t element_bytes(ElementCode e, int64_t n);
/// How many of n elements differ and the first one. nan_equal: a NaN equals any NaN (F32, BF16, F16), as `qtc verify`
/// compares; otherwise bit patterns are compared.
struct Mismatch {
  int64_t count = 0, first = -1;
  uint32_t want = 0, got = 0;
};
Mismatch find_mismatch(ElementCode e, const uint8_t* want, const uint8_t* got, int64_t n, bool nan_equal);
/// "<name>: N of T elements differ; first at <coord>: expected <want>, got <got>" and "; block <block>" when
/// `block` is not empty: the line of `qtc verify`.
std::string mismatch_line(std::string_view name, ElementCode e, const Mismatch& m, int64_t total, std::string_view coord,
                          std::string_view block);
/// The expect stage's rules for one expected tensor as a caller gives it, shared by `qtc verify` and the Python
/// module's device path: the ERROR message for a tensor that is not an output of recipe r (VECTORS.md, Tensors), and
/// for a dtype that cannot hold it (F32 values, or a byte type for codes and E4M3 / E8M0 scales; empty when it fits).
std::string not_an_output_text(std::string_view name, const Recipe& r);
std::string dtype_problem(std::string_view name, std::string_view dtype, bool want_f32);
/// The inputs of the quantization block behind element (a, b) (compact coordinates, elements) of the VECTORS.md
/// output `tensor` of recipe r on x: "x[0, 0:16] = {...}" as `qtc verify` prints it; empty when `tensor` is not an
/// output of r.
std::string block_inputs_text(const Recipe& r, std::string_view tensor, int64_t a, int64_t b, const MatrixView& x);
/// The same for an x that is not in host memory (the Python module's CUDA tensors): `at(i, j)` reads x's element
/// (i, j) of an [M, K] input as a float; only the values the text shows (at most 32) are read.
std::string block_inputs_text(const Recipe& r, std::string_view tensor, int64_t a, int64_t b, int64_t M, int64_t K,
                              const std::function<float(int64_t, int64_t)>& at);

}  // namespace qtc::conformance
