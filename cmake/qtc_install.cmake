# \file qtc_install.cmake
# \brief `cmake --install build --prefix P`: the public headers, the static libraries and the CMake package
#        (P/lib/cmake/qtc/qtcConfig.cmake, qtcConfigVersion.cmake, qtcTargets.cmake) that
#        `find_package(qtc 0.2 CONFIG REQUIRED)` reads. Exported targets:
#          qtc::reference  the CPU reference (quantizers, layouts, GEMMs, safetensors I/O); qtc::formats its headers
#          qtc::verify     what `qtc verify` / `qtc identify` compare and print
#          qtc::testing    GoogleTest assertions (qtc/testing.hpp)
#          qtc::cuda       the CUDA kernels, only when this build compiled them
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(QTC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/qtc)
set(QTC_INSTALL_TARGETS qtc_formats qtc_ref qtc_verify qtc_testing)
if(QTC_CUDA)
  list(APPEND QTC_INSTALL_TARGETS qtc_cuda)
endif()
install(TARGETS ${QTC_INSTALL_TARGETS} EXPORT qtcTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(QTC_PUBLIC_INCLUDE_DIRS ${PROJECT_SOURCE_DIR}/reference/include/ ${PROJECT_SOURCE_DIR}/conformance/include/
    ${PROJECT_SOURCE_DIR}/testing/include/)
if(QTC_CUDA)
  list(APPEND QTC_PUBLIC_INCLUDE_DIRS ${PROJECT_SOURCE_DIR}/kernels/include/)
endif()
install(DIRECTORY ${QTC_PUBLIC_INCLUDE_DIRS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(EXPORT qtcTargets NAMESPACE qtc:: DESTINATION ${QTC_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qtcConfig.cmake.in ${PROJECT_BINARY_DIR}/qtcConfig.cmake
                              INSTALL_DESTINATION ${QTC_INSTALL_CMAKEDIR})
# 0.2.x accepts requests for 0.2 (and 0.2.y with y <= x); 0.3 would be another minor version.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/qtcConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/qtcConfig.cmake ${PROJECT_BINARY_DIR}/qtcConfigVersion.cmake
        DESTINATION ${QTC_INSTALL_CMAKEDIR})
