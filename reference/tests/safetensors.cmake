# \file safetensors.cmake
# \brief safetensors reader/writer tests: round trips and the malformed-file table.
qtc_add_test(test_safetensors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_safetensors.cpp LIBS qtc_ref LABELS cpu)
