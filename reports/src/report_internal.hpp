/// \file report_internal.hpp
/// \brief The report's model (what the inputs say) and its renderers, shared by report_*.cpp.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qtc/report.hpp"

namespace qtc::report::detail {

using nlohmann::json;

/// One benchmark of one run, repetitions folded: the median (or the single run) real time.
struct BenchPoint {
  std::string suite;  ///< the file's qtc_suite context, else the file stem
  std::string name;   ///< run name without aggregate suffix, e.g. "quantize/nvfp4_1x16/real_time"
  std::string time_unit;
  double real_time = 0;   ///< in time_unit
  double seconds = 0;     ///< real_time in seconds
  int repetitions = 1;
  std::map<std::string, double> counters;  ///< user counters (of the median entry when aggregated)
  double bandwidth_gbs() const;            ///< counter "GB/s" (or "GBps"), else bytes_per_second / 1e9; 0 if none
  double tflops() const;                   ///< counter "TFLOP/s" (or "TFLOPS", "TFLOPs"); 0 if none
};

struct BenchFile {
  std::string path;
  std::string suite;
  std::map<std::string, std::string> context;  ///< Google Benchmark's context, qtc fields included
  std::vector<BenchPoint> points;
};

/// Bandwidth of one kernel against the copy benchmark of its suite.
struct BandwidthRow {
  std::string suite, name;
  double gbs = 0, copy_gbs = 0, fraction = 0, seconds = 0;
  double peak_extra_x_input = -1;  ///< counter of the same name, -1 if absent
  double cpu_s_all_threads = -1;   ///< counter of the same name (CPU suites), -1 if absent
};

/// One GEMM against cuBLASLt.
struct GemmRow {
  std::string suite, name;
  double tflops = 0;
  double cublaslt_tflops = 0;  ///< 0 when no counterpart was found
  std::string baseline_kind = "cuBLASLt";  ///< what cublaslt_tflops measured
};

/// Conformance verdict counts of one (recipe, backend, profile).
struct ConformCell {
  std::string recipe, backend, profile;
  int passed = 0, failed = 0, errors = 0, skipped = 0;
  std::vector<std::string> notes;  ///< a few failure details
};

/// One check that failed or errored, with its message (the report's summary lists them first).
struct ConformFailure {
  std::string verdict;  ///< "fail" or "error"
  std::string recipe, profile, backend;
  std::string check;    ///< "suite check" when the producer names them (e.g. "bundled verify")
  std::string path, message;
};

struct Conformance {
  std::vector<std::string> sources;
  std::vector<ConformCell> cells;
  std::vector<ConformFailure> failures;  ///< in the producer's order
  std::vector<std::string> divergence_columns;
  std::vector<std::vector<std::string>> divergence_rows;
  std::map<std::string, std::string> summary;  ///< top-level scalars (totals, backend, date, ...)
};

/// One past run (reports/history/*.json).
struct HistoryRun {
  std::string file, date, commit, machine_kind;
  std::map<std::string, double> seconds;  ///< "<suite>:<name>" -> median seconds
};

struct Model {
  Inputs in;
  std::vector<BenchFile> benches;
  std::vector<BandwidthRow> bandwidth;
  std::vector<GemmRow> gemms;
  std::vector<Comparison> comparison;
  Conformance conform;
  std::vector<HistoryRun> history;  ///< oldest first, this run last when it has benchmarks
  std::vector<std::string> warnings;
  std::string generated_utc;
};

/// A field of an input's JSON object whose value has another type than the report reads (a string where a
/// number belongs, ...): the entry it belongs to is left out and the report names the file and the field.
struct FieldError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// o[key] as a string / number / integer / bool, `dflt` when absent or null; FieldError naming the key otherwise.
std::string str_field(const json& o, const char* key, const std::string& dflt);
double num_field(const json& o, const char* key, double dflt);
int64_t int_field(const json& o, const char* key, int64_t dflt);
bool bool_field(const json& o, const char* key, bool dflt);

/// Reads every input named in `in` into a model (unreadable inputs -> warnings).
Model build_model(const Inputs& in);
/// Parses one Google Benchmark JSON document.
/// An entry with a mistyped field is left out, with a warning naming the file, the entry and the field in `warnings`
/// (or a FieldError when `warnings` is null).
BenchFile parse_bench(const json& j, const std::string& path, std::vector<std::string>* warnings = nullptr);
/// Parses a `qtc conform` report.json into verdict counts and the divergence table.
void parse_conform(const json& j, const std::string& source, Conformance& out, std::vector<std::string>* warnings = nullptr);
/// A JSON scalar (or a list of scalars) as table text.
std::string scalar_text(const json& v);
/// One history record (reports/history/*.json); nullopt, with a warning naming `file` and the field, when it is
/// not an object or a field has another type.
std::optional<HistoryRun> parse_history_record(const json& j, const std::string& file, std::vector<std::string>& warnings);
/// Text from an input as a gnuplot string literal of the script: single-quoted (no backquote, macro or escape
/// expansion), quotes doubled, control characters as spaces.
std::string gnuplot_quote(const std::string& s);
/// Text from an input as a double-quoted string column of a gnuplot data file (no '"' or control character inside).
std::string gnuplot_data_quote(const std::string& s);
/// This run as a history record.
json history_record(const Model& m);

/// One rendered plot: its SVG text (no XML prolog, ready to inline) and the file it was saved to.
struct Plot {
  std::string id, title, svg, file;
  std::string error;  ///< why it is missing, when svg is empty
};
/// Renders the plots of the model with gnuplot into dir/plots/.
std::vector<Plot> render_plots(const Model& m, const fs::path& dir);

std::string render_markdown(const Model& m, const std::vector<Plot>& plots);
std::string render_html(const Model& m, const std::vector<Plot>& plots);
json render_summary(const Model& m);

/// Text helpers.
std::string html_escape(const std::string& s);
std::string md_escape(const std::string& s);
std::string fmt_num(double v, int sig = 4);
/// A profile's place in the order of the profile records (profile.hpp: all_profiles); unknown names after them,
/// "-" last (report_profiles.cpp).
int profile_rank(const std::string& name);

}  // namespace qtc::report::detail
