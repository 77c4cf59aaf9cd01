# \file quantize.cmake
# \brief The GPU conformance suite of the quantizers (label gpu): skips without a device, fails under
#        QTC_REQUIRE_GPU=1. Host-only C++ on the qtc::cuda API, so it compiles fast.
qtc_add_test(test_quantize_cuda CUDA
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quantize_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/hybrid_cuda_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/device_compare_test.cpp ${CMAKE_CURRENT_LIST_DIR}/device_verify_test.cpp
  LIBS qtc_cuda qtc_ref qtc_testing
  LABELS gpu
  TIMEOUT 1800)
if(TARGET test_quantize_cuda)  # device_verify_test.cpp: every bundled vector on the device and on the host
  target_compile_definitions(test_quantize_cuda PRIVATE QTC_VECTORS_DIR="${PROJECT_SOURCE_DIR}/conformance/vectors")
endif()
