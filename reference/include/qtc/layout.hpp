/// \file layout.hpp
/// \brief The scale layout as ONE value, from the Python keyword and the CLI flag down to the device code:
///        `qtc::Layout` names how a plane's scale matrix (compact [rows, cols], recipe_policy.hpp) is stored, and
///        `qtc::ScaleGeometry` (built by PlaneSpec::geometry) answers, on the host and in a kernel alike, where entry
///        (r, c) of the compact matrix lives in that layout's buffer and what shape the buffer has. Every layout rule
///        of TE_FORMATS.md §5/§6 and of the inference engines is written once, here. No CUDA header (QTC_HD only).
///
///  | value                    | name                    | buffer                                                  |
///  |--------------------------|-------------------------|---------------------------------------------------------|
///  | kCompact                 | `compact`               | [rows, cols] row-major (VECTORS.md)                     |
///  | kPadded                  | `te`                    | TE's allocation shape (§5), padding 0; FP8 block 1x128 transposed ([kb][i]) |
///  | kSwizzled                | `swizzled_128x4`        | the padded shape in cuBLAS's 128x4 tile order (§6)      |
///  | kSwizzled8x4             | `swizzled_8x4`          | [roundup(R, 8), roundup(C, 4)] in FlashInfer / TensorRT-LLM's 8x4 tile order |
///  | kDeepGemmPackedUe8m0     | `deepgemm_packed_ue8m0` | U8 [ceil(C/4), roundup(R, 4) * 4]: four UE8M0 bytes per int32 word, MN-major |
///  | kFbgemmMx4               | `fbgemm_mx4`            | NO scale buffer: FBGEMM's MX4 rows, U8 [R, C * 17], the data AND scales of a plane |
///
/// kFbgemmMx4 is a combined layout (layout_is_combined): FBGEMM's `fp32_to_mx4` output (Triton `quantize_mx4`,
/// `py_quantize_mx4`) keeps each group of 32 elements of a data row as its 16 bytes of E2M1 codes (element 2j in the
/// low nibble) followed by the group's E8M0 exponent byte, in the data tensor; a ragged row's last group is padded with
/// zero elements (codes 0). It exists in files and tensor sets only (native_layout.hpp's OutputLayout packs and
/// unpacks it); a plane's ScaleMatrix, the CUDA kernels and layouts.hpp's convert_layout have no such form
/// (PlaneSpec::geometry refuses it naming rule 'layout-fbgemm_mx4'): they quantize in compact and convert.
///
/// For the swizzled layouts S [R, C] is the compact matrix, or its transpose for the MXFP8 columnwise plane
/// (ScaleGeometry::transposed); for the DeepGEMM packing R, C are the compact extents. In vector metadata the values
/// are written `layout=compact`, `layout=te`, `layout=te` + `swizzled=1` (kSwizzled: the form every committed vector
/// and TransformerEngine dump uses), `layout=swizzled_8x4`, `layout=deepgemm_packed_ue8m0`, `layout=fbgemm_mx4` (native_layout.hpp's
/// layout_from_metadata / layout_to_metadata; conformance/README.md, "Scale layouts").
#pragma once
#include <array>
#include <climits>
#include <cstdint>
#include <optional>
#include <string_view>

#include "qtc/host_device.hpp"

