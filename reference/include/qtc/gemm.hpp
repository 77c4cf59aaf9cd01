/// \file gemm.hpp
/// \brief Reference GEMMs on quantized operands (TE_FORMATS.md §7): an exact one (every product and the
///        whole sum without rounding, one rounding to the output type), a fast Eigen one on dequantized
///        FP64 with a stated error bound, the row-scaled NVFP4 GEMM (§7.5) and its grouped form.
///
/// Conventions follow TE's `cublas_gemm(A, B, D, transa, transb)` (§7.1): A is the weight-like operand
/// whose rows become the output columns, B the activation-like operand whose rows become the output rows.
/// The operand plane is A: rowwise if transa else columnwise; B: columnwise if transb else rowwise. Every
/// plane is read as a [rows, k] matrix reduced along k: a rowwise plane of an [M, K] tensor is [M, K], a
/// columnwise plane is [K, M] (MXFP8 columnwise data keeps x's orientation and is read transposed). So
///   fprop TN: A = W [N, K], B = X [M, K] -> D = X·Wᵀ [M, N]
///   dgrad NN: A = W, B = dY [M, N]        -> D = dY·W [M, K]
///   wgrad NT: A = X, B = dY               -> D = dYᵀ·X [N, K]
/// D is row-major [b.rows, a.rows]: D[i][j] = alpha · Σ_r b[i][r]·a[j][r] (+ beta·C[i][j]) (+ bias[j]).
///
/// Scales may be in any layout (padded and swizzled ones are read through their compact form). Pairs (§7.1-§7.4): FP8 per-tensor
/// E4M3xE4M3, E4M3xE5M2, E5M2xE4M3; FP8 block 1x128/128x128 in any mix except 128x128 x 128x128; MXFP8 x
/// MXFP8 (not both E5M2); NVFP4 x NVFP4 (not row-scaled: see gemm_nvfp4_row_scaled; no F16 output).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "qtc/quantized.hpp"

namespace qtc::ref {

/// The three GEMMs of a linear layer and their TE flags (§7.1).
enum class GemmKind : uint8_t { kFprop, kDgrad, kWgrad };
struct GemmTrans {
  bool transa = true;
  bool transb = false;
};
GemmTrans gemm_trans(GemmKind k);  ///< fprop TN, dgrad NN, wgrad NT

/// What the GEMM computes besides A and B.
struct GemmArgs {
  bool transa = true;
  bool transb = false;
  float alpha = 1.0f;
  float beta = 0.0f;              ///< needs c when non-zero
  const HostMatrix* c = nullptr;  ///< [n, m] F32/BF16/F16 (n = output rows, m = output cols)
  std::vector<float> bias;        ///< empty or [m]: one per output column
  DType out = DType::kF32;        ///< F32, BF16 or F16

  static GemmArgs of(GemmKind k, DType out = DType::kF32) {
    GemmArgs a;
    a.transa = gemm_trans(k).transa;
    a.transb = gemm_trans(k).transb;
    a.out = out;
    return a;
  }
};

/// One operand as the GEMM reads it: [rows, k], every element value = sig · 2^exp exactly (block scales
/// and FP8 per-tensor scale_inv folded in; NVFP4's global scale is in ResolvedGemm::alpha instead).
/// Non-finite elements (NaN codes, NaN/Inf scales) are kept in `value` and flagged per row.
struct ExactOperand {
  int64_t rows = 0;
  int64_t k = 0;
  std::vector<int64_t> sig;          ///< odd or zero (trailing zeros moved into exp)
  std::vector<int32_t> exp;
  std::vector<double> value;         ///< sig·2^exp as FP64 (exact: at most 28 significant bits)
  std::vector<uint8_t> row_nonfinite;///< 1 if any element of the row is NaN or Inf

