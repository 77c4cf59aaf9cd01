/// \file commands.hpp
/// \brief The subcommands of `qtc`: each lives in its own cmd_<name>.cpp and registers itself on the app.
#pragma once

namespace CLI {
class App;
}

namespace qtc::conformance {

/// `qtc verify [--backend cpu|cuda|all] PATH...` (cmd_verify.cpp).
void register_verify(CLI::App& app);
/// `qtc conform [--out DIR] [--backend cpu|cuda|all]` (cmd_conform.cpp).
void register_conform(CLI::App& app);
/// `qtc report [--bench F...] [--compare F...] [--conform F...] [--history DIR] [--out DIR]` (cmd_report.cpp).
void register_report(CLI::App& app);
/// `qtc gating [--cc X.Y] [--cublas N] [--feature NAME]` (cmd_gating.cpp).
void register_gating(CLI::App& app);
void register_identify(CLI::App& app);
/// `qtc profiles` (cmd_profiles.cpp).
void register_profiles(CLI::App& app);
/// `qtc quantize ...` and `qtc convert ...`: write vectors in the compact or TE layout (cmd_write.cpp).
void register_write(CLI::App& app);
/// Every subcommand above, in the order `qtc --help` lists them (main.cpp and the CLI fuzz target).
void register_all(CLI::App& app);

/// The exit code a subcommand's callback asks for (set by the callback, returned by main).
int& exit_code();

}  // namespace qtc::conformance
