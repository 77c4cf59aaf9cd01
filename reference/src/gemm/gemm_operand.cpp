/// \file gemm_operand.cpp
/// \brief Reading a quantized plane as a GEMM operand with exact element values, and the checks of
///        which operand pairs a GEMM accepts (TE_FORMATS.md §7.1-§7.4).
#include <cmath>
#include <cstring>
#include <sstream>

#include "qtc/codec.hpp"
#include "qtc/gemm.hpp"
#include "qtc/layouts.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::ref {
namespace {

float f32_at(const ScaleMatrix& s, int64_t r, int64_t c) {
  float v;
  std::memcpy(&v, s.bytes.data() + static_cast<size_t>(r * s.cols + c) * 4, 4);
  return v;
}

double decode_fp8(uint8_t code, Fp8Type t) {
  return t == Fp8Type::kE4M3 ? static_cast<double>(decode_e4m3(code)) : static_cast<double>(decode_e5m2(code));
}

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


/// Element (r, c) of a compact block-scale matrix for a plane stored [R, C], block (bh x bw); the compact
/// matrix may repeat a 2-D block's scale on every row (NVFP4 16x16, TE's 1-D storage) or hold one row per
/// block row (FP8 128x128).
int64_t scale_row(const ScaleMatrix& s, int64_t r, int64_t R, int bh) { return s.rows == R ? r : r / bh; }

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
  if (rc.kind() != RecipeKind::kFP8Tensor && opt->scale.layout != ScaleLayout::kCompact) {
    compact_copy = *opt;
    compact_copy.scale = convert_layout(opt->scale, ScaleLayout::kCompact, rc, pk, q.rows, q.cols);
    converted = true;
  }
  const Plane& p = converted ? compact_copy : *opt;
  // The plane as stored: [R, C] values (NVFP4 packs two per byte).
  const bool mx_col = rc.kind() == RecipeKind::kMXFP8 && pk == PlaneKind::kColumnwise;
  const int64_t R = p.data_rows;
  const int64_t C = rc.kind() == RecipeKind::kMXFP4 ? describe_plane(rc, pk, q.rows, q.cols).data_row_elems
                    : rc.kind() == RecipeKind::kNVFP4 ? p.data_cols * 2 : p.data_cols;
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

  const RecipeKind kind = rc.kind();
  const bool e2m1 = kind == RecipeKind::kNVFP4 || kind == RecipeKind::kMXFP4;
  const Fp8Type fp8 = e2m1 ? Fp8Type::kE4M3 : rc.fp8_type();  // element type of FP8 data
  const bool two_d = rc.is_2d();
  auto stored_value = [&](int64_t r, int64_t c) -> double {  // element (r, c) of the stored [R, C] plane
    switch (kind) {
      case RecipeKind::kNVFP4: {
        const uint8_t byte = p.data[static_cast<size_t>(r * p.data_cols + c / 2)];
        const uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0xF);
        const uint8_t sf = p.scale.byte(scale_row(p.scale, r, R, 16), c / 16);
        return static_cast<double>(decode_e2m1(code)) * static_cast<double>(decode_e4m3(sf));
      }
      case RecipeKind::kMXFP8: {
        const double v = decode_fp8(p.data[static_cast<size_t>(r * C + c)], fp8);
        const uint8_t e = mx_col ? p.scale.byte(r / 32, c) : p.scale.byte(r, c / 32);
        return v * static_cast<double>(decode_e8m0(e));
      }
      case RecipeKind::kFP8Block: {
        const double v = decode_fp8(p.data[static_cast<size_t>(r * C + c)], fp8);
        const int64_t sr = two_d ? r / 128 : r;
        return v * static_cast<double>(f32_at(p.scale, sr, c / 128));
      }
      case RecipeKind::kFP8Tensor:
        return decode_fp8(p.data[static_cast<size_t>(r * C + c)], fp8) * static_cast<double>(q.scale_inv);
      case RecipeKind::kMXFP4: {  // [R, C] = x (rowwise) or x^T (columnwise), blocks of 32 along C
        const uint8_t byte = p.data[static_cast<size_t>(r * p.data_cols + c / 2)];
        const uint8_t code = (c & 1) ? (byte >> 4) : (byte & 0xF);
        return static_cast<double>(decode_e2m1(code)) * static_cast<double>(decode_e8m0(p.scale.byte(r, c / 32)));
      }
    }
    return 0.0;
  };

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
  const bool fp8 = ra.kind() != RecipeKind::kNVFP4 && ra.kind() != RecipeKind::kMXFP4;
  if (fp8)
    QTC_CHECK(!(ra.fp8_type() == Fp8Type::kE5M2 && rb.fp8_type() == Fp8Type::kE5M2),
              "E5M2 x E5M2 is not a cuBLASLt FP8 GEMM (one operand must be E4M3): A ", ra.name(), ", B ", rb.name());
  if (ra.kind() == RecipeKind::kFP8Block)
    QTC_CHECK(!(ra.is_2d() && rb.is_2d()),
              "FP8 block scaling: 128x128 x 128x128 GEMMs are not supported (TE_FORMATS.md §7.3)");
  if (ra.kind() == RecipeKind::kMXFP4)
    QTC_CHECK(args.out != DType::kF16, "FP4 GEMM does not support FP16 output (TE_FORMATS.md §7.4; cuBLASLt block-scaled FP4)");
  if (ra.kind() == RecipeKind::kNVFP4) {
    QTC_CHECK(!ra.nvfp4_row_scaled() && !rb.nvfp4_row_scaled(),
              "row-scaled NVFP4 operands are rejected by the plain NVFP4 GEMM; use gemm_nvfp4_row_scaled (TE_FORMATS.md §7.5)");
    QTC_CHECK(args.out != DType::kF16, "FP4 GEMM does not support FP16 output (TE_FORMATS.md §7.4)");
  }
  const PlaneKind pa = args.transa ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
  const PlaneKind pb = args.transb ? PlaneKind::kColumnwise : PlaneKind::kRowwise;
  ResolvedGemm g;
  g.a = gemm_operand(A, pa);
  g.b = gemm_operand(B, pb);
  QTC_CHECK(g.a.k == g.b.k, "reduction dims differ: A (transa=", args.transa ? "T" : "N", ") gives [", g.a.rows, ", ",
            g.a.k, "], B (transb=", args.transb ? "T" : "N", ") gives [", g.b.rows, ", ", g.b.k, "]");
  g.alpha = args.alpha;
  if (ra.kind() == RecipeKind::kNVFP4) {
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
