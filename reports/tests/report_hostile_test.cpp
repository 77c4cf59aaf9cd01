/// \file report_hostile_test.cpp
/// \brief The report's hostile inputs (issue 21): names and commits that try to reach a shell through gnuplot,
///        markup in names, mistyped fields, a history record that tries to leave its folder.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "qtc/report.hpp"
#include "report_test_util.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using qtc::report::test::make_run;
using qtc::report::test::slurp;

// ---- Hostile inputs (issue 21) -------------------------------------------------------------------

/// A benchmark JSON whose names and commit try to run shell commands through gnuplot (backquotes expand inside
/// gnuplot's double-quoted strings) and to inject gnuplot commands with a newline. Before: the report ran them.
TEST(ReportHostile, NamesNeverReachAShell) {
  const fs::path dir = qtc::report::test::scratch_dir() / "qtc_report_hostile_gnuplot";
  fs::remove_all(dir);
  fs::create_directories(dir / "history");
  const fs::path pwned = dir / "PWNED", pwned2 = dir / "PWNED2", pwned3 = dir / "PWNED3";
  const std::string tick = "`touch " + pwned.string() + "`";
  json run = make_run({{"copy/bf16", {10, 10.2, 9.9}},
                       {"quantize/" + tick, {800, 810, 790}},
                       {"q/x'); system('touch " + pwned2.string() + "'); print('", {800, 810, 790}},
                       {"q/nl\nsystem(\"touch " + pwned3.string() + "\")\n#", {800, 810, 790}}},
                      "abc1234");
  std::ofstream(dir / "evil.json") << run.dump();
  // Plain commits and dates here: with a backquote in the 7 characters of a commit, the old script broke on an
  // unterminated backquote before it reached the plot titles (which ran `touch`).
  std::ofstream(dir / "history" / "old.json")
      << json{{"date", "2026-11-01T10:00:00Z"}, {"commit", "0000001"}, {"machine_kind", "k"},
              {"seconds", {{"crafted:quantize/" + tick, 0.9}}}}.dump();
  run["context"]["qtc_commit"] = "`touch " + (dir / "PWNED4").string() + "`";
  std::ofstream(dir / "evil_commit.json") << run.dump();
  json diff = json::array({{{"name", "quantize/" + tick}, {"time_unit", "ms"}, {"run_type", "iteration"},
                            {"measurements", json::array({{{"real_time", 1.0}, {"real_time_other", 2.0}}})},
                            {"utest", {{"time_pvalue", 0.001}, {"nr_of_repetitions", 9}, {"nr_of_repetitions_other", 9}}}}});
  std::ofstream(dir / "diff.json") << diff.dump();
  qtc::report::Inputs in;
  in.bench_json = {dir / "evil.json"};
  in.compare_json = {dir / "diff.json"};
  in.history_dir = dir / "history";
  const auto out = qtc::report::write_report(in, dir / "out");
  in.bench_json = {dir / "evil_commit.json"};
  (void)qtc::report::write_report(in, dir / "out_commit");
  EXPECT_FALSE(fs::exists(dir / "PWNED4")) << "a backquoted commit ran a shell command";
  EXPECT_FALSE(fs::exists(pwned)) << "a backquoted name ran a shell command";
  EXPECT_FALSE(fs::exists(pwned2)) << "a quote in a name ended the gnuplot string";
  EXPECT_FALSE(fs::exists(pwned3)) << "a newline in a name started a gnuplot command";
  for (const char* id : {"bandwidth", "comparison", "history"}) {
    const std::string gp = slurp(dir / "out" / "plots" / (std::string(id) + ".gp"));
    ASSERT_FALSE(gp.empty()) << id;
    // Every line of the script is ours: none starts with the injected command.
    std::istringstream lines(gp);
    for (std::string l; std::getline(lines, l);) EXPECT_NE(l.rfind("system(", 0), 0u) << id << ": " << l;
    EXPECT_EQ(gp.find("\"abc`"), std::string::npos) << id;
  }
  const std::string html = slurp(out.html);
  EXPECT_NE(html.find("<svg"), std::string::npos) << "the plots still render: " << (out.warnings.empty() ? "" : out.warnings[0]);
}

/// Names with markup are text in both renderings. Before: Markdown passed '<' through.
TEST(ReportHostile, MarkupInNamesIsEscaped) {
  const fs::path dir = qtc::report::test::scratch_dir() / "qtc_report_hostile_html";
  fs::remove_all(dir);
  fs::create_directories(dir);
  json run = make_run({{"copy/bf16", {10, 10.2, 9.9}}, {"quantize/<script>alert(1)</script>", {800, 810, 790}}},
                      "<img src=x onerror=alert(2)>");
  run["context"]["qtc_suite"] = "s\"'><b>";
  std::ofstream(dir / "b.json") << run.dump();
  qtc::report::Inputs in;
  in.bench_json = {dir / "b.json"};
  const auto out = qtc::report::write_report(in, dir / "out");
  const std::string html = slurp(out.html), md = slurp(out.markdown);
  for (const char* bad : {"<script", "<img", "<b>"}) {
    EXPECT_EQ(html.find(bad), std::string::npos) << bad << " in the HTML";
    EXPECT_EQ(md.find(bad), std::string::npos) << bad << " in the Markdown";
  }
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
}

