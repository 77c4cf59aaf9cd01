/// \file commands.cpp
/// \brief State shared by the subcommands of `qtc`.
#include "commands.hpp"

namespace qtc::conformance {

int& exit_code() {
  static int code = 0;
  return code;
}

}  // namespace qtc::conformance
