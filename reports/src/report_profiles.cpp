/// \file report_profiles.cpp
/// \brief The order of profiles in the reports: the order of the profile records (profile.hpp), not a list here.
#include "qtc/profile.hpp"
#include "report_internal.hpp"

namespace qtc::report::detail {

int profile_rank(const std::string& name) {
  int i = 0;
  for (const ProfileRules& p : all_profiles()) {
    if (name == p.name) return i;
    ++i;
  }
  return name == "-" ? i + 1 : i;
}

}  // namespace qtc::report::detail
