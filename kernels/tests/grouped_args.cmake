# \file grouped_args.cmake
# \brief The per-group arithmetic of the device-driven grouped GEMM (group_args, kernels/src/grouped/grouped_gemm_sm90.hpp) on
#        the CPU: problem shapes and operand offsets from group sizes and offsets; label cpu (no GPU needed).
qtc_add_test(test_grouped_args CUDA SOURCES ${CMAKE_CURRENT_LIST_DIR}/grouped_args_test.cpp LIBS CUDA::cudart_static
             LABELS cpu)
if(TARGET test_grouped_args)  # CUDA builds only (the header includes cuda_runtime_api.h)
  target_include_directories(test_grouped_args PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../src/grouped)
endif()
