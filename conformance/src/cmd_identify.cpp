/// \file cmd_identify.cpp
/// \brief `qtc identify PATH...`: tells which profile (and, for MXFP8, which scale rule) reproduces a vector's
///        expected outputs bit for bit, so a foreign implementation's dump is attributed to the rules it follows
///        instead of failing with a bare mismatch (DIVERGENCES.md). The logic is identify.hpp's, shared with the
///        divergence table of `qtc conform`.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cmd_checkpoint.hpp"
#include "commands.hpp"
#include "qtc/backend.hpp"
#include "qtc/error.hpp"
#include "qtc/identify.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

int run_identify(std::vector<std::string> paths) {
  // Model checkpoints: the convention of every quantized tensor and what is wrong with it (cmd_checkpoint.cpp).
  const std::vector<std::string> ckpts = take_checkpoints(paths);
  const int ckpt_rc = run_checkpoints(ckpts, CheckpointOptions{}, /*verbose=*/true);
  if (paths.empty()) return ckpt_rc;
  std::vector<FileResult> problems;
  const auto files = collect_vector_files(paths, problems);
  for (const auto& p : problems) std::printf("%s\n", result_line(p).c_str());
  auto cpu = make_cpu_backend();
  int identified = 0, unmatched = 0, errors = static_cast<int>(problems.size());
  // Files grouped by the implementation their `source` names, in order of first appearance.
  std::vector<std::string> impls;
  std::vector<std::vector<std::filesystem::path>> impl_paths;
  std::vector<std::vector<VectorIdentity>> impl_ids;
  for (const auto& path : files) {
    VectorIdentity id = identify_vector(path, *cpu);
    // Every field may quote the file (its path, claimed profile, a metadata key in a message): no raw control
    // characters reach the terminal.
    for (std::string* s : {&id.path, &id.claimed, &id.error, &id.closest, &id.closest_mismatch, &id.claimed_mismatch})
      *s = printable_text(*s);
    for (std::string& m : id.matches) m = printable_text(m);
    const std::string impl = implementation_of(id.source);
    size_t k = 0;
    while (k < impls.size() && impls[k] != impl) ++k;
    if (k == impls.size()) {
      impls.push_back(impl);
      impl_paths.emplace_back();
      impl_ids.emplace_back();
    }
    impl_paths[k].push_back(path);
    impl_ids[k].push_back(id);
    switch (id.verdict) {
      case IdentityVerdict::kError:
        ++errors;
        std::printf("ERROR %s: %s\n", id.path.c_str(), id.error.c_str());
        break;
      case IdentityVerdict::kNone:
        ++unmatched;
        std::printf("NONE  %s (claims %s): no profile reproduces it; closest %s (%lld elements differ): %s; %s\n",
                    id.path.c_str(), id.claimed.c_str(), id.closest.c_str(), static_cast<long long>(id.closest_count),
                    id.closest_mismatch.c_str(), rule_explanation(id).c_str());
        break;
      case IdentityVerdict::kOther:
        ++identified;
        std::printf("OTHER %s (claims %s): matches %s; as %s: %s\n", id.path.c_str(), id.claimed.c_str(),
                    join_labels(id.matches).c_str(), id.claimed.c_str(), id.claimed_mismatch.c_str());
        break;
      case IdentityVerdict::kClaimed:
        ++identified;
        std::printf("OK    %s (claims %s): matches %s\n", id.path.c_str(), id.claimed.c_str(), join_labels(id.matches).c_str());
        break;
    }
  }
  // One verdict per implementation: which profile reproduces how many of its files, and the one rule (if any) whose
  // change reproduces all the others.
  for (size_t k = 0; k < impls.size(); ++k)
    std::printf("%s\n", implementation_line(implementation_verdict(impls[k], impl_paths[k], impl_ids[k], *cpu)).c_str());
  std::printf("%d identified, %d unmatched", identified, unmatched);
  if (errors != 0) std::printf(", %d errors", errors);
  std::printf("\n");
  return combine_exit_codes(errors != 0 ? 2 : (unmatched != 0 ? 1 : 0), ckpt_rc);
}

}  // namespace

void register_identify(CLI::App& app) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* sub = app.add_subcommand(
      "identify", "Tell which profile (te, te_pyref, ocp, torchao, modelopt, jax, vllm; MXFP8 also the scale rule) reproduces "
                  "each vector, and give one verdict per implementation (files grouped by `source`)");
  sub->add_option("paths", *paths, "Vector files or folders (searched recursively for *.safetensors)")->required();
  sub->footer(
      "One line per file: OK (the profile it claims matches), OTHER (only other profiles match), NONE (no profile\n"
      "reproduces it; the closest candidate and its first mismatch are shown) or ERROR. Then one IMPL line per\n"
      "implementation (the first two words of `source`, with \"on DEVICE\" when they follow): the profile that\n"
      "reproduces most of its files, and for the others the one rule whose change reproduces every one of them\n"
      "(none is named when no rule explains all).\n"
      "Exit 0 when every file matches some profile, 1 when one matches none, 2 on an unreadable file.");
  sub->callback([paths] {
    try {
      exit_code() = run_identify(*paths);
    } catch (const qtc::Error& e) {
      std::fprintf(stderr, "qtc identify: %s\n", printable_text(e.what()).c_str());
      exit_code() = 2;
    }
  });
}

}  // namespace qtc::conformance
