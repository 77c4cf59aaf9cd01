/// \file native_layout.hpp
/// \brief The buffer layouts a vector's outputs may come in (VECTORS.md, "Native layouts"): `compact` (the
///        VECTORS.md table) or `te` (TransformerEngine's PyTorch buffers as they are, TE_FORMATS.md §5: padded
///        scales, FP8 block 1x128 scales transposed), optionally `swizzled` (NVFP4 / MXFP8 scales in the cuBLAS
///        128x4 order, §6). Everything here works on one output tensor's raw bytes, so any tool (verify, the
///        testing library, the Python module, a writer) can check or produce either layout:
///
///  * layout_from_metadata() reads the metadata keys `layout` / `swizzled` (a bad value throws qtc::Error
///    naming the key);
///  * OutputLayout::find() gives, for one output name of a recipe and an input of M x K, the compact shape,
///    the shape in the requested layout (with the error text for a buffer of the wrong shape), and converts
///    the tensor between the layout and compact (to_compact / from_compact); padding() lists the entries that
///    hold no value (never compared; `--strict-padding` wants zeros there: nonzero_padding());
///  * convert_vector_layout() rewrites every output of a whole vector file into another layout.
///
/// Only the scale tensors (`rowwise_scale_inv`, `columnwise_scale_inv`) differ between the layouts; every other
/// output (data planes, amaxes, FP8 per-tensor's `scale_inv`, `amax` and transposed `columnwise_data` [K, M],
/// dequantized planes) has the same shape and bytes in both.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/quantized.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::ref {

enum class TensorLayout : uint8_t {
  kCompact,  ///< VECTORS.md shapes: no padding, no swizzle
  kTE,       ///< TransformerEngine's buffers (TE_FORMATS.md §5)
  kDeepGemmPackedUe8m0,  ///< FP8 block scales with scale_dtype=ue8m0 as DeepGEMM's
                         ///< `get_mn_major_tma_aligned_packed_ue8m0_tensor` lays them out: four UE8M0 bytes per int32
                         ///< word (scale 4w + b in byte b), MN-major, the MN extent aligned to 4 (16 bytes, TMA):
                         ///< compact [R, C] -> U8 [ceil(C/4), roundup(R, 4) * 4], entry (r, c) at
                         ///< [c / 4][4 r + c % 4]; padding zero (conformance/README.md)
};

/// How a vector's output buffers are laid out.
struct LayoutOptions {
  TensorLayout layout = TensorLayout::kCompact;
  bool swizzled = false;  ///< NVFP4 / MXFP8 scales in the cuBLAS 128x4 order (layout te only)
  bool operator==(const LayoutOptions&) const = default;
};

/// "compact", "te", "deepgemm_packed_ue8m0".
std::string_view layout_name(TensorLayout l);
/// "compact", "te", "te+swizzled" (for messages and report labels).
std::string describe(const LayoutOptions& o);

/// Reads the metadata keys `layout` (`compact`, default, or `te`) and `swizzled` (`0`, default, or `1`; `1`
/// only with layout te). A bad value throws qtc::Error naming the key and the values allowed.
LayoutOptions layout_from_metadata(const std::map<std::string, std::string>& md);
/// Writes the keys: `layout` always, `swizzled` = `1` when set (and removes a stale `swizzled` otherwise).
void layout_to_metadata(const LayoutOptions& o, std::map<std::string, std::string>& md);
/// Throws qtc::Error when `o` does not apply to the recipe: swizzled scales exist for NVFP4 and MXFP8 only.
void check_layout_applies(const LayoutOptions& o, const Recipe& r);

/// The VECTORS.md output tensor names, in the order they are checked.
const std::vector<std::string>& output_tensor_names();

/// One padding entry of a layout buffer that is not zero.
struct PaddingProblem {
  int64_t nonzero = 0;              ///< how many padding elements are not all-zero bytes
  int64_t total = 0;                ///< how many padding elements the buffer has
  std::vector<int64_t> first;       ///< coordinates of the first one, in the buffer's shape
  std::vector<uint8_t> first_bytes;  ///< its bytes (1 or 4, little-endian)
};

