/// \file cmd_verify.cpp
/// \brief `qtc verify [--backend cpu|cuda|all] PATH...`: checks conformance vectors (VECTORS.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "backends.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

struct VerifyCommand {
  std::string backend = "cpu";
  std::vector<std::string> paths;
  bool verbose = false;
  VerifyOptions verify;
};

int run_verify(const VerifyCommand& o) {
  std::vector<std::unique_ptr<QuantizeBackend>> owned = make_backends(o.backend);
  std::vector<QuantizeBackend*> backends;
  for (auto& b : owned) backends.push_back(b.get());

  Summary sum;
  std::vector<FileResult> problems;
  const auto files = collect_vector_files(o.paths, problems);
  for (const FileResult& p : problems) {
    std::printf("%s\n", result_line(p).c_str());
    sum.add(p.verdict);
  }
  for (const auto& f : files) {
    for (const FileResult& r : verify_file(f, backends, o.verify)) {
      sum.add(r.verdict);
      if (r.verdict != Verdict::kPass) {
        std::printf("%s\n", result_line(r).c_str());
        if (o.verbose)
          for (const auto& d : r.details) std::printf("    %s\n", printable_text(d).c_str());
      } else if (o.verbose) {
        std::printf("%s\n", printable_text(::fmt::format("PASS {} [{}]", r.path, r.backend)).c_str());
      }
    }
  }
  std::printf("%s\n", sum.closing_line().c_str());
  std::fflush(stdout);
  return sum.exit_code();
}

}  // namespace

void register_verify(CLI::App& app) {
  auto opts = std::make_shared<VerifyCommand>();
  CLI::App* cmd = app.add_subcommand("verify", "Check conformance vectors (VECTORS.md) against a backend, bit for bit");
  cmd->footer(
      "Each PATH is a .safetensors vector or a directory searched recursively for *.safetensors.\n"
      "Every expected output a file carries is recomputed from its input x and compared: byte tensors byte\n"
      "for byte, F32 tensors bit for bit (any NaN equals any NaN).\n"
      "Verdicts: pass, fail (an output differs), error (unreadable or malformed file, unknown recipe or\n"
      "parameter, missing input, no expected output, wrong shape), skipped (backend not available here).\n"
      "Prints one line per file and backend that did not pass, then 'N passed, N failed' (', N skipped',\n"
      "', N errors' appended when non-zero).\n"
      "Output buffers may be laid out as TransformerEngine holds them: metadata layout=te (padded scales, FP8\n"
      "block 1x128 scales transposed) and swizzled=1 (NVFP4 / MXFP8 scales in the cuBLAS 128x4 order); padding\n"
      "is not compared unless --strict-padding, which requires zeros there (VECTORS.md, Native layouts).\n"
      "Exit status: 0 when nothing failed or errored, 1 when something failed and nothing errored,\n"
      "2 when any file errored (or on a usage error).");
  cmd->add_option("--backend", opts->backend, "Backend to run: cpu, cuda or all (each file on every backend)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  cmd->add_flag("--strict-padding", opts->verify.strict_padding,
                "layout=te files: padding entries must be zero (a non-zero one fails, naming the tensor and coordinates)");
  cmd->add_flag("-v,--verbose", opts->verbose, "Also list passing files and every mismatching tensor of a failure");
  cmd->add_option("PATH", opts->paths, "Vector files or directories")->required();
  cmd->callback([opts] { exit_code() = run_verify(*opts); });
}

}  // namespace qtc::conformance
