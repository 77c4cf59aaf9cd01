/// \file bench_context.cpp
/// \brief qtc::bench::add_bench_context: the facts of context_pairs into Google Benchmark's JSON context.
#include <benchmark/benchmark.h>

#include "qtc/bench_context.hpp"

namespace qtc::bench {

void add_context(const std::string& key, const std::string& value) { benchmark::AddCustomContext(key, value); }

void add_bench_context(const GpuContext& gpu) {
  static bool done = false;  // Google Benchmark warns on duplicate keys; one call per process is enough
  if (done) return;
  done = true;
  for (const auto& [k, v] : context_pairs(gpu)) add_context(k, v);
}

}  // namespace qtc::bench
