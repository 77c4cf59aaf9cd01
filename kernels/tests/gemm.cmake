# \file gemm.cmake
# \brief GPU GEMM tests (kernels/src/gemm_*.cpp|cu) against the exact reference; label gpu.
qtc_add_test(test_gemm_cuda CUDA SOURCES ${CMAKE_CURRENT_LIST_DIR}/gemm_cuda_test.cpp LIBS qtc_cuda qtc_ref qtc_testing LABELS gpu)