/// One mistyped field costs only its entry (or record), named with its file and field; the rest is reported.
/// Before: the JSON library's type_error ended `qtc report` and nothing was written, on every later run too
/// when the bad record was in the history folder.
TEST(ReportHostile, MistypedFieldsAreWarningsNotFailures) {
  const fs::path dir = qtc::report::test::scratch_dir() / "qtc_report_hostile_fields";
  fs::remove_all(dir);
  fs::create_directories(dir / "history");
  json run = make_run({{"copy/bf16", {10, 10.2, 9.9}}, {"quantize/nvfp4_1x16", {800, 810, 790}}}, "abc1234");
  json bad_entry = run["benchmarks"][0];
  bad_entry["run_name"] = "dequantize/x";
  bad_entry["name"] = "dequantize/x";
  bad_entry["real_time"] = "fast";
  run["benchmarks"].push_back(bad_entry);
  std::ofstream(dir / "b.json") << run.dump();
  json diff = json::array({{{"name", 5}, {"run_type", "iteration"}},
                           {{"name", "quantize/nvfp4_1x16/real_time"}, {"time_unit", "ms"}, {"run_type", "iteration"},
                            {"measurements", json::array({{{"real_time", 1.0}, {"real_time_other", 1.0}}})}},
                           {{"name", "quantize/other"}, {"run_type", "iteration"}, {"measurements", json::array({{{"real_time", "x"}}})}}});
  std::ofstream(dir / "diff.json") << diff.dump();
  std::ofstream(dir / "history" / "bad.json") << json{{"date", 20261101}, {"commit", "c"}, {"seconds", {}}}.dump();
  std::ofstream(dir / "history" / "bad2.json") << json{{"date", "2026-11-02"}, {"seconds", {{"crafted:a", "slow"}}}}.dump();
  std::ofstream(dir / "history" / "good.json")
      << json{{"date", "2026-11-03T10:00:00Z"}, {"commit", "0000001"}, {"machine_kind", "k"}, {"seconds", {{"crafted:a", 1.0}}}}.dump();
  json conform = {{"matrix", json::array({{{"recipe", "nvfp4_1x16"}, {"backend", "cpu"}, {"profile", "te"}, {"pass", "five"}},
                                          {{"recipe", "mxfp8"}, {"backend", "cpu"}, {"profile", "te"}, {"pass", 2}}})}};
  std::ofstream(dir / "c.json") << conform.dump();
  qtc::report::Inputs in;
  in.bench_json = {dir / "b.json"};
  in.compare_json = {dir / "diff.json"};
  in.conform_json = {dir / "c.json"};
  in.history_dir = dir / "history";
  in.record_history = true;
  qtc::report::Outputs out;
  ASSERT_NO_THROW(out = qtc::report::write_report(in, dir / "out"));
  std::string all;
  for (const auto& w : out.warnings) all += w + "\n";
  for (const std::string& want : std::vector<std::string>{(dir / "b.json").string() + ": benchmark entry 10 (dequantize/x): field 'real_time' is a string, expected a number",
                                 (dir / "diff.json").string() + ": entry 0: field 'name' is a number, expected a string",
                                 "entry 2 (quantize/other): field 'real_time' is a string, expected a number",
                                 "history record " + (dir / "history" / "bad.json").string() + ": field 'date' is a number",
                                 "bad2.json: field 'seconds' entry 'crafted:a' is a string",
                                 (dir / "c.json").string() + ": matrix entry 0: field 'pass' is a string, expected an integer"})
    EXPECT_NE(all.find(want), std::string::npos) << want << "\nin:\n" << all;
  const json summary = json::parse(slurp(out.json));
  ASSERT_EQ(summary["comparison"].size(), 1u) << "the good comparison entry is kept";
  EXPECT_EQ(summary["conformance"].size(), 1u) << "the good matrix entry is kept";
  EXPECT_EQ(summary["seconds"].size(), 2u) << "the good benchmarks are kept";
  EXPECT_NE(slurp(out.html).find("quantize/nvfp4_1x16"), std::string::npos);
  EXPECT_FALSE(out.history_record.empty());
  // A later report over the same history folder (the bad records, and the record this run wrote) is written too.
  in.record_history = false;
  ASSERT_NO_THROW(out = qtc::report::write_report(in, dir / "out2"));
  EXPECT_TRUE(fs::exists(out.html));
}

/// The history record's file name takes the machine kind and the commit from the benchmark JSON: they cannot
/// leave the history folder.
TEST(ReportHostile, HistoryRecordStaysInItsFolder) {
  const fs::path dir = qtc::report::test::scratch_dir() / "qtc_report_hostile_record";
  fs::remove_all(dir);
  fs::create_directories(dir / "h" / "deep");
  json run = make_run({{"copy/bf16", {10, 10.2, 9.9}}}, "/../../x");
  run["context"]["qtc_machine_kind"] = "../../../evil";
  std::ofstream(dir / "b.json") << run.dump();
  qtc::report::Inputs in;
  in.bench_json = {dir / "b.json"};
  in.history_dir = dir / "h" / "deep";
  in.record_history = true;
  const auto out = qtc::report::write_report(in, dir / "out");
  ASSERT_FALSE(out.history_record.empty());
  EXPECT_EQ(out.history_record.parent_path(), dir / "h" / "deep");
  EXPECT_TRUE(fs::exists(out.history_record)) << out.history_record;
  EXPECT_EQ(out.history_record.filename().string().find('/'), std::string::npos);
}

}  // namespace
