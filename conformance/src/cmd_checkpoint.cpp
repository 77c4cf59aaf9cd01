/// \file cmd_checkpoint.cpp
/// \brief Model checkpoints in `qtc verify` and `qtc identify` (checkpoint_conventions.hpp): the paths that are
///        checkpoints (checkpoint_rule: a folder with an index, a quantization_config, hf_quant_config.json or
///        quantized-weight tensor names; a .safetensors file of quantized weights without VECTORS.md metadata) are
///        taken out of the vector list and checked tensor by tensor; the report names the rule that decided.
#include "cmd_checkpoint.hpp"

#include <cstdio>

#include "qtc/checkpoint_conventions.hpp"

namespace qtc::conformance {

std::vector<std::string> take_checkpoints(std::vector<std::string>& paths) {
  std::vector<std::string> ckpts, rest;
  for (auto& p : paths) (is_model_checkpoint(p) ? ckpts : rest).push_back(p);
  paths = std::move(rest);
  return ckpts;
}

int run_checkpoints(const std::vector<std::string>& ckpts, const CheckpointOptions& opts, bool verbose) {
  int rc = 0;
  for (const auto& p : ckpts) {
    const CheckpointReport rep = check_checkpoint(p, opts);
    std::fputs(rep.text(verbose).c_str(), stdout);
    rc = combine_exit_codes(rc, rep.exit_code());
  }
  std::fflush(stdout);
  return rc;
}

int combine_exit_codes(int a, int b) { return (a == 2 || b == 2) ? 2 : (a == 1 || b == 1) ? 1 : std::max(a, b); }

}  // namespace qtc::conformance
