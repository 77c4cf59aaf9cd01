/// \file testing_gemm.cpp
/// \brief gemm_within_error_bound (testing_gemm.hpp).
#include "qtc/testing_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"

namespace qtc::testing {

::testing::AssertionResult gemm_within_error_bound(const QuantizedTensor& A, const QuantizedTensor& B, const ref::GemmArgs& args,
                                                   const MatrixView& out, GemmAccumulation acc) {
  try {
    QTC_CHECK(out.dtype == DType::kF32 || out.dtype == DType::kBF16 || out.dtype == DType::kF16,
              "the GEMM output must be F32, BF16 or F16");
    QuantizedTensor a = A, b = B;
    ref::convert_layout(a, ScaleLayout::kCompact);
    ref::convert_layout(b, ScaleLayout::kCompact);
    const ref::ResolvedGemm g = ref::resolve_gemm(a, b, args);
    const HostMatrix want = ref::gemm_exact(g, args);
    QTC_CHECK(out.rows == want.rows && out.cols == want.cols, "the output has shape [", out.rows, ", ", out.cols, "], the GEMM's is [",
              want.rows, ", ", want.cols, "] (n output rows, m output columns)");
    // S per element: the FP64 bound helper gives gamma_{k+3} * S * 1.01 (gemm.hpp); S is recovered from it.
    const std::vector<double> e = ref::gemm_eigen_error_bound(g, args);
    const double nk = static_cast<double>(g.a.k + 3), gamma = nk * 0x1p-53 / (1 - nk * 0x1p-53) * 1.01;
    const double rel = acc.per_term * static_cast<double>(g.a.k) + acc.constant;
    int64_t bad = 0, first = -1;
    double first_err = 0, first_bound = 0, first_s = 0;
    for (int64_t i = 0; i < want.rows; ++i)
      for (int64_t j = 0; j < want.cols; ++j) {
        const double x = want.get(i, j), y = out.at(i, j);
        if (std::isnan(x) && std::isnan(y)) continue;  // a NaN operand makes the element NaN in both
        const double s = e[static_cast<size_t>(i * want.cols + j)] / gamma;
        const double bound = ref::ulp_of(out.dtype, std::max(std::fabs(x), std::fabs(y))) + rel * s;
        const double err = std::fabs(x - y);
        if (x == y || err <= bound) continue;  // infinities equal, or a finite error within the bound
        if (bad++ == 0) first = i * want.cols + j, first_err = err, first_bound = bound, first_s = s;
      }
    if (bad == 0) return ::testing::AssertionSuccess();
    const int64_t i = first / want.cols, j = first % want.cols;
    return ::testing::AssertionFailure() << ::fmt::format(
               "GEMM output: {} of {} elements outside the error bound; first at [{}, {}]: got {}, exact {}, error {:.6g} > bound "
               "{:.6g} (S = {:.6g}, k = {}, {} per term + {})",
               bad, want.numel(), i, j, out.at(i, j), want.get(i, j), first_err, first_bound, first_s, g.a.k, acc.per_term, acc.constant);
  } catch (const std::exception& ex) {
    return ::testing::AssertionFailure() << "ERROR gemm_within_error_bound: " << ex.what();
  }
}

}  // namespace qtc::testing
