# \file qtc_install.cmake
# \brief `cmake --install build --prefix P`: the public headers, the static libraries, the `qtc` command (P/bin/qtc)
#        and the CMake package (P/lib/cmake/qtc/qtcConfig.cmake, qtcConfigVersion.cmake and one targets file per
#        export set) that `find_package(qtc 0.2 CONFIG REQUIRED [COMPONENTS ...])` reads. Components and targets:
#          reference     qtc::reference, the CPU reference (quantizers, layouts, GEMMs, safetensors I/O);
#                        qtc::formats its headers (always loaded)
#          verify        qtc::verify, what `qtc verify` / `qtc identify` compare and print (always loaded)
#          testing       qtc::testing, GoogleTest assertions (qtc/testing.hpp, qtc/testing_gmock.hpp): needs GTest
#          cuda          qtc::cuda, the CUDA kernels: only when this build compiled them; needs the CUDA toolkit
#          testing_cuda  qtc::testing_cuda, conforms() on device memory (qtc/testing_device.hpp): testing + cuda
#        A CPU-only consumer needs neither GTest nor the CUDA toolkit: without COMPONENTS, the optional parts are
#        loaded when their dependencies are found; a component named in COMPONENTS whose dependency is missing makes
#        find_package fail, saying which.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(QTC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/qtc)
# One export set per component group, so that the core targets load without GTest or CUDA.
install(TARGETS qtc_formats qtc_ref qtc_verify EXPORT qtcTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS qtc_testing EXPORT qtcTestingTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(QTC_CUDA)
  install(TARGETS qtc_cuda EXPORT qtcCudaTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(TARGETS qtc_testing_cuda EXPORT qtcTestingCudaTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT qtcCudaTargets NAMESPACE qtc:: DESTINATION ${QTC_INSTALL_CMAKEDIR})
  install(EXPORT qtcTestingCudaTargets NAMESPACE qtc:: DESTINATION ${QTC_INSTALL_CMAKEDIR})
endif()
install(EXPORT qtcTestingTargets NAMESPACE qtc:: DESTINATION ${QTC_INSTALL_CMAKEDIR})
# The command: `qtc verify`, `qtc identify`, `qtc --version`, ... (`qtc conform` reads the bundled vectors from
# the source tree it was built from, or from --vectors).
install(TARGETS qtc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(QTC_PUBLIC_INCLUDE_DIRS ${PROJECT_SOURCE_DIR}/reference/include/ ${PROJECT_SOURCE_DIR}/conformance/include/
    ${PROJECT_SOURCE_DIR}/testing/include/)
if(QTC_CUDA)
  list(APPEND QTC_PUBLIC_INCLUDE_DIRS ${PROJECT_SOURCE_DIR}/kernels/include/)
endif()
# Public headers only: test_support.hpp is the verdict library of qtc's own tests (internal, not installed).
install(DIRECTORY ${QTC_PUBLIC_INCLUDE_DIRS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp"
        PATTERN "test_support.hpp" EXCLUDE)
install(EXPORT qtcTargets NAMESPACE qtc:: DESTINATION ${QTC_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qtcConfig.cmake.in ${PROJECT_BINARY_DIR}/qtcConfig.cmake
                              INSTALL_DESTINATION ${QTC_INSTALL_CMAKEDIR})
# 0.2.x accepts requests for 0.2 (and 0.2.y with y <= x); 0.3 would be another minor version.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/qtcConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/qtcConfig.cmake ${PROJECT_BINARY_DIR}/qtcConfigVersion.cmake
        DESTINATION ${QTC_INSTALL_CMAKEDIR})
