/// \file report_test.cpp
/// \brief Tests of the report (issue 8): the baseline comparison (Google Benchmark's compare.py and its U test)
///        flags a planted regression and passes an unchanged run; the HTML page renders in headless Chromium.
///
/// | test                                   | input                                          | expects                        |
/// |----------------------------------------|------------------------------------------------|--------------------------------|
/// | ReportCompare.PassesUnchangedRun        | 9 vs 9 repetitions, same spread, reshuffled    | 0 regressions                  |
/// | ReportCompare.FlagsPlantedRegression    | one benchmark 30% slower, others unchanged     | exactly that one flagged       |
/// | ReportCompare.NoisyShiftWithinSpread    | +8% median shift inside a +-25% spread         | not significant, not flagged   |
/// | ReportCompare.FewRepetitionsUntested    | 1 vs 1 repetition, 50% slower                  | "not tested", never flagged    |
/// | ReportCompare.SpeedupIsImprovement      | one benchmark 30% faster                       | improvement, not regression    |
/// | ReportCompare.CpuMetricIgnoresLoad      | real time +30% from load, CPU time unchanged   | flagged on real, not on CPU    |
/// | ReportHtml.SelfContained                | full report from crafted inputs                | no external URL, all sections  |
/// | ReportHtml.VerdictLeads                 | same page                                      | verdict, matrix, failures      |
/// |                                         |                                                | before every other section     |
/// | ReportHtml.RendersInChromium            | same page in headless Chromium                 | DOM dumped (verdict matrix with|
/// |                                         |                                                | coloured cells first), no      |
/// |                                         |                                                | console message, screenshot    |
/// | ReportConform.ReadsConformMatrix        | `qtc conform`'s report.json                    | counts, failures first, notes  |
/// | ReportBench.BenchOnlyHasNoConformance   | benchmark JSON only                            | no verdict / conformance /     |
/// |   Sections                              |                                                | empty sections                 |
/// | ReportConform.ConformOnlyLeavesOutBench | same, no benchmark input                       | no benchmark/history sections; |
/// |                                         |                                                | md and html open with verdict  |
///
/// compare.py and Chromium are external programs: without them the tests skip with the reason, except in CI
/// (CI=true), where scripts/setup.sh has installed them and their absence is a failure.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "qtc/report.hpp"
#include "report_test_util.hpp"

namespace {

namespace fs = std::filesystem;

using nlohmann::json;
using qtc::report::test::make_run;
using qtc::report::test::scratch_dir;
using qtc::report::test::median;
using qtc::report::test::slurp;
using qtc::report::Comparison;

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && (std::string(ci) == "true" || std::string(ci) == "1");
}

/// Skips with the reason outside CI; fails in CI (where the setup step installed everything).
#define QTC_REQUIRE_TOOL(ok, reason)                       \
  do {                                                     \
    if (!(ok)) {                                           \
      if (in_ci()) FAIL() << (reason) << " (CI=true)";     \
      GTEST_SKIP() << (reason);                            \
    }                                                      \
  } while (0)

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}


/// First existing path among the candidates (absolute paths, or names looked up on PATH).
std::string find_program(std::initializer_list<const char*> env_and_names) {
  for (const char* c : env_and_names) {
    std::string cand = c;
    if (cand.rfind("$", 0) == 0) {
      const char* e = std::getenv(cand.c_str() + 1);
      if (e == nullptr || *e == '\0') continue;
      cand = e;
    }
    if (cand.find('/') != std::string::npos) {
      if (fs::exists(cand)) return cand;
      continue;
    }
    const char* path = std::getenv("PATH");
    std::stringstream ss(path ? path : "");
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty() && fs::exists(fs::path(dir) / cand)) return (fs::path(dir) / cand).string();
  }
  return {};
}

/// compare.py (Debian libbenchmark-tools) and a Python that has its scipy dependency.
struct CompareTool {
  std::string script, python, problem;
};

