/// \file error.hpp
/// \brief The one error type of qtc and the check macros that throw it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace qtc {

/// Every failure in qtc is a qtc::Error: the message names the rule that was broken.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Args>
[[noreturn]] inline void throw_error(const char* file, int line, const char* expr, Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  if (expr != nullptr && *expr != '\0') os << " [check `" << expr << "` failed at " << file << ":" << line << "]";
  throw Error(os.str());
}
}  // namespace detail

}  // namespace qtc

/// Throws qtc::Error with the streamed message when `cond` is false.
#define QTC_CHECK(cond, ...)                                                          \
  do {                                                                                \
    if (!(cond)) ::qtc::detail::throw_error(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

/// Throws qtc::Error with the streamed message.
#define QTC_FAIL(...) ::qtc::detail::throw_error(__FILE__, __LINE__, "", __VA_ARGS__)
