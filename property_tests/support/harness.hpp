/// \file harness.hpp
/// \brief Running a RapidCheck property inside a GoogleTest test: RC_PARAMS configuration (CI pins the
///        seed), cases per second on stdout, the reproduce string on failure, and the edge-class check
///        (a property that never generated the edge it is about fails).
#pragma once
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qtc::prop {

/// Marks the current case as belonging to an edge class (RC_TAG without the quoting of strings).
void tag(std::string_view label);
/// tag(label) when cond holds; returns cond.
bool tag_if(bool cond, std::string_view label);

namespace detail {
/// Reports a finished property: prints "N cases in T s (R cases/s)" and the class counts, adds a gtest
/// failure with the counterexample and the RC_PARAMS replay string when it failed, and one per
/// required class that was never generated.
void report(const rc::detail::TestMetadata& md, const rc::detail::TestResult& result, double seconds,
            const std::vector<std::string>& required);
rc::detail::TestMetadata metadata_of_current_test();
}  // namespace detail

/// Checks `testable` (a callable taking generated arguments, RC_ASSERT inside) as the current gtest's
/// property. `required` lists the tags every run must have produced at least once.
template <typename Testable>
void check_property(const std::vector<std::string>& required, Testable&& testable) {
  const rc::detail::TestMetadata md = detail::metadata_of_current_test();
  const auto t0 = std::chrono::steady_clock::now();
  const rc::detail::TestResult result = rc::detail::checkTestable(std::forward<Testable>(testable), md);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  detail::report(md, result, secs, required);
}

}  // namespace qtc::prop
