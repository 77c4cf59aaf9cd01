# \file qtc_package_test.cmake
# \brief The ctest test `package_consumer` (cmake -P): installs this build into a prefix under the build folder,
#        configures examples/consumer against it as an unrelated project would (find_package(qtc 0.2 CONFIG)),
#        builds it and runs its test. Arguments: -DQTC_BUILD_DIR= -DQTC_SOURCE_DIR= -DQTC_CXX_COMPILER=.
set(root ${QTC_BUILD_DIR}/package-test)
file(REMOVE_RECURSE ${root}/prefix ${root}/consumer)
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package_consumer: ${what} failed (exit ${rc})")
  endif()
endfunction()
step("cmake --install" ${CMAKE_COMMAND} --install ${QTC_BUILD_DIR} --prefix ${root}/prefix)
set(launcher)
find_program(ccache ccache)
if(ccache)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${ccache})
endif()
step("configuring examples/consumer" ${CMAKE_COMMAND} -S ${QTC_SOURCE_DIR}/examples/consumer -B ${root}/consumer
     -DCMAKE_PREFIX_PATH=${root}/prefix -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${QTC_CXX_COMPILER} ${launcher})
step("building examples/consumer" ${CMAKE_COMMAND} --build ${root}/consumer -j2)
step("the consumer's test" ${CMAKE_CTEST_COMMAND} --test-dir ${root}/consumer --output-on-failure)
