# \file kind_table.cmake
# \brief The table of recipe kinds (reference/src/kinds/kind_table.cpp, qtc/kind.hpp): one module per kind, in
#        RecipeKind order, names and metadata consistent; pure, CPU only.
qtc_add_test(test_kind_table SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kind_table.cpp LIBS qtc_ref LABELS cpu)
