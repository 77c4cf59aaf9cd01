# \file qtc_test.cmake
# \brief qtc_add_test(NAME SOURCES ... LIBS ... LABELS ... [CUDA] [TIMEOUT s] [ENV k=v ...]):
#        one GoogleTest executable registered with CTest under the given labels.
#        CUDA tests are only built when the CUDA kernels are.
function(qtc_add_test name)
  cmake_parse_arguments(T "CUDA" "TIMEOUT" "SOURCES;LIBS;LABELS;ENV;ARGS" ${ARGN})
  if(T_CUDA AND NOT QTC_CUDA)
    return()
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  # qtc/test_fixtures.hpp: the fixtures of qtc's own tests (temporary directories, ...).
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/testing/fixtures)
  # QTC_TEST_COMPILE_OPTIONS (top-level CMakeLists.txt): the default preset's -O1 for the test code (C++ only).
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${QTC_TEST_COMPILE_OPTIONS}>)
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  if(T_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()
