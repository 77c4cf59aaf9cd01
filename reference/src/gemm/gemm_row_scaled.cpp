/// \file gemm_row_scaled.cpp
/// \brief Row-scaled NVFP4 GEMM (TE_FORMATS.md §7.5): neutralise the outer scales, per-tensor NVFP4 GEMM
///        into FP32, post-scale per row and column in TE's order, bias in FP32, output cast.
#include <cmath>
#include <cstring>

#include "gemm_internal.hpp"
#include "qtc/codec.hpp"
#include "qtc/gemm.hpp"

namespace qtc::ref {
namespace {

Plane& selected_plane(QuantizedTensor& q, PlaneKind p, const char* which) {
  std::optional<Plane>& opt = p == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
  QTC_CHECK(opt.has_value(), "row-scaled GEMM: operand ", which, " lacks the ",
            p == PlaneKind::kRowwise ? "rowwise" : "columnwise", " plane it is read with (TE_FORMATS.md §7.1)");
  return *opt;
}

}  // namespace

RowScaledSplit neutralize_row_scaled(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args) {
  QTC_CHECK(A.recipe.nvfp4_or_null() != nullptr && B.recipe.nvfp4_or_null() != nullptr,
            "row-scaled GEMM needs NVFP4 operands, got ", A.recipe.name(), " and ", B.recipe.name());
  RowScaledSplit s{A, B, {}, {}};
  const PlaneKind pa = args.transa ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
  const PlaneKind pb = args.transb ? PlaneKind::kColumnwise : PlaneKind::kRowwise;
  Plane& plane_a = selected_plane(s.a, pa, "A");
  Plane& plane_b = selected_plane(s.b, pb, "B");
  QTC_CHECK(!plane_a.amax.empty() && !plane_b.amax.empty(), "row-scaled GEMM: an operand plane has no amax");
  s.col_scales = plane_a.amax;
  s.row_scales = plane_b.amax;
  plane_a.amax = {1.0f};
  plane_b.amax = {1.0f};
  s.a.recipe.nvfp4().row_scaled = false;
  s.b.recipe.nvfp4().row_scaled = false;
  // The other plane of a row-scaled tensor keeps its per-row amax but is not read; make it scalar so the
  // tensor is a consistent per-tensor NVFP4 tensor.
  for (QuantizedTensor* q : {&s.a, &s.b})
    for (std::optional<Plane>* p : {&q->rowwise, &q->columnwise})
      if (p->has_value() && (*p)->amax.size() != 1) (*p)->amax = {1.0f};
  return s;
}

void row_scaled_post_scale(std::span<float> scratch, int64_t n, int64_t m, std::span<const float> row_scales,
                           std::span<const float> col_scales) {
  QTC_CHECK(row_scales.size() == 1 || static_cast<int64_t>(row_scales.size()) == n, "row scales: ", row_scales.size(),
            " values for ", n, " output rows");
  QTC_CHECK(col_scales.size() == 1 || static_cast<int64_t>(col_scales.size()) == m, "column scales: ",
            col_scales.size(), " values for ", m, " output columns");
  QTC_CHECK(static_cast<int64_t>(scratch.size()) >= n * m, "scratch too small");
  if (col_scales.size() == 1) {  // out *= (row_scales * col_scales): one fused fp32 factor per row
    for (int64_t i = 0; i < n; ++i) {
      const float f = row_scales[row_scales.size() == 1 ? 0 : static_cast<size_t>(i)] * col_scales[0];
      for (int64_t j = 0; j < m; ++j) scratch[static_cast<size_t>(i * m + j)] *= f;
    }
  } else if (row_scales.size() == 1) {  // out *= (col_scales * row_scales): one fused factor per column
    for (int64_t j = 0; j < m; ++j) {
      const float f = col_scales[static_cast<size_t>(j)] * row_scales[0];
      for (int64_t i = 0; i < n; ++i) scratch[static_cast<size_t>(i * m + j)] *= f;
    }
  } else {  // out *= row_scales; out *= col_scales: two roundings
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        float& v = scratch[static_cast<size_t>(i * m + j)];
        v *= row_scales[static_cast<size_t>(i)];
        v *= col_scales[static_cast<size_t>(j)];
      }
  }
}

HostMatrix gemm_nvfp4_row_scaled(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args) {
  QTC_CHECK(args.alpha == 1.0f, "row-scaled NVFP4 GEMM takes alpha = 1 (TE_FORMATS.md §7.5), got ", args.alpha);
  QTC_CHECK(args.beta == 0.0f || (args.beta == 1.0f && args.c != nullptr),
            "row-scaled NVFP4 GEMM supports no explicit beta: only accumulate (beta = 1 with C, added in the output "
            "dtype) or beta = 0 (TE_FORMATS.md §7.5); got beta = ", args.beta);
  const RowScaledSplit s = neutralize_row_scaled(A, B, args);
  GemmArgs inner;
  inner.transa = args.transa;
  inner.transb = args.transb;
  inner.out = DType::kF32;
  HostMatrix scratch = gemm_exact(s.a, s.b, inner);  // [n, m] FP32, alpha = 1/(36·maxA·maxB)
  const int64_t n = scratch.rows;
  const int64_t m = scratch.cols;
  std::span<float> sv(scratch.as<float>(), static_cast<size_t>(n * m));
  row_scaled_post_scale(sv, n, m, s.row_scales, s.col_scales);
  QTC_CHECK(args.bias.empty() || static_cast<int64_t>(args.bias.size()) == m, "bias has ", args.bias.size(),
            " elements, D has ", m, " columns");
  const bool accumulate = args.beta == 1.0f && args.c != nullptr;
  if (accumulate)
    QTC_CHECK(args.c->rows == n && args.c->cols == m && args.c->dtype == args.out, "accumulate target is ",
              args.c->rows, "x", args.c->cols, " ", dtype_name(args.c->dtype), ", D is ", n, "x", m, " ",
              dtype_name(args.out));
  HostMatrix out(args.out, n, m);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      float v = sv[static_cast<size_t>(i * m + j)];
      if (!args.bias.empty()) v += args.bias[static_cast<size_t>(j)];  // fp32
      // cast to the output dtype (one RN from fp32), then, with accumulate, add in the output dtype
      // (computed in fp32 and rounded back, as torch does for bf16/fp16 tensors)
      store_rounded(out, i, j, v);
      if (accumulate) {
        const auto o = static_cast<float>(gemm_matrix_value(out, i, j));
        const auto c = static_cast<float>(gemm_matrix_value(*args.c, i, j));
        store_rounded(out, i, j, static_cast<double>(c + o));
      }
    }
  return out;
}

}  // namespace qtc::ref
