/// \file cmd_checkpoint.hpp
/// \brief The checkpoint part of `qtc verify` / `qtc identify` (cmd_checkpoint.cpp).
#pragma once
#include <string>
#include <vector>

#include "qtc/checkpoint_conventions.hpp"

namespace qtc::conformance {

/// Removes the model checkpoints from `paths` and returns them (is_model_checkpoint).
std::vector<std::string> take_checkpoints(std::vector<std::string>& paths);
/// Checks each checkpoint, prints its report; returns 2 on any error, else 1 on any problem, else 0.
int run_checkpoints(const std::vector<std::string>& ckpts, const CheckpointOptions& opts, bool verbose);
/// The exit code of two parts of one run: 2 over 1 over anything else.
int combine_exit_codes(int a, int b);

}  // namespace qtc::conformance
