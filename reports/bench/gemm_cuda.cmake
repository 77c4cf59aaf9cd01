# \file gemm_cuda.cmake
# \brief bench_gemm_cuda: GPU GEMM throughput (FP8 per-tensor and block vs bare cuBLASLt, NVFP4 emulation vs BF16).
if(QTC_CUDA AND TARGET benchmark::benchmark)
  add_executable(bench_gemm_cuda ${CMAKE_CURRENT_LIST_DIR}/gemm_cuda.cu)
  target_link_libraries(bench_gemm_cuda PRIVATE qtc_cuda qtc_ref benchmark::benchmark CUDA::cublasLt Threads::Threads)
  qtc_cuda_cxx20(bench_gemm_cuda)
  if(TARGET qtc_bench_context)
    target_link_libraries(bench_gemm_cuda PRIVATE qtc_bench_context)
    target_compile_definitions(bench_gemm_cuda PRIVATE QTC_HAVE_BENCH_CONTEXT=1)
  endif()
endif()
