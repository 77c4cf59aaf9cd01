/// \file error_bound.hpp
/// \brief The error bound of dequantize(quantize(x)), per element: the one bound of qtc::testing's within_error_bound and
///        `qtc conform`'s round-trip check. Every element is quantized as q = round_E(x / s) and decoded as q * s,
///        where s is the effective scale of x's block as the dequantizer applies it (NVFP4: E4M3 block scale times
///        amax / (6 * e4m3_max), or the torchao two-level product; MXFP8 and MXFP4: the E8M0 power of two; FP8 block:
///        the block's scale_inv; FP8 tensor: scale_inv) and E the element format (E2M1, E4M3, E5M2). For v = |x| / s
///        inside E's range, round-to-nearest is off by at most half the spacing of E at v: spacing(v) =
///        2^(floor(log2 v) - mantissa bits) for v >= E's smallest normal and 2^(emin - mantissa bits) below it (E2M1:
///        0.5 up to 2, 1 up to 4, 2 up to 6; E4M3: 2^-9 below 2^-6). Stochastic rounding may go to either neighbour:
///        the full spacing. Values beyond E's largest finite value M_E saturate: the excess |x| - M_E * s is added. The
///        scaling itself is fp32 arithmetic (x times a rounded reciprocal, the decoded scale recomputed from its parts),
///        so a relative 2^-20 of |x| (8 fp32 ulps) is allowed for it, and the rounding of the output type: half an ulp
///        of |dequantized| (relative 2^-24 F32, 2^-8 BF16, 2^-11 F16). Altogether
///            |dequantized - x| <= s * spacing(min(v, M_E)) / 2  (stochastic rounding: the full spacing)
///                                 + max(0, |x| - M_E * s) + 2^-20 |x| + ulp_out(|dequantized|) / 2,
///        and an infinite result of x's sign is the right rounding where |x| plus that bound passes the output type's
///        largest finite value. Not checked: elements whose x or scale is not finite (how NaN and Inf encode is a
///        profile rule, pinned bit for bit), and those the kind's module exempts (KindInfo::bound_exempt: NVFP4
///        whose amax puts TE's dequantization off the inverse of its quantization, TE_FORMATS.md §1.14, §11.3).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "qtc/quantize.hpp"
#include "qtc/recipe.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/tensor.hpp"

namespace qtc {

/// Element format of a recipe's data: mantissa bits, smallest normal exponent, largest finite value.
struct ElementFormat {
  int mbits = 0;
  int emin = 0;
  double max = 0.0;
};
ElementFormat element_format(const Recipe& r);
/// The spacing of format f at magnitude v (v <= f.max).
double element_spacing(const ElementFormat& f, double v);
/// The bound on |dequantized - x| of one element whose effective block scale is s, dequantized to type `out`.
double element_error_bound(const Recipe& r, double x, double s, DType out, double dequantized);

/// The effective scale of every element of one plane of q (compact scales), as ref::dequantize applies it, by the
/// element's coordinates in x's orientation.
class PlaneScales {
 public:
  PlaneScales(const QuantizedTensor& q, PlaneKind pk);
  double operator()(int64_t i, int64_t j) const;
  /// The amax that sets the element's global scale (NVFP4: the plane's, or its plane row's); 0 for other kinds.
  double global_amax(int64_t i, int64_t j) const;

 private:
  const QuantizedTensor& q_;
  PlaneKind pk_;
  PlaneSpec spec_;
  std::optional<ref::Nvfp4BlockDequant> nvfp4_;
};

/// dequantized (x's orientation, any float type) against x (the plane's domain: x, or RHT(x^T)^T for an RHT
/// columnwise plane), with the scales of q, the quantization that was dequantized.
struct ErrorBoundResult {
  int64_t checked = 0, outside = 0, exempt = 0;
  std::string exempt_reason;  ///< the kind's reason for the first exempt element
  // The first element outside the bound.
  int64_t i = -1, j = -1;
  double x = 0.0, got = 0.0, bound = 0.0, scale = 0.0;
};
ErrorBoundResult check_error_bound(const QuantizedTensor& q, PlaneKind pk, const MatrixView& x, const MatrixView& dequantized);

}  // namespace qtc