namespace qtc {

enum class Layout : uint8_t {
  kCompact,              ///< VECTORS.md shapes, no padding
  kPadded,               ///< TE's allocation shapes (TE_FORMATS.md §5), padding zero
  kSwizzled,             ///< cuBLAS 128x4 tiles over the padded shape (TE_FORMATS.md §6), padding zero
  kSwizzled8x4,          ///< FlashInfer / TensorRT-LLM small-M 8x4 tiles (`SfLayout.layout_8x4`), padding zero
  kDeepGemmPackedUe8m0,  ///< DeepGEMM's `get_mn_major_tma_aligned_packed_ue8m0_tensor` (UE8M0 FP8 block scales)
  kFbgemmMx4,            ///< FBGEMM's MX4 rows: codes and exponent bytes in the data tensor (MXFP4; combined)
};
inline constexpr int kLayoutCount = 6;

/// Every layout with its one name (CLI `--layout`, Python `layout=`, reports).
struct LayoutName {
  Layout layout;
  std::string_view name;
};
inline constexpr std::array<LayoutName, kLayoutCount> kLayoutNames{{
    {Layout::kCompact, "compact"},
    {Layout::kPadded, "te"},
    {Layout::kSwizzled, "swizzled_128x4"},
    {Layout::kSwizzled8x4, "swizzled_8x4"},
    {Layout::kDeepGemmPackedUe8m0, "deepgemm_packed_ue8m0"},
    {Layout::kFbgemmMx4, "fbgemm_mx4"},
}};

constexpr std::string_view layout_name(Layout l) {
  for (const LayoutName& n : kLayoutNames)
    if (n.layout == l) return n.name;
  return "?";
}
constexpr std::optional<Layout> layout_from_name(std::string_view s) {
  for (const LayoutName& n : kLayoutNames)
    if (n.name == s) return n.layout;
  return std::nullopt;
}
/// "compact, te, swizzled_128x4, swizzled_8x4, deepgemm_packed_ue8m0, fbgemm_mx4" (for messages).
inline constexpr std::string_view kLayoutNameList = "compact, te, swizzled_128x4, swizzled_8x4, deepgemm_packed_ue8m0, fbgemm_mx4";

/// Whether the layout reorders entries in tiles or words (the two swizzles, DeepGEMM's packing): rows of such a
/// buffer cannot be sliced or concatenated as rows (sharding refuses them; convert to compact first).
constexpr bool layout_is_tiled(Layout l) {
  return l == Layout::kSwizzled || l == Layout::kSwizzled8x4 || l == Layout::kDeepGemmPackedUe8m0;
}

/// Whether the layout keeps a plane's data and its scales in ONE tensor (the data tensor; no `<plane>_scale_inv`):
/// FBGEMM's MX4 rows. Such a layout has no scale buffer of its own (PlaneSpec::has_layout is false for it).
constexpr bool layout_is_combined(Layout l) { return l == Layout::kFbgemmMx4; }

/// FBGEMM's MX4 rows (kFbgemmMx4): a group of 32 elements of a data row is 17 bytes, its 16 code bytes (element 2j
/// of the group in the low nibble of byte j, as `py_quantize_mx4` and the Triton `_kernel_quantize_mx4` pack them)
/// followed by its exponent byte (shared exponent + 127: the E8M0 byte). A row of `groups` groups is groups * 17
/// bytes; the tensor is [rows, groups * 17].
inline constexpr int64_t kMx4GroupElems = 32;
inline constexpr int64_t kMx4GroupCodeBytes = kMx4GroupElems / 2;
inline constexpr int64_t kMx4GroupBytes = kMx4GroupCodeBytes + 1;
/// Byte of data byte `b` (codes 2b, 2b + 1) of data row `row` in the packed tensor.
QTC_HD int64_t fbgemm_mx4_data_offset(int64_t row, int64_t b, int64_t groups) {
  return row * groups * kMx4GroupBytes + (b / kMx4GroupCodeBytes) * kMx4GroupBytes + b % kMx4GroupCodeBytes;
}
/// Byte of the exponent of group `g` of data row `row` (compact scale entry (row, g)).
QTC_HD int64_t fbgemm_mx4_scale_offset(int64_t row, int64_t g, int64_t groups) {
  return row * groups * kMx4GroupBytes + g * kMx4GroupBytes + kMx4GroupCodeBytes;
}

/// The cuBLAS 128x4 swizzle: byte of entry (row, kb) of S with num_kb k-blocks (padded or not), TE_FORMATS.md §6.
QTC_HD int64_t swizzled_offset(int64_t row, int64_t kb, int64_t num_kb) {
  const int64_t tiles_k = (num_kb + 3) / 4;
  return ((row / 128) * tiles_k + kb / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + (kb % 4);
}

/// The 8x4 small-M swizzle: S padded to [roundup(R, 8), roundup(C, 4)], stored as [R/8][C/4][8][4] tiles of 32
/// bytes (FlashInfer `compute_sf_index_swizzled_8x4_gpu`; its tests' `_swizzle_mxfp8_scales`).
QTC_HD int64_t swizzled_8x4_offset(int64_t row, int64_t kb, int64_t num_kb) {
  const int64_t k_tiles = (num_kb + 3) / 4;
  return (row / 8) * k_tiles * 32 + (kb / 4) * 32 + (row % 8) * 4 + kb % 4;
}

/// Where each entry of one plane's compact scale matrix lives in one layout's buffer. Built by
/// PlaneSpec::geometry(layout) (recipe_policy.hpp), which refuses a layout the plane does not have; plain data,
/// passed to kernels as it is.
struct ScaleGeometry {
  Layout layout = Layout::kCompact;
  /// kPadded: the buffer holds the compact matrix transposed (FP8 block 1x128: TE's GEMM-ready [kb][i]);
  /// kSwizzled / kSwizzled8x4: S is the compact matrix transposed (MXFP8 columnwise: row = K index).
  bool transposed = false;
  int64_t rows = 0, cols = 0;          ///< the compact matrix
  int64_t buf_rows = 0, buf_cols = 0;  ///< the layout buffer's 2-D shape (what a file holds)

  /// Element index in the buffer of compact entry (r, c) (times the element size: the byte offset).
  QTC_HD int64_t offset(int64_t r, int64_t c) const {
    switch (layout) {
      case Layout::kCompact: return r * cols + c;
      case Layout::kPadded: return transposed ? c * buf_cols + r : r * buf_cols + c;
      case Layout::kSwizzled: return transposed ? swizzled_offset(c, r, buf_rows) : swizzled_offset(r, c, buf_cols);
      case Layout::kSwizzled8x4: return transposed ? swizzled_8x4_offset(c, r, buf_cols) : swizzled_8x4_offset(r, c, buf_cols);
      case Layout::kDeepGemmPackedUe8m0: return (c / 4) * buf_cols + 4 * r + c % 4;
      case Layout::kFbgemmMx4: return fbgemm_mx4_scale_offset(r, c, cols);  // in the combined data tensor
    }
    return r * cols + c;
  }
  /// Elements of the buffer (padding included).
  QTC_HD int64_t size() const { return buf_rows * buf_cols; }
  /// Whether the buffer is the compact matrix itself (same shape, identity order).
  QTC_HD bool identity() const {
    return layout == Layout::kCompact || (layout == Layout::kPadded && !transposed && buf_rows == rows && buf_cols == cols);
  }
};

/// a rounded up to a multiple of b (a >= 0, b > 0), saturating at INT64_MAX (untrusted shapes: a size check
/// downstream refuses such a buffer).
constexpr int64_t layout_roundup(int64_t a, int64_t b) {
  const int64_t n = a / b + (a % b != 0 ? 1 : 0);
  return n > INT64_MAX / b ? INT64_MAX : n * b;
}

/// The buffer geometry of layout `l` for a compact [rows, cols] matrix. `padded_rows/cols` is TE's allocation shape
/// (kPadded / kSwizzled); `transposed` as in ScaleGeometry. (PlaneSpec::geometry calls it with the plane's facts.)
constexpr ScaleGeometry make_scale_geometry(Layout l, int64_t rows, int64_t cols, int64_t padded_rows, int64_t padded_cols,
                                            bool transposed) {
  ScaleGeometry g;
  g.layout = l;
  g.rows = rows;
  g.cols = cols;
  switch (l) {
    case Layout::kCompact:
      g.buf_rows = rows;
      g.buf_cols = cols;
      break;
    case Layout::kPadded:
    case Layout::kSwizzled:
      g.transposed = transposed;
      g.buf_rows = padded_rows;
      g.buf_cols = padded_cols;
      break;
    case Layout::kSwizzled8x4: {
      g.transposed = transposed;
      const int64_t R = transposed ? cols : rows, C = transposed ? rows : cols;
      g.buf_rows = layout_roundup(R, 8);
      g.buf_cols = layout_roundup(C, 4);
      break;
    }
    case Layout::kDeepGemmPackedUe8m0:
      g.buf_rows = layout_roundup(cols, 4) / 4;
      g.buf_cols = layout_roundup(rows, 4) > INT64_MAX / 4 ? INT64_MAX : layout_roundup(rows, 4) * 4;
      break;
    case Layout::kFbgemmMx4:  // the combined tensor [rows, cols * 17] that holds these scale entries and the codes
      g.buf_rows = rows;
      g.buf_cols = cols > INT64_MAX / kMx4GroupBytes ? INT64_MAX : cols * kMx4GroupBytes;
      break;
  }
  return g;
}

}  // namespace qtc