CompareTool compare_tool() {
  CompareTool t;
  t.script = find_program({"$QTC_BENCH_COMPARE", "/usr/share/benchmark/compare.py", "/usr/lib/benchmark/tools/compare.py"});
  if (t.script.empty()) {
    t.problem = "compare.py not found (Debian libbenchmark-tools; or set QTC_BENCH_COMPARE)";
    return t;
  }
  for (const char* py : {"/usr/bin/python3", "python3"}) {
    const std::string cand = std::string(py).find('/') != std::string::npos ? std::string(py) : find_program({py});
    if (cand.empty()) continue;
    if (std::system((shell_quote(cand) + " -c 'import scipy.stats, numpy' >/dev/null 2>&1").c_str()) == 0) {
      t.python = cand;
      return t;
    }
  }
  t.problem = "no python3 with scipy for compare.py (Debian python3-scipy)";
  return t;
}



/// Nine repetitions around `center` with a +-3% spread, in an order given by `shift` (same values, reshuffled).
std::vector<double> reps9(double center, int shift, double spread = 0.03) {
  static const double kOffsets[9] = {-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0};
  std::vector<double> v;
  for (int i = 0; i < 9; ++i) v.push_back(center * (1.0 + spread * kOffsets[(i * 4 + shift) % 9]) + 0.001 * shift);
  return v;
}

class ReportCompare : public testing::Test {
 protected:
  void SetUp() override {
    tool_ = compare_tool();
    QTC_REQUIRE_TOOL(tool_.problem.empty(), tool_.problem);
    dir_ = scratch_dir() / ("qtc_report_compare_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  /// Runs compare.py on two crafted runs and reads its dump the way the report does.
  std::vector<Comparison> compare(const json& base, const json& next) {
    std::ofstream(dir_ / "base.json") << base.dump();
    std::ofstream(dir_ / "new.json") << next.dump();
    const std::string cmd = shell_quote(tool_.python) + " " + shell_quote(tool_.script) + " --no-color -d " +
                            shell_quote((dir_ / "diff.json").string()) + " benchmarks " + shell_quote((dir_ / "base.json").string()) +
                            " " + shell_quote((dir_ / "new.json").string()) + " > " + shell_quote((dir_ / "compare.txt").string()) + " 2>&1";
    const int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << "compare.py failed: " << slurp(dir_ / "compare.txt");
    const json dump = json::parse(slurp(dir_ / "diff.json"));
    return qtc::report::read_comparison(dump, 0.05, 0.05);
  }
  static const Comparison* find(const std::vector<Comparison>& v, const std::string& name) {
    for (const auto& c : v)
      if (c.name == name + "/real_time") return &c;
    return nullptr;
  }
  static int count(const std::vector<Comparison>& v, Comparison::Verdict verdict) {
    int n = 0;
    for (const auto& c : v) n += c.verdict == verdict;
    return n;
  }
  CompareTool tool_;
  fs::path dir_;
};

const std::vector<std::string> kNames = {"quantize/nvfp4_1x16", "dequantize/nvfp4_1x16", "quantize/mxfp8_e4m3_rceil",
                                         "quantize/fp8tensor_e4m3"};
const std::vector<double> kCenters = {800, 400, 300, 120};

json run_with(int shift, const std::map<std::string, double>& factor = {}, double spread = 0.03) {
  std::vector<std::pair<std::string, std::vector<double>>> b;
  for (size_t i = 0; i < kNames.size(); ++i) {
    const double f = factor.count(kNames[i]) ? factor.at(kNames[i]) : 1.0;
    b.emplace_back(kNames[i], reps9(kCenters[i] * f, shift, spread));
  }
  return make_run(b, shift == 0 ? "base" : "next");
}

TEST_F(ReportCompare, PassesUnchangedRun) {
  const auto v = compare(run_with(0), run_with(3));
  ASSERT_EQ(v.size(), kNames.size()) << slurp(dir_ / "compare.txt");
  EXPECT_EQ(count(v, Comparison::Verdict::kRegression), 0) << slurp(dir_ / "compare.txt");
  for (const auto& c : v) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(c.pvalue.has_value()) << "9 repetitions each: compare.py runs its U test";
    EXPECT_EQ(c.reps_old, 9);
    EXPECT_NE(c.verdict, Comparison::Verdict::kImprovement);
  }
}

TEST_F(ReportCompare, FlagsPlantedRegression) {
  const auto v = compare(run_with(0), run_with(3, {{"quantize/mxfp8_e4m3_rceil", 1.30}}));
  EXPECT_EQ(count(v, Comparison::Verdict::kRegression), 1) << slurp(dir_ / "compare.txt");
  const Comparison* c = find(v, "quantize/mxfp8_e4m3_rceil");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Comparison::Verdict::kRegression) << "p = " << c->pvalue.value_or(-1) << ", change = " << c->change;
  EXPECT_NEAR(c->change, 0.30, 0.01);
  ASSERT_TRUE(c->pvalue.has_value());
  EXPECT_LT(*c->pvalue, 0.05);
}

