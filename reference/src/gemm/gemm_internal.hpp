/// \file gemm_internal.hpp
/// \brief Helpers shared by the reference GEMM sources (not part of the public API).
#pragma once
#include <cstdint>

#include "qtc/tensor.hpp"

namespace qtc::ref {

/// Element (i, j) of an F32/BF16/F16 host matrix as FP64 (exact).
double gemm_matrix_value(const HostMatrix& m, int64_t i, int64_t j);

}  // namespace qtc::ref
