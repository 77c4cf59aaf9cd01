/// \file check.hpp
/// \brief Test-side oracles, written independently of the reference: bitwise comparison of quantized
///        tensors with a message that finds the bug, TE's padded scale shapes (TE_FORMATS.md §5) restated,
///        the cuBLAS swizzle restated as TE's torch view/permute (§6), a columnwise derivation from the
///        rowwise plane (§1.7, §2.2, §3.3), and per-element error bounds of each format.
#pragma once
#include <cstdint>
#include <string>

#include "qtc/quantized.hpp"

namespace qtc::prop {

/// Empty when a and b are bit-identical (shape, planes, data, scales, amax bits, scale_inv bits);
/// otherwise the first mismatch (plane, buffer, coordinate, both values in hex), and the mismatch count.
std::string diff_quantized(const QuantizedTensor& a, const QuantizedTensor& b);
/// Same for one plane.
std::string diff_plane(const Plane& a, const Plane& b, const char* what);
/// Same for scale matrices.
std::string diff_scales(const ScaleMatrix& a, const ScaleMatrix& b, const char* what);

/// TE's allocation shape of a plane's scale_inv (TE_FORMATS.md §5 table), written from the table.
struct Shape2 {
  int64_t rows = 0, cols = 0;
  bool operator==(const Shape2&) const = default;
};
Shape2 te_padded_scale_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K);
/// Whether entry (row, col) of the padded matrix holds a block scale (not padding), and which compact
/// entry: FP8 block 1x128 padded layouts are transposed ("GEMM ready", §3.3).
bool te_padded_valid(const Recipe& r, PlaneKind p, int64_t M, int64_t K, int64_t row, int64_t col, int64_t* crow,
                     int64_t* ccol);

/// The swizzled byte order of a padded [R, C] byte matrix as TE's torch code writes it:
/// S.view(R/128, 4, 32, C/4, 4).permute(0, 3, 2, 1, 4).flatten(); MXFP8 columnwise swizzles the
/// transposed matrix. Only valid entries are copied; padding is 0 (the swizzle kernel zeroes it).
std::vector<uint8_t> te_swizzle(const ScaleMatrix& padded, const Recipe& r, PlaneKind p, int64_t M, int64_t K);

/// The test's own columnwise derivation: NVFP4 16x16 nibble transpose + scale transpose, FP8 128x128
/// byte transpose + scale transpose, MXFP8 32x32 same bytes (same orientation) + the tile scale per
/// 32-row block, FP8 tensor byte transpose; amax copied. Throws qtc::Error for 1-D recipes.
/// `force` skips the refusal (to show what a derivation would produce for a 1-D recipe).
Plane derive_columnwise_oracle(const QuantizedTensor& q, bool force = false);

/// Value of an element of a plane's grid code: E2M1 (NVFP4), E4M3/E5M2 (others).
float grid_value(const Recipe& r, uint8_t code);
/// Half the distance to the neighbouring grid points around |v| (exact value on the element grid), or,
/// beyond the largest grid value, |v| - max (saturation). The "nearest, saturating" bound per element.
double nearest_bound(const Recipe& r, double v_abs);
/// Largest finite grid value (6, 448 or 57344).
double grid_max(const Recipe& r);

}  // namespace qtc::prop

namespace qtc::prop {
/// Rows [r0, r1) of a quantized tensor with compact scales, cut by the test itself (not ref::slice_rows):
/// r0 and r1 must lie on block boundaries of every plane (r1 may also be q.rows).
QuantizedTensor slice_oracle(const QuantizedTensor& q, int64_t r0, int64_t r1);
}  // namespace qtc::prop
