# \file qtc_package_test.cmake
# \brief The ctest test `package_consumer` (cmake -P): installs this build into a prefix under the build folder,
#        checks what was installed (`qtc --version`, no internal header), configures examples/consumer against it
#        as an unrelated project would (find_package(qtc 0.2 CONFIG COMPONENTS testing)), builds it and runs its
#        tests (C++20 and C++17, the gmock matcher, the device overload where CUDA was built); then the CPU-only
#        consumer examples/consumer/cpu_only with GTest and the CUDA toolkit out of reach.
#        Arguments: -DQTC_BUILD_DIR= -DQTC_SOURCE_DIR= -DQTC_CXX_COMPILER=.
set(root ${QTC_BUILD_DIR}/package-test)
file(REMOVE_RECURSE ${root}/prefix ${root}/consumer ${root}/cpu_only)
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package_consumer: ${what} failed (exit ${rc})")
  endif()
endfunction()
step("cmake --install" ${CMAKE_COMMAND} --install ${QTC_BUILD_DIR} --prefix ${root}/prefix)
execute_process(COMMAND ${root}/prefix/bin/qtc --version OUTPUT_VARIABLE version RESULT_VARIABLE rc)
string(STRIP "${version}" version)
if(NOT rc EQUAL 0 OR NOT version MATCHES "^qtc [0-9]+\\.[0-9]+\\.[0-9]+$")
  message(FATAL_ERROR "package_consumer: installed `qtc --version` gave exit ${rc} and '${version}', expected 'qtc X.Y.Z'")
endif()
if(EXISTS ${root}/prefix/include/qtc/test_support.hpp)
  message(FATAL_ERROR "package_consumer: the internal header qtc/test_support.hpp was installed")
endif()
set(launcher)
find_program(ccache ccache)
if(ccache)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${ccache})
endif()
step("configuring examples/consumer" ${CMAKE_COMMAND} -S ${QTC_SOURCE_DIR}/examples/consumer -B ${root}/consumer
     -DCMAKE_PREFIX_PATH=${root}/prefix -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${QTC_CXX_COMPILER} ${launcher})
step("building examples/consumer" ${CMAKE_COMMAND} --build ${root}/consumer -j2)
step("the consumer's test" ${CMAKE_CTEST_COMMAND} --test-dir ${root}/consumer --output-on-failure)
step("configuring examples/consumer/cpu_only" ${CMAKE_COMMAND} -S ${QTC_SOURCE_DIR}/examples/consumer/cpu_only -B ${root}/cpu_only
     -DCMAKE_PREFIX_PATH=${root}/prefix -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${QTC_CXX_COMPILER} ${launcher}
     -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)
step("building examples/consumer/cpu_only" ${CMAKE_COMMAND} --build ${root}/cpu_only -j2)
step("the CPU-only consumer's test" ${CMAKE_CTEST_COMMAND} --test-dir ${root}/cpu_only --output-on-failure)
