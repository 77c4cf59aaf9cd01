/// \file check.hpp
/// \brief The CUDA runtime's declarations and qtc's check macros (QTC_CUDA_CHECK, QTC_CUDA_CHECK_LAUNCH,
///        QTC_CUDA_SYNC_CHECK, QTC_CUBLAS_CHECK with <cublasLt.h>): qtc/status_check.hpp, the one header of them.
#pragma once
#include <cuda_runtime_api.h>

#include "qtc/status_check.hpp"
