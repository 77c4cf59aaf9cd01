# \file gemm.cmake
# \brief Reference GEMMs (reference/src/gemm/): exact accumulator, Eigen path, pairs, row-scaled NVFP4.
qtc_add_test(test_gemm_ref SOURCES ${CMAKE_CURRENT_LIST_DIR}/gemm_test.cpp LIBS qtc_ref LABELS cpu)
