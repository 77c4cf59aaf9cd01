/// \file report.hpp
/// \brief The qtc report (issue 8): benchmark results with machine context, the comparison with a committed
///        baseline (Google Benchmark's compare.py and its Mann-Whitney U test; no statistics of our own),
///        conformance results, and the history of past runs, written as Markdown, one self-contained HTML page
///        with SVG plots rendered by gnuplot, and a JSON summary.
///
/// `qtc report` (conformance/src/cmd_report.cpp) and `qtc conform` both end in write_report(); the benchmark
/// script (scripts/bench_report.sh) runs the suites with repetitions and compare.py, then `qtc report`.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qtc::report {

namespace fs = std::filesystem;

/// What goes into one report. Every list may be empty; the report says what it did not get.
struct Inputs {
  std::string title = "qtc report";
  std::vector<fs::path> bench_json;    ///< Google Benchmark JSON files of this run (--benchmark_format=json)
  std::vector<fs::path> compare_json;  ///< `compare.py -d OUT benchmarks BASELINE NEW` dumps, judged on real time
  std::vector<fs::path> compare_cpu_json;  ///< same, judged on cpu_time: CPU suites that MeasureProcessCPUTime on
                                           ///< a machine shared with other work (real time follows the load)
  std::string baseline;                ///< where the baseline came from (shown), e.g. reports/baselines/<kind>
  std::vector<fs::path> conform_json;  ///< `qtc conform`'s report.json files
  std::optional<nlohmann::json> conform;  ///< or the same JSON in memory (what `qtc conform` passes)
  fs::path history_dir;                ///< past runs' summaries (reports/history/*.json); empty: none
  bool record_history = false;         ///< also write this run's summary into history_dir
  double alpha = 0.05;                 ///< U-test significance level (compare.py's --alpha)
  double min_change = 0.05;            ///< smallest relative slowdown that counts as a regression
};

/// What write_report() produced.
struct Outputs {
  fs::path dir;       ///< the report folder
  fs::path markdown;  ///< dir/qtc_report.md (plots beside it in dir/plots/*.svg)
  fs::path html;      ///< dir/qtc_report.html, self-contained (inline CSS and SVG, nothing fetched)
  fs::path json;      ///< dir/qtc_report.json, the summary (also the history record format)
  fs::path history_record;  ///< the file written into history_dir, if any
  int regressions = 0;      ///< benchmarks slower than the baseline beyond the run-to-run spread
  int conform_failed = 0;   ///< conformance cases that failed or errored
  std::vector<std::string> warnings;  ///< inputs that could not be read, plots that could not be drawn
};

/// Writes the report into out_dir (created if needed). Unreadable inputs become warnings in the report,
/// not exceptions; only an unwritable out_dir throws.
Outputs write_report(const Inputs& in, const fs::path& out_dir);

/// What `qtc conform` calls after writing dir/report.json: write_report() into the same folder with that
/// report.json, the committed history (<source tree>/reports/history) and, when bench_dir names the folder of a
/// scripts/bench_report.sh run (e.g. build/bench-report/latest), its benchmark JSON (bench/*.json) and
/// comparisons (compare/*.json). Adds qtc_report.{md,html,json} and plots/ beside report.{md,json}.
Outputs write_report_for_conform(const fs::path& dir, const fs::path& bench_dir = {});

/// The opening of a conformance report as Markdown, from `qtc conform`'s report.json: "## Verdict", the verdict
/// line, the recipe x profile x backend matrix (pass / FAIL / skip per cell) and the first failures with their
/// messages. `qtc conform`'s report.md starts with it; qtc_report.md and .html open with the same section.
std::string conform_summary_markdown(const nlohmann::json& conform_report);

/// One benchmark of the baseline comparison.
struct Comparison {
  std::string name;
  std::string time_unit;
  std::string metric = "real time";  ///< or "CPU time"
  double old_time = 0;  ///< median time of the baseline (mean if the dump has no median)
  double new_time = 0;
  double change = 0;    ///< (new - old) / old
  std::optional<double> pvalue;  ///< U-test p-value of that time; empty with too few repetitions
  int reps_old = 0, reps_new = 0;
  enum class Verdict { kRegression, kImprovement, kSame, kUntested } verdict = Verdict::kUntested;
};

/// Reads a compare.py dump: a regression is a slowdown with p < alpha and change > min_change, on real time
/// (or on cpu_time when cpu_time is set).
/// An entry with a field of the wrong type (a string where a number belongs, ...) is left out, with a line naming
/// the entry and the field in `problems`; with `problems` null, it throws qtc::Error with that line.
std::vector<Comparison> read_comparison(const nlohmann::json& dump, double alpha, double min_change, bool cpu_time = false,
                                        std::vector<std::string>* problems = nullptr);
std::string_view verdict_name(Comparison::Verdict v);

}  // namespace qtc::report
