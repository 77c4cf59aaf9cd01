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
#include "cmd_checkpoint.hpp"
#include "qtc/stochastic_rounding.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

struct VerifyCommand {
  std::string backend = "cpu";
  std::vector<std::string> paths;
  bool verbose = false;
  VerifyOptions verify;
  CheckpointOptions checkpoint;  ///< model checkpoints among the paths (cmd_checkpoint.cpp)
  bool sr = false;               ///< judge stochastic-rounding vectors by admissibility (stochastic_rounding.hpp)
  SrOptions sr_opts;
};

/// --sr: a vector whose metadata asks for stochastic rounding is judged by admissibility (neighbours, exact scales,
/// unbiasedness), not bit for bit. Returns false when the file is not such a vector (the ordinary path takes it).
bool verify_sr(const std::filesystem::path& f, const VerifyCommand& o, Summary& sum) {
  io::File file;
  try {
    file = io::read_file(f);
  } catch (const std::exception&) {
    return false;  // the ordinary path reports the error
  }
  const auto it = file.metadata.find("stochastic_rounding");
  if (it == file.metadata.end() || it->second != "1") return false;
  const SrResult r = check_stochastic_rounding(file, o.sr_opts);
  sum.add(r.admissible ? Verdict::kPass : Verdict::kFail);
  if (!r.admissible || o.verbose) std::printf("%s %s [sr]: %s\n", r.admissible ? "PASS" : "FAIL", f.string().c_str(), r.message.c_str());
  if (o.verbose)
    for (const auto& d : r.details) std::printf("    %s\n", d.c_str());
  return true;
}

int run_verify(VerifyCommand o) {
  const std::vector<std::string> ckpts = take_checkpoints(o.paths);
  const int ckpt_rc = run_checkpoints(ckpts, o.checkpoint, o.verbose);
  if (o.paths.empty()) return ckpt_rc;
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
    if (o.sr && verify_sr(f, o, sum)) continue;
    for (const FileResult& r : verify_file(f, backends, o.verify)) {
      sum.add(r.verdict);
      if (r.verdict != Verdict::kPass) {
        std::printf("%s\n", result_line(r).c_str());
        if (o.verbose)
          for (const auto& d : detail_lines(r)) std::printf("    %s\n", printable_text(d).c_str());
      } else if (o.verbose) {
        std::printf("%s\n", printable_text(::fmt::format("PASS {} [{}]", r.path, r.backend)).c_str());
      }
    }
  }
  std::printf("%s\n", sum.closing_line().c_str());
  std::fflush(stdout);
  return combine_exit_codes(sum.exit_code(), ckpt_rc);
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
      "2 when any file errored (or on a usage error).\n"
      "A PATH that is a model checkpoint (a folder with config.json or model.safetensors.index.json, or a\n"
      ".safetensors file of quantized weights without VECTORS.md metadata) is checked per quantized tensor in\n"
      "its convention (ModelOpt NVFP4/FP8, compressed-tensors NVFP4/MXFP4/FP8/FP8-block, DeepSeek-V3 FP8):\n"
      "shapes, dtypes, scale ranges, global vs block scales, fused projections' shared scales; with --reference,\n"
      "the decoded values against the high-precision weights (rounding bound, nibble order) and, with --profile,\n"
      "bit for bit against qtc's quantization. Exit 1 when a tensor has a problem, 2 when a file is unreadable.");
  cmd->add_option("--backend", opts->backend, "Backend to run: cpu, cuda or all (each file on every backend)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  cmd->add_flag("--strict-padding", opts->verify.strict_padding,
                "layout=te files: padding entries must be zero (a non-zero one fails, naming the tensor and coordinates)");
  cmd->add_option("--reference", opts->checkpoint.reference,
                  "Model checkpoints: the high-precision weights (a checkpoint of the same model) to compare with");
  cmd->add_option("--profile", opts->checkpoint.profile,
                  "Model checkpoints with --reference: codes and scales must be those of this qtc profile (else only noted)")
      ->each([opts](const std::string&) { opts->checkpoint.profile_required = true; });
  cmd->add_flag("--sr", opts->sr,
                "Vectors with stochastic_rounding=1: judge admissibility (every code a neighbour of the scaled value, "
                "scales and amax exact, unbiased at false-alarm rate --sr-alpha) instead of bit equality");
  cmd->add_option("--sr-alpha", opts->sr_opts.alpha, "--sr: false-alarm rate of the unbiasedness test")->capture_default_str();
  cmd->add_option("--sr-random-bits", opts->sr_opts.random_bits,
                  "--sr: random bits per element of the implementation (its rounding probability is within 2^-bits of the exact one)")
      ->capture_default_str();
  cmd->add_flag("-v,--verbose", opts->verbose, "Also list passing files and every mismatching tensor of a failure");
  cmd->add_option("PATH", opts->paths, "Vector files or directories")->required();
  cmd->callback([opts] { exit_code() = run_verify(*opts); });
}

}  // namespace qtc::conformance
