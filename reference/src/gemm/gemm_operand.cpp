/// \file gemm_operand.cpp
/// \brief Reading a quantized plane as a GEMM operand with exact element values, and the checks of
///        which operand pairs a GEMM accepts (TE_FORMATS.md §7.1-§7.4).
#include <cmath>
#include <cstring>
#include <sstream>

#include "qtc/codec.hpp"
#include "qtc/gemm.hpp"
#include "qtc/layouts.hpp"
#include "kind_module.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::ref {
namespace {

/// Splits an exactly representable non-zero finite double into an odd integer times a power of two.
void split_exact(double v, int64_t& sig, int32_t& exp) {
  if (v == 0.0) {
    sig = 0;
    exp = 0;
    return;
  }
  int e = 0;
  const double m = std::frexp(v, &e);               // v = m·2^e, 0.5 <= |m| < 1
  auto s = static_cast<int64_t>(std::ldexp(m, 53));  // exact
  int32_t x = e - 53;
  while ((s & 1) == 0) {
    s /= 2;
    ++x;
  }
  sig = s;
  exp = x;
}

}  // namespace

GemmTrans gemm_trans(GemmKind k) {
  switch (k) {
    case GemmKind::kFprop: return {true, false};
    case GemmKind::kDgrad: return {false, false};
    case GemmKind::kWgrad: return {false, true};
  }
  return {};
}

ExactOperand gemm_operand(const QuantizedTensor& q, PlaneKind pk) {
  const std::optional<Plane>& opt = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
  QTC_CHECK(opt.has_value(), "the GEMM reads the ", plane_kind_name(pk), " plane of this ", q.recipe.name(),
            " tensor, which it does not have (TE_FORMATS.md §7.1)");
  const Recipe& rc = q.recipe;
  // Padded or swizzled scales (what the GPU paths consume) are read through their compact form.
  Plane compact_copy;
  bool converted = false;
  const detail::KindModule& kind = detail::kind_module(rc.kind());
  if (!kind.info.per_tensor_scale && opt->scale.layout != ScaleLayout::kCompact) {
    compact_copy = *opt;
    compact_copy.scale = convert_layout(opt->scale, ScaleLayout::kCompact, rc, pk, q.rows, q.cols);
    converted = true;
  }
  const Plane& p = converted ? compact_copy : *opt;
  // The plane as stored: [R, C] values (E2M1 packs two per byte; a row of an odd length ends in half a byte).
  const bool mx_col = !kind.info.columnwise_transposed && pk == PlaneKind::kColumnwise;  // MXFP8: x's orientation
  const int64_t R = p.data_rows;
  const PlaneSpec spec = describe_plane(rc, pk, q.rows, q.cols);
  const int64_t C = !kind.info.e2m1_data ? p.data_cols : p.data_cols == spec.data_cols ? spec.data_row_elems : p.data_cols * 2;
  const int64_t want_r = pk == PlaneKind::kRowwise || mx_col ? q.rows : q.cols;
  const int64_t want_c = pk == PlaneKind::kRowwise || mx_col ? q.cols : q.rows;
  QTC_CHECK(R == want_r && C == want_c, "the ", plane_kind_name(pk), " plane of a ", q.rows, "x", q.cols, " ",
            rc.name(), " tensor holds ", R, "x", C, " values, expected ", want_r, "x", want_c);

  ExactOperand op;
  op.rows = mx_col ? C : R;
  op.k = mx_col ? R : C;
  const size_t n = static_cast<size_t>(op.rows * op.k);
  op.sig.resize(n);
  op.exp.resize(n);
  op.value.resize(n);
  op.row_nonfinite.assign(static_cast<size_t>(op.rows), 0);

  const detail::OperandPlane plane{.p = p,
                                   .R = R,
                                   .C = C,
                                   .mx_col = mx_col,
                                   .fp8 = kind.info.e2m1_data ? Fp8Type::kE4M3 : rc.fp8_type(),
                                   .two_d = rc.is_2d(),
                                   .scale_inv = q.scale_inv};
  // Element (r, c) of the stored [R, C] plane: the kind's reading (kinds/<kind>_kind.cpp).
  auto stored_value = [&](int64_t r, int64_t c) -> double { return kind.operand_value(plane, r, c); };

  for (int64_t i = 0; i < op.rows; ++i) {
    for (int64_t kk = 0; kk < op.k; ++kk) {
      const double v = mx_col ? stored_value(kk, i) : stored_value(i, kk);
      const size_t idx = static_cast<size_t>(i * op.k + kk);
      op.value[idx] = v;
      if (!std::isfinite(v)) {
        op.row_nonfinite[static_cast<size_t>(i)] = 1;
        op.sig[idx] = 0;
        op.exp[idx] = 0;
      } else {
        split_exact(v, op.sig[idx], op.exp[idx]);
      }
    }
  }
  return op;
}

