/// \file native_layout.hpp
/// \brief The buffer layouts a vector's outputs may come in (VECTORS.md, "Native layouts"; conformance/README.md,
///        "Scale layouts"): one qtc::Layout value (layout.hpp): `compact` (the VECTORS.md table), `te`
///        (TransformerEngine's PyTorch buffers as they are, TE_FORMATS.md §5: padded scales, FP8 block 1x128 scales
///        transposed), the cuBLAS 128x4 swizzle (`layout=te` + `swizzled=1` in metadata, §6), FlashInfer's 8x4
///        swizzle (`layout=swizzled_8x4`) and DeepGEMM's packed UE8M0 words. Everything here works on one output
///        tensor's raw bytes, so any tool (verify, the testing library, the Python module, a writer) can check or
///        produce any layout:
///
///  * layout_from_metadata() / layout_to_metadata(): the one mapping between the metadata keys and the value (a bad
///    value throws qtc::Error naming the key);
///  * OutputLayout::find() gives, for one output name of a recipe and an input of M x K, the compact shape,
///    the shape in the requested layout (with the error text for a buffer of the wrong shape), and converts
///    the tensor between the layout and compact (to_compact / from_compact) through the plane's ScaleGeometry;
///    padding() lists the entries that hold no value (never compared; `--strict-padding` wants zeros there:
///    nonzero_padding());
///  * convert_vector_layout() rewrites every output of a whole vector file into another layout.
///
/// In the scale layouts only the scale tensors (`rowwise_scale_inv`, `columnwise_scale_inv`) differ; every other
/// output (data planes, amaxes, FP8 per-tensor's `scale_inv`, `amax` and transposed `columnwise_data` [K, M],
/// dequantized planes) has the same shape and bytes in all. A combined layout (layout_is_combined: FBGEMM's MX4 rows,
/// `layout=fbgemm_mx4`) keeps a plane's scales inside its data tensor: `<plane>_data` is the packed tensor
/// (OutputLayout::combines_scales) and `<plane>_scale_inv` has no tensor of its own (OutputLayout::carrier names the
/// data tensor its entries live in); outputs_to_compact / outputs_to_layout convert whole tensor sets.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/layout.hpp"
#include "qtc/quantized.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::ref {

/// The layout of a vector's scale buffers: qtc::Layout (layout.hpp), one value; qtc::layout_name / layout_from_name
/// give its one name.
using ::qtc::Layout;
using ::qtc::layout_name;

/// Reads the metadata keys `layout` (`compact`, default; `te`; `swizzled_8x4`; `deepgemm_packed_ue8m0`; or any
/// other name of layout.hpp's table) and `swizzled` (`0`, default, or `1`; `1` only with layout te, and then the
/// value is Layout::kSwizzled, the cuBLAS 128x4 order, as every committed vector and TE dump writes it). A bad value
/// throws qtc::Error naming the key and the values allowed.
Layout layout_from_metadata(const std::map<std::string, std::string>& md);
/// Writes the keys: `layout` always (kSwizzled as `layout=te` + `swizzled=1`, the form above), and removes a stale
/// `swizzled` for every other layout.
void layout_to_metadata(Layout l, std::map<std::string, std::string>& md);
/// Throws qtc::Error naming the rule when a file cannot hold the recipe's planes in layout `l`
/// (PlaneSpec::file_layout_refusal: a scale layout the planes lack, or fbgemm_mx4 for a kind other than MXFP4).
void check_layout_applies(Layout l, const Recipe& r);

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
  static std::optional<OutputLayout> find(std::string_view name, const Recipe& r, int64_t M, int64_t K, Layout l,
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
  /// A combined layout's scale tensor: the name of the data tensor whose bytes hold its entries (shape(), elements(),
  /// layout_index() and to_compact() are then that tensor's); empty otherwise. Such a tensor is never a file's own.
  const std::string& carrier() const { return carrier_; }
  /// A combined layout's data tensor: it holds the plane's scale entries too (`<plane>_scale_inv`, whose
  /// OutputLayout has carrier() == name()).
  bool combines_scales() const { return combines_; }
  /// The message for a file tensor `<plane>_scale_inv` under a combined layout (naming the rule and the carrier).
  std::string carried_error() const;

  /// Layout buffer -> compact bytes. Throws qtc::Error naming the expected size when `bytes` has another size.
  std::vector<uint8_t> to_compact(std::span<const uint8_t> bytes) const;
  /// Compact bytes -> layout buffer, every padding byte set to `pad` (TE's swizzle writes zeros; 0 is the default).
  /// A combined data tensor's scale bytes are `pad` too until its scales are written in (write_into); a carried scale
  /// tensor has no buffer of its own (throws naming the carrier).
  std::vector<uint8_t> from_compact(std::span<const uint8_t> compact, uint8_t pad = 0) const;
  /// Writes the compact bytes into their places of a layout buffer of elements() elements (for a carried scale
  /// tensor: its carrier's buffer), leaving every other byte as it is.
  void write_into(std::span<uint8_t> buffer, std::span<const uint8_t> compact) const;
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
  bool combines_ = false;
  std::string carrier_;
  int elem_bytes_ = 1;
  std::vector<int64_t> compact_, shape_, alt_shape_;
  Recipe recipe_;
  Layout layout_ = Layout::kCompact;
  int64_t M_ = 0, K_ = 0;
  PlaneSpec spec_;      ///< describe_plane(recipe_, plane_, M_, K_)
  ScaleGeometry geom_;  ///< spec_.geometry(layout_) (scale tensors)
};

/// Output tensors of a recipe for an input of [M, K] in layout `from` -> compact, in their order; a combined data
/// tensor gives its data and then its scale tensor. Throws qtc::Error naming the tensor for a name that is no output
/// (the recipe policy's table), a wrong shape (shape_error) or a scale tensor that the layout keeps inside its data
/// tensor (carried_error).
std::vector<io::Tensor> outputs_to_compact(const std::vector<io::Tensor>& in, const Recipe& r, int64_t M, int64_t K, Layout from);
/// Compact output tensors -> layout `to` (padding `pad`), in their order; under a combined layout a plane's scale
/// tensor goes into its data tensor, so both must be present (else qtc::Error naming the missing one).
std::vector<io::Tensor> outputs_to_layout(const std::vector<io::Tensor>& compact, const Recipe& r, int64_t M, int64_t K, Layout to,
                                          uint8_t pad = 0);

/// Rewrites every output tensor of a vector (recipe, x and the current layout read from its metadata) into the
/// layout `to`, padding filled with `pad`, and sets the metadata keys. Throws qtc::Error (naming the tensor and
/// the expected shape) when a tensor does not have the shape its current layout requires.
io::File convert_vector_layout(const io::File& f, Layout to, uint8_t pad = 0);

}  // namespace qtc::ref
