# \file tests.cmake
# \brief Tests of the conformance layer: verify's logic (cpu), every bundled vector (vectors), the qtc binary (cpu).
qtc_add_test(test_verify SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verify.cpp LIBS qtc_conformance LABELS cpu)
qtc_add_test(test_bundled_vectors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_vectors.cpp LIBS qtc_conformance LABELS vectors cpu)
qtc_add_test(test_qtc_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli.cpp LIBS qtc_conformance LABELS cpu)
target_compile_definitions(test_qtc_cli PRIVATE QTC_BINARY="$<TARGET_FILE:qtc>")
add_dependencies(test_qtc_cli qtc)

# The closing line and exit code straight from CTest, without a test harness in between.
add_test(NAME qtc_verify_bundled COMMAND qtc verify ${QTC_BUNDLED_VECTORS_DIR})
set_tests_properties(qtc_verify_bundled PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^135 passed, 0 failed\n$")
add_test(NAME qtc_verify_missing_file COMMAND qtc verify ${CMAKE_CURRENT_BINARY_DIR}/no_such_vector.safetensors)
set_tests_properties(qtc_verify_missing_file PROPERTIES LABELS cpu WILL_FAIL TRUE)
# qtc identify attributes every bundled TE vector to the profile it claims (and lists the others that agree).
add_test(NAME qtc_identify_bundled COMMAND qtc identify ${QTC_BUNDLED_VECTORS_DIR})
set_tests_properties(qtc_identify_bundled PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n135 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
# Hostile inputs (issue 14): huge empty shapes, overflowing dimensions, directory scans, messages. The timeout
# catches the old behaviour of looping over 2^35 empty row strips.
qtc_add_test(test_verify_hostile SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verify_hostile.cpp LIBS qtc_conformance LABELS cpu TIMEOUT 120)
