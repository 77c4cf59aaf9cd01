# \file checkpoint.cmake
# \brief Checkpoints: round trips, resharding, async snapshots, corruption table, kill at every write step.
qtc_add_test(test_checkpoint SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cpp
             LIBS qtc_ref qtc_testing nlohmann_json::nlohmann_json ${QTC_XXHASH_LIB} LABELS cpu TIMEOUT 300)
# Concurrent saves of one directory: threads, processes, the split API (issue 14).
qtc_add_test(test_checkpoint_concurrency SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_concurrency_test.cpp LIBS qtc_ref
             LABELS cpu TIMEOUT 300)
