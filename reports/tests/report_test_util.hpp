/// \file report_test_util.hpp
/// \brief Helpers of the report's tests (report_test.cpp, report_hostile_test.cpp): reading a file, making a
///        Google Benchmark run.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "qtc/report.hpp"

namespace qtc::report::test {

namespace fs = std::filesystem;

/// This process's own folder under the test temp dir: two runs of the suite at once (a developer's and CI's) must not
/// share one (Chromium's profile lock, half-written reports).
inline fs::path scratch_dir() { return fs::path(::testing::TempDir()) / ("qtc_report_test_" + std::to_string(::getpid())); }
using nlohmann::json;

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

/// A Google Benchmark JSON document with the given repetitions per benchmark (milliseconds), as
/// `--benchmark_repetitions=N --benchmark_format=json` writes it: one entry per repetition, then aggregates.
inline json make_run(const std::vector<std::pair<std::string, std::vector<double>>>& benches, const std::string& commit) {
  json j;
  j["context"] = {{"date", "2026-11-29T12:00:00+00:00"}, {"host_name", "test"}, {"num_cpus", 2},
                  {"qtc_suite", "crafted"}, {"qtc_commit", commit}, {"qtc_machine_kind", "test-kind"},
                  {"gpu", "none"}, {"library_build_type", "release"}};
  json list = json::array();
  int family = 0;
  for (const auto& [name, times] : benches) {
    const std::string run = name + "/real_time";
    const int reps = static_cast<int>(times.size());
    for (int r = 0; r < reps; ++r)
      list.push_back({{"name", run}, {"family_index", family}, {"per_family_instance_index", 0}, {"run_name", run},
                      {"run_type", "iteration"}, {"repetitions", reps}, {"repetition_index", r}, {"threads", 1},
                      {"iterations", 1}, {"real_time", times[r]}, {"cpu_time", times[r] / 50}, {"time_unit", "ms"},
                      {"GB/s", 50.0 / times[r]}});
    if (reps > 1) {
      double mean = 0;
      for (double t : times) mean += t / reps;
      for (const auto& [agg, v] : std::vector<std::pair<std::string, double>>{{"mean", mean}, {"median", median(times)}})
        list.push_back({{"name", run + "_" + agg}, {"family_index", family}, {"per_family_instance_index", 0},
                        {"run_name", run}, {"run_type", "aggregate"}, {"repetitions", reps}, {"threads", 1},
                        {"aggregate_name", agg}, {"aggregate_unit", "time"}, {"iterations", reps}, {"real_time", v},
                        {"cpu_time", v / 50}, {"time_unit", "ms"}, {"GB/s", 50.0 / v}});
    }
    ++family;
  }
  j["benchmarks"] = list;
  return j;
}

}  // namespace qtc::report::test
