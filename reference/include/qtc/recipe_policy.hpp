/// \file recipe_policy.hpp
/// \brief The recipe policy's geometry: one function, describe_plane, says everything about one plane of a
///        recipe for a tensor of [M, K] (data shape and element type, scale element type, compact and padded
///        scale shapes, which axis runs along M, amax count, block geometry, layout quirks). The reference
///        quantizers, layouts, checkpoints, sharding, the CUDA host code and `qtc verify` read it; none of them
///        recomputes a shape. (Validation of the recipe itself: Recipe::validate, recipe.cpp.)
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/layout.hpp"
#include "qtc/quantized.hpp"

namespace qtc {

/// Element type of a plane's data bytes.
enum class DataElem : uint8_t {
  kE2M1,  ///< FP4, two per byte, low nibble first
  kE4M3,
  kE5M2,
};

/// Which axis of a stored matrix runs along x's M (rows) axis.
enum class MAxis : uint8_t { kRows, kCols, kNone };

/// Rows x cols of a matrix (scale entries, or data bytes).
struct ScaleShape {
  int64_t rows = 0;
  int64_t cols = 0;
  bool operator==(const ScaleShape&) const = default;
};

/// x's rows [r0, r1) and columns [c0, c1).
struct XRegion {
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  bool operator==(const XRegion&) const = default;
};

/// An entry (row, col) of a matrix.
struct Index2 {
  int64_t row = 0, col = 0;
  bool operator==(const Index2&) const = default;
};

/// Everything about one plane of a recipe for an input of M rows and K columns.
struct PlaneSpec {
  PlaneKind plane = PlaneKind::kRowwise;
  bool requested = false;  ///< the recipe produces this plane (rowwise / columnwise flags)
  int64_t M = 0, K = 0;

  // Data
  DataElem data_elem = DataElem::kE4M3;
  bool data_transposed = false;  ///< stored as [K, M] (x^T); else in x's orientation [M, K]
  int64_t data_rows = 0;         ///< rows of the data matrix
  int64_t data_cols = 0;         ///< bytes per row (FP4: half the elements)
  int64_t data_row_elems = 0;    ///< elements per row
  MAxis data_m_axis = MAxis::kRows;

  // Scales
  bool per_tensor = false;        ///< FP8 tensor: one F32 scale_inv for the whole tensor (a 1x1 matrix)
  ScaleType scale_type = ScaleType::kF32;
  size_t scale_elem_bytes = 4;
  ScaleShape compact;             ///< VECTORS.md shape
  ScaleShape padded;              ///< TE's allocation shape (TE_FORMATS.md §5); also the 128x4-swizzled shape
  MAxis scale_m_axis = MAxis::kNone;  ///< axis of the compact scale matrix along x's M
  bool padded_transposed = false; ///< the padded layout stores the compact matrix transposed (FP8 block 1x128: [kb][i])
  /// The layouts the plane's scales have (bit 1 << Layout): compact and padded for every kind; the cuBLAS 128x4 and
  /// the 8x4 swizzles for NVFP4, MXFP8, MXFP4; DeepGEMM's packing for FP8 block with UE8M0 scales. has_layout() /
  /// layout_refusal() read it, geometry() refuses the others naming the rule.
  uint32_t layouts = 0;
  /// The combined layouts (layout.hpp layout_is_combined: data and scales in one tensor, files only) the plane has
  /// (bit 1 << Layout): FBGEMM's MX4 rows for MXFP4. Not in `layouts`: no scale buffer has them.
  uint32_t combined_layouts = 0;
  bool tiles_transposed = false;  ///< the swizzled layouts tile the transposed matrix (MXFP8 columnwise: row = K index)
  /// x elements one step of a compact scale index spans along M and along K (NVFP4 rowwise: 1 and 16, also
  /// with 16x16 tiles, whose scale is repeated on each of the tile's rows).
  int64_t scale_step_m = 1, scale_step_k = 1;

  // Blocks, in x's coordinates: one scale entry covers block_rows x block_cols elements of x (clipped at the
  // edges). FP8 tensor: the whole tensor.
  int64_t block_rows = 0;
  int64_t block_cols = 0;

  // Amax
  int64_t amax_count = 0;         ///< NVFP4: 1, or M / K when row-scaled; FP8 tensor: 1; else 0
  bool amax_per_line = false;     ///< one amax per data row (row-scaled NVFP4)

