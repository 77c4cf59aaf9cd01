# \file gemm.cmake
# \brief GPU GEMM and grouped tests (kernels/src/gemm/, kernels/src/grouped/) against the exact reference; one
#        executable, one file per path (helpers and the CUDA-graph fixture: gemm_cuda_test_util.hpp); label gpu.
qtc_add_test(test_gemm_cuda CUDA
             SOURCES ${CMAKE_CURRENT_LIST_DIR}/gemm_cuda_fp8_test.cpp
                     ${CMAKE_CURRENT_LIST_DIR}/gemm_cuda_nvfp4_test.cpp
                     ${CMAKE_CURRENT_LIST_DIR}/gemm_cuda_grouped_test.cpp
                     ${CMAKE_CURRENT_LIST_DIR}/gemm_cuda_grouped_quantize_test.cpp
                     ${CMAKE_CURRENT_LIST_DIR}/gemm_cuda_grouped_device_test.cpp
                     ${CMAKE_CURRENT_LIST_DIR}/gemm_cuda_grouped_poison_test.cpp
             LIBS qtc_cuda qtc_ref qtc_testing LABELS gpu)
# One translation unit in the unity build (the split files cost no more compile time than the single file did).
if(TARGET test_gemm_cuda)
  qtc_unity_build(test_gemm_cuda)
endif()
