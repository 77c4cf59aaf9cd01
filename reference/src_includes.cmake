# \file src_includes.cmake
# \brief The private include folders of the reference's sources (qtc_ref and the Python module's qtc_ref_py): src/ and
#        every part folder of src/ that holds a src-internal header (core/internal.hpp, kinds/kind_module.hpp,
#        gemm/gemm_internal.hpp, sharding/sharding_internal.hpp, checkpoint/checkpoint_internal.hpp). A source includes
#        such a header by its file name wherever it lives; a part folder that gains a header is added here.
set(QTC_REF_PRIVATE_INCLUDES
    ${CMAKE_CURRENT_LIST_DIR}/src
    ${CMAKE_CURRENT_LIST_DIR}/src/core
    ${CMAKE_CURRENT_LIST_DIR}/src/kinds
    ${CMAKE_CURRENT_LIST_DIR}/src/gemm
    ${CMAKE_CURRENT_LIST_DIR}/src/sharding
    ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint)
