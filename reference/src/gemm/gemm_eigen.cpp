/// \file gemm_eigen.cpp
/// \brief The fast reference GEMM: Eigen FP64 on the dequantized operands (exact dequantization), one
///        rounding to the output type, and its error bound against gemm_exact (gemm.hpp).
#include <Eigen/Dense>
#include <cmath>

#include "gemm_internal.hpp"
#include "qtc/gemm.hpp"

namespace qtc::ref {
namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Eigen::Map<const RowMajor> as_matrix(const ExactOperand& op) { return {op.value.data(), op.rows, op.k}; }

}  // namespace

HostMatrix gemm_eigen(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args) {
  return gemm_eigen(resolve_gemm(A, B, args), args);
}

HostMatrix gemm_eigen(const ResolvedGemm& g, const GemmArgs& args) {
  const int64_t n = g.b.rows;
  const int64_t m = g.a.rows;
  const RowMajor d = as_matrix(g.b) * as_matrix(g.a).transpose();  // (n, m)
  HostMatrix out(args.out, n, m);
  const bool use_c = args.beta != 0.0f && args.c != nullptr;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double v = static_cast<double>(g.alpha) * d(i, j);
      if (use_c) v += static_cast<double>(args.beta) * gemm_matrix_value(*args.c, i, j);
      if (!args.bias.empty()) v += static_cast<double>(args.bias[static_cast<size_t>(j)]);
      store_rounded(out, i, j, v);
    }
  return out;
}

std::vector<double> gemm_eigen_error_bound(const ResolvedGemm& g, const GemmArgs& args) {
  const int64_t n = g.b.rows;
  const int64_t m = g.a.rows;
  const RowMajor s = as_matrix(g.b).cwiseAbs() * as_matrix(g.a).cwiseAbs().transpose();
  const double u = 0x1p-53;
  const double nk = static_cast<double>(g.a.k + 3);
  const double gamma = nk * u / (1.0 - nk * u);
  const bool use_c = args.beta != 0.0f && args.c != nullptr;
  std::vector<double> e(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double t = std::fabs(static_cast<double>(g.alpha)) * s(i, j);
      if (use_c) t += std::fabs(static_cast<double>(args.beta) * gemm_matrix_value(*args.c, i, j));
      if (!args.bias.empty()) t += std::fabs(static_cast<double>(args.bias[static_cast<size_t>(j)]));
      // The bound on |S| computed in FP64 is itself rounded; 1.01 covers that (k·u << 0.01).
      e[static_cast<size_t>(i * m + j)] = gamma * t * 1.01;
    }
  return e;
}

}  // namespace qtc::ref