TEST_F(ReportCompare, NoisyShiftWithinSpread) {
  // +8% median shift (above min_change) but inside a +-25% run-to-run spread: the U test does not reject.
  const auto v = compare(run_with(0, {}, 0.25), run_with(3, {{"quantize/nvfp4_1x16", 1.08}}, 0.25));
  const Comparison* c = find(v, "quantize/nvfp4_1x16");
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->pvalue.has_value());
  EXPECT_GE(*c->pvalue, 0.05) << slurp(dir_ / "compare.txt");
  EXPECT_GT(c->change, 0.05);
  EXPECT_EQ(c->verdict, Comparison::Verdict::kSame);
  EXPECT_EQ(count(v, Comparison::Verdict::kRegression), 0);
}

TEST_F(ReportCompare, FewRepetitionsUntested) {
  const auto v = compare(make_run({{"quantize/nvfp4_1x16", {800}}}, "base"), make_run({{"quantize/nvfp4_1x16", {1200}}}, "next"));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FALSE(v[0].pvalue.has_value());
  EXPECT_EQ(v[0].verdict, Comparison::Verdict::kUntested);
  EXPECT_NEAR(v[0].change, 0.5, 1e-9);
}

TEST_F(ReportCompare, SpeedupIsImprovement) {
  const auto v = compare(run_with(0), run_with(3, {{"dequantize/nvfp4_1x16", 0.7}}));
  const Comparison* c = find(v, "dequantize/nvfp4_1x16");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Comparison::Verdict::kImprovement);
  EXPECT_EQ(count(v, Comparison::Verdict::kRegression), 0);
}

TEST_F(ReportCompare, CpuMetricIgnoresLoad) {
  // Other load on the machine: real time 30% longer, CPU time of the process unchanged.
  json next = run_with(3);
  for (auto& b : next["benchmarks"])
    if (b["run_name"] == "quantize/nvfp4_1x16/real_time") b["real_time"] = b["real_time"].get<double>() * 1.3;
  const auto real = compare(run_with(0), next);
  EXPECT_EQ(count(real, Comparison::Verdict::kRegression), 1) << "on real time the load looks like a regression";
  const json dump = json::parse(slurp(dir_ / "diff.json"));
  const auto cpu = qtc::report::read_comparison(dump, 0.05, 0.05, /*cpu_time=*/true);
  EXPECT_EQ(count(cpu, Comparison::Verdict::kRegression), 0) << slurp(dir_ / "compare.txt");
  for (const auto& c : cpu) EXPECT_EQ(c.metric, "CPU time");
}