  double at(int64_t r, int64_t c) const { return value[static_cast<size_t>(r * k + c)]; }
};

/// Reads one plane of q as a GEMM operand ([M,K] rowwise, [K,M] columnwise; see the file comment).
/// Throws when the plane is absent or has the wrong shape.
ExactOperand gemm_operand(const QuantizedTensor& q, PlaneKind plane);

/// A and B resolved: the planes read, and the fp32 alpha cuBLAS would be handed.
struct ResolvedGemm {
  ExactOperand a;     ///< [m, k]
  ExactOperand b;     ///< [n, k]
  float alpha = 1.f;  ///< args.alpha, times NVFP4's global factor evaluated as §7.4 (left to right, fp32)
};

/// Checks that (A, B, args) is a pair the GEMM accepts (throws qtc::Error naming the rule), picks the
/// planes, and computes alpha. NVFP4: alpha = alpha_in·amax_A·amax_B·(1/(36·E4M3_MAX_A·E4M3_MAX_B)).
ResolvedGemm resolve_gemm(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args);
/// The same NVFP4 alpha on its own (§7.4), fp32 left to right.
float nvfp4_gemm_alpha(float alpha_in, float amax_a, float amax_b, int e4m3_max_a, int e4m3_max_b);

/// Exact: D = alpha·Σ b·a (+ beta·C) (+ bias) computed in a wide fixed-point accumulator, rounded once
/// (RN-even, overflow to ±Inf) to args.out. Any NaN/Inf input element makes the outputs it touches follow
/// IEEE FP64 arithmetic instead.
HostMatrix gemm_exact(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args);
HostMatrix gemm_exact(const ResolvedGemm& g, const GemmArgs& args);

/// Fast: Eigen FP64 GEMM on the dequantized operands, then alpha, beta·C and bias in FP64, then one
/// rounding to args.out.
///
/// Error bound (tested against gemm_exact): with u = 2^-53 and, per output element,
///   S = |alpha|·Σ_r |b[i][r]·a[j][r]| + |beta·C[i][j]| + |bias[j]|,
/// the FP64 value before the output rounding differs from the exact value by at most
///   E = γ_{k+3}·S,  γ_n = n·u / (1 - n·u)
/// (products of ≤28-bit significands round once each, any summation order, FMA or not; plus the alpha
/// multiply and the two additions), so |fast - exact| ≤ E + ulp_out(max(|fast|, |exact|)) after rounding.
/// When every partial sum is exact in FP64 (e.g. small integers times powers of two) fast == exact, bit
/// for bit.
HostMatrix gemm_eigen(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args);
HostMatrix gemm_eigen(const ResolvedGemm& g, const GemmArgs& args);
/// E of the bound above, per output element ([n, m], row-major).
std::vector<double> gemm_eigen_error_bound(const ResolvedGemm& g, const GemmArgs& args);

/// Rounds an exactly known FP64 value once to F32/BF16/F16 (RN-even, overflow to ±Inf; NaN stays NaN)
/// and stores it at (i, j) of out.
void store_rounded(HostMatrix& out, int64_t i, int64_t j, double v);
/// The spacing of out-type values at |v| (the ULP used by the bounds).
double ulp_of(DType t, double v);

// ------------------------------------------------------------------------------------------------
// Row-scaled NVFP4 (§7.5)

/// The outer scales removed from row-scaled operands: one factor per output row and per output column
/// (a vector of one element means a scalar). Taken from the amax of the plane each operand is read with.
struct RowScaledSplit {
  QuantizedTensor a;                ///< A with its selected amax replaced by {1} and row_scaled = false
  QuantizedTensor b;                ///< likewise
  std::vector<float> row_scales;    ///< B's removed amax: [n] (or [1] if B is not row-scaled)
  std::vector<float> col_scales;    ///< A's removed amax: [m] (or [1])
};
/// Step 1 of §7.5. Either operand may be row-scaled or per-tensor (then its amax is moved out too, which
/// is what TE does for an ordinary weight: a scalar column scale).
RowScaledSplit neutralize_row_scaled(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args);

/// Step 3 of §7.5 on an FP32 scratch [n, m]: one fused factor when either side is a scalar
/// (col scalar: row·col; row scalar: col·row), else two roundings (·row, then ·col).
void row_scaled_post_scale(std::span<float> scratch, int64_t n, int64_t m, std::span<const float> row_scales,
                           std::span<const float> col_scales);

/// The whole §7.5 GEMM: neutralise, exact per-tensor NVFP4 GEMM rounded once to FP32 (alpha = 1/(36·maxA·maxB)),
/// post-scale in FP32, `+ bias` in FP32, cast to args.out. args.alpha must be 1; args.beta 0, or 1 with c,
/// which adds in the output dtype (TE's `accumulate`: requested_out += out.to(dtype)).
HostMatrix gemm_nvfp4_row_scaled(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args);

}  // namespace qtc::ref

namespace qtc::ref {

/// FP8 block scaling in cuBLAS's order (TE_FORMATS.md §7.3, TE's `CuBLASRefBlockwiseGemm`, which TE requires
/// to match cuBLAS bit for bit): for each output and each 128-wide k block, p = the block's dot product of the
/// raw FP8 values rounded once to FP32 (exact here, in long double, so this matches the hardware whenever
/// the 128-term sum is exact in FP32), then y = fma(RN(p · s1), s2, y) in FP32, where s1 is the 1x128
/// operand's scale (B's when both are 1x128) and s2 the other one; finally + bias in FP32 and the cast.
/// alpha must be 1 and beta 0 (TE's block-scaled GEMMs use neither).
HostMatrix gemm_fp8_block_cublas_order(const QuantizedTensor& A, const QuantizedTensor& B, const GemmArgs& args);

}  // namespace qtc::ref
