/// \file testing_gemm.hpp
/// \brief A GoogleTest assertion for a GEMM on quantized operands (library qtc::testing): the caller's output lies
///        within the rounding bound of its accumulation around the exact product of the decoded operands.
///
///   const qtc::ref::GemmArgs args = qtc::ref::GemmArgs::of(qtc::ref::GemmKind::kFprop, qtc::DType::kBF16);
///   EXPECT_TRUE(qtc::testing::gemm_within_error_bound(A, B, args, {my_out, qtc::DType::kBF16, n, m},
///                                                     qtc::testing::GemmAccumulation::fp32()));
///
/// The bound. With S = |alpha| * sum_r |b[i][r] * a[j][r]| + |beta * C[i][j]| + |bias[j]| (the decoded operands,
/// block scales and NVFP4's global scales applied exactly: ref::gemm_exact's operands), an accumulation that adds
/// each of the k products with a relative error of at most `per_term` and the epilogue with `constant` differs from
/// the exact value by at most (per_term * k + constant) * S before the output is rounded, and by at most one ulp of
/// the output type at max(|got|, |exact|) more after it. FP32 accumulation: per_term 2^-24, constant 2^-23 (alpha
/// and the epilogue); Hopper's FP8 tensor-core accumulation (about 14 significant bits per 32-deep k-step, then
/// promoted to FP32): per_term 2^-18; an FP64 accumulation (ref::gemm_eigen): gamma_{k+3} of the FP64 unit.
/// Where every partial sum is exact (small integers times powers of two), the exact value itself is the answer:
/// check it bit for bit against ref::gemm_exact instead.
#pragma once
#include <gtest/gtest.h>

#include "qtc/gemm.hpp"
#include "qtc/quantized.hpp"
#include "qtc/tensor.hpp"

namespace qtc::testing {

/// How the GEMM under test accumulates: the relative error it may add per product term and once at the end.
struct GemmAccumulation {
  double per_term = 0x1p-24;
  double constant = 0x1p-23;
  static GemmAccumulation fp32() { return {0x1p-24, 0x1p-23}; }
  static GemmAccumulation fp8_hopper() { return {0x1p-18, 0x1p-23}; }
  static GemmAccumulation fp64() { return {0x1p-53, 0x1p-51}; }
};

/// Every element of `out` ([n, m] as ref::gemm_exact returns it: n = output rows, m = output columns; F32, BF16 or
/// F16) lies within the bound above around the exact product of A and B (any scale layout: converted to compact
/// here). On failure: how many elements are out of bound, the first one's coordinates, both values, the error and
/// the bound, and S.
::testing::AssertionResult gemm_within_error_bound(const QuantizedTensor& A, const QuantizedTensor& B, const ref::GemmArgs& args,
                                                   const MatrixView& out, GemmAccumulation acc = GemmAccumulation::fp32());

}  // namespace qtc::testing