/// A whole report from crafted inputs: a CPU suite with a copy benchmark, a GEMM suite with cuBLASLt
/// counterparts, a comparison with one planted regression, conformance results and a two-run history.
class ReportHtml : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir() / "qtc_report_html";
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "history");
    qtc::report::Inputs in;
    in.title = "qtc report (test)";
    json cpu = make_run({{"copy/bf16_4096x4096", {10, 10.2, 9.9}}, {"quantize/nvfp4_1x16", {800, 810, 790}},
                         {"dequantize/nvfp4_1x16", {400, 405, 395}}}, "abc1234");
    std::ofstream(dir_ / "cpu.json") << cpu.dump();
    json gemm = make_run({}, "abc1234");
    gemm["context"]["qtc_suite"] = "gemm_cuda";
    gemm["context"]["gpu"] = "NVIDIA H200";
    gemm["benchmarks"] = json::array(
        {{{"name", "qtc/fp8_tensor/8192x8192x8192"}, {"run_name", "qtc/fp8_tensor/8192x8192x8192"}, {"run_type", "iteration"},
          {"real_time", 1.5}, {"cpu_time", 1.5}, {"time_unit", "ms"}, {"iterations", 100}, {"TFLOP/s", 733.0}},
         {{"name", "cublaslt/fp8_tensor/8192x8192x8192"}, {"run_name", "cublaslt/fp8_tensor/8192x8192x8192"},
          {"run_type", "iteration"}, {"real_time", 1.4}, {"cpu_time", 1.4}, {"time_unit", "ms"}, {"iterations", 100},
          {"TFLOP/s", 785.0}}});
    std::ofstream(dir_ / "gemm.json") << gemm.dump();
    json diff = json::array();
    auto entry = [](const std::string& n, double o, double nw, double p) {
      return json{{"name", n}, {"label", ""}, {"time_unit", "ms"}, {"run_type", "iteration"}, {"aggregate_name", ""},
                  {"measurements", json::array({{{"real_time", o}, {"cpu_time", o}, {"real_time_other", nw}, {"cpu_time_other", nw},
                                                 {"time", (nw - o) / o}, {"cpu", (nw - o) / o}}})},
                  {"utest", {{"have_optimal_repetitions", true}, {"cpu_pvalue", p}, {"time_pvalue", p},
                             {"nr_of_repetitions", 9}, {"nr_of_repetitions_other", 9}}}};
    };
    diff.push_back(entry("quantize/nvfp4_1x16/real_time", 800, 1040, 0.0004));
    diff.push_back(entry("dequantize/nvfp4_1x16/real_time", 400, 401, 0.8));
    std::ofstream(dir_ / "diff.json") << diff.dump();
    json conform = {{"backend", "cpu"},
                    {"passed", 3},
                    {"failed", 1},
                    {"results", json::array({{{"recipe", "nvfp4_1x16"}, {"backend", "cpu"}, {"profile", "te"}, {"verdict", "pass"}},
                                             {{"recipe", "nvfp4_1x16"}, {"backend", "cuda"}, {"profile", "te"}, {"verdict", "skipped"}},
                                             {{"recipe", "mxfp8_e4m3_ocpfloor"}, {"backend", "cpu"}, {"profile", "ocp"}, {"verdict", "pass"}},
                                             {{"recipe", "fp8block_1x128_e4m3"}, {"backend", "cpu"}, {"profile", "te"}, {"verdict", "fail"},
                                              {"message", "scale_inv[3] 0x3f800000 != 0x3f000000"}}})},
                    {"divergences", json::array({{{"vector", "torchao/nvfp4_tie.safetensors"}, {"field", "data"}, {"mismatches", 2},
                                                  {"reason", "RNE vs round-half-away"}}})}};
    std::ofstream(dir_ / "conform.json") << conform.dump();
    std::ofstream(dir_ / "history" / "2026-11-01_test-kind_0000001.json")
        << json{{"date", "2026-11-01T10:00:00Z"}, {"commit", "0000001"}, {"machine_kind", "test-kind"},
                {"seconds", {{"crafted:quantize/nvfp4_1x16/real_time", 0.9}, {"crafted:dequantize/nvfp4_1x16/real_time", 0.42}}}}
               .dump();
    in.bench_json = {dir_ / "cpu.json", dir_ / "gemm.json"};
    in.compare_json = {dir_ / "diff.json"};
    in.baseline = "reports/baselines/test-kind";
    in.conform_json = {dir_ / "conform.json"};
    in.history_dir = dir_ / "history";
    out_ = qtc::report::write_report(in, dir_ / "out");
  }
  fs::path dir_;
  qtc::report::Outputs out_;
};

