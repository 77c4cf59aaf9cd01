# \file native_layout.cmake
# \brief Output tensors in the compact and TE layouts (native_layout.hpp): round trips over ragged shapes, the
#        agreement with layouts.hpp, metadata errors, and the shared TE-layout vectors read back into the compact ones.
qtc_add_test(test_native_layout SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_native_layout.cpp LIBS qtc_ref LABELS cpu)
target_compile_definitions(test_native_layout PRIVATE QTC_VECTORS_ROOT="${PROJECT_SOURCE_DIR}/conformance/vectors")
