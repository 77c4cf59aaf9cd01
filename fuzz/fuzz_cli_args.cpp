/// \file fuzz_cli_args.cpp
/// \brief Fuzz target: the `qtc` command line — the input is split at NUL bytes into arguments and parsed by the
///        same CLI11 app as main.cpp, and the command runs: its own checks (shapes, --param, layouts, outputs)
///        must end in an exit status and a message, never a crash, a leak, a hang or a huge allocation.
///        Sandboxed: the process works in a scratch folder emptied after every input; an argument holding '/' or
///        ".." is not run (no file outside the scratch folder is read or written); `conform` (minutes of work by
///        design) is parsed but not run; the memory precheck is bounded to 16 MiB (QTC_MEMORY_LIMIT_BYTES) so
///        that every accepted shape is small.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "commands.hpp"

namespace {

namespace fs = std::filesystem;

/// The scratch folder, removed when the process exits.
struct Scratch {
  fs::path path;
  ~Scratch() {
    std::error_code ec;
    fs::current_path(fs::temp_directory_path(), ec);
    fs::remove_all(path, ec);
  }
};

const fs::path& scratch() {
  static const Scratch dir{[] {
    const fs::path d = fs::temp_directory_path() / ("qtc-fuzz-cli-" + std::to_string(::getpid()));
    fs::create_directories(d);
    fs::current_path(d);
    ::setenv("QTC_MEMORY_LIMIT_BYTES", "16777216", 1);
    return d;
  }()};
  return dir.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const fs::path& dir = scratch();
  std::vector<std::string> args{"qtc"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  if (!cur.empty()) args.push_back(cur);
  if (args.size() > 64) return 0;
  for (const auto& a : args)
    // Stays in the scratch folder: no '/' and no "..": `identify ..` read the build tree for minutes (a CI timeout),
    // and `-o..` or `--out=..` would write beside it.
    if (a.find('/') != std::string::npos || a.find("..") != std::string::npos) return 0;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());

  CLI::App app{"qtc"};
  app.require_subcommand(1);
  qtc::conformance::register_all(app);
  // `conform` is parsed, then stopped before its run: its final callback (which owns its options) stays in place.
  struct ConformNotRun {};
  app.get_subcommand("conform")->parse_complete_callback([] { throw ConformNotRun{}; });
  qtc::conformance::exit_code() = 0;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    // a usage error: exit status 2 in main.cpp
  } catch (const ConformNotRun&) {
  }
  const int rc = qtc::conformance::exit_code();
  if (rc < 0 || rc > 2) std::abort();  // 0, 1 or 2: nothing else is an exit status of qtc
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) fs::remove_all(e.path(), ec);
  return 0;
}