  /// Whether the plane's scales have layout `l`.
  bool has_layout(Layout l) const { return (layouts >> static_cast<unsigned>(l) & 1u) != 0; }
  /// Whether a file (a vector, a tensor set) may hold the plane in layout `l`: a scale layout it has, or a combined one.
  bool has_file_layout(Layout l) const { return has_layout(l) || (combined_layouts >> static_cast<unsigned>(l) & 1u) != 0; }
  /// Empty when the plane has layout `l`; else why not, naming the rule (`layout-<name>`) and the kinds that have it
  /// (for a combined layout the plane has in files: that no scale buffer has it, quantize in compact and convert).
  std::string layout_refusal(Layout l) const;
  /// Empty when a file may hold the plane in layout `l` (has_file_layout); else layout_refusal(l).
  std::string file_layout_refusal(Layout l) const { return has_file_layout(l) ? std::string() : layout_refusal(l); }
  /// Where each compact scale entry lives in layout `l` and the buffer's shape (layout.hpp). Throws qtc::Error with
  /// layout_refusal(l) when the plane does not have `l`. FP8 tensor: the 1x1 matrix of its one scale_inv.
  ScaleGeometry geometry(Layout l) const;
  /// The scale buffer's shape in `layout` (geometry(layout)'s buf_rows x buf_cols).
  ScaleShape scale_shape(Layout layout) const {
    const ScaleGeometry g = geometry(layout);
    return {g.buf_rows, g.buf_cols};
  }
  /// Data bytes and scale bytes of the plane in `layout`.
  int64_t data_bytes() const { return data_rows * data_cols; }
  int64_t scale_bytes(Layout layout) const {
    const ScaleShape s = scale_shape(layout);
    return s.rows * s.cols * static_cast<int64_t>(scale_elem_bytes);
  }
  /// Elements per data byte (2: E2M1, low nibble first; 1: FP8) and the value code `code` decodes to, unscaled
  /// (numeric.hpp's decoders: E2M1 / E4M3 / E5M2).
  int elems_per_byte() const { return data_elem == DataElem::kE2M1 ? 2 : 1; }
  float decode(uint8_t code) const;
  /// The code of data element (a, b) of the data matrix (b counts elements; FP4: nibble b % 2 of byte b / 2).
  uint8_t code_at(const uint8_t* data, int64_t a, int64_t b) const {
    if (data_elem != DataElem::kE2M1) return data[a * data_cols + b];
    const uint8_t byte = data[a * data_cols + b / 2];
    return static_cast<uint8_t>(b % 2 == 0 ? byte & 0xF : byte >> 4);
  }
  /// The block of x that element (i, j) of x belongs to in this plane (clipped to [M, K]).
  XRegion block_of(int64_t i, int64_t j) const;
  /// x's coordinates of element (a, b) of the data matrix (FP4: b counts elements, not bytes).
  void data_to_x(int64_t a, int64_t b, int64_t& i, int64_t& j) const;
  /// The block of x that compact scale entry (a, b) covers.
  XRegion scale_block(int64_t a, int64_t b) const;
  /// The compact scale entry that holds the scale of x(i, j) ({0, 0} for FP8 tensor).
  Index2 scale_entry(int64_t i, int64_t j) const {
    if (per_tensor) return {};
    const int64_t am = i / scale_step_m, ak = j / scale_step_k;
    return scale_m_axis == MAxis::kRows ? Index2{am, ak} : Index2{ak, am};
  }
};

/// The description of plane `p` of recipe `r` for an input of [M, K] (M, K >= 0). Pure arithmetic without
/// overflow for any non-negative M and K (a padded extent that does not fit int64 saturates at INT64_MAX); it
/// does not validate the recipe or the shape (Recipe::validate_input does).
PlaneSpec describe_plane(const Recipe& r, PlaneKind p, int64_t M, int64_t K);

/// Whether the recipe's planes carry one global amax for the whole tensor (NVFP4 two-level, FP8 tensor), not one per
/// row or none: what grouping and sharding share across members and shards.
bool one_amax_per_tensor(const Recipe& r);

/// What one VECTORS.md output tensor holds.
enum class TensorRole : uint8_t {
  kData,        ///< <plane>_data: the plane's data bytes
  kScale,       ///< <plane>_scale_inv: the plane's scale matrix (not FP8 tensor)
  kAmax,        ///< amax_<plane>: NVFP4's global amax (one, or one per row / column when row-scaled)
  kScaleInv,    ///< scale_inv: FP8 tensor's one F32 scale_inv
  kTensorAmax,  ///< amax: FP8 tensor's one amax
  kDequant,     ///< dequantized_<plane>: [M, K] F32 (FP8 tensor: rowwise only)
};

/// One output tensor of a recipe for an input of [M, K] (the VECTORS.md table), from the plane's description.
struct TensorSpec {
  std::string_view name;   ///< one of tensor_names()
  TensorRole role = TensorRole::kData;
  PlaneSpec plane;         ///< the description of the plane it belongs to
  std::vector<int64_t> shape;  ///< the compact shape (VECTORS.md)
  int elem_bytes = 1;      ///< bytes per element: 1 (data, E4M3 / E8M0 scales) or 4 (F32 values)
  bool f32 = false;        ///< holds F32 values (FP8 block scales, amaxes, scale_inv, dequantized)
};

/// Every output tensor name of VECTORS.md, in its order.
std::span<const std::string_view> tensor_names();
/// The tensor `name` of recipe `r` for an input of [M, K], or nullopt when `name` is not an output of `r`'s
/// kind (independent of the recipe's rowwise / columnwise flags).
std::optional<TensorSpec> describe_tensor(const Recipe& r, std::string_view name, int64_t M, int64_t K);

/// Element type of a recipe's data (E2M1 for NVFP4, else the recipe's FP8 type).
DataElem data_elem_of(const Recipe& r);
std::string_view data_elem_name(DataElem e);
std::string_view plane_kind_name(PlaneKind p);

}  // namespace qtc
