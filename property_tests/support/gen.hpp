/// \file gen.hpp
/// \brief Generators that reach the edges: recipes, shapes at and around the block and tile sizes
///        (16, 32, 128 and one tile either side), and input matrices with exact-scale anchors (block amax
///        at elem_max*2^k and one ulp around it, powers of two), E2M1 and FP8 tie points, zero blocks and
///        rows, subnormal and huge values, NaN, Inf and -0.
///
/// A matrix is generated as a small DataSpec (seed and knobs; what RapidCheck shows and shrinks) that
/// `build` expands with a counter-based hash, so any element can be recomputed from (seed, index).
#pragma once
#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "qtc/quantized.hpp"
#include "qtc/tensor.hpp"

namespace qtc {
/// RapidCheck's printer for recipes and dtypes in counterexamples (found by ADL).
void showValue(const Recipe& r, std::ostream& os);
void showValue(DType t, std::ostream& os);
}  // namespace qtc

namespace qtc::prop {

/// A uniform choice in [0, n) (rc::gen::inRange scales its range with the size; this does not).
rc::Gen<int> pick(int n);

// ---------------------------------------------------------------------------------------------------
// Recipes

/// Which recipes a property may draw. Every drawn recipe passes Recipe::validate().
struct RecipeSpace {
  bool nvfp4 = true, mxfp8 = true, fp8_block = true, fp8_tensor = true;
  bool nvfp4_1d = true, nvfp4_2d = true, row_scaled = true, rht = true, fourover6 = true, stochastic = true;
  bool mx_1d = true, mx_2d = true;
  bool block_1d = true, block_2d = true;
  bool te_pyref = true;  ///< te_pyref (NVFP4, FP8) and ocp (MXFP8) profiles besides te
  bool eps = true;       ///< FP8 eps > 0
  bool plane_subsets = true;  ///< rowwise-only and columnwise-only besides both planes
};
rc::Gen<Recipe> gen_recipe(const RecipeSpace& s);

// ---------------------------------------------------------------------------------------------------
// Shapes

/// M or K for a recipe: multiples of 16 for NVFP4 (16..288: 16, 32, 112, 128, 144, 240, 256, 272 ...),
/// any size for the others (1, 15-17, 31-33, 127-129, 255-257 and random), biased to the edges.
rc::Gen<int64_t> gen_dim(RecipeKind k, int64_t max_dim = 272);
/// A row count that is a multiple of `mult` (1..max_tiles tiles).
rc::Gen<int64_t> gen_multiple(int64_t mult, int64_t max_tiles);

// ---------------------------------------------------------------------------------------------------
// Input data

enum Special : uint32_t {
  kNaN = 1u << 0,
  kInf = 1u << 1,
  kNegZero = 1u << 2,
  kPosZero = 1u << 3,
  kSubnormal = 1u << 4,  ///< subnormal of the input type
  kHuge = 1u << 5,       ///< within a few ulps of the input type's largest finite value
};

enum class Anchor : uint8_t {
  kNone,      ///< ordinary values 2^(base_exp - [0, spread]) * [1, 2)
  kTies,      ///< exact power-of-two scales per block; elements on E2M1/FP8 tie points, +-1 ulp
  kAmaxEdge,  ///< tensor and block amax at elem_max*2^k or 2^k, exactly or one ulp either side
};

struct DataSpec {
  uint64_t seed = 1;
  DType dtype = DType::kF32;
  Anchor anchor = Anchor::kNone;
  int base_exp = 0;        ///< ordinary magnitude, and k of the anchors
  int spread = 8;
  int zero_block_pct = 0;  ///< per tile of the recipe's largest block (16x16, 32x32, 128x128 ...)
  int zero_row_pct = 0;
  int special_pct = 0;     ///< per element, drawn from `specials`
  uint32_t specials = 0;
  bool negative_only = false;  ///< every ordinary value negative (one-signed blocks)
};
void showValue(const DataSpec& d, std::ostream& os);

/// Draws a DataSpec for the recipe. `allow_specials` is a mask of Special; NaN/Inf only where passed.
rc::Gen<DataSpec> gen_data(const Recipe& r, uint32_t allow_specials);

/// The matrix a DataSpec describes for recipe r (the recipe decides where the anchors sit).
HostMatrix build(const DataSpec& d, const Recipe& r, int64_t M, int64_t K);

/// Counter-based hash: 64 random bits for (seed, index).
uint64_t hash64(uint64_t seed, uint64_t index);

// ---------------------------------------------------------------------------------------------------
// Classification of inputs (what the tags count).

/// "pow2", "pow2_pm1ulp", "elem_max_pow2", "elem_max_pow2_pm1ulp", "zero", "inf", "nan" or "" for a
/// positive amax against elem_max (ulp of float). Used to prove the generators reached those amaxes.
std::string classify_amax(float a, float elem_max);
/// Tags for the special values present in x ("input_nan", "input_inf", "input_neg_zero",
/// "input_subnormal", "input_huge") plus "zero_row" / "zero_block" found.
std::vector<std::string> classify_input(const HostMatrix& x, const Recipe& r);

}  // namespace qtc::prop
