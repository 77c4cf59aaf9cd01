# \file verify_sources.cmake
# \brief The sources of qtc_verify (what `qtc verify` / `qtc identify` compare and print), named once for the two
#        builds that compile them: conformance/CMakeLists.txt (library qtc_verify) and python/CMakeLists.txt (the
#        module, which compiles them itself). Include with QTC_CONFORMANCE_SRC set to conformance/src.
set(QTC_VERIFY_SOURCES
    ${QTC_CONFORMANCE_SRC}/verify.cpp
    ${QTC_CONFORMANCE_SRC}/verdicts.cpp
    ${QTC_CONFORMANCE_SRC}/vector_files.cpp
    ${QTC_CONFORMANCE_SRC}/identify.cpp
    ${QTC_CONFORMANCE_SRC}/checkpoint_conventions.cpp
    ${QTC_CONFORMANCE_SRC}/checkpoint_formats.cpp
    ${QTC_CONFORMANCE_SRC}/checkpoint_compare.cpp
    ${QTC_CONFORMANCE_SRC}/value_equivalence.cpp
    ${QTC_CONFORMANCE_SRC}/stochastic_rounding.cpp
    ${QTC_CONFORMANCE_SRC}/verify_hybrid.cpp)
