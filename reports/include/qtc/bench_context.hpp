/// \file bench_context.hpp
/// \brief The context every qtc benchmark writes into its Google Benchmark JSON (issue 8): machine kind,
///        CPU, OS, compiler, commit, date, and (for GPU suites) GPU, driver, CUDA, cuBLASLt and NCCL versions.
///
/// Usage, in a benchmark's main() before benchmark::RunSpecifiedBenchmarks():
///
///     benchmark::Initialize(&argc, argv);
///     qtc::bench::add_bench_context();                       // CPU suites
///     qtc::bench::add_bench_context({.gpu = "NVIDIA H200", .driver = ..., ...});  // GPU suites
///
/// Link `qtc_bench_context`. It has no CUDA dependency: GPU suites fill GpuContext from their own
/// cudaGetDeviceProperties / cudaDriverGetVersion / cublasLtGetVersion / ncclGetVersion calls.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace qtc::bench {

/// GPU facts a GPU suite queries itself. Empty fields are written as "n/a".
struct GpuContext {
  std::string gpu;           ///< device name, e.g. "NVIDIA H200"
  std::string sm_clock_mhz;  ///< current or max SM clock
  std::string driver;        ///< driver version, e.g. "13.0" (cudaDriverGetVersion) or the nvidia-smi string
  std::string cuda_runtime;  ///< cudaRuntimeGetVersion
  std::string cublaslt;      ///< cublasLtGetVersion
  std::string nccl;          ///< ncclGetVersion
  std::string gpu_count;     ///< GPUs used by the suite
};

/// Adds the context once per process (Google Benchmark keeps the first value of a key): qtc_commit,
/// qtc_commit_dirty, qtc_date_utc (ISO 8601), qtc_machine_kind (env QTC_MACHINE_KIND, else the host
/// name), cpu_model, cpu_threads, os, compiler, qtc_build_type, and the GPU fields gpu, gpu_sm_clock_mhz,
/// gpu_driver, cuda_runtime, cublaslt, nccl, gpu_count ("none" for a CPU suite, i.e. gpu.gpu empty).
void add_bench_context(const GpuContext& gpu = {});

/// Adds one more key (suite-specific facts, e.g. "l2_flush_bytes"); the first value of a key wins.
void add_context(const std::string& key, const std::string& value);

/// The same facts as (key, value) pairs, without Google Benchmark (library qtc_bench_context_core): for suites
/// that write Google Benchmark's JSON schema themselves.
std::vector<std::pair<std::string, std::string>> context_pairs(const GpuContext& gpu = {});

/// The commit this binary was built from (updated at every build, not only at configure time).
std::string build_commit();

}  // namespace qtc::bench
