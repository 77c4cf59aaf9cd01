/// \file check.hpp
/// \brief The transports' library headers and qtc's check macros: QTC_MPI_CHECK and (in CUDA builds)
///        QTC_NCCL_CHECK and QTC_CUDA_CHECK, from qtc/status_check.hpp (the one header of them). They throw
///        qtc::Error with file, line, expression, the numeric code and the library's error string, never exit and
///        never synchronize.
#pragma once
#include <mpi.h>

#ifdef QTC_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#include "qtc/status_check.hpp"
