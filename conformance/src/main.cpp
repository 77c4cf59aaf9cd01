/// \file main.cpp
/// \brief The `qtc` command: a CLI11 app with one subcommand per cmd_<name>.cpp (see commands.hpp).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <new>

#include "commands.hpp"
#include "qtc/untrusted.hpp"

int main(int argc, char** argv) {
  CLI::App app{"qtc: conformance harness for low-precision tensor formats (NVFP4, MXFP8, MXFP4, FP8 block, FP8 tensor)"};
  app.set_version_flag("--version", "qtc " QTC_VERSION, "Print the version (qtc X.Y.Z) and exit");
  app.require_subcommand(1);
  qtc::conformance::register_all(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help (rc 0) or the usage error
    return rc == 0 ? 0 : 2;      // a usage error is an error: exit code 2, as for unreadable input
  } catch (const std::bad_alloc&) {
    // Every command checks sizes and memory before it allocates (footprint.hpp); what is left (another process
    // took the memory meanwhile) ends as an error with its reason, never as a bare std::bad_alloc.
    std::fprintf(stderr, "qtc: out of memory (rule 'memory': a resource limit, not a wrong answer)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qtc: %s\n", qtc::printable_text(e.what()).c_str());
    return 2;
  }
  return qtc::conformance::exit_code();
}
