/// \file cmd_profiles.cpp
/// \brief `qtc profiles`: every profile (profile.hpp, the one list) with its version, what it follows and each
///        of its rules, as the reference and the kernels read them.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "commands.hpp"
#include "qtc/profile.hpp"

namespace qtc::conformance {

void register_profiles(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("profiles", "Print every profile with its rules (the metadata key `profile` selects one)");
  sub->footer("A profile is a named, versioned record of the bit-level rules implementations choose differently\n"
              "(VECTORS.md, Profiles). `qtc identify` names the rule of the closest profile that explains a mismatch.");
  sub->callback([] {
    for (const ProfileRules& p : all_profiles()) {
      std::printf("%s (version %d): %s\n", p.name.c_str(), p.version, p.follows.c_str());
      for (const auto& [rule, value] : p.describe()) std::printf("  %-34s %s\n", rule.c_str(), value.c_str());
    }
    exit_code() = 0;
  });
}

}  // namespace qtc::conformance
