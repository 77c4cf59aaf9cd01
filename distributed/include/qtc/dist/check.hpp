/// \file check.hpp
/// \brief Check macros of the transports: QTC_MPI_CHECK and (in CUDA builds) QTC_NCCL_CHECK and
///        QTC_CUDA_RT_CHECK throw qtc::Error with file, line, expression, the numeric code and the
///        library's error string. They never exit and never synchronize.
#pragma once
#include <mpi.h>

#include <string>

#include "qtc/error.hpp"

namespace qtc::dist::detail {
inline std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "unknown MPI error";
  return std::string(buf, static_cast<size_t>(len));
}
}  // namespace qtc::dist::detail

/// Throws qtc::Error when an MPI call does not return MPI_SUCCESS (the communicator must use
/// MPI_ERRORS_RETURN for errors to reach here instead of aborting).
#define QTC_MPI_CHECK(call)                                                                                      \
  do {                                                                                                           \
    const int qtc_mpi_rc_ = (call);                                                                              \
    if (qtc_mpi_rc_ != MPI_SUCCESS)                                                                              \
      ::qtc::detail::throw_error(__FILE__, __LINE__, #call, "MPI error ", qtc_mpi_rc_, ": ",                     \
                                 ::qtc::dist::detail::mpi_error_string(qtc_mpi_rc_));                            \
  } while (0)

#ifdef QTC_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

/// Throws qtc::Error when an NCCL call returns anything but ncclSuccess (ncclInProgress included:
/// callers that use non-blocking communicators poll ncclCommGetAsyncError themselves).
#define QTC_NCCL_CHECK(call)                                                                                     \
  do {                                                                                                           \
    const ncclResult_t qtc_nccl_rc_ = (call);                                                                    \
    if (qtc_nccl_rc_ != ncclSuccess)                                                                             \
      ::qtc::detail::throw_error(__FILE__, __LINE__, #call, "NCCL error ", static_cast<int>(qtc_nccl_rc_), ": ", \
                                 ncclGetErrorString(qtc_nccl_rc_));                                              \
  } while (0)

/// Throws qtc::Error when a CUDA runtime call fails (the transports' own; kernels/ has QTC_CUDA_CHECK).
#define QTC_CUDA_RT_CHECK(call)                                                                                  \
  do {                                                                                                           \
    const cudaError_t qtc_cuda_rc_ = (call);                                                                     \
    if (qtc_cuda_rc_ != cudaSuccess)                                                                             \
      ::qtc::detail::throw_error(__FILE__, __LINE__, #call, "CUDA error ", static_cast<int>(qtc_cuda_rc_), " (", \
                                 cudaGetErrorName(qtc_cuda_rc_), "): ", cudaGetErrorString(qtc_cuda_rc_));       \
  } while (0)
#endif
