# \file sharding.cmake
# \brief FSDP2 protocol, amax reduction, Adam on shards, columnwise derivation, views (single process).
qtc_add_test(test_sharding SOURCES ${CMAKE_CURRENT_LIST_DIR}/sharding_test.cpp LIBS qtc_ref qtc_testing LABELS cpu TIMEOUT 300)
