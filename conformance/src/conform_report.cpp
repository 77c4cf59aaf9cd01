/// \file conform_report.cpp
/// \brief report.json and report.md of `qtc conform`.
#include "conform_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "qtc/error.hpp"
#include "qtc/output_file.hpp"
#include "qtc/report.hpp"

namespace qtc::conformance {

namespace {

struct Counts {
  int pass = 0, fail = 0, error = 0, skipped = 0;
  void add(Verdict v) {
    switch (v) {
      case Verdict::kPass: ++pass; break;
      case Verdict::kFail: ++fail; break;
      case Verdict::kError: ++error; break;
      case Verdict::kSkipped: ++skipped; break;
      case Verdict::kEquivalent: ++fail; break;  // not the profile's bytes (value_equivalence.hpp): counted as failed here
    }
  }
};

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

/// A divergence-table cell: the first mismatch without its block dump ("; block x[...] = {...}", up to 32 values;
/// report.json keeps it whole), at most 160 characters.
std::string short_cell(std::string s) {
  for (auto at = s.find("; block "); at != std::string::npos; at = s.find("; block ", at)) {
    auto end = s.find("}", at);
    s.erase(at, end == std::string::npos ? std::string::npos : end + 1 - at);
  }
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

/// Dumps of other implementations (`--foreign`): their verdicts are kept apart from qtc's own checks.
bool is_foreign(const ConformRecord& rec) { return rec.suite == "foreign"; }

/// Whole or not at all (a temporary renamed into place: a full disk leaves no truncated report), never through a
/// link or onto a device node (output_file.hpp).
void write_text(const std::filesystem::path& p, const std::string& text) { io::write_output_file(p, text); }

}  // namespace

void write_conform_report(const std::filesystem::path& dir, const ConformRun& run, const std::vector<ConformRecord>& records) {
  using json = nlohmann::json;
  // recipe x backend x profile, and per suite/check.
  std::map<std::tuple<std::string, std::string, std::string>, Counts> matrix;
  std::map<std::pair<std::string, std::string>, Counts> by_suite;
  Counts total;
  std::map<std::tuple<std::string, std::string, std::string>, Counts> foreign_matrix;
  Counts foreign_total;
  for (const auto& rec : records) {
    const FileResult& r = rec.result;
    // Group by recipe variant, whatever planes a vector happened to check ("_rowonly" of FP8 tensor vectors).
    std::string recipe = r.recipe.empty() ? "(unparsed)" : r.recipe;
    for (const char* suffix : {"_rowonly", "_colonly"})
      if (recipe.size() > std::strlen(suffix) && recipe.ends_with(suffix)) recipe.resize(recipe.size() - std::strlen(suffix));
    const std::string backend = r.backend.empty() ? "-" : r.backend;
    const std::string profile = r.profile.empty() ? "-" : r.profile;
    if (is_foreign(rec)) {  // a separate verdict: another implementation's dump, not one of qtc's checks
      foreign_matrix[{recipe, backend, profile}].add(r.verdict);
      foreign_total.add(r.verdict);
      continue;
    }
    matrix[{recipe, backend, profile}].add(r.verdict);
    by_suite[{rec.suite, rec.check}].add(r.verdict);
    total.add(r.verdict);
  }

  json j;
  j["qtc_version"] = run.version;
  j["started_utc"] = run.started;
  j["seconds"] = run.seconds;
  j["seed"] = run.seed;
  j["vectors_dir"] = run.vectors_dir;
  j["backends"] = run.backends;
  j["generated"] = {{"recipes", run.recipes}, {"cases", run.cases}};
  auto counts_json = [](const Counts& c) { return json{{"pass", c.pass}, {"fail", c.fail}, {"error", c.error}, {"skipped", c.skipped}}; };
  j["summary"] = counts_json(total);
  j["by_check"] = json::array();
  for (const auto& [k, c] : by_suite) {
    json e = counts_json(c);
    e["suite"] = k.first;
    e["check"] = k.second;
    j["by_check"].push_back(e);
  }
  j["matrix"] = json::array();
  for (const auto& [k, c] : matrix) {
    json e = counts_json(c);
    e["recipe"] = std::get<0>(k);
    e["backend"] = std::get<1>(k);
    e["profile"] = std::get<2>(k);
    j["matrix"].push_back(e);
  }
  // "results": qtc's own checks (the verdict matrix above); "foreign": the --foreign dumps, apart.
  j["results"] = json::array();
  j["foreign"] = {{"summary", counts_json(foreign_total)}, {"matrix", json::array()}, {"results", json::array()}};
  for (const auto& [k, c] : foreign_matrix) {
    json e = counts_json(c);
    e["recipe"] = std::get<0>(k);
    e["backend"] = std::get<1>(k);
    e["profile"] = std::get<2>(k);
    j["foreign"]["matrix"].push_back(e);
  }
  for (const auto& rec : records) {
    const FileResult& r = rec.result;
    json e{{"suite", rec.suite}, {"check", rec.check}, {"path", r.path}, {"backend", r.backend}, {"recipe", r.recipe},
           {"profile", r.profile}, {"verdict", std::string(verdict_name(r.verdict))}};
    if (!r.message.empty()) e["message"] = r.message;
    if (const auto lines = detail_lines(r); !lines.empty()) e["details"] = lines;
    for (const TensorMismatch& m : r.mismatches) {  // the records behind the lines, for tools that read the report
      json mj{{"tensor", m.tensor}};
      if (!m.compared()) {
        mj["problem"] = m.problem;
      } else {
        mj.update({{"count", m.count}, {"total", m.total}, {"index", m.at}, {"expected", element_text(m.elem, m.want)},
                   {"got", element_text(m.elem, m.got)}});
        if (!m.file_at.empty()) mj["buffer_index"] = m.file_at;
      }
      e["mismatches"].push_back(std::move(mj));
    }
    if (!r.checked.empty()) e["checked"] = r.checked;
    (is_foreign(rec) ? j["foreign"]["results"] : j["results"]).push_back(e);
  }
  // The divergence table: vectors grouped by (suite, source, recipe, claimed profile, verdict, profiles that
  // reproduce them); the per-file attribution under "identities".
  struct DivGroup {
    int count = 0;
    std::string example, mismatch;
  };
  using DivKey = std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>;
  std::map<DivKey, DivGroup> div;
  j["identities"] = json::array();
  for (const auto& [suite, id] : run.identities) {
    const std::string tag = identity_tag(id.verdict);
    const std::string matches = id.verdict == IdentityVerdict::kError ? "-" : join_labels(id.matches);
    DivGroup& g = div[{suite, id.source.empty() ? "-" : id.source, id.recipe.empty() ? "-" : id.recipe, id.claimed, tag, matches}];
    if (g.count++ == 0) {
      g.example = std::filesystem::path(id.path).filename().string();
      if (id.verdict == IdentityVerdict::kOther) g.mismatch = "as " + id.claimed + ": " + short_cell(id.claimed_mismatch);
      if (id.verdict == IdentityVerdict::kNone)
        g.mismatch = "closest " + id.closest + ": " + short_cell(id.closest_mismatch) + "; " + rule_explanation(id);
      if (id.verdict == IdentityVerdict::kError) g.mismatch = id.error;
    }
    json e{{"suite", suite}, {"path", id.path}, {"source", id.source}, {"recipe", id.recipe}, {"claims", id.claimed},
           {"result", tag}, {"matches", id.matches}};
    if (!id.claimed_mismatch.empty()) e["claimed_mismatch"] = id.claimed_mismatch;
    if (!id.closest.empty()) {
      e["closest"] = id.closest;
      e["closest_mismatch"] = id.closest_mismatch;
      e["explaining_rule"] = id.explaining_rule;
    }
    if (!id.error.empty()) e["error"] = id.error;
    j["identities"].push_back(e);
  }
  j["divergences"] = json::array();
  for (const auto& [k, g] : div)
    j["divergences"].push_back(json{{"suite", std::get<0>(k)}, {"source", std::get<1>(k)}, {"recipe", std::get<2>(k)},
                                    {"claims", std::get<3>(k)}, {"result", std::get<4>(k)},
                                    {"reproduced by", std::get<5>(k)}, {"vectors", g.count}, {"example", g.example},
                                    {"first mismatch", g.mismatch.empty() ? "-" : g.mismatch}});
  j["divergence_columns"] = {"suite", "source", "recipe", "claims", "result", "reproduced by", "vectors", "example", "first mismatch"};
  j["foreign_dirs"] = run.foreign_dirs;
  // Messages and paths may hold bytes that are not UTF-8 (a file's name, a parser's quote of a malformed header):
  // written with U+FFFD in their place, so that one such file never costs the report of all the others.
  write_text(dir / "report.json", j.dump(1, ' ', false, json::error_handler_t::replace) + "\n");

  // report.md: the verdict first (matrix, failures with their messages), then the divergence table, then details.
  std::string md;
  md += "# qtc conform report\n\n";
  md += ::fmt::format("qtc {}, started {} UTC, {:.1f} s, seed {}; backends: {}.\n\n", run.version, run.started, run.seconds,
                      run.seed, ::fmt::format("{}", ::fmt::join(run.backends, ", ")));
  md += qtc::report::conform_summary_markdown(j);
  if (!run.foreign_dirs.empty()) {
    // The --foreign dumps: their own verdict, after qtc's (a producer that diverges is not a failure of qtc).
    md += ::fmt::format("## Foreign dumps (`--foreign`): {} passed, {} failed, {} skipped, {} errors\n\n", foreign_total.pass,
                        foreign_total.fail, foreign_total.skipped, foreign_total.error);
    md += "Dumps of other implementations, each checked against the profile it claims; not counted in qtc's verdict "
          "above. The divergence table below says which profile reproduces each one.\n\n";
    if (!foreign_matrix.empty()) {
      md += "| recipe | backend | profile | pass | fail | error | skipped |\n|---|---|---|---:|---:|---:|---:|\n";
      for (const auto& [k, c] : foreign_matrix)
        md += ::fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", std::get<0>(k), std::get<1>(k), std::get<2>(k), c.pass,
                            c.fail, c.error, c.skipped);
      md += "\n";
    }
    for (const auto& rec : records)
      if (is_foreign(rec) && (rec.result.verdict == Verdict::kFail || rec.result.verdict == Verdict::kError))
        md += ::fmt::format("* **{}** `{}` [{}]: {}\n", verdict_name(rec.result.verdict), rec.result.path,
                            rec.result.backend.empty() ? "-" : rec.result.backend, md_escape(short_cell(rec.result.message)));
    md += "\n";
  }
  md += "## Divergences: which profile reproduces each vector\n\n"
        "Every bundled and foreign vector is re-run on the CPU reference under each profile qtc models (te, te_pyref, "
        "ocp, torchao; MXFP8 also under both scale rules). OK: the profile it claims reproduces it; OTHER: only other "
        "profiles do (the producer follows their rules, DIVERGENCES.md); NONE: no profile does (the closest one and "
        "its first mismatch are shown).\n\n";
  if (div.empty()) {
    md += "No vectors were attributed in this run.\n";
  } else {
    md += "| suite | source | recipe | claims | result | reproduced by | vectors | example | first mismatch |\n"
          "|---|---|---|---|---|---|---:|---|---|\n";
    for (const auto& [k, g] : div)
      md += ::fmt::format("| {} | {} | {} | {} | {} | {} | {} | `{}` | {} |\n", std::get<0>(k), md_escape(std::get<1>(k)),
                          std::get<2>(k), std::get<3>(k), std::get<4>(k), std::get<5>(k), g.count, g.example,
                          md_escape(g.mismatch.empty() ? "-" : g.mismatch));
  }
  md += "\n## Details\n\n";
  md += ::fmt::format("Bundled vectors: `{}`. Generated: {} recipe variants, {} cases.\n\n", run.vectors_dir, run.recipes, run.cases);
  md += ::fmt::format("**{} passed, {} failed, {} skipped, {} errors.**\n\n", total.pass, total.fail, total.skipped, total.error);
  md += "Checks: `verify` re-runs a vector on a backend and compares every expected output bit for bit; `roundtrip` "
        "writes a generated vector with the safetensors writer and reads it back; `bound` checks dequantize(quantize(x)) "
        "against x within the format's error bound.\n\n";
  md += "| suite | check | pass | fail | error | skipped |\n|---|---|---:|---:|---:|---:|\n";
  for (const auto& [k, c] : by_suite)
    md += ::fmt::format("| {} | {} | {} | {} | {} | {} |\n", k.first, k.second, c.pass, c.fail, c.error, c.skipped);
  md += "\n### Recipe x backend x profile\n\n| recipe | backend | profile | pass | fail | error | skipped |\n"
        "|---|---|---|---:|---:|---:|---:|\n";
  for (const auto& [k, c] : matrix)
    md += ::fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", std::get<0>(k), std::get<1>(k), std::get<2>(k), c.pass,
                        c.fail, c.error, c.skipped);
  md += "\n### Every failure and error\n\n";
  int shown = 0;
  for (const auto& rec : records) {
    const FileResult& r = rec.result;
    if (r.verdict != Verdict::kFail && r.verdict != Verdict::kError) continue;
    ++shown;
    md += ::fmt::format("* **{}** `{}` [{}] ({} {}): {}\n", verdict_name(r.verdict), r.path, r.backend.empty() ? "-" : r.backend,
                        rec.suite, rec.check, md_escape(r.message));
    for (const auto& d : detail_lines(r)) md += "  * " + md_escape(d) + "\n";
  }
  if (shown == 0) md += "None.\n";
  md += "\n### Skipped\n\n";
  std::map<std::string, int> skip_reasons;
  for (const auto& rec : records)
    if (rec.result.verdict == Verdict::kSkipped) ++skip_reasons[rec.result.backend + ": " + rec.result.message];
  if (skip_reasons.empty()) md += "None.\n";
  for (const auto& [why, n] : skip_reasons) md += ::fmt::format("* {} x {}\n", n, md_escape(why));
  md += "\n### Per-file verdicts\n\n<details><summary>every file and check</summary>\n\n"
        "| suite | check | file | backend | verdict |\n|---|---|---|---|---|\n";
  for (const auto& rec : records)
    md += ::fmt::format("| {} | {} | `{}` | {} | {} |\n", rec.suite, rec.check, rec.result.path,
                        rec.result.backend.empty() ? "-" : rec.result.backend, verdict_name(rec.result.verdict));
  md += "\n</details>\n";
  write_text(dir / "report.md", md);
}

}  // namespace qtc::conformance
