/// \file cmd_identify.cpp
/// \brief `qtc identify PATH...`: tells which profile (and, for MXFP8, which scale rule) reproduces a vector's
///        expected outputs bit for bit, so a foreign implementation's dump is attributed to the rules it follows
///        instead of failing with a bare mismatch (DIVERGENCES.md). Each candidate is the file's own recipe
///        with the metadata keys `profile` (and `scale_rule`) replaced, verified on the CPU reference.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "qtc/backend.hpp"
#include "qtc/error.hpp"
#include "verify.hpp"

namespace qtc::conformance {

namespace {

struct Candidate {
  std::string profile;
  std::string scale_rule;  ///< MXFP8 only; empty otherwise
  std::string label() const { return scale_rule.empty() ? profile : profile + "+" + scale_rule; }
};

std::vector<Candidate> candidates_for(const io::File& f) {
  const auto it = f.metadata.find("recipe");
  const bool mx = it != f.metadata.end() && it->second == "mxfp8";
  std::vector<Candidate> out;
  for (const char* p : {"te", "te_pyref", "ocp", "torchao"}) {
    if (!mx) {
      out.push_back({p, {}});
      continue;
    }
    for (const char* rule : {"rceil", "ocp_floor"}) out.push_back({p, rule});
  }
  return out;
}

struct FileIdentity {
  std::string path;
  std::string claimed;              ///< the candidate the file's own metadata names
  std::vector<std::string> matches;  ///< candidates that reproduce every expected tensor
  std::string closest;              ///< when none matches: the candidate with the fewest mismatching tensors
  std::string closest_detail;
  std::string error;                ///< unreadable file or no applicable candidate
};

FileIdentity identify_file(const std::filesystem::path& path, QuantizeBackend& cpu) {
  FileIdentity id;
  id.path = path.string();
  io::File f;
  try {
    f = io::read_file(path);
  } catch (const Error& e) {
    id.error = e.what();
    return id;
  }
  const auto get = [&](const char* k, const char* d) {
    const auto it = f.metadata.find(k);
    return it == f.metadata.end() ? std::string(d) : it->second;
  };
  const bool mx = get("recipe", "") == "mxfp8";
  id.claimed = get("profile", "te") + (mx ? "+" + get("scale_rule", "rceil") : "");
  size_t best = SIZE_MAX;
  int applicable = 0;
  std::string first_error;
  for (const Candidate& c : candidates_for(f)) {
    io::File g = f;
    g.metadata["profile"] = c.profile;
    if (!c.scale_rule.empty()) g.metadata["scale_rule"] = c.scale_rule;
    const FileResult r = verify_vector(g, id.path + " as " + c.label(), cpu);
    if (r.verdict == Verdict::kError) {  // the recipe is not defined under this profile
      if (first_error.empty()) first_error = r.message;
      continue;
    }
    ++applicable;
    if (r.verdict == Verdict::kPass) {
      id.matches.push_back(c.label());
    } else if (r.details.size() < best) {
      best = r.details.size();
      id.closest = c.label();
      id.closest_detail = r.details.empty() ? r.message : r.details.front();
    }
  }
  if (applicable == 0) id.error = first_error.empty() ? "no profile applies to this file" : first_error;
  return id;
}

int run_identify(const std::vector<std::string>& paths) {
  std::vector<FileResult> problems;
  const auto files = collect_vector_files(paths, problems);
  for (const auto& p : problems) std::printf("%s\n", result_line(p).c_str());
  auto cpu = make_cpu_backend();
  int identified = 0, unmatched = 0, errors = static_cast<int>(problems.size());
  for (const auto& path : files) {
    const FileIdentity id = identify_file(path, *cpu);
    if (!id.error.empty()) {
      ++errors;
      std::printf("ERROR %s: %s\n", id.path.c_str(), id.error.c_str());
      continue;
    }
    if (id.matches.empty()) {
      ++unmatched;
      std::printf("NONE  %s (claims %s): no profile reproduces it; closest %s: %s\n", id.path.c_str(), id.claimed.c_str(),
                  id.closest.c_str(), id.closest_detail.c_str());
      continue;
    }
    ++identified;
    std::string list;
    bool claimed_matches = false;
    for (const auto& m : id.matches) {
      list += (list.empty() ? "" : ", ") + m;
      claimed_matches = claimed_matches || m == id.claimed;
    }
    std::printf("%s %s (claims %s): matches %s\n", claimed_matches ? "OK   " : "OTHER", id.path.c_str(), id.claimed.c_str(),
                list.c_str());
  }
  std::printf("%d identified, %d unmatched", identified, unmatched);
  if (errors != 0) std::printf(", %d errors", errors);
  std::printf("\n");
  return errors != 0 ? 2 : (unmatched != 0 ? 1 : 0);
}

}  // namespace

void register_identify(CLI::App& app) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* sub = app.add_subcommand(
      "identify", "Tell which profile (te, te_pyref, ocp, torchao; MXFP8 also the scale rule) reproduces each vector");
  sub->add_option("paths", *paths, "Vector files or folders (searched recursively for *.safetensors)")->required();
  sub->footer(
      "One line per file: OK (the profile it claims matches), OTHER (only other profiles match), NONE (no profile\n"
      "reproduces it; the closest candidate and its first mismatch are shown) or ERROR. Exit 0 when every file\n"
      "matches some profile, 1 when one matches none, 2 on an unreadable file.");
  sub->callback([paths] {
    try {
      exit_code() = run_identify(*paths);
    } catch (const qtc::Error& e) {
      std::fprintf(stderr, "qtc identify: %s\n", e.what());
      exit_code() = 2;
    }
  });
}

}  // namespace qtc::conformance