TEST_F(ReportHtml, SelfContained) {
  EXPECT_EQ(out_.regressions, 1);
  EXPECT_EQ(out_.conform_failed, 1);
  const std::string html = slurp(out_.html), md = slurp(out_.markdown);
  for (const char* s : {"id=\"context\"", "id=\"bandwidth\"", "id=\"gemm\"", "id=\"comparison\"", "id=\"conformance\"",
                        "id=\"history\"", "REGRESSION", "NVIDIA H200", "RNE vs round-half-away", "mxfp8_e4m3_ocpfloor"})
    EXPECT_NE(html.find(s), std::string::npos) << "missing " << s;
  const bool gnuplot = out_.warnings.empty() || html.find("<svg") != std::string::npos;
  QTC_REQUIRE_TOOL(gnuplot, "gnuplot did not render the plots (Debian gnuplot-nox): " + (out_.warnings.empty() ? "" : out_.warnings[0]));
  for (const char* id : {"plot-bandwidth", "plot-gemm", "plot-comparison", "plot-history"})
    EXPECT_NE(html.find(std::string("<figure id=\"") + id + "\">\n<svg"), std::string::npos) << "no inline SVG for " << id;
  EXPECT_TRUE(out_.warnings.empty()) << out_.warnings[0];
  // Self-contained: nothing to fetch (SVG namespaces are identifiers, not fetched).
  for (const char* s : {" src=", "href=\"http", "href='http", "@import", "url(http"}) EXPECT_EQ(html.find(s), std::string::npos) << "found " << s;
  EXPECT_NE(md.find("**REGRESSION**"), std::string::npos);
  EXPECT_NE(md.find("](plots/comparison.svg)"), std::string::npos);
  EXPECT_TRUE(fs::exists(out_.dir / "plots" / "comparison.svg"));
}

TEST_F(ReportHtml, VerdictLeads) {
  const std::string html = slurp(out_.html), md = slurp(out_.markdown);
  const size_t verdict = html.find("<section id=\"verdict\">");
  ASSERT_NE(verdict, std::string::npos);
  for (const char* later : {"id=\"divergences\"", "id=\"context\"", "id=\"bandwidth\"", "id=\"gemm\"", "id=\"comparison\"",
                            "id=\"conformance\"", "id=\"history\""})
    EXPECT_LT(verdict, html.find(later)) << later << " before the verdict";
  EXPECT_NE(html.find("<p class=\"verdict fail\">FAIL: 1 failed, 0 errors (2 passed, 1 skipped)</p>"), std::string::npos);
  // The matrix: the failing recipe first, one column per profile / backend, cells coloured by class.
  const size_t matrix = html.find("<table id=\"verdict-matrix\">");
  ASSERT_NE(matrix, std::string::npos);
  EXPECT_NE(html.find("<th>recipe</th><th>te / cpu</th><th>te / cuda</th><th>ocp / cpu</th>", matrix), std::string::npos);
  EXPECT_NE(html.find("<tr><td>fp8block_1x128_e4m3</td><td class=\"fail\">FAIL 1/1</td><td class=\"none\"></td><td class=\"none\"></td></tr>", matrix),
            std::string::npos)
      << html.substr(matrix, 800);
  EXPECT_NE(html.find("<td class=\"skip\">skip 1</td>", matrix), std::string::npos);
  EXPECT_NE(html.find("<td class=\"pass\">pass 1</td>", matrix), std::string::npos);
  // Failures with their message right after the matrix, before the divergence table.
  const size_t failures = html.find("<table id=\"verdict-failures\">");
  ASSERT_NE(failures, std::string::npos);
  EXPECT_LT(failures, html.find("id=\"divergences\""));
  EXPECT_NE(html.find("scale_inv[3] 0x3f800000 != 0x3f000000", failures), std::string::npos);
  EXPECT_NE(html.find("td.fail{background:"), std::string::npos) << "cells are coloured by class";
  EXPECT_NE(html.find("Benchmarks: <strong>1 regression</strong>"), std::string::npos);
  // Markdown: the same order, colour marks in the cells.
  EXPECT_LT(md.find("## Verdict"), md.find("## Divergences"));
  EXPECT_LT(md.find("## Divergences"), md.find("## Machine and build"));
  EXPECT_NE(md.find("| fp8block_1x128_e4m3 | \xF0\x9F\x94\xB4 **FAIL 1/1** |  |  |"), std::string::npos) << md;
}

