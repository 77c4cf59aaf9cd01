# \file reference_cpu.cmake
# \brief bench_reference_cpu: Google Benchmark suite of the CPU reference (every recipe, 4096x4096 BF16).
if(TARGET benchmark::benchmark AND TARGET qtc_bench_context)
  add_executable(bench_reference_cpu ${CMAKE_CURRENT_LIST_DIR}/reference_cpu.cpp)
  target_link_libraries(bench_reference_cpu PRIVATE qtc_ref qtc_bench_context benchmark::benchmark Threads::Threads)
endif()