float nvfp4_gemm_alpha(float alpha_in, float amax_a, float amax_b, int e4m3_max_a, int e4m3_max_b) {
  // TE `nvte_nvfp4_compute_per_tensor_scale`: alpha_in * amax_A * amax_B * (1.0f / (6*6*maxA*maxB)), fp32,
  // left to right. 36*448*448 = 7225344 < 2^24, so the integer constant is exact in fp32.
  const float factor = 1.0f / static_cast<float>(36 * e4m3_max_a * e4m3_max_b);
  float a = alpha_in * amax_a;
  a = a * amax_b;
  return a * factor;
}

ResolvedGemm resolve_gemm(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args) {
  const Recipe& ra = A.recipe;
  const Recipe& rb = B.recipe;
  QTC_CHECK(ra.kind() == rb.kind(), "A (", ra.name(), ") and B (", rb.name(),
            ") must have the same scaling mode (TE_FORMATS.md §7.1)");
  QTC_CHECK(args.out == DType::kF32 || args.out == DType::kBF16 || args.out == DType::kF16,
            "GEMM output must be F32, BF16 or F16, got ", dtype_name(args.out));
  QTC_CHECK(args.beta == 0.0f || args.c != nullptr, "beta = ", args.beta, " needs a C matrix");
  const detail::KindModule& kind = detail::kind_module(ra.kind());
  if (!kind.info.e2m1_data)
    QTC_CHECK(!(ra.fp8_type() == Fp8Type::kE5M2 && rb.fp8_type() == Fp8Type::kE5M2),
              "E5M2 x E5M2 is not a cuBLASLt FP8 GEMM (one operand must be E4M3): A ", ra.name(), ", B ", rb.name());
  kind.check_gemm_pair(ra, rb, args.out);  // the kind's own pair rules
  const PlaneKind pa = args.transa ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
  const PlaneKind pb = args.transb ? PlaneKind::kColumnwise : PlaneKind::kRowwise;
  ResolvedGemm g;
  g.a = gemm_operand(A, pa);
  g.b = gemm_operand(B, pb);
  QTC_CHECK(g.a.k == g.b.k, "reduction dims differ: A (transa=", args.transa ? "T" : "N", ") gives [", g.a.rows, ", ",
            g.a.k, "], B (transb=", args.transb ? "T" : "N", ") gives [", g.b.rows, ", ", g.b.k, "]");
  g.alpha = args.alpha;
  if (ra.nvfp4_or_null() != nullptr) {  // NVFP4's per-tensor scales move into alpha (§7.4)
    const Plane& plane_a = pa == PlaneKind::kRowwise ? *A.rowwise : *A.columnwise;
    const Plane& plane_b = pb == PlaneKind::kRowwise ? *B.rowwise : *B.columnwise;
    QTC_CHECK(plane_a.amax.size() == 1 && plane_b.amax.size() == 1, "NVFP4 GEMM needs one amax per operand plane, got ",
              plane_a.amax.size(), " and ", plane_b.amax.size());
    g.alpha = nvfp4_gemm_alpha(args.alpha, plane_a.amax[0], plane_b.amax[0], ra.nvfp4().e4m3_max, rb.nvfp4().e4m3_max);
  }
  if (args.c != nullptr && args.beta != 0.0f)
    QTC_CHECK(args.c->rows == g.b.rows && args.c->cols == g.a.rows, "C is ", args.c->rows, "x", args.c->cols,
              ", D is ", g.b.rows, "x", g.a.rows);
  QTC_CHECK(args.bias.empty() || static_cast<int64_t>(args.bias.size()) == g.a.rows, "bias has ", args.bias.size(),
            " elements, D has ", g.a.rows, " columns");
  return g;
}

}  // namespace qtc::ref
