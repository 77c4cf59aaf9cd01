# \file hostile.cmake
# \brief Hostile inputs (issue 14): crafted checkpoint sizes, huge and sparse files, header padding, empty ranks.
qtc_add_test(test_hostile_inputs SOURCES ${CMAKE_CURRENT_LIST_DIR}/hostile_test.cpp ${CMAKE_CURRENT_LIST_DIR}/hostile_issue21_test.cpp
             LIBS qtc_ref qtc_testing nlohmann_json::nlohmann_json ${QTC_XXHASH_LIB} LABELS cpu TIMEOUT 300)
