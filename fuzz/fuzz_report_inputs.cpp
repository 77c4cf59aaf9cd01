/// \file fuzz_report_inputs.cpp
/// \brief Fuzz target: what `qtc report` reads from files — Google Benchmark JSON, compare.py dumps, history
///        records and `qtc conform` report.json — through the report's readers, then the Markdown and HTML
///        renderers, and the gnuplot quoting of every name. The first byte picks the reader, the rest is the
///        document. Every input must end in a report (mistyped fields as warnings), never a crash, a leak or an
///        escape: the gnuplot strings of any name stay one single-quoted literal without a control character,
///        and no '<' from an input reaches the HTML or the Markdown unescaped.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "qtc/error.hpp"
#include "report_internal.hpp"

namespace {

using namespace qtc::report;
using namespace qtc::report::detail;

/// The gnuplot literal of `s` must be one single-quoted string: quotes inside doubled, no control character.
void check_gnuplot(const std::string& s) {
  const std::string q = gnuplot_quote(s);
  if (q.size() < 2 || q.front() != '\'' || q.back() != '\'') std::abort();
  for (size_t i = 1; i + 1 < q.size(); ++i) {
    const auto u = static_cast<unsigned char>(q[i]);
    if (u < 0x20 || u == 0x7F) std::abort();
    if (q[i] == '\'') {
      if (i + 2 >= q.size() || q[i + 1] != '\'') std::abort();  // a lone quote would end the literal
      ++i;
    }
  }
  const std::string d = gnuplot_data_quote(s);
  if (d.size() < 2 || d.front() != '"' || d.back() != '"') std::abort();
  for (size_t i = 1; i + 1 < d.size(); ++i)
    if (d[i] == '"' || static_cast<unsigned char>(d[i]) < 0x20) std::abort();
}

/// No '<' of the input survives the escaping of either renderer.
void check_escaped(const std::string& s) {
  if (html_escape(s).find('<') != std::string::npos || md_escape(s).find('<') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int kind = data[0] % 4;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  check_gnuplot(text);
  check_escaped(text);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    return 0;  // not JSON: `qtc report` warns and goes on
  }
  Model m;
  try {
    switch (kind) {
      case 0: m.benches.push_back(parse_bench(j, "fuzz.json", &m.warnings)); break;
      case 1: {
        std::vector<std::string> problems;
        m.comparison = read_comparison(j, 0.05, 0.05, (size & 1) != 0, &problems);
        break;
      }
      case 2:
        if (auto h = parse_history_record(j, "fuzz.json", m.warnings)) m.history.push_back(std::move(*h));
        break;
      case 3: parse_conform(j, "fuzz.json", m.conform, &m.warnings); break;
    }
  } catch (const qtc::Error&) {
    return 0;
  }
  for (const auto& b : m.benches)
    for (const auto& p : b.points) check_gnuplot(p.name);
  for (const auto& c : m.comparison) check_gnuplot(c.name);
  for (const auto& h : m.history) check_gnuplot(h.date + " " + h.commit);
  // The renderers over what was read (no plots: gnuplot is not run here).
  (void)render_markdown(m, {});
  (void)render_html(m, {});
  (void)render_summary(m).dump(-1, ' ', false, json::error_handler_t::replace);
  return 0;
}
