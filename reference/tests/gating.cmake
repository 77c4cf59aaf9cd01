# \file gating.cmake
# \brief The capability table (reference/src/rules/gating.cpp): pure, CPU only.
qtc_add_test(test_gating SOURCES ${CMAKE_CURRENT_LIST_DIR}/gating_test.cpp LIBS qtc_ref LABELS cpu)
