/// \file testing_gmock.hpp
/// \brief A GoogleMock matcher over qtc::testing::conforms (link GTest::gmock as well as qtc::testing):
///
///   EXPECT_THAT(outputs, qtc::testing::ConformsTo(x, recipe));
///
/// `outputs` is a qtc::testing::Outputs; the match is conforms(x, recipe, outputs) and, when it fails, the
/// explanation is conforms()'s message (tensor, count, first mismatch in hex and decoded, the block's inputs).
/// x's data is not copied: it must outlive the matcher, as for conforms(). Compiles as C++17.
#pragma once
#include <gmock/gmock.h>

#include <ostream>
#include <string>
#include <utility>

#include "qtc/testing.hpp"

namespace qtc::testing {

/// The matcher's implementation (a MatcherInterface, which every GoogleMock version accepts).
class ConformsToMatcher final : public ::testing::MatcherInterface<const Outputs&> {
 public:
  ConformsToMatcher(const MatrixView& x, Recipe r, std::string name) : x_(x), r_(std::move(r)), name_(std::move(name)) {}

  bool MatchAndExplain(const Outputs& out, ::testing::MatchResultListener* listener) const override {
    const ::testing::AssertionResult res = conforms(x_, r_, out, name_);
    if (!res) *listener << res.message();
    return static_cast<bool>(res);
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "conforms bit for bit to qtc's reference quantization (recipe " << r_.name() << ") of x [" << x_.rows << ", "
        << x_.cols << "]";
  }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "differs from qtc's reference quantization (recipe " << r_.name() << ") of x [" << x_.rows << ", " << x_.cols
        << "]";
  }

 private:
  MatrixView x_;
  Recipe r_;
  std::string name_;
};

/// Matches Outputs that conforms(x, r, outputs, name) accepts.
inline ::testing::Matcher<const Outputs&> ConformsTo(const MatrixView& x, const Recipe& r, const std::string& name = "") {
  return ::testing::MakeMatcher(new ConformsToMatcher(x, r, name));
}

}  // namespace qtc::testing
