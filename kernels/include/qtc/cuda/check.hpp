/// \file check.hpp
/// \brief QTC_CUDA_CHECK: turns a CUDA runtime (or cuBLASLt) status into a thrown qtc::Error that carries the
///        file, line, expression and the library's error name and string. Never exits, never synchronizes.
#pragma once
#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

#include "qtc/error.hpp"

namespace qtc::cuda::detail {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  std::ostringstream os;
  os << "CUDA error " << static_cast<int>(e) << " (" << cudaGetErrorName(e) << ": " << cudaGetErrorString(e)
     << ") in `" << expr << "` at " << file << ":" << line;
  throw ::qtc::Error(os.str());
}

}  // namespace qtc::cuda::detail

/// Evaluates a cudaError_t expression; throws qtc::Error unless it is cudaSuccess.
#define QTC_CUDA_CHECK(expr)                                                                \
  do {                                                                                      \
    const cudaError_t qtc_cuda_status_ = (expr);                                            \
    if (qtc_cuda_status_ != cudaSuccess)                                                    \
      ::qtc::cuda::detail::throw_cuda(qtc_cuda_status_, #expr, __FILE__, __LINE__);         \
  } while (0)

/// Checks the launch just made (cudaGetLastError); does not synchronize.
#define QTC_CUDA_CHECK_LAUNCH() QTC_CUDA_CHECK(cudaGetLastError())

/// Opt-in: synchronizes the device and checks (for debugging and tests, never inside library calls).
#define QTC_CUDA_SYNC_CHECK() QTC_CUDA_CHECK(cudaDeviceSynchronize())
