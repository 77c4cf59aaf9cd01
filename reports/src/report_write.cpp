/// \file report_write.cpp
/// \brief write_report(): the model rendered as Markdown, one self-contained HTML page and a JSON summary.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "qtc/error.hpp"
#include "qtc/output_file.hpp"
#include "report_internal.hpp"

namespace qtc::report {

namespace detail {

namespace {

/// A table both renderers print: header, rows, and a CSS class per row ("" / "bad" / "good").
struct Table {
  std::string id;  ///< HTML id of the table (optional)
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row_class;
  /// Per-cell class ("pass" / "fail" / "skip" / "none"), coloured in HTML and marked in Markdown; may be empty.
  std::vector<std::vector<std::string>> cell_class;
  void add(std::vector<std::string> r, std::string cls = "", std::vector<std::string> cells = {}) {
    rows.push_back(std::move(r));
    row_class.push_back(std::move(cls));
    cell_class.push_back(std::move(cells));
  }
};

/// One section of the report: a heading, a lead line (the verdict), paragraphs, tables and plots, in that order.
struct Section {
  std::string id, heading;
  std::vector<std::string> paragraphs;
  std::vector<Table> tables;
  std::vector<std::string> plot_ids;
  std::string lead;        ///< one line shown first and large (the verdict)
  std::string lead_class;  ///< "pass" / "fail" / "skip"
  std::map<size_t, std::string> table_intro;  ///< a paragraph shown right above table i
};

/// How the verdict matrix orders profiles and backends: the known ones first, in this order, then the others.
int rank_of(const std::string& v, std::initializer_list<const char*> known) {
  int i = 0;
  for (const char* k : known) {
    if (v == k) return i;
    ++i;
  }
  return v == "-" ? i + 1 : i;
}


constexpr size_t kSummaryFailures = 25;  ///< failures listed in the summary (all of them are in the details)

/// The verdict: one line, the recipe x profile x backend matrix, failures first with their messages.
Section verdict_section(const Model& m) {
  const Conformance& c = m.conform;
  Section s;
  s.id = "verdict";
  s.heading = "Verdict";
  int p = 0, f = 0, e = 0, k = 0;
  for (const auto& cell : c.cells) p += cell.passed, f += cell.failed, e += cell.errors, k += cell.skipped;
  if (f + e > 0) {
    s.lead = fmt::format("FAIL: {} failed, {} errors ({} passed, {} skipped)", f, e, p, k);
    s.lead_class = "fail";
  } else if (p > 0) {
    s.lead = fmt::format("PASS: {} passed, 0 failed{}", p, k ? fmt::format(", {} skipped", k) : "");
    s.lead_class = "pass";
  } else {
    s.lead = fmt::format("NO RESULT: nothing passed or failed ({} skipped)", k);
    s.lead_class = "skip";
  }
  int reg = 0;
  for (const auto& cmp : m.comparison) reg += cmp.verdict == Comparison::Verdict::kRegression;
  if (!m.comparison.empty())
    s.paragraphs.push_back(fmt::format("Benchmarks: **{} regression{}** against the baseline (section Comparison).", reg, reg == 1 ? "" : "s"));

  // Columns: (profile, backend) pairs; rows: recipes, those with a failure first.
  using Col = std::pair<std::string, std::string>;
  auto col_less = [](const Col& a, const Col& b) {
    const auto ka = std::make_tuple(profile_rank(a.first), a.first,
                                    rank_of(a.second, {"cpu", "cuda"}), a.second);
    const auto kb = std::make_tuple(profile_rank(b.first), b.first,
                                    rank_of(b.second, {"cpu", "cuda"}), b.second);
    return ka < kb;
  };
  std::vector<Col> cols;
  std::vector<std::string> recipes;
  std::map<std::string, bool> recipe_bad;
  std::map<std::pair<std::string, Col>, const ConformCell*> at;
  for (const auto& cell : c.cells) {
    const Col col{cell.profile, cell.backend};
    // Recipe names carry the profile when it is not te ("mxfp8_e4m3_ocpfloor_ocp"): the column says it already.
    std::string recipe = cell.recipe;
    const std::string suffix = "_" + cell.profile;
    if (cell.profile != "te" && recipe.size() > suffix.size() && recipe.ends_with(suffix)) recipe.resize(recipe.size() - suffix.size());
    if (std::find(cols.begin(), cols.end(), col) == cols.end()) cols.push_back(col);
    if (!recipe_bad.count(recipe)) recipes.push_back(recipe);
    recipe_bad[recipe] = recipe_bad[recipe] || cell.failed + cell.errors > 0;
    at[{recipe, col}] = &cell;
  }
  std::sort(cols.begin(), cols.end(), col_less);
  std::stable_sort(recipes.begin(), recipes.end(), [&](const std::string& a, const std::string& b) {
    return std::make_pair(!recipe_bad[a], a) < std::make_pair(!recipe_bad[b], b);
  });
  s.paragraphs.push_back(
      "Each cell counts the checks of one recipe under one profile on one backend (bundled and generated vectors "
      "verified bit for bit, the write/read round trip, the error bound; `--foreign` dumps have a verdict of their "
      "own): **pass N** all N passed, **FAIL "
      "F/N** F of N failed or errored, **skip N** nothing ran (the reason is in the details), empty: not run.");
  Table t;
  t.id = "verdict-matrix";
  t.header = {"recipe"};
  for (const auto& [prof, back] : cols) t.header.push_back(prof + " / " + back);
  for (const auto& r : recipes) {
    std::vector<std::string> row{r}, cls{""};
    for (const auto& col : cols) {
      const auto it = at.find({r, col});
      if (it == at.end()) {
        row.emplace_back("");
        cls.emplace_back("none");
        continue;
      }
      const ConformCell& cell = *it->second;
      const int total = cell.passed + cell.failed + cell.errors + cell.skipped;
      if (cell.failed + cell.errors > 0) {
        row.push_back(fmt::format("FAIL {}/{}", cell.failed + cell.errors, total));
        cls.emplace_back("fail");
      } else if (cell.passed > 0) {
        row.push_back(fmt::format("pass {}", cell.passed) + (cell.skipped ? fmt::format(" (+{} skip)", cell.skipped) : ""));
        cls.emplace_back("pass");
      } else {
        row.push_back(fmt::format("skip {}", cell.skipped));
        cls.emplace_back("skip");
      }
    }
    t.add(row, "", cls);
  }
  s.tables.push_back(t);

  if (!c.failures.empty()) {
    const size_t shown = std::min(c.failures.size(), kSummaryFailures);
    s.table_intro[s.tables.size()] = (fmt::format("Failures and errors, first {} of {}{}:", shown, c.failures.size(),
                                       shown < c.failures.size() ? " (every one is in report.md and report.json)" : ""));
    Table ft;
    ft.id = "verdict-failures";
    ft.header = {"verdict", "recipe", "profile", "backend", "check", "file", "message"};
    for (size_t i = 0; i < shown; ++i) {
      const ConformFailure& x = c.failures[i];
      ft.add({x.verdict == "error" ? "ERROR" : "FAIL", x.recipe, x.profile, x.backend, x.check, x.path, x.message}, "bad");
    }
    s.tables.push_back(ft);
  }
  return s;
}

std::string short_name(std::string n) {
  for (const std::string suffix : {"/real_time", "/process_time", "/manual_time"})
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) n.resize(n.size() - suffix.size());
  return n;
}

const std::vector<std::string> kContextKeys = {
    "qtc_machine_kind", "host_name", "cpu_model", "num_cpus", "mhz_per_cpu", "gpu", "gpu_count", "gpu_sm_clock_mhz",
    "gpu_driver", "driver", "cuda_driver_api", "cuda_runtime", "compute_capability", "sm_count", "cublaslt", "nccl",
    "ranks", "qtc_commit", "commit", "qtc_commit_dirty", "qtc_date_utc", "date", "load_avg",
    "os", "compiler", "qtc_build_type", "library_build_type"};

std::vector<Section> build_sections(const Model& m) {
  std::vector<Section> out;
  const bool have_conform = !m.conform.sources.empty();
  // The verdict first, then the divergence table, then the details. A section with no data in this run is left out.
  if (have_conform) {
    out.push_back(verdict_section(m));
    const Conformance& c = m.conform;
    if (!c.divergence_rows.empty()) {
      Section s{"divergences", "Divergences: which profile reproduces each vector", {}, {}, {}, {}, {}, {}};
      s.paragraphs.push_back(
          "For each group of bundled and foreign vectors, the profiles that reproduce them bit for bit; OTHER or NONE "
          "rows name the first mismatch (DIVERGENCES.md).");
      Table d;
      d.header = c.divergence_columns;
      for (const auto& r : c.divergence_rows) d.add(r);
      s.tables.push_back(d);
      out.push_back(s);
    }
  }

  // Machine and build context of every benchmark file.
  if (!m.benches.empty()) {
    Section s{"context", "Machine and build", {}, {}, {}, {}, {}, {}};
    Table t;
    t.header = {"field"};
    for (const auto& f : m.benches) t.header.push_back(f.suite);
    for (const auto& k : kContextKeys) {
      std::vector<std::string> row{k};
      bool any = false;
      for (const auto& f : m.benches) {
        auto it = f.context.find(k);
        row.push_back(it != f.context.end() ? it->second : "");
        any = any || it != f.context.end();
      }
      if (any) t.add(row);
    }
    s.tables.push_back(t);
    out.push_back(s);
  }

  // Kernels: time, bandwidth, fraction of copy, memory.
  if (!m.bandwidth.empty()) {
    Section s{"bandwidth", "Kernels: time, bandwidth and fraction of copy", {}, {}, {}, {}, {}, {}};
    {
      s.paragraphs.push_back(
          "Each kernel's bytes read and written per second, divided by the rate of the `copy` benchmark of the same "
          "suite and machine (1.0 = as fast as a plain copy of the same bytes). Time is the median real time over the "
          "repetitions; CPU seconds are summed over the threads of the process (less sensitive to other load on the machine); "
          "peak extra memory is the heap growth during one call, as a multiple of the input's size.");
      Table t;
      t.header = {"suite", "kernel", "seconds", "CPU s, all threads", "GB/s", "copy GB/s", "fraction of copy", "peak extra (x input)"};
      for (const auto& b : m.bandwidth)
        t.add({b.suite, short_name(b.name), fmt_num(b.seconds), b.cpu_s_all_threads >= 0 ? fmt_num(b.cpu_s_all_threads) : "",
               fmt_num(b.gbs), b.copy_gbs > 0 ? fmt_num(b.copy_gbs) : "n/a", b.fraction > 0 ? fmt_num(b.fraction, 3) : "n/a",
               b.peak_extra_x_input >= 0 ? fmt_num(b.peak_extra_x_input, 3) : ""});
      s.tables.push_back(t);
      s.plot_ids.push_back("bandwidth");
    }
    out.push_back(s);
  }

  // GEMMs against cuBLASLt.
  if (!m.gemms.empty()) {
    Section s{"gemm", "GEMMs: TFLOP/s against cuBLASLt", {}, {}, {}, {}, {}, {}};
    {
      s.paragraphs.push_back(
          "Each GEMM's throughput against cuBLASLt on the same machine: the suite's `baseline_TFLOPs` (for NVFP4 on "
          "Hopper, emulated through BF16, the BF16 cuBLASLt GEMM of the same shape), else a `cublaslt...` benchmark of "
          "the same shape.");
      Table t;
      t.header = {"suite", "GEMM", "TFLOP/s", "baseline", "baseline TFLOP/s", "x baseline"};
      for (const auto& g : m.gemms)
        t.add({g.suite, short_name(g.name), fmt_num(g.tflops), g.baseline_kind, g.cublaslt_tflops > 0 ? fmt_num(g.cublaslt_tflops) : "n/a",
               g.cublaslt_tflops > 0 ? fmt_num(g.tflops / g.cublaslt_tflops, 3) : "n/a"});
      s.tables.push_back(t);
      s.plot_ids.push_back("gemm");
    }
    out.push_back(s);
  }

  // Baseline comparison.
  if (!m.comparison.empty()) {
    Section s{"comparison", "Comparison with the baseline", {}, {}, {}, {}, {}, {}};
    {
      int reg = 0, imp = 0, untested = 0;
      for (const auto& c : m.comparison) {
        reg += c.verdict == Comparison::Verdict::kRegression;
        imp += c.verdict == Comparison::Verdict::kImprovement;
        untested += c.verdict == Comparison::Verdict::kUntested;
      }
      s.paragraphs.push_back(fmt::format(
          "Baseline: {}. Google Benchmark's compare.py ran a two-sided Mann-Whitney U test over the repetitions of each "
          "benchmark; a benchmark is a **regression** when p < {} and its median time grew by more than {}%, an "
          "improvement when p < {} and it shrank by more than {}%. Result: **{} regression{}**, {} improvement{}, {} "
          "not tested (fewer than 2 repetitions; compare.py recommends 9 or more). The metric is real time, or for CPU "
          "suites run on a machine shared with other work, the process's CPU time over all threads (real time there "
          "follows the other load).",
          m.in.baseline.empty() ? "(unnamed)" : m.in.baseline, fmt_num(m.in.alpha), fmt_num(100 * m.in.min_change),
          fmt_num(m.in.alpha), fmt_num(100 * m.in.min_change), reg, reg == 1 ? "" : "s", imp, imp == 1 ? "" : "s", untested));
      Table t;
      t.header = {"benchmark", "metric", "unit", "baseline", "this run", "change", "U-test p", "repetitions", "verdict"};
      for (const auto& c : m.comparison) {
        const bool r = c.verdict == Comparison::Verdict::kRegression;
        const bool g = c.verdict == Comparison::Verdict::kImprovement;
        t.add({short_name(c.name), c.metric, c.time_unit, fmt_num(c.old_time), fmt_num(c.new_time), fmt::format("{:+.1f}%", 100 * c.change),
               c.pvalue ? fmt_num(*c.pvalue, 3) : "n/a", fmt::format("{} vs {}", c.reps_old, c.reps_new),
               r ? "REGRESSION" : std::string(verdict_name(c.verdict))},
              r ? "bad" : (g ? "good" : ""));
      }
      s.tables.push_back(t);
      s.plot_ids.push_back("comparison");
    }
    out.push_back(s);
  }

  // Conformance details (the verdict and the divergence table lead the report).
  if (have_conform) {
    Section s{"conformance", "Conformance details (qtc conform)", {}, {}, {}, {}, {}, {}};
    const Conformance& c = m.conform;
    {
      int p = 0, f = 0, e = 0, k = 0;
      for (const auto& cell : c.cells) p += cell.passed, f += cell.failed, e += cell.errors, k += cell.skipped;
      s.paragraphs.push_back(fmt::format("From {}: {} passed, {} failed, {} errors, {} skipped.", fmt::join(c.sources, ", "), p, f, e, k));
      if (!c.summary.empty()) {
        Table t;
        t.header = {"field", "value"};
        for (const auto& [key, v] : c.summary) t.add({key, v});
        s.tables.push_back(t);
      }
      Table t;
      t.header = {"recipe", "profile", "backend", "result", "passed", "failed", "errors", "skipped", "first failures"};
      for (const auto& cell : c.cells) {
        const bool bad = cell.failed + cell.errors > 0;
        const std::string res = bad ? "FAIL" : (cell.passed > 0 ? "pass" : "skipped");
        t.add({cell.recipe, cell.profile, cell.backend, res, std::to_string(cell.passed), std::to_string(cell.failed),
               std::to_string(cell.errors), std::to_string(cell.skipped), fmt::format("{}", fmt::join(cell.notes, "; "))},
              bad ? "bad" : "");
      }
      s.tables.push_back(t);
    }
    out.push_back(s);
  }

  // History of benchmark runs: with this run's benchmarks, or alone in a report of nothing else.
  if (!m.history.empty() && (!m.benches.empty() || out.empty())) {
    Section s{"history", "History of past runs", {}, {}, {}, {}, {}, {}};
    {
      s.paragraphs.push_back(fmt::format("{} run(s) from {}{}.", m.history.size(),
                                         m.in.history_dir.empty() ? "(no history folder)" : m.in.history_dir.string(),
                                         m.benches.empty() ? "" : ", this run last"));
      Table t;
      t.header = {"date", "commit", "machine kind", "benchmarks", "record"};
      for (const auto& h : m.history)
        t.add({h.date, h.commit.substr(0, 12), h.machine_kind, std::to_string(h.seconds.size()), h.file});
      s.tables.push_back(t);
      s.plot_ids.push_back("history");
    }
    out.push_back(s);
  }
  if (out.empty()) {
    Section s{"empty", "No data", {}, {}, {}, {}, {}, {}};
    s.paragraphs.push_back("This run gave the report no benchmark results, no comparison, no conformance results and no history.");
    out.push_back(s);
  }
  return out;
}

const Plot* find_plot(const std::vector<Plot>& plots, const std::string& id) {
  for (const auto& p : plots)
    if (p.id == id) return &p;
  return nullptr;
}

/// Markdown inline code/bold markers to HTML for the few paragraphs we write ourselves.
std::string md_inline_to_html(const std::string& s) {
  std::string e = html_escape(s), o;
  bool code = false, bold = false;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i] == '`') {
      o += code ? "</code>" : "<code>";
      code = !code;
    } else if (e[i] == '*' && i + 1 < e.size() && e[i + 1] == '*') {
      o += bold ? "</strong>" : "<strong>";
      bold = !bold;
      ++i;
    } else {
      o += e[i];
    }
  }
  return o;
}

