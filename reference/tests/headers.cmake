# \file headers.cmake
# \brief Header self-containment: one generated translation unit per public reference header, holding only
#        `#include "qtc/..."`, compiled into an object library; and a check that no CUDA header is included
#        anywhere under reference/.
file(GLOB_RECURSE QTC_REF_PUBLIC_HEADERS CONFIGURE_DEPENDS RELATIVE ${CMAKE_CURRENT_LIST_DIR}/../include
     ${CMAKE_CURRENT_LIST_DIR}/../include/qtc/*.hpp)
set(QTC_HEADER_TUS)
foreach(h ${QTC_REF_PUBLIC_HEADERS})
  string(MAKE_C_IDENTIFIER "${h}" id)
  set(tu ${CMAKE_CURRENT_BINARY_DIR}/self_contained/${id}.cpp)
  file(CONFIGURE OUTPUT ${tu} CONTENT "#include \"${h}\"\n")
  list(APPEND QTC_HEADER_TUS ${tu})
endforeach()
add_library(qtc_ref_header_check OBJECT ${QTC_HEADER_TUS})
target_link_libraries(qtc_ref_header_check PRIVATE qtc_formats)

add_test(NAME reference_includes_no_cuda_header
         COMMAND sh -c "! grep -rnE '#include *[<\"](cuda|cublas|nccl|curand|cuda_runtime)' ${CMAKE_CURRENT_LIST_DIR}/..")
set_tests_properties(reference_includes_no_cuda_header PROPERTIES LABELS cpu)
