/// \file cmd_report.cpp
/// \brief `qtc report`: writes the qtc report (Markdown + one self-contained HTML page + JSON summary) from
///        benchmark JSON, compare.py dumps against a baseline, `qtc conform` results and the run history.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "qtc/report.hpp"
#include "qtc/untrusted.hpp"

namespace qtc::conformance {

namespace {

struct ReportOptions {
  std::vector<std::string> bench, compare, compare_cpu, conform;
  std::string baseline, history, out = "qtc-report", title = "qtc report";
  bool record = false;
  bool fail_on_regression = false;
  double alpha = 0.05;
  double min_change = 0.05;
};

int run_report(const ReportOptions& o) {
  report::Inputs in;
  in.title = o.title;
  for (const auto& p : o.bench) in.bench_json.emplace_back(p);
  for (const auto& p : o.compare) in.compare_json.emplace_back(p);
  for (const auto& p : o.compare_cpu) in.compare_cpu_json.emplace_back(p);
  for (const auto& p : o.conform) in.conform_json.emplace_back(p);
  in.baseline = o.baseline;
  in.history_dir = o.history;
  in.record_history = o.record;
  in.alpha = o.alpha;
  in.min_change = o.min_change;
  report::Outputs out;
  try {
    out = report::write_report(in, o.out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qtc report: %s\n", e.what());
    return 2;
  }
  for (const auto& w : out.warnings) std::fprintf(stderr, "qtc report: warning: %s\n", printable_text(w).c_str());
  std::printf("%s\n", ::fmt::format("markdown: {}\nhtml: {}\nsummary: {}", out.markdown.string(), out.html.string(), out.json.string()).c_str());
  if (!out.history_record.empty()) std::printf("history record: %s\n", out.history_record.string().c_str());
  std::printf("%d regression%s against the baseline, %d conformance failure%s\n", out.regressions, out.regressions == 1 ? "" : "s",
              out.conform_failed, out.conform_failed == 1 ? "" : "s");
  std::printf("%s\n", out.dir.string().c_str());  // the report's folder, printed last
  std::fflush(stdout);
  return o.fail_on_regression && out.regressions > 0 ? 1 : 0;
}

}  // namespace

void register_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand("report", "Write the benchmark and conformance report (Markdown, HTML with SVG plots, JSON)");
  cmd->footer(
      "Writes qtc_report.md, qtc_report.html (self-contained: open it in any browser) and qtc_report.json into\n"
      "--out, plots beside them in plots/ (rendered by gnuplot). Prints the folder's path last.\n"
      "A benchmark counts as a regression when compare.py's U test over the repetitions gives p < --alpha and its\n"
      "median time (real, or CPU with --compare-cpu) grew by more than --min-change. scripts/bench_report.sh runs the benchmarks and compare.py\n"
      "and then this command. Exit status: 0; 1 with --fail-on-regression when something regressed; 2 when the\n"
      "report cannot be written.");
  cmd->add_option("--bench", o->bench, "Google Benchmark JSON files of this run")->check(CLI::ExistingFile);
  cmd->add_option("--compare", o->compare, "compare.py -d dumps (baseline vs this run), judged on real time")->check(CLI::ExistingFile);
  cmd->add_option("--compare-cpu", o->compare_cpu, "compare.py -d dumps judged on CPU time (CPU suites on a shared machine)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--baseline", o->baseline, "Where the baseline came from (shown in the report)");
  cmd->add_option("--conform", o->conform, "`qtc conform` report.json files")->check(CLI::ExistingFile);
  cmd->add_option("--history", o->history, "Folder of past runs' records (reports/history)");
  cmd->add_flag("--record", o->record, "Also write this run's record into --history");
  cmd->add_option("--out", o->out, "Report folder")->capture_default_str();
  cmd->add_option("--title", o->title, "Report title")->capture_default_str();
  cmd->add_option("--alpha", o->alpha, "U-test significance level")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("--min-change", o->min_change, "Smallest relative slowdown reported as a regression")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  cmd->add_flag("--fail-on-regression", o->fail_on_regression, "Exit 1 when a benchmark regressed");
  cmd->callback([o] { exit_code() = run_report(*o); });
}

}  // namespace qtc::conformance
