# \file tests.cmake
# \brief Tests of the conformance layer: verify's logic (cpu), every bundled vector (vectors), the qtc binary (cpu).
qtc_add_test(test_verify SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verify.cpp LIBS qtc_conformance LABELS cpu)
qtc_add_test(test_bundled_vectors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_vectors.cpp LIBS qtc_conformance LABELS vectors cpu)
qtc_add_test(test_te_layout SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_te_layout.cpp LIBS qtc_conformance LABELS vectors cpu)
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
# The shared vectors rewritten into TransformerEngine's layout (a copy of shared/vectors/te_layout): every one passes
# verify and identify, and `qtc conform --foreign` takes them as dumps of another implementation.
set(QTC_TE_LAYOUT_VECTORS_DIR ${CMAKE_CURRENT_SOURCE_DIR}/vectors/te_layout)
add_test(NAME qtc_verify_te_layout COMMAND qtc verify ${QTC_TE_LAYOUT_VECTORS_DIR})
set_tests_properties(qtc_verify_te_layout PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^184 passed, 0 failed\n$")
add_test(NAME qtc_identify_te_layout COMMAND qtc identify ${QTC_TE_LAYOUT_VECTORS_DIR})
set_tests_properties(qtc_identify_te_layout PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n184 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
add_test(NAME qtc_conform_foreign_te_layout
         COMMAND qtc conform --backend cpu --no-generated --no-bundled --foreign ${QTC_TE_LAYOUT_VECTORS_DIR}
                 --out ${CMAKE_CURRENT_BINARY_DIR}/conform_te_layout)
set_tests_properties(qtc_conform_foreign_te_layout PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n184 passed, 0 failed\n")
# Hostile inputs (issue 14): huge empty shapes, overflowing dimensions, directory scans, messages. The timeout
# catches the old behaviour of looping over 2^35 empty row strips.
qtc_add_test(test_verify_hostile SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verify_hostile.cpp LIBS qtc_conformance LABELS cpu TIMEOUT 120)
# The vectorized CPU reference against the scalar one, byte for byte, on every instruction set this machine runs.
qtc_add_test(test_simd_exact SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_simd_exact.cpp LIBS qtc_conformance LABELS cpu vectors
             ARGS --gtest_filter=-SimdEnv.*)
# QTC_SCALAR=1 forces the scalar path; unset, the vectorized one is taken.
add_test(NAME test_simd_env_scalar COMMAND test_simd_exact --gtest_filter=SimdEnv.*)
set_tests_properties(test_simd_env_scalar PROPERTIES LABELS cpu ENVIRONMENT QTC_SCALAR=1)
add_test(NAME test_simd_env_default COMMAND test_simd_exact --gtest_filter=SimdEnv.*)
set_tests_properties(test_simd_env_default PROPERTIES LABELS cpu ENVIRONMENT QTC_SCALAR=)

# Vectors dumped from torchao 0.18.0 (conformance/peers/torchao_dump.py): every MXFP8 scale rule (floor, rceil,
# ceil, even) x E4M3/E5M2 x F32/BF16/F16, NVFP4 with and without the per-tensor scale; all bit-exact on the CPU,
# and every one attributed to profile torchao.
add_test(NAME qtc_verify_torchao COMMAND qtc verify ${CMAKE_CURRENT_LIST_DIR}/../vectors/torchao)
set_tests_properties(qtc_verify_torchao PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^78 passed, 0 failed\n$")
add_test(NAME qtc_identify_torchao COMMAND qtc identify ${CMAKE_CURRENT_LIST_DIR}/../vectors/torchao)
set_tests_properties(qtc_identify_torchao PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "\n78 identified, 0 unmatched\n$"
                     FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
qtc_add_test(test_identify SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_identify.cpp LIBS qtc_conformance LABELS cpu)

# Vectors dumped from nvidia-modelopt 0.47.0, JAX (XLA CPU) and vLLM 0.33.0 (conformance/peers/{modelopt,jax,vllm}_dump.py):
# each implementation's sample is reproduced bit for bit by its profile, and identify's per-implementation verdict
# (the IMPL line) names that profile for all of its files.
set(QTC_N_MODELOPT 30)
set(QTC_N_JAX 32)
set(QTC_N_VLLM 15)
foreach(impl_count IN ITEMS "modelopt;QTC_N_MODELOPT" "jax;QTC_N_JAX" "vllm;QTC_N_VLLM")
  list(GET impl_count 0 impl)
  list(GET impl_count 1 nvar)
  add_test(NAME qtc_verify_${impl} COMMAND qtc verify ${CMAKE_CURRENT_LIST_DIR}/../vectors/${impl})
  set_tests_properties(qtc_verify_${impl} PROPERTIES LABELS "vectors;cpu" PASS_REGULAR_EXPRESSION "^${${nvar}} passed, 0 failed\n$")
  add_test(NAME qtc_identify_${impl} COMMAND qtc identify ${CMAKE_CURRENT_LIST_DIR}/../vectors/${impl})
  set_tests_properties(qtc_identify_${impl} PROPERTIES LABELS "vectors;cpu"
                       PASS_REGULAR_EXPRESSION "\nIMPL  [^\n]*: ${${nvar}} files; ${impl} reproduces ${${nvar}} of ${${nvar}}[^\n]*\n${${nvar}} identified, 0 unmatched\n$"
                       FAIL_REGULAR_EXPRESSION "(^|\n)(NONE|OTHER|ERROR) ")
endforeach()
