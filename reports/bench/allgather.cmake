# \file allgather.cmake
# \brief bench_allgather: FSDP2 all-gather of quantized parameters vs BF16 (nccl-tests columns) over MPI or
#        NCCL, plus checkpoint save/load throughput. A 2-rank smoke run with tiny sizes is a CTest test.
if(TARGET qtc_dist)
  add_executable(bench_allgather ${CMAKE_CURRENT_LIST_DIR}/allgather.cpp)
  target_link_libraries(bench_allgather PRIVATE qtc_dist qtc_bench_context_core nlohmann_json::nlohmann_json)
  add_test(NAME bench_allgather_smoke_np2
           COMMAND ${MPIEXEC_EXECUTABLE} ${QTC_MPIRUN_FLAGS} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:bench_allgather>
                   --cols 256 --rows 128 --iters 2 --warmup 1 --repetitions 3 --json ${CMAKE_CURRENT_BINARY_DIR}/bench_allgather_smoke.json --checkpoint-dir ${CMAKE_CURRENT_BINARY_DIR}/bench_allgather_ckpt)
  set_tests_properties(bench_allgather_smoke_np2 PROPERTIES LABELS "distributed;bench" TIMEOUT 120
                       ENVIRONMENT "${QTC_MPI_ENV};QTC_DIST_TIMEOUT_S=60")
endif()
