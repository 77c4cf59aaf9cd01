/// \file gemm_fp8_block.cpp
/// \brief FP8 block-scaled GEMM in cuBLAS's accumulation order (gemm.hpp, TE_FORMATS.md §7.3).
#include <cmath>
#include <cstring>

#include "qtc/gemm.hpp"
#include "qtc/layouts.hpp"

namespace qtc::ref {
namespace {

/// The compact block-scale of operand row r, k block kb (1x128: per row; 128x128: per 128-row tile).
struct BlockScales {
  ScaleMatrix s;
  bool two_d = false;
  float at(int64_t r, int64_t kb) const {
    float v;
    std::memcpy(&v, s.bytes.data() + static_cast<size_t>((two_d ? r / 128 : r) * s.cols + kb) * 4, 4);
    return v;
  }
};

BlockScales scales_of(const QuantizedTensor& q, PlaneKind pk) {
  const Plane& p = pk == PlaneKind::kRowwise ? *q.rowwise : *q.columnwise;
  BlockScales b;
  b.two_d = q.recipe.is_2d();
  b.s = p.scale.layout == ScaleLayout::kCompact ? p.scale
                                                 : convert_layout(p.scale, ScaleLayout::kCompact, q.recipe, pk, q.rows, q.cols);
  return b;
}

/// q with every block scale set to 1: gemm_operand then yields the raw FP8 values.
QuantizedTensor unit_scales(QuantizedTensor q) {
  for (std::optional<Plane>* p : {&q.rowwise, &q.columnwise}) {
    if (!p->has_value()) continue;
    ScaleMatrix& s = (*p)->scale;
    const float one = 1.0f;
    for (size_t i = 0; i + 4 <= s.bytes.size(); i += 4) std::memcpy(s.bytes.data() + i, &one, 4);
  }
  return q;
}

}  // namespace

HostMatrix gemm_fp8_block_cublas_order(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args) {
  QTC_CHECK(A.recipe.fp8_block_or_null() != nullptr && B.recipe.fp8_block_or_null() != nullptr,
            "gemm_fp8_block_cublas_order needs FP8 block operands, got ", A.recipe.name(), " and ", B.recipe.name());
  QTC_CHECK(args.alpha == 1.0f && args.beta == 0.0f, "TE's block-scaled GEMM uses alpha = 1 and beta = 0 (§7.3)");
  const ResolvedGemm g = resolve_gemm(unit_scales(A), unit_scales(B), args);  // also checks the pair
  const PlaneKind pa = args.transa ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
  const PlaneKind pb = args.transb ? PlaneKind::kColumnwise : PlaneKind::kRowwise;
  const BlockScales sa = scales_of(A, pa), sb = scales_of(B, pb);
  const int64_t n = g.b.rows, m = g.a.rows, K = g.a.k, nkb = (K + 127) / 128;
  // §7.3: "1Dx1D and 1Dx2D: y = fma(RN(p*sx), sw, y); 2Dx1D: y = fma(RN(p*sw), sx, y)" with x = B, w = A.
  const bool b_first = !B.recipe.is_2d();
  HostMatrix out(args.out, n, m);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      float y = 0.0f;
      for (int64_t kb = 0; kb < nkb; ++kb) {
        long double s = 0.0L;  // 64-bit significand: the 128-term FP8 dot product is exact
        for (int64_t r = kb * 128; r < std::min(K, kb * 128 + 128); ++r)
          s += static_cast<long double>(g.b.at(i, r)) * static_cast<long double>(g.a.at(j, r));
        const auto p = static_cast<float>(s);
        const float sx = sb.at(i, kb), sw = sa.at(j, kb);
        y = b_first ? std::fma(p * sx, sw, y) : std::fma(p * sw, sx, y);
      }
      if (!args.bias.empty()) y += args.bias[static_cast<size_t>(j)];
      store_rounded(out, i, j, static_cast<double>(y));
    }
  return out;
}

}  // namespace qtc::ref
