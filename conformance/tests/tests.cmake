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

# Vectors dumped from torchao 0.18.0 (conformance/peers/torchao_dump.py): every MXFP8 scale rule (floor, rceil,
# ceil, even) x E4M3/E5M2 x F32/BF16/F16, NVFP4 with and without the per-tensor scale; all bit-exact on the CPU,
# and every one attributed to profile torchao.
add_test(NAME qtc_verify_torchao COMMAND qtc verify ${CMAKE_CURRENT_LIST_DIR}/../vectors/torchao)
set_tests_properties(qtc_verify_torchao PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^78 passed, 0 failed\n$")
add_test(NAME qtc_identify_torchao COMMAND qtc identify ${CMAKE_CURRENT_LIST_DIR}/../vectors/torchao)
set_tests_properties(qtc_identify_torchao PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n78 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
qtc_add_test(test_identify SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_identify.cpp LIBS qtc_conformance LABELS cpu)
