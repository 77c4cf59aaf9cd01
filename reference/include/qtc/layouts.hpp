/// \file layouts.hpp
/// \brief Scale matrices moved between layouts (qtc::Layout, layout.hpp): every conversion goes through the
///        plane's ScaleGeometry (PlaneSpec::geometry), the one offset function the kernels call too.
#pragma once
#include <cstdint>

#include "qtc/numeric.hpp"
#include "qtc/quantized.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::ref {

/// Shape of a plane's compact and TE-padded scale matrix; recipe_policy.hpp.
using ::qtc::ScaleShape;
ScaleShape compact_scale_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K);
ScaleShape padded_scale_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K);

/// swizzled_offset(row, kb, num_kb), the cuBLAS swizzle index (§6), is layout.hpp's (shared with the kernels).
using qtc::swizzled_offset;

/// compact -> padded: TE's allocation shape, padding zero. FP8 block 1x128 becomes TE's GEMM-ready
/// transposed layout ([kb][i]); FP8 tensor has no scale matrix and is refused.
ScaleMatrix to_padded(const ScaleMatrix& compact, const Recipe& r, PlaneKind p, int64_t M, int64_t K);
/// padded -> compact (drops the padding; it does not need to be zero).
ScaleMatrix to_compact(const ScaleMatrix& padded, const Recipe& r, PlaneKind p, int64_t M, int64_t K);
/// padded -> swizzled (NVFP4 and MXFP8; MXFP8 columnwise is swizzled transposed). Entries outside the
/// valid region are written as zero, whatever the padding held.
ScaleMatrix swizzle(const ScaleMatrix& padded, const Recipe& r, PlaneKind p, int64_t M, int64_t K);
/// swizzled -> padded (inverse of swizzle on the valid region; padding comes back zero).
ScaleMatrix unswizzle(const ScaleMatrix& swizzled, const Recipe& r, PlaneKind p, int64_t M, int64_t K);
/// Converts a plane's scales to the requested layout, whatever layout they are in now (any two of qtc::Layout that
/// the plane has; the others throw qtc::Error naming the rule, PlaneSpec::layout_refusal). Padding comes out zero.
ScaleMatrix convert_layout(const ScaleMatrix& s, ScaleLayout to, const Recipe& r, PlaneKind p, int64_t M, int64_t K);
/// Converts every plane of q.
void convert_layout(QuantizedTensor& q, ScaleLayout to);

}  // namespace qtc::ref
