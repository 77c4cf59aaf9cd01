# \file quantize_cuda.cmake
# \brief bench_quantize_cuda: Google Benchmark of the CUDA quantizers (only with CUDA and Google Benchmark), with
#        TransformerEngine as an optional run-time peer (QTC_TE_LIB, te_peer.hpp).
if(QTC_CUDA AND benchmark_FOUND)
  execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  OUTPUT_VARIABLE QTC_BENCH_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT QTC_BENCH_COMMIT)
    set(QTC_BENCH_COMMIT unknown)
  endif()
  # te_peer.cpp: TransformerEngine's C API through dlopen at run time (QTC_TE_LIB); nothing of TE at build time.
  add_executable(bench_quantize_cuda ${CMAKE_CURRENT_LIST_DIR}/quantize_cuda.cu ${CMAKE_CURRENT_LIST_DIR}/te_peer.cpp)
  target_link_libraries(bench_quantize_cuda PRIVATE qtc_cuda qtc_ref benchmark::benchmark ${CMAKE_DL_LIBS})
  target_compile_definitions(bench_quantize_cuda PRIVATE QTC_GIT_COMMIT="${QTC_BENCH_COMMIT}")
  qtc_cuda_cxx20(bench_quantize_cuda)
  if(TARGET qtc_bench_context)
    target_link_libraries(bench_quantize_cuda PRIVATE qtc_bench_context)
    target_compile_definitions(bench_quantize_cuda PRIVATE QTC_HAVE_BENCH_CONTEXT=1)
  endif()
endif()