TEST_F(ReportHtml, RendersInChromium) {
  const std::string chromium = find_program({"$QTC_CHROMIUM", "chromium", "chromium-browser", "google-chrome"});
  QTC_REQUIRE_TOOL(!chromium.empty(), "chromium not found (Debian chromium; or set QTC_CHROMIUM)");
  const fs::path profile = dir_ / "chromium-profile";
  const std::string common = shell_quote(chromium) + " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
                             "--no-first-run --disable-extensions --enable-logging=stderr --v=0 --user-data-dir=" +
                             shell_quote(profile.string()) + " ";
  const std::string url = "file://" + fs::absolute(out_.html).string();
  const fs::path dom = dir_ / "dom.html", log = dir_ / "chromium_dom.log";
  ASSERT_EQ(std::system(("timeout 120 " + common + "--dump-dom " + shell_quote(url) + " > " + shell_quote(dom.string()) + " 2> " +
                         shell_quote(log.string())).c_str()), 0)
      << slurp(log);
  const std::string d = slurp(dom);
  EXPECT_NE(d.find("qtc report (test)"), std::string::npos) << "the page did not load: " << d.substr(0, 500);
  EXPECT_NE(d.find("<svg"), std::string::npos);
  EXPECT_NE(d.find("REGRESSION"), std::string::npos);
  // The verdict renders first: its banner, the matrix with coloured cells, the failures with their message.
  const size_t v = d.find("<section id=\"verdict\">");
  ASSERT_NE(v, std::string::npos) << "no verdict section in the rendered DOM";
  EXPECT_LT(v, d.find("<section id=\"bandwidth\">"));
  EXPECT_NE(d.find("<p class=\"verdict fail\">FAIL: 1 failed", v), std::string::npos);
  EXPECT_NE(d.find("<table id=\"verdict-matrix\">", v), std::string::npos);
  EXPECT_NE(d.find("<td class=\"fail\">FAIL 1/1</td>", v), std::string::npos);
  EXPECT_NE(d.find("<td class=\"pass\">pass 1</td>", v), std::string::npos);
  EXPECT_NE(d.find("<table id=\"verdict-failures\">", v), std::string::npos);
  // Any console message (an error, a failed load) is a failure: the page has no script and fetches nothing.
  std::istringstream lines(slurp(log));
  std::string line;
  while (std::getline(lines, line)) EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << line;

  // The screenshot is kept beside the test's build folder (and in the report folder) for people to look at.
  const char* keep = std::getenv("QTC_REPORT_SCREENSHOT");
  const fs::path shot = keep != nullptr && *keep != '\0' ? fs::path(keep) : out_.dir / "screenshot.png";
  fs::remove(shot);
  const fs::path slog = dir_ / "chromium_shot.log";
  ASSERT_EQ(std::system(("timeout 120 " + common + "--hide-scrollbars --window-size=1280,3200 --screenshot=" +
                         shell_quote(fs::absolute(shot).string()) + " " + shell_quote(url) + " > /dev/null 2> " + shell_quote(slog.string()))
                            .c_str()),
            0)
      << slurp(slog);
  const std::string png = slurp(shot);
  ASSERT_GT(png.size(), 10000u) << "screenshot missing or empty: " << shot;
  EXPECT_EQ(png.substr(1, 3), "PNG");
  std::istringstream slines(slurp(slog));
  while (std::getline(slines, line)) EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << line;
  std::printf("screenshot: %s\n", fs::absolute(shot).c_str());
}

