/// \file status_check.hpp
/// \brief The one header of qtc's library-status check macros: QTC_CUDA_CHECK (CUDA runtime), QTC_CUBLAS_CHECK
///        (cuBLASLt), QTC_MPI_CHECK (MPI), QTC_NCCL_CHECK (NCCL), plus QTC_CUDA_CHECK_LAUNCH / QTC_CUDA_SYNC_CHECK.
///        Each evaluates the call once and throws qtc::Error with the library, the numeric status, the library's
///        name and text for it, the expression, file and line. Never exits, never synchronizes (but
///        QTC_CUDA_SYNC_CHECK, for tests and debugging).
///
///        This header includes no library header: a macro names the library's status type and functions only where
///        it is used, so the translation unit that uses QTC_NCCL_CHECK includes <nccl.h> itself (kernels/ and
///        distributed/ do, through qtc/cuda/check.hpp and qtc/dist/check.hpp), and reference/ stays free of CUDA
///        headers.
#pragma once
#include <string>

#include "qtc/error.hpp"

namespace qtc::detail {

/// The message every check macro throws: "<library> error <code> (<name>: <text>) in `<expr>` at <file>:<line>".
[[noreturn]] inline void throw_status(const char* library, long long code, const std::string& name, const std::string& text,
                                      const char* expr, const char* file, int line) {
  throw_error(nullptr, 0, nullptr, library, " error ", code, " (", name, name.empty() ? "" : ": ", text, ") in `", expr, "` at ",
              file, ":", line);
}

}  // namespace qtc::detail

/// A CUDA runtime call (cudaError_t): throws unless cudaSuccess.
#define QTC_CUDA_CHECK(expr)                                                                                      \
  do {                                                                                                            \
    const cudaError_t qtc_cuda_status_ = (expr);                                                                  \
    if (qtc_cuda_status_ != cudaSuccess)                                                                          \
      ::qtc::detail::throw_status("CUDA", static_cast<long long>(qtc_cuda_status_), cudaGetErrorName(qtc_cuda_status_), \
                                  cudaGetErrorString(qtc_cuda_status_), #expr, __FILE__, __LINE__);               \
  } while (0)

/// Checks the launch just made (cudaGetLastError); does not synchronize.
#define QTC_CUDA_CHECK_LAUNCH() QTC_CUDA_CHECK(cudaGetLastError())

/// Opt-in: synchronizes the device and checks (for debugging and tests, never inside library calls).
#define QTC_CUDA_SYNC_CHECK() QTC_CUDA_CHECK(cudaDeviceSynchronize())

/// A cuBLASLt call (cublasStatus_t): throws unless CUBLAS_STATUS_SUCCESS.
#define QTC_CUBLAS_CHECK(expr)                                                                                    \
  do {                                                                                                            \
    const cublasStatus_t qtc_cublas_status_ = (expr);                                                             \
    if (qtc_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                              \
      ::qtc::detail::throw_status("cuBLASLt", static_cast<long long>(qtc_cublas_status_),                          \
                                  cublasLtGetStatusName(qtc_cublas_status_), cublasLtGetStatusString(qtc_cublas_status_), \
                                  #expr, __FILE__, __LINE__);                                                     \
  } while (0)

/// An MPI call (int): throws unless MPI_SUCCESS (the communicator must use MPI_ERRORS_RETURN for errors to reach
/// here instead of aborting).
#define QTC_MPI_CHECK(call)                                                                                       \
  do {                                                                                                            \
    const int qtc_mpi_rc_ = (call);                                                                               \
    if (qtc_mpi_rc_ != MPI_SUCCESS) {                                                                             \
      char qtc_mpi_text_[MPI_MAX_ERROR_STRING];                                                                   \
      int qtc_mpi_len_ = 0;                                                                                       \
      const bool qtc_mpi_ok_ = MPI_Error_string(qtc_mpi_rc_, qtc_mpi_text_, &qtc_mpi_len_) == MPI_SUCCESS;        \
      ::qtc::detail::throw_status("MPI", qtc_mpi_rc_, "",                                                         \
                                  qtc_mpi_ok_ ? std::string(qtc_mpi_text_, static_cast<size_t>(qtc_mpi_len_))     \
                                              : std::string("unknown MPI error"),                                 \
                                  #call, __FILE__, __LINE__);                                                     \
    }                                                                                                             \
  } while (0)

/// An NCCL call (ncclResult_t): throws unless ncclSuccess (ncclInProgress included: callers that use non-blocking
/// communicators poll ncclCommGetAsyncError themselves).
#define QTC_NCCL_CHECK(call)                                                                                      \
  do {                                                                                                            \
    const ncclResult_t qtc_nccl_rc_ = (call);                                                                     \
    if (qtc_nccl_rc_ != ncclSuccess)                                                                              \
      ::qtc::detail::throw_status("NCCL", static_cast<long long>(qtc_nccl_rc_), "", ncclGetErrorString(qtc_nccl_rc_), \
                                  #call, __FILE__, __LINE__);                                                     \
  } while (0)
