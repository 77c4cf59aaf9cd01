# \file codec.cmake
# \brief Scalar codec tests: exhaustive over every code and every BF16 value, boundary tables.
qtc_add_test(test_codec SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_codec.cpp LIBS qtc_ref LABELS cpu)
qtc_add_test(test_quantize_edges SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quantize_edges.cpp LIBS qtc_ref LABELS cpu)
qtc_add_test(test_layouts SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_layouts.cpp LIBS qtc_ref LABELS cpu)
qtc_add_test(test_torchao_rules SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_torchao_rules.cpp ${CMAKE_CURRENT_LIST_DIR}/test_mxfp4.cpp
             LIBS qtc_ref LABELS cpu)
# compressed-tensors' NVFP4 / MXFP8 / MXFP4 orders against measured values (issue 25): in the same executable
target_sources(test_torchao_rules PRIVATE ${CMAKE_CURRENT_LIST_DIR}/test_ct_rules.cpp ${CMAKE_CURRENT_LIST_DIR}/test_ct_triton_rules.cpp)