const char* kCss = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{border-bottom:2px solid #2e86c1;padding-bottom:.2em}h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#eaf2f8}tr.bad td{background:#fadbd8;font-weight:600}tr.good td{background:#d5f5e3}
code{background:#f4f4f4;padding:0 .2em}td{max-width:40em;overflow-wrap:anywhere}figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}
.warn{background:#fcf3cf;border:1px solid #f1c40f;padding:.5em 1em}.summary{font-size:1.05em}
td.pass{background:#d5f5e3;color:#145a32}td.fail{background:#f5b7b1;color:#78281f;font-weight:700}td.skip{background:#eaeded;color:#566573}
td.none{background:#fff}p.verdict{font-size:1.4em;font-weight:700;padding:.4em .8em;border-left:8px solid}
p.verdict.pass{background:#d5f5e3;border-color:#1e8449}p.verdict.fail{background:#fadbd8;border-color:#c0392b}p.verdict.skip{background:#eaeded;border-color:#7f8c8d}
nav a{margin-right:1em})";

}  // namespace

/// Markdown has no colour: a cell's class is shown by a coloured mark before its text.
const char* md_mark(const std::string& cls) {
  if (cls == "pass") return "\xF0\x9F\x9F\xA2 ";  // green circle
  if (cls == "fail") return "\xF0\x9F\x94\xB4 ";  // red circle
  if (cls == "skip") return "\xE2\x9A\xAA ";      // white circle
  return "";
}

std::string section_markdown(const Section& s, const std::vector<Plot>& plots) {
  std::ostringstream o;
  o << "## " << s.heading << "\n\n";
  if (!s.lead.empty()) o << "**" << md_mark(s.lead_class) << md_escape(s.lead) << "**\n\n";
  for (const auto& p : s.paragraphs) o << p << "\n\n";
  for (size_t ti = 0; ti < s.tables.size(); ++ti) {
    const Table& t = s.tables[ti];
    if (auto it = s.table_intro.find(ti); it != s.table_intro.end()) o << it->second << "\n\n";
    o << "|";
    for (const auto& h : t.header) o << " " << md_escape(h) << " |";
    o << "\n|";
    for (size_t i = 0; i < t.header.size(); ++i) o << "---|";
    o << "\n";
    for (size_t r = 0; r < t.rows.size(); ++r) {
      o << "|";
      for (size_t i = 0; i < t.rows[r].size(); ++i) {
        std::string cell = md_escape(t.rows[r][i]);
        const std::string cls = i < t.cell_class[r].size() ? t.cell_class[r][i] : "";
        if (!cell.empty() && cls == "fail") cell = "**" + cell + "**";
        if (!cell.empty()) cell = md_mark(cls) + cell;
        o << " " << (t.row_class[r] == "bad" && !cell.empty() ? "**" + cell + "**" : cell) << " |";
      }
      o << "\n";
    }
    o << "\n";
  }
  for (const auto& id : s.plot_ids)
    if (const Plot* p = find_plot(plots, id)) {
      if (!p->file.empty()) o << "![" << p->title << "](" << p->file << ")\n\n";
      else o << "> plot " << id << " missing: " << md_escape(p->error) << "\n\n";
    }
  return o.str();
}

std::string render_markdown(const Model& m, const std::vector<Plot>& plots) {
  std::ostringstream o;
  o << "# " << m.in.title << "\n\nGenerated " << m.generated_utc << " by `qtc report`. The same report as one page: `qtc_report.html`.\n\n";
  for (const auto& w : m.warnings) o << "> warning: " << md_escape(w) << "\n";
  if (!m.warnings.empty()) o << "\n";
  for (const Section& s : build_sections(m)) o << section_markdown(s, plots);
  return o.str();
}

std::string render_html(const Model& m, const std::vector<Plot>& plots) {
  const auto sections = build_sections(m);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<link rel=\"icon\" href=\"data:,\">\n"  // no favicon request: the page fetches nothing
    << "<title>" << html_escape(m.in.title) << "</title>\n<style>" << kCss << "\n</style>\n</head>\n<body>\n"
    << "<h1>" << html_escape(m.in.title) << "</h1>\n<p>Generated " << html_escape(m.generated_utc)
    << " by <code>qtc report</code>. Everything on this page is inline; plots are SVG rendered by gnuplot.</p>\n<nav>";
  for (const Section& s : sections) o << "<a href=\"#" << s.id << "\">" << html_escape(s.heading) << "</a>";
  o << "</nav>\n";
  for (const auto& w : m.warnings) o << "<p class=\"warn\">warning: " << html_escape(w) << "</p>\n";
  for (const Section& s : sections) {
    o << "<section id=\"" << s.id << "\">\n<h2>" << html_escape(s.heading) << "</h2>\n";
    if (!s.lead.empty()) o << "<p class=\"verdict " << s.lead_class << "\">" << html_escape(s.lead) << "</p>\n";
    for (const auto& p : s.paragraphs) o << "<p class=\"summary\">" << md_inline_to_html(p) << "</p>\n";
    for (size_t ti = 0; ti < s.tables.size(); ++ti) {
      const Table& t = s.tables[ti];
      if (auto it = s.table_intro.find(ti); it != s.table_intro.end())
        o << "<p class=\"summary\">" << md_inline_to_html(it->second) << "</p>\n";
      o << (t.id.empty() ? "<table>" : "<table id=\"" + t.id + "\">") << "\n<thead><tr>";
      for (const auto& h : t.header) o << "<th>" << html_escape(h) << "</th>";
      o << "</tr></thead>\n<tbody>\n";
      for (size_t r = 0; r < t.rows.size(); ++r) {
        o << (t.row_class[r].empty() ? "<tr>" : "<tr class=\"" + t.row_class[r] + "\">");
        for (size_t i = 0; i < t.rows[r].size(); ++i) {
          const std::string cls = i < t.cell_class[r].size() ? t.cell_class[r][i] : "";
          o << (cls.empty() ? "<td>" : "<td class=\"" + cls + "\">") << html_escape(t.rows[r][i]) << "</td>";
        }
        o << "</tr>\n";
      }
      o << "</tbody>\n</table>\n";
    }
    for (const auto& id : s.plot_ids)
      if (const Plot* p = find_plot(plots, id)) {
        if (!p->svg.empty()) o << "<figure id=\"plot-" << id << "\">\n" << p->svg << "\n<figcaption>" << html_escape(p->title) << "</figcaption></figure>\n";
        else o << "<p class=\"warn\">plot " << html_escape(id) << " missing: " << html_escape(p->error) << "</p>\n";
      }
    o << "</section>\n";
  }
  o << "</body>\n</html>\n";
  return o.str();
}

json render_summary(const Model& m) {
  json j = history_record(m);
  j["title"] = m.in.title;
  j["baseline"] = m.in.baseline;
  json cmp = json::array();
  int reg = 0;
  for (const auto& c : m.comparison) {
    reg += c.verdict == Comparison::Verdict::kRegression;
    cmp.push_back({{"name", c.name}, {"metric", c.metric}, {"time_unit", c.time_unit}, {"baseline", c.old_time}, {"new", c.new_time},
                   {"change", c.change}, {"pvalue", c.pvalue ? json(*c.pvalue) : json(nullptr)},
                   {"verdict", std::string(verdict_name(c.verdict))}});
  }
  j["comparison"] = cmp;
  j["regressions"] = reg;
  json bw = json::array();
  for (const auto& b : m.bandwidth)
    bw.push_back({{"suite", b.suite}, {"name", b.name}, {"seconds", b.seconds}, {"gbs", b.gbs}, {"copy_gbs", b.copy_gbs},
                  {"fraction_of_copy", b.fraction}, {"peak_extra_x_input", b.peak_extra_x_input}});
  j["bandwidth"] = bw;
  json gm = json::array();
  for (const auto& g : m.gemms)
    gm.push_back({{"suite", g.suite}, {"name", g.name}, {"tflops", g.tflops}, {"baseline", g.baseline_kind},
                  {"baseline_tflops", g.cublaslt_tflops}});
  j["gemms"] = gm;
  json cf = json::array();
  int failed = 0;
  for (const auto& c : m.conform.cells) {
    failed += c.failed + c.errors;
    cf.push_back({{"recipe", c.recipe}, {"profile", c.profile}, {"backend", c.backend}, {"passed", c.passed},
                  {"failed", c.failed}, {"errors", c.errors}, {"skipped", c.skipped}});
  }
  j["conformance"] = cf;
  j["conform_failed"] = failed;
  j["warnings"] = m.warnings;
  return j;
}

}  // namespace detail

Outputs write_report(const Inputs& in, const fs::path& out_dir) {
  using namespace detail;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  QTC_CHECK(!ec && fs::is_directory(out_dir), "report: cannot create the folder ", out_dir.string(), ": ", ec.message());
  Model m = build_model(in);
  const std::vector<Plot> plots = render_plots(m, out_dir);
  for (const auto& p : plots)
    if (!p.error.empty()) m.warnings.push_back("plot " + p.id + ": " + p.error);

  Outputs o;
  o.dir = fs::absolute(out_dir);
  o.markdown = o.dir / "qtc_report.md";
  o.html = o.dir / "qtc_report.html";
  o.json = o.dir / "qtc_report.json";
  // Each file is written whole or not at all (a temporary renamed into place), never through a link or onto a
  // device node; text that is not UTF-8 (a file name, a field) is written with U+FFFD in its place.
  auto write = [](const fs::path& p, const std::string& text) { io::write_output_file(p, text); };
  auto dump = [](const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n"; };
  const json summary = render_summary(m);
  write(o.markdown, render_markdown(m, plots));
  write(o.html, render_html(m, plots));
  write(o.json, dump(summary));
  if (in.record_history && !in.history_dir.empty() && !m.benches.empty()) {
    fs::create_directories(in.history_dir);
    // The machine kind and the commit come from the benchmark JSON: only [A-Za-z0-9._-] of them reach the file
    // name (no '/', no "..": the record stays in the history folder).
    auto name_part = [](std::string v, size_t max, const char* dflt) {
      std::string o;
      for (char c : v.substr(0, std::min(v.size(), max)))
        o += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '-';
      while (!o.empty() && o.front() == '.') o.erase(0, 1);
      return o.empty() ? std::string(dflt) : o;
    };
    std::string stamp = m.generated_utc;
    for (char& c : stamp)
      if (c == ':') c = '-';
    o.history_record = in.history_dir / fmt::format("{}_{}_{}.json", name_part(stamp, 40, "undated"),
                                                    name_part(summary.value("machine_kind", ""), 64, "unknown"),
                                                    name_part(summary.value("commit", ""), 7, "nocommit"));
    write(o.history_record, dump(history_record(m)));
  }
  o.regressions = summary["regressions"].get<int>();
  o.conform_failed = summary["conform_failed"].get<int>();
  o.warnings = m.warnings;
  return o;
}

std::string conform_summary_markdown(const nlohmann::json& conform_report) {
  detail::Model m;
  detail::parse_conform(conform_report, "qtc conform", m.conform);
  return detail::section_markdown(detail::verdict_section(m), {});
}

Outputs write_report_for_conform(const fs::path& dir, const fs::path& bench_dir) {
  Inputs in;
  in.title = "qtc conform report";
  in.conform_json = {dir / "report.json"};
#ifdef QTC_SOURCE_DIR
  if (fs::is_directory(fs::path(QTC_SOURCE_DIR) / "reports" / "history")) in.history_dir = fs::path(QTC_SOURCE_DIR) / "reports" / "history";
#endif
  if (!bench_dir.empty()) {
    auto add = [](const fs::path& d, std::vector<fs::path>& out) {
      std::error_code ec;
      if (!fs::is_directory(d, ec)) return;
      for (const auto& e : fs::directory_iterator(d, ec))
        if (e.path().extension() == ".json") out.push_back(e.path());
      std::sort(out.begin(), out.end());
    };
    add(bench_dir / "bench", in.bench_json);
    add(bench_dir / "compare", in.compare_json);
    in.baseline = "see " + bench_dir.string();
  }
  return write_report(in, dir);
}

}  // namespace qtc::report
