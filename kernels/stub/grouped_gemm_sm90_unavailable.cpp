/// \file grouped_gemm_sm90_unavailable.cpp
/// \brief The grouped GEMM entry points of kernels/src/grouped/grouped_gemm_sm90.hpp in a build without QTC_CUTLASS: every
///        call says why (the gating row gemm.grouped_nvfp4_row_scaled_sm90 refuses it first, with the same reason).
#include "grouped_gemm_sm90.hpp"

#include "qtc/error.hpp"

namespace qtc::cuda::detail {

namespace {
constexpr const char* kWhy =
    "this build has no CUTLASS sm_90a grouped GEMM (configure with -DQTC_CUTLASS=ON and the CUTLASS headers "
    "scripts/setup.sh installs)";
}

const char* sm90_grouped_unavailable_reason() { return kWhy; }

size_t sm90_grouped_scratch_bytes(int) { return 0; }

void run_sm90_grouped(const GroupedGemmProblem&, void*, cudaStream_t) { QTC_FAIL("grouped GEMM: ", kWhy); }

}  // namespace qtc::cuda::detail
