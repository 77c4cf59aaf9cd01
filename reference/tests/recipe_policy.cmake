# \file recipe_policy.cmake
# \brief The recipe policy: describe_plane against the quantizers and layouts; Recipe::validate's rules.
qtc_add_test(test_recipe_policy SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_recipe_policy.cpp LIBS qtc_ref LABELS cpu)
