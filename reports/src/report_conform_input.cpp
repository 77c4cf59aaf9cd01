/// \file report_conform_input.cpp
/// \brief The report's `qtc conform` input: report.json read into the verdict matrix, the run facts and the
///        divergence table (report_internal.hpp, parse_conform).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "report_internal.hpp"

namespace qtc::report {
namespace detail {

void parse_conform(const json& j, const std::string& source, Conformance& out, std::vector<std::string>* warnings) {
  out.sources.push_back(source);
  if (!j.is_object()) return;
  // Run facts: top-level scalars, lists of scalars, and one level of objects ("summary.pass", "generated.cases").
  for (const auto& [k, v] : j.items()) {
    if (v.is_primitive()) out.summary[k] = scalar_text(v);
    if (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_primitive(); })) {
      std::string joined;
      for (const auto& e : v) joined += (joined.empty() ? "" : ", ") + scalar_text(e);
      out.summary[k] = joined;
    }
    if (v.is_object())
      for (const auto& [k2, v2] : v.items())
        if (v2.is_primitive()) out.summary[k + "." + k2] = scalar_text(v2);
  }
  // Results: an array of objects under one of these keys, each naming recipe, backend, profile and verdict.
  auto str_of = [](const json& o, std::initializer_list<const char*> keys, const std::string& dflt) {
    for (const char* k : keys)
      if (o.contains(k) && !o[k].is_null()) return scalar_text(o[k]);
    return dflt;
  };
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index;
  // `qtc conform` writes the matrix itself ("matrix": recipe, backend, profile, pass, fail, error, skipped):
  // take its counts, and only the failure messages from "results".
  const bool have_matrix = j.contains("matrix") && j["matrix"].is_array();
  if (have_matrix) {
    size_t i = 0;
    for (const auto& e : j["matrix"]) {
      ++i;
      if (!e.is_object()) continue;
      ConformCell cell;
      cell.recipe = str_of(e, {"recipe"}, "?");
      cell.backend = str_of(e, {"backend"}, "-");
      cell.profile = str_of(e, {"profile"}, "-");
      try {
        auto count = [&](const char* k) {
          const int64_t v = int_field(e, k, 0);
          if (v < 0 || v > INT32_MAX) throw FieldError(fmt::format("field '{}' is {}, expected a count", k, v));
          return static_cast<int>(v);
        };
        cell.passed = count("pass");
        cell.failed = count("fail");
        cell.errors = count("error");
        cell.skipped = count("skipped");
      } catch (const FieldError& err) {
        const std::string line = fmt::format("{}: matrix entry {}: {}; the entry is left out", source, i - 1, err.what());
        if (warnings == nullptr) throw FieldError(line);
        warnings->push_back(line);
        continue;
      }
      index[std::make_tuple(cell.recipe, cell.backend, cell.profile)] = out.cells.size();
      out.cells.push_back(cell);
    }
  }
  for (const char* key : {"results", "cases", "files", "vectors", "entries"}) {
    if (!j.contains(key) || !j[key].is_array()) continue;
    for (const auto& r : j[key]) {
      if (!r.is_object()) continue;
      std::string recipe = str_of(r, {"recipe", "recipe_name", "name"}, "");
      std::string backend = str_of(r, {"backend"}, "");
      std::string profile = str_of(r, {"profile"}, "");
      if (have_matrix) {  // the names conform_report.cpp gives empty fields in its matrix, and its grouping
        if (recipe.empty()) recipe = "(unparsed)";
        if (backend.empty()) backend = "-";
        if (profile.empty()) profile = "-";
        for (const std::string suffix : {"_rowonly", "_colonly"})
          if (recipe.size() > suffix.size() && recipe.ends_with(suffix)) recipe.resize(recipe.size() - suffix.size());
      } else {
        if (recipe.empty()) recipe = "?";
        if (backend.empty()) backend = "cpu";
        if (profile.empty()) profile = "te";
      }
      std::string verdict = str_of(r, {"verdict", "status", "result", "outcome"}, "");
      if (verdict.empty() && r.contains("passed") && r["passed"].is_boolean()) verdict = r["passed"].get<bool>() ? "pass" : "fail";
      std::transform(verdict.begin(), verdict.end(), verdict.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      const auto t = std::make_tuple(recipe, backend, profile);
      if (!index.count(t) && have_matrix) {  // counted in no matrix cell: keep only its failure
        const bool bad = !(verdict.rfind("pass", 0) == 0 || verdict == "ok" || verdict.rfind("skip", 0) == 0);
        if (bad)
          out.failures.push_back({verdict.rfind("err", 0) == 0 ? "error" : "fail", recipe, profile, backend,
                                  str_of(r, {"suite"}, "") + " " + str_of(r, {"check"}, ""), str_of(r, {"path"}, ""),
                                  str_of(r, {"message"}, "")});
        continue;
      }
      if (!index.count(t)) {
        index[t] = out.cells.size();
        ConformCell cell;
        cell.recipe = recipe;
        cell.backend = backend;
        cell.profile = profile;
        out.cells.push_back(cell);
      }
      ConformCell& c = out.cells[index[t]];
      const bool bad = !(verdict.rfind("pass", 0) == 0 || verdict == "ok" || verdict.rfind("skip", 0) == 0 ||
                         verdict == "notsupported" || verdict == "not_supported" || verdict == "notrun");
      if (bad) {
        ConformFailure f;
        f.verdict = verdict.rfind("err", 0) == 0 || verdict == "failed_to_run" ? "error" : "fail";
        f.recipe = recipe, f.profile = profile, f.backend = backend;
        const std::string suite = str_of(r, {"suite"}, ""), check = str_of(r, {"check"}, "");
        f.check = suite + (suite.empty() || check.empty() ? "" : " ") + check;
        f.path = str_of(r, {"path", "file", "case", "vector"}, "");
        f.message = str_of(r, {"message", "detail", "details", "reason"}, "");
        out.failures.push_back(std::move(f));
      }
      if (have_matrix) {  // counts are the matrix's; keep a few failure messages
        const std::string note = str_of(r, {"message", "path"}, "").substr(0, 200);
        if (bad && c.notes.size() < 3 && std::find(c.notes.begin(), c.notes.end(), note) == c.notes.end()) c.notes.push_back(note);
        continue;
      }
      if (verdict.rfind("pass", 0) == 0 || verdict == "ok") ++c.passed;
      else if (verdict.rfind("skip", 0) == 0 || verdict == "notsupported" || verdict == "not_supported" || verdict == "notrun") ++c.skipped;
      else if (verdict.rfind("err", 0) == 0 || verdict == "failed_to_run") ++c.errors;
      else {
        ++c.failed;
        if (c.notes.size() < 3) {
          std::string what = str_of(r, {"message", "detail", "details", "reason", "case", "path", "file"}, "");
          if (what.size() > 200) what = what.substr(0, 200) + "...";
          if (std::find(c.notes.begin(), c.notes.end(), what) == c.notes.end()) c.notes.push_back(what);
        }
      }
    }
  }
  std::sort(out.cells.begin(), out.cells.end(), [](const ConformCell& a, const ConformCell& b) {  // failures first
    const bool fa = a.failed + a.errors > 0, fb = b.failed + b.errors > 0;
    if (fa != fb) return fa;
    return std::tie(a.recipe, a.profile, a.backend) < std::tie(b.recipe, b.profile, b.backend);
  });
  // Divergences of foreign vectors: any array of objects under a key naming them; columns = union of keys.
  for (const char* key : {"divergences", "divergence", "divergence_table"}) {
    if (!j.contains(key) || !j[key].is_array()) continue;
    // The producer's column order when it gives one (JSON objects do not keep key order), then any other key.
    if (j.contains("divergence_columns") && j["divergence_columns"].is_array())
      for (const auto& c : j["divergence_columns"])
        if (c.is_string() && std::find(out.divergence_columns.begin(), out.divergence_columns.end(), c.get<std::string>()) ==
                                 out.divergence_columns.end())
          out.divergence_columns.push_back(c.get<std::string>());
    for (const auto& r : j[key]) {
      if (!r.is_object()) continue;
      for (const auto& [k, v] : r.items())
        if (std::find(out.divergence_columns.begin(), out.divergence_columns.end(), k) == out.divergence_columns.end())
          out.divergence_columns.push_back(k);
    }
    for (const auto& r : j[key]) {
      if (!r.is_object()) continue;
      std::vector<std::string> row;
      for (const auto& c : out.divergence_columns) row.push_back(r.contains(c) ? scalar_text(r[c]) : "");
      out.divergence_rows.push_back(row);
    }
  }
}

}  // namespace detail
}  // namespace qtc::report
