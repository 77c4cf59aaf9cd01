/// \file hybrid.hpp
/// \brief Hybrid planes (TransformerEngine 2.20's `HybridQuantizer`, tensor/hybrid_tensor.py): the rowwise plane of
///        one recipe and the columnwise plane of another, quantized from the input (`columnwise_source=original`) or
///        from the dequantized rowwise plane (`rowwise_dequantized`); and TE's fused grouped MXFP8 requantization
///        (common/cast/fused_group_requantize.cu: rowwise MXFP8 -> dequantize -> columnwise MXFP8 E4M3), which is
///        the grouped hybrid {mxfp8, mxfp8 e4m3, rowwise_dequantized} with an F32 (or, under fast math, BF16) source.
///
/// TE composes the two sub-quantizers and nothing else: the rowwise quantizer runs alone on x (rowwise usage only),
/// the columnwise quantizer alone on its source (columnwise usage only), each with its own amax and scales. The
/// dequantized rowwise plane is `rowwise_result.dequantize(dtype=tensor.dtype)`: in the input's dtype. The fused
/// kernel keeps it in float (fast math: BF16), which its own test checks bit for bit against nvte_dequantize to F32
/// (BF16) followed by the single-tensor columnwise MXFP8 quantize of every group. Metadata keys: conformance/README.md.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/grouped.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/quantized.hpp"

namespace qtc {

/// Where the columnwise quantizer reads its input (TE `columnwise_source`).
enum class ColumnwiseSource : uint8_t { kOriginal, kRowwiseDequantized };
/// The dtype of the dequantized rowwise plane the columnwise quantizer reads (only with kRowwiseDequantized):
/// x's dtype (TE HybridQuantizer), float (TE's fused requantization) or BF16 (its fast-math path).
enum class SourceDType : uint8_t { kInput, kF32, kBF16 };

/// A hybrid recipe: two recipes, one per plane, and the columnwise source. The sub-recipes' own `rowwise` /
/// `columnwise` flags are ignored: `rowwise` produces the rowwise plane only, `columnwise` the columnwise one.
struct HybridRecipe {
  Recipe rowwise;
  Recipe columnwise;
  ColumnwiseSource source = ColumnwiseSource::kOriginal;
  SourceDType source_dtype = SourceDType::kInput;
  /// Group sizes along M (a grouped tensor: each group quantized as its own tensor); empty: one tensor.
  std::vector<int64_t> group_rows;

  /// TE's fused grouped MXFP8 requantization `nvte_group_requantize` (rowwise MXFP8 of `rowwise_fp8`, TE rule rceil,
  /// columnwise MXFP8 E4M3), dequantized in float (`fast_math`: BF16).
  static HybridRecipe te_group_requantize(Fp8Type rowwise_fp8, bool fast_math, std::vector<int64_t> group_rows);

  /// The sub-recipe of one plane, with only that plane requested.
  Recipe plane_recipe(PlaneKind p) const;
  /// The dtype of the columnwise source for an input of dtype `input` (the input's own dtype under kOriginal).
  DType source_dtype_for(DType input) const;
  /// Throws qtc::Error "hybrid recipe <name>: rule '<id>': <text>" for the first rule of hybrid_rules() broken
  /// (independent of the input); the sub-recipes' own rules first.
  void validate() const;
  std::string_view broken_rule() const;
  /// Throws qtc::Error naming the rule when x cannot be quantized (each sub-recipe's input rules, group sizes).
  void validate_input(DType input, int64_t rows, int64_t cols) const;
  /// "hybrid_<rowwise name>__<columnwise name>[_rdq[_f32|_bf16]][_grouped]".
  std::string name() const;
  /// The metadata of a hybrid vector (conformance/README.md, Hybrid planes): recipe=hybrid, rowwise.* / columnwise.*
  /// (each the sub-recipe's own keys), columnwise_source, columnwise_source_dtype, group_rows.
  std::map<std::string, std::string> to_metadata() const;
  /// Parses that metadata; unknown keys or values throw naming the key; then validate().
  static HybridRecipe from_metadata(const std::map<std::string, std::string>& md);
  /// Whether metadata names a hybrid recipe (recipe=hybrid).
  static bool is_hybrid(const std::map<std::string, std::string>& md);
  bool operator==(const HybridRecipe&) const;
};

/// Every rule HybridRecipe::validate checks: id and text.
std::span<const RecipeRule> hybrid_rules();

/// A hybrid tensor (TE HybridQuantizedTensorStorage): one sub-tensor per plane, each holding only its plane, plus
/// the columnwise source when it is the dequantized rowwise plane.
struct HybridQuantized {
  QuantizedTensor rowwise;     ///< rowwise plane only (its recipe: HybridRecipe::plane_recipe(kRowwise))
  QuantizedTensor columnwise;  ///< columnwise plane only
  std::optional<HostMatrix> source;  ///< the dequantized rowwise plane the columnwise plane was quantized from
};

namespace ref {

/// The hybrid quantizer on one tensor (group_rows ignored): quantize rowwise, [dequantize it to the source dtype],
/// quantize columnwise. `quantize` and `dequantize` are the reference's (ref::quantize / ref::dequantize).
HybridQuantized quantize_hybrid(const MatrixView& x, const HybridRecipe& h);
/// The grouped hybrid quantizer: result[g] = quantize_hybrid(rows of group g) (h.group_rows, or `rows`).
std::vector<HybridQuantized> quantize_hybrid_grouped(const MatrixView& x, const GroupedRows& rows, const HybridRecipe& h);
/// The groups of a hybrid recipe over an input of `m` rows (packed; one group of m rows when group_rows is empty).
GroupedRows hybrid_groups(const HybridRecipe& h, int64_t m, int64_t k);

/// TE's grouped layout of the fused requantization's output (nvte_group_requantize with GEMM-swizzled scales): the
/// columnwise scales of each group, [Mg/32, K] in layout `lo`, one group after another (zero-row groups hold none);
/// the rowwise scales and both data planes are the whole tensor's. Throws qtc::Error naming rule
/// 'hybrid-grouped-layout' unless both planes are MXFP8, every group is a multiple of 128 rows and K of 128 (TE's
/// contract, under which the dense rowwise swizzle is the per-group one), or when `bytes` has the wrong size.
void check_grouped_layout(const HybridRecipe& h, int64_t m, int64_t k, Layout lo);
std::vector<uint8_t> grouped_columnwise_scales_to_compact(const HybridRecipe& h, int64_t m, int64_t k,
                                                         Layout lo, std::span<const uint8_t> bytes);
std::vector<uint8_t> grouped_columnwise_scales_from_compact(const HybridRecipe& h, int64_t m, int64_t k,
                                                           Layout lo, std::span<const uint8_t> compact);

}  // namespace ref
}  // namespace qtc