/// `qtc conform`'s report.json (conformance/src/conform_report.cpp): matrix counts, per-file results.
TEST(ReportConform, ReadsConformMatrix) {
  const fs::path dir = scratch_dir() / "qtc_report_conform";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const json j = {
      {"qtc_version", "0.1.0"}, {"started_utc", "2026-11-29T16:54:14Z"}, {"seconds", 7.8}, {"seed", 20261129},
      {"backends", {"cpu", "cuda (skipped: built without CUDA)"}}, {"generated", {{"recipes", 103}, {"cases", 1327}}},
      {"summary", {{"pass", 5}, {"fail", 2}, {"error", 1}, {"skipped", 3}}},
      {"matrix", json::array({{{"recipe", "nvfp4_1x16"}, {"backend", "cpu"}, {"profile", "te"}, {"pass", 5}, {"fail", 0}, {"error", 0}, {"skipped", 0}},
                              {{"recipe", "nvfp4_1x16"}, {"backend", "cuda"}, {"profile", "te"}, {"pass", 0}, {"fail", 0}, {"error", 0}, {"skipped", 3}},
                              {{"recipe", "mxfp8_e4m3_rceil"}, {"backend", "cpu"}, {"profile", "te"}, {"pass", 0}, {"fail", 2}, {"error", 0}, {"skipped", 0}},
                              {{"recipe", "(unparsed)"}, {"backend", "-"}, {"profile", "-"}, {"pass", 0}, {"fail", 0}, {"error", 1}, {"skipped", 0}}})},
      {"results", json::array({{{"suite", "generated"}, {"check", "verify"}, {"path", "a.safetensors"}, {"backend", "cpu"},
                                {"recipe", "mxfp8_e4m3_rceil"}, {"profile", "te"}, {"verdict", "fail"}, {"message", "rowwise_scale_inv differs"}},
                               {{"suite", "generated"}, {"check", "verify"}, {"path", "b.safetensors"}, {"backend", "cpu"},
                                {"recipe", "mxfp8_e4m3_rceil"}, {"profile", "te"}, {"verdict", "fail"}, {"message", "rowwise_scale_inv differs"}},
                               {{"suite", "bundled"}, {"check", "verify"}, {"path", "bad.safetensors"}, {"backend", ""},
                                {"recipe", ""}, {"profile", ""}, {"verdict", "error"}, {"message", "header length beyond the file"}}})}};
  std::ofstream(dir / "report.json") << j.dump();
  const auto out = qtc::report::write_report_for_conform(dir);
  EXPECT_EQ(out.conform_failed, 3);
  const json summary = json::parse(slurp(out.json));
  ASSERT_EQ(summary["conformance"].size(), 4u);
  EXPECT_EQ(summary["conformance"][0]["failed"].get<int>() + summary["conformance"][0]["errors"].get<int>() > 0, true)
      << "failures are listed first";
  const std::string html = slurp(out.html);
  EXPECT_NE(html.find("rowwise_scale_inv differs"), std::string::npos);
  EXPECT_EQ(html.find("rowwise_scale_inv differs; rowwise_scale_inv differs"), std::string::npos) << "notes are deduplicated";
  EXPECT_NE(html.find("header length beyond the file"), std::string::npos);
  EXPECT_NE(html.find("cuda (skipped: built without CUDA)"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "report.json")) << "conform's own files stay";
}

