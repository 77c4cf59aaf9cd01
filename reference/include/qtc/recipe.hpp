/// \file recipe.hpp
/// \brief A quantization recipe is a value: kind, parameters, profile, requested planes.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "qtc/tensor.hpp"

namespace qtc {

enum class RecipeKind : uint8_t { kNVFP4, kMXFP8, kFP8Block, kFP8Tensor };

/// A profile names every bit-level choice that implementations make differently (VECTORS.md, Profiles).
enum class Profile : uint8_t {
  kTE,       ///< TransformerEngine's CUDA kernels (default)
  kTEPyRef,  ///< TE's pure-PyTorch / Python test references: -0.0 -> code 0, NaN propagates into amax,
             ///< FP8 scale 0 for amax = +inf (TE_FORMATS.md §1.6, §3.2)
  kOCP,      ///< OCP MX v1.0 (MXFP8 only): floor scale rule, NaN/Inf block -> NaN scale
  kTorchAO,  ///< torchao 0.18.0 `nvfp4_quantize` (1x16, with or without per-tensor scale) and `to_mx`
             ///< (rceil, ocp_floor = FLOOR, ceil, even); every rule in profile.hpp
};

enum class Fp8Type : uint8_t { kE4M3, kE5M2 };
/// MXFP8 E8M0 scale rule: rceil (cuBLAS/TE; torchao RCEIL), ocp_floor (OCP MX v1.0; torchao FLOOR),
/// ceil and even (torchao ScaleCalculationMode CEIL and EVEN, as its `to_mx` computes them).
enum class MxScaleRule : uint8_t { kRceil, kOcpFloor, kCeil, kEven };
enum class ErrMode : uint8_t { kMAE, kMSE };

// The options of each recipe kind, and only those: a recipe is one of these alternatives plus its profile and
// the planes it produces (Recipe::options, Recipe::of). The defaults are the metadata defaults (VECTORS.md).
struct Nvfp4Options {
  bool tile_2d = false;  ///< 16x16 blocks (else 1x16)
  bool row_scaled = false;
  bool rht = false;
  bool fourover6 = false;
  ErrMode fourover6_err = ErrMode::kMAE;
  int e4m3_max = 448;
  bool stochastic = false;
  uint64_t seed = 0;
  uint16_t rht_sign_mask = 0xD7E8;
  bool per_tensor_scale = true;
  bool operator==(const Nvfp4Options&) const = default;
};
struct Mxfp8Options {
  Fp8Type fp8 = Fp8Type::kE4M3;
  MxScaleRule scale_rule = MxScaleRule::kRceil;
  bool tile_2d = false;  ///< 32x32 blocks (else 1x32 / 32x1)
  bool operator==(const Mxfp8Options&) const = default;
};
struct Fp8BlockOptions {
  Fp8Type fp8 = Fp8Type::kE4M3;
  bool tile_2d = false;  ///< 128x128 blocks (else 1x128 / 128x1)
  bool pow2_scales = false;
  float eps = 0.0f;
  bool operator==(const Fp8BlockOptions&) const = default;
};
struct Fp8TensorOptions {
  Fp8Type fp8 = Fp8Type::kE4M3;
  bool pow2_scales = false;
  float eps = 0.0f;
  bool operator==(const Fp8TensorOptions&) const = default;
};
/// One alternative per recipe kind, in RecipeKind order.
using RecipeOptions = std::variant<Nvfp4Options, Mxfp8Options, Fp8BlockOptions, Fp8TensorOptions>;

/// One rule of the recipe policy that Recipe::validate checks: a stable id (quoted in the error) and what it says.
struct RecipeRule {
  std::string_view id;
  std::string_view text;
};
/// Every rule Recipe::validate checks, in the order it checks them.
std::span<const RecipeRule> recipe_rules();

/// A recipe value. Its fields mirror the alternatives above so that existing code (and the CUDA kernels'
/// host code) can read them; options() is the alternative of its kind, and validate() rejects, naming the
/// rule, any field set that its kind's alternative does not have.
struct Recipe {
  RecipeKind kind = RecipeKind::kNVFP4;
  Profile profile = Profile::kTE;
  bool rowwise = true;     ///< produce the rowwise plane
  bool columnwise = true;  ///< produce the columnwise plane

  // NVFP4
  bool tile_2d = false;        ///< 16x16 blocks (else 1x16)
  bool row_scaled = false;     ///< one global amax per row (per column for the columnwise plane)
  bool rht = false;            ///< columnwise plane of RHT(x^T); bf16 input only
  bool fourover6 = false;      ///< per-block choice of map-to-4 / map-to-6
  ErrMode fourover6_err = ErrMode::kMAE;
  int e4m3_max = 448;          ///< 448, or 256 with 4over6
  bool stochastic = false;     ///< stochastic E2M1 rounding from the counter-based source (rng.hpp)
  uint64_t seed = 0;           ///< key of the random source for stochastic rounding
  uint16_t rht_sign_mask = 0xD7E8;  ///< bit i set <=> sign_i = -1
  bool per_tensor_scale = true;  ///< two-level scaling; false: block scales only (torchao, metadata per_tensor_scale=0)

  // MXFP8, FP8 block, FP8 tensor
  Fp8Type fp8 = Fp8Type::kE4M3;
  MxScaleRule scale_rule = MxScaleRule::kRceil;  ///< MXFP8
  bool mx_2d = false;          ///< MXFP8 32x32 blocks
  bool block_2d = false;       ///< FP8 block: 128x128 (else 1x128)
  bool pow2_scales = false;    ///< FP8 block / tensor: scale rounded down to a power of two
  float eps = 0.0f;            ///< FP8 block / tensor: amax clamped to at least eps

  /// The one validation of the recipe policy: throws qtc::Error "recipe <name>: rule '<id>': <text>" for the
  /// first rule of recipe_rules() that this recipe breaks (independent of the input).
  void validate() const;
  /// The id of the first rule this recipe breaks, or an empty view when it is valid.
  std::string_view broken_rule() const;
  /// This recipe's kind with only that kind's options.
  RecipeOptions options() const;
  /// The recipe of one alternative (its kind follows from it): no other kind's option can be set.
  static Recipe of(const RecipeOptions& options, Profile profile = Profile::kTE, bool rowwise = true, bool columnwise = true);
  /// Throws qtc::Error naming the rule when the input cannot be quantized with this recipe.
  void validate_input(DType input, int64_t rows, int64_t cols) const;
  /// Short stable name, e.g. "nvfp4_1x16", "nvfp4_16x16_4over6mse256", "mxfp8_e4m3_rceil", "fp8block_128x128_e5m2_pow2".
  std::string name() const;
  /// The VECTORS.md metadata of this recipe (recipe, profile and parameter keys).
  std::map<std::string, std::string> to_metadata() const;
  /// Parses VECTORS.md metadata. Unknown recipe or parameter values throw, naming the key.
  static Recipe from_metadata(const std::map<std::string, std::string>& md);

  /// Element block along the row (16, 32 or 128) and block height (1 or the tile).
  int block_cols() const;
  int block_rows() const;
};

std::string_view profile_name(Profile p);
std::string_view recipe_kind_name(RecipeKind k);
float fp8_max(Fp8Type t);

}  // namespace qtc
