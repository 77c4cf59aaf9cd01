/// \file commands.cpp
/// \brief State shared by the subcommands of `qtc`.
#include "commands.hpp"

namespace qtc::conformance {

void register_all(CLI::App& app) {
  register_verify(app);
  register_conform(app);
  register_report(app);
  register_gating(app);
  register_identify(app);
  register_profiles(app);
  register_write(app);
}

int& exit_code() {
  static int code = 0;
  return code;
}

}  // namespace qtc::conformance