/// A benchmark-only report: no verdict, no conformance section, no empty placeholder; the benchmarks lead.
TEST(ReportBench, BenchOnlyHasNoConformanceSections) {
  const fs::path dir = scratch_dir() / "qtc_report_bench_only";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "cpu.json") << make_run({{"copy/bf16_4096x4096", {10, 10.2, 9.9}}, {"quantize/nvfp4_1x16", {800, 810, 790}}}, "abc1234").dump();
  qtc::report::Inputs in;
  in.bench_json = {dir / "cpu.json"};
  const auto out = qtc::report::write_report(in, dir / "out");
  const std::string html = slurp(out.html);
  for (const char* absent : {"id=\"verdict\"", "id=\"conformance\"", "id=\"divergences\"", "id=\"comparison\"", "id=\"gemm\"",
                             "No conformance", "No comparison"})
    EXPECT_EQ(html.find(absent), std::string::npos) << absent;
  EXPECT_NE(html.find("<section id=\"context\">"), std::string::npos);
  EXPECT_NE(html.find("<section id=\"bandwidth\">"), std::string::npos);
}

/// A conform-only run: the report opens with the verdict and has no benchmark or history section at all.
TEST(ReportConform, ConformOnlyLeavesOutBench) {
  const fs::path dir = scratch_dir() / "qtc_report_conform_only";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const json j = {{"summary", {{"pass", 4}, {"fail", 0}, {"error", 0}, {"skipped", 4}}},
                  {"matrix", json::array({{{"recipe", "nvfp4_1x16"}, {"backend", "cpu"}, {"profile", "te"}, {"pass", 4}, {"fail", 0}, {"error", 0}, {"skipped", 0}},
                                          {{"recipe", "nvfp4_1x16"}, {"backend", "cuda"}, {"profile", "te"}, {"pass", 0}, {"fail", 0}, {"error", 0}, {"skipped", 4}},
                                          {{"recipe", "mxfp8_e4m3_ocpfloor_ocp"}, {"backend", "cpu"}, {"profile", "ocp"}, {"pass", 2}, {"fail", 0}, {"error", 0}, {"skipped", 0}}})},
                  {"results", json::array({{{"suite", "bundled"}, {"check", "verify"}, {"path", "a.safetensors"}, {"backend", "cpu"},
                                            {"recipe", "fp8tensor_e4m3_rowonly"}, {"profile", "te"}, {"verdict", "pass"}}})}};
  std::ofstream(dir / "report.json") << j.dump();
  const auto out = qtc::report::write_report_for_conform(dir);
  const std::string html = slurp(out.html), md = slurp(out.markdown);
  for (const char* absent : {"id=\"context\"", "id=\"bandwidth\"", "id=\"gemm\"", "id=\"comparison\"", "id=\"history\"",
                             "No benchmark", "No comparison", "No GEMM", "No history"}) {
    EXPECT_EQ(html.find(absent), std::string::npos) << absent << " in a conform-only report";
    EXPECT_EQ(md.find(absent), std::string::npos) << absent << " in a conform-only report";
  }
  EXPECT_EQ(html.find("id=\"divergences\""), std::string::npos) << "no divergence data: no section";
  EXPECT_NE(html.find("<p class=\"verdict pass\">PASS: 6 passed, 0 failed, 4 skipped</p>"), std::string::npos) << html;
  // The ocp row is the same recipe variant as its te name minus the profile; no empty cell for an uncounted result.
  EXPECT_NE(html.find("<tr><td>mxfp8_e4m3_ocpfloor</td><td class=\"none\"></td><td class=\"none\"></td><td class=\"pass\">pass 2</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("fp8tensor_e4m3"), std::string::npos);
  EXPECT_EQ(md.find("## Verdict"), md.find("## "));
  EXPECT_EQ(qtc::report::conform_summary_markdown(j).rfind("## Verdict\n\n**", 0), 0u);
}

}  // namespace
