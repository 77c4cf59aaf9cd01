/// \file bench_context_core.cpp
/// \brief qtc::bench::context_pairs: the machine, build and GPU facts of a benchmark run, without Google Benchmark
///        (suites that write Google Benchmark's JSON schema themselves, e.g. the all-gather benchmark, use it too).
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include "qtc/bench_context.hpp"

namespace qtc::bench {

namespace detail {
extern const char* const kGitCommit;  // generated at build time (reports/cmake/git_commit.cmake)
extern const bool kGitDirty;
}  // namespace detail

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string os_name() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

std::string or_none(const std::string& v, bool gpu_suite) { return !v.empty() ? v : (gpu_suite ? "n/a" : "none"); }

}  // namespace

std::string build_commit() { return detail::kGitCommit; }

std::vector<std::pair<std::string, std::string>> context_pairs(const GpuContext& gpu) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add_context = [&](const std::string& k, const std::string& v) { out.emplace_back(k, v); };
  const char* kind = std::getenv("QTC_MACHINE_KIND");
  add_context("qtc_commit", detail::kGitCommit);
  add_context("qtc_commit_dirty", detail::kGitDirty ? "true" : "false");
  add_context("qtc_date_utc", utc_now());
  add_context("qtc_machine_kind", kind != nullptr && *kind != '\0' ? kind : host_name());
  add_context("cpu_model", cpu_model());
  add_context("cpu_threads", std::to_string(std::thread::hardware_concurrency()));
  add_context("os", os_name());
#if defined(__clang__)
  add_context("compiler", std::string("clang ") + __clang_version__);
#elif defined(__GNUC__)
  add_context("compiler", std::string("gcc ") + __VERSION__);
#endif
#ifdef NDEBUG
  add_context("qtc_build_type", "release");
#else
  add_context("qtc_build_type", "debug");
#endif
  const bool g = !gpu.gpu.empty();
  add_context("gpu", or_none(gpu.gpu, g));
  add_context("gpu_sm_clock_mhz", or_none(gpu.sm_clock_mhz, g));
  add_context("gpu_driver", or_none(gpu.driver, g));
  add_context("cuda_runtime", or_none(gpu.cuda_runtime, g));
  add_context("cublaslt", or_none(gpu.cublaslt, g));
  add_context("nccl", or_none(gpu.nccl, g));
  add_context("gpu_count", g ? or_none(gpu.gpu_count, g) : "0");
  return out;
}

}  // namespace qtc::bench
