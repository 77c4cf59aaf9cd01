/// \file kind.hpp
/// \brief The recipe kinds as a checked table: one module per kind (reference/src/kinds/<kind>_kind.cpp), listed in
///        reference/src/kinds/kind_table.cpp in RecipeKind order (a static_assert and test_kind_table check that every
///        enumerator has exactly one entry whose .kind is its index). Code that needs a property of a kind looks it up
///        here instead of switching on RecipeKind; adding a kind adds its module and one line of the table.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "qtc/recipe.hpp"

namespace qtc {

/// The RecipeKind of an options alternative: its index in RecipeOptions (a module names its kind by its options type).
template <typename Options>
inline constexpr RecipeKind kind_of_options = static_cast<RecipeKind>(RecipeOptions(std::in_place_type<Options>).index());

/// Number of recipe kinds (alternatives of RecipeOptions).
inline constexpr int kRecipeKindCount = static_cast<int>(std::variant_size_v<RecipeOptions>);

struct MetadataReader;
struct ProfileRules;  // profile.hpp  // reference/src/kinds/kind_module.hpp: typed access to the metadata map

/// The text of a float as metadata and names write it (shortest round trip).
std::string float_text(float v);
/// "e4m3" or "e5m2".
const char* fp8_type_text(Fp8Type t);

/// One recipe kind's module at the reference layer: its names, metadata keys and mapping, block geometry and the
/// properties other code asks about. Quantizers and dequantizers are the module's too (reference-internal:
/// reference/src/kinds/kind_module.hpp); the CUDA launchers are its module at the kernels layer.
struct KindInfo {
  RecipeKind kind;
  std::string_view name;   ///< the metadata value of key `recipe` (recipe_kind_name): "nvfp4", "fp8_block", ...
  std::string_view title;  ///< how messages name the kind: "NVFP4", "FP8 block", ...
  std::span<const std::string_view> metadata_keys;  ///< its parameter keys (VECTORS.md), beyond the common ones
  bool e2m1_data;             ///< data is E2M1 codes, two per byte (else one FP8 byte per element)
  bool e8m0_scales;           ///< block scales are E8M0 bytes (MX formats)
  bool per_tensor_scale;      ///< one scale for the tensor: no scale blocks, no scale layout (FP8 tensor)
  bool global_amax;           ///< its quantizer takes a global amax from outside (quantize_with_amax)
  bool plane_amax;            ///< each plane carries its own amax tensor (amax_rowwise / amax_columnwise: NVFP4)
  bool columnwise_transposed; ///< the columnwise plane's data is x^T (else it keeps x's orientation: MXFP8)
  bool fp8_scaling_options;   ///< holds fp8_dtype, pow2_scales and eps (FP8 block and FP8 tensor)
  int input_rows_multiple;    ///< row slices of its tensors fall on multiples of this (NVFP4: 16, §1.1; else 1)
  /// Its default options (the metadata defaults).
  RecipeOptions (*default_options)();
  /// Element block along a plane row (16, 32, 128; 0 for one scale per tensor) and whether blocks are 2D tiles.
  int (*block_cols)(const RecipeOptions&);
  bool (*is_2d)(const RecipeOptions&);
  /// The kind's part of Recipe::name() ("nvfp4_1x16", "mxfp8_e4m3_rceil", ...; profile and planes are appended).
  std::string (*name_of)(const RecipeOptions&);
  /// Its parameter keys into `md`, and its options from metadata (keys of other kinds are refused before).
  void (*to_metadata)(const RecipeOptions&, std::map<std::string, std::string>& md);
  RecipeOptions (*from_metadata)(const MetadataReader& m);
  /// The variants `qtc conform` generates under profile `pr` (candidates: conform drops those validate() refuses;
  /// nothing where the profile does not define the kind).
  void (*conform_variants)(const ProfileRules& pr, std::vector<Recipe>& out);
  /// Its data takes any shape, odd row lengths included (E2M1 two per byte, a half-filled last byte): conform adds
  /// odd shapes.
  bool conform_odd_shapes;
  /// Why the error bound (error_bound.hpp) does not hold for an element whose global amax is `amax` (empty: it
  /// does); nullptr for a kind whose dequantization always inverts its quantization's scaling.
  std::string (*bound_exempt)(const Recipe& r, double amax);
};

/// The module of kind `k`; every RecipeKind has one.
const KindInfo& kind_info(RecipeKind k);
/// The module of a recipe's kind.
inline const KindInfo& kind_info(const Recipe& r) { return kind_info(r.kind()); }
/// Every module, in RecipeKind order.
std::span<const KindInfo* const> kind_table();
/// The module whose name is `name`, or nullptr.
const KindInfo* find_kind(std::string_view name);

}  // namespace qtc
