/// \file harness.cpp
/// \brief check_property's reporting: rate, class counts, replay string, missing edge classes.
#include "harness.hpp"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include <rapidcheck/detail/Configuration.h>
#include <rapidcheck/detail/PropertyContext.h>

namespace qtc::prop {

void tag(std::string_view label) {
  rc::detail::ImplicitParam<rc::detail::param::CurrentPropertyContext>::value()->addTag(std::string(label));
}

bool tag_if(bool cond, std::string_view label) {
  if (cond) tag(label);
  return cond;
}

namespace detail {

rc::detail::TestMetadata metadata_of_current_test() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata md;
  md.id = std::string(info->test_suite_name()) + "/" + info->name();
  md.description = info->name();
  return md;
}

namespace {
/// The RC_PARAMS value that replays exactly this failure (seed and shrink path of the minimal case).
std::string replay_params(const rc::detail::TestMetadata& md, const rc::detail::FailureResult& f) {
  rc::detail::Configuration cfg = rc::detail::configuration();
  cfg.reproduce.clear();
  cfg.reproduce[md.id] = f.reproduce;
  return rc::detail::configToMinimalString(cfg);
}
}  // namespace

void report(const rc::detail::TestMetadata& md, const rc::detail::TestResult& result, double seconds,
            const std::vector<std::string>& required) {
  const auto& params = rc::detail::configuration().testParams;
  if (result.is<rc::detail::SuccessResult>()) {
    const auto& ok = result.get<rc::detail::SuccessResult>();
    // Count every class over the distribution (a case may carry several tags).
    std::map<std::string, int> counts;
    for (const auto& [tags, n] : ok.distribution) {
      const std::set<std::string> once(tags.begin(), tags.end());
      for (const auto& t : once) counts[t] += n;
    }
    const double rate = seconds > 0 ? ok.numSuccess / seconds : 0.0;
    std::printf("[ property ] %s: %d cases in %.3f s (%.1f cases/s), seed %llu, max_success %d\n", md.id.c_str(),
                ok.numSuccess, seconds, rate, static_cast<unsigned long long>(params.seed), params.maxSuccess);
    for (const auto& [t, n] : counts) std::printf("[ property ]   %-44s %6d  (%.1f%%)\n", t.c_str(), n, 100.0 * n / std::max(1, ok.numSuccess));
    std::fflush(stdout);
    for (const auto& want : required) {
      if (counts.count(want) == 0)
        ADD_FAILURE() << md.id << ": edge class '" << want << "' was never generated in " << ok.numSuccess
                      << " cases; the property did not test the edge it is about (raise max_success or fix the generator)";
    }
    EXPECT_GE(ok.numSuccess, 1) << md.id << ": no case ran";
    return;
  }
  std::ostringstream os;
  rc::detail::printResultMessage(result, os);
  if (result.is<rc::detail::FailureResult>()) {
    const auto& f = result.get<rc::detail::FailureResult>();
    os << "\nReplay this failure: RC_PARAMS=\"" << replay_params(md, f) << "\" " << "<test binary> --gtest_filter="
       << md.id.substr(0, md.id.find('/')) << "." << md.description;
  }
  std::printf("[ property ] %s: FAILED after %.3f s\n", md.id.c_str(), seconds);
  ADD_FAILURE() << os.str();
}

}  // namespace detail
}  // namespace qtc::prop