/// Where each value of one output tensor sits in a layout, for a recipe and an input of M x K.
class OutputLayout {
 public:
  /// nullopt when `name` is not an output of the recipe (`why`, when given, says so naming the table).
  /// Throws qtc::Error when the options do not apply to the recipe (check_layout_applies).
  static std::optional<OutputLayout> find(std::string_view name, const Recipe& r, int64_t M, int64_t K, const LayoutOptions& o,
                                          std::string* why = nullptr);

  const std::string& name() const { return name_; }
  PlaneKind plane() const { return plane_; }
  bool is_scale() const { return scale_; }
  /// Bytes per element: 4 for F32 tensors, 1 for byte tensors (NVFP4 data: one byte holds two codes).
  int elem_bytes() const { return elem_bytes_; }
  /// "F32" or "U8": the dtype a writer uses.
  const char* dtype() const { return elem_bytes_ == 4 ? "F32" : "U8"; }
  /// The VECTORS.md (compact) shape.
  const std::vector<int64_t>& compact_shape() const { return compact_; }
  /// The shape in the requested layout (what a writer produces).
  const std::vector<int64_t>& shape() const { return shape_; }
  /// Whether a buffer of this shape is accepted: shape(), a 0-d tensor for a [1] one, and for swizzled MXFP8
  /// columnwise scales also the transposed 2-D shape of the matrix the swizzle tiles ([roundup(K,128),
  /// roundup(ceil(M/32),4)]): the swizzled bytes are one tile sequence either way.
  bool accepts_shape(const std::vector<int64_t>& got) const;
  /// The message for a buffer of shape `got` that is not accepted: expected shape, layout and the other layout's
  /// shape, e.g. "tensor 'rowwise_scale_inv' has shape [16, 3], expected [128, 4] (layout=te expects TE's padded
  /// shape; compact is [16, 3]) for x of shape [16, 48] (recipe nvfp4)".
  std::string shape_error(const std::vector<int64_t>& got) const;

  int64_t compact_elements() const;
  int64_t elements() const;  ///< elements of the layout buffer (padding included)
  /// Flat element index in the layout buffer of the compact element at flat index `c`.
  int64_t layout_index(int64_t compact_index) const;
  /// Coordinates of flat element `i` in `shape` (the file's shape, or shape() when empty).
  static std::vector<int64_t> coords(int64_t i, const std::vector<int64_t>& shape);
  /// "[a, b]" text of coordinates.
  static std::string coords_text(const std::vector<int64_t>& c);
  /// True when the layout is the compact one for this tensor (no padding, identity order).
  bool is_identity() const { return identity_; }

  /// Layout buffer -> compact bytes. Throws qtc::Error naming the expected size when `bytes` has another size.
  std::vector<uint8_t> to_compact(std::span<const uint8_t> bytes) const;
  /// Compact bytes -> layout buffer, every padding byte set to `pad` (TE's swizzle writes zeros; 0 is the default).
  std::vector<uint8_t> from_compact(std::span<const uint8_t> compact, uint8_t pad = 0) const;
  /// One flag per layout element: true where no compact value is stored.
  std::vector<bool> padding_mask() const;
  /// The padding elements of a layout buffer that are not zero (nullopt when all are zero or there is none).
  /// `file_shape` names coordinates in the buffer's own shape (default shape()).
  std::optional<PaddingProblem> nonzero_padding(std::span<const uint8_t> bytes, const std::vector<int64_t>& file_shape = {}) const;

 private:
  std::string name_;
  PlaneKind plane_ = PlaneKind::kRowwise;
  bool scale_ = false;
  bool identity_ = true;
  int elem_bytes_ = 1;
  std::vector<int64_t> compact_, shape_, alt_shape_;
  Recipe recipe_;
  LayoutOptions opts_;
  int64_t M_ = 0, K_ = 0;
  PlaneSpec spec_;  ///< describe_plane(recipe_, plane_, M_, K_)
};

/// Rewrites every output tensor of a vector (recipe, x and the current layout read from its metadata) into the
/// layout `to`, padding filled with `pad`, and sets the metadata keys. Throws qtc::Error (naming the tensor and
/// the expected shape) when a tensor does not have the shape its current layout requires.
io::File convert_vector_layout(const io::File& f, const LayoutOptions& to, uint8_t pad = 0);

}  // namespace qtc::ref
