# \file grouped.cmake
# \brief Grouped (MoE) tensors in the reference: grouped quantize, grouped row-scaled NVFP4 GEMM.
qtc_add_test(test_grouped_ref SOURCES ${CMAKE_CURRENT_LIST_DIR}/grouped_test.cpp ${CMAKE_CURRENT_LIST_DIR}/hybrid_test.cpp LIBS qtc_ref qtc_testing LABELS cpu)
