/// \file testing_checkpoint.cpp
/// \brief qtc::testing::checkpoint_consistent (issue 26): a model checkpoint's quantized tensors checked in their
///        convention, as `qtc verify` on a checkpoint prints them.
#include "qtc/checkpoint_conventions.hpp"
#include "qtc/testing.hpp"

namespace qtc::testing {

::testing::AssertionResult checkpoint_consistent(const std::string& path, const std::string& reference, const std::string& profile) {
  conformance::CheckpointOptions o;
  o.reference = reference;
  if (!profile.empty()) {
    o.profile = profile;
    o.profile_required = true;
  }
  const conformance::CheckpointReport r = conformance::check_checkpoint(path, o);
  if (r.exit_code() == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.text(false);
}

}  // namespace qtc::testing
