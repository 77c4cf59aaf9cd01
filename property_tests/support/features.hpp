/// \file features.hpp
/// \brief Which gating rows (gating.hpp) a recipe's quantizer needs: what a GPU test of that recipe must
///        skip on when the table says the card cannot run it.
#pragma once
#include <vector>

#include "qtc/gating.hpp"
#include "qtc/recipe.hpp"

namespace qtc::prop {

inline std::vector<gating::Feature> quantize_features(const Recipe& r) {
  using gating::Feature;
  switch (r.kind()) {
    case RecipeKind::kFP8Tensor: return {Feature::kQuantizeFp8Tensor};
    case RecipeKind::kFP8Block: return {Feature::kQuantizeFp8Block};
    case RecipeKind::kMXFP8: return {Feature::kQuantizeMxfp8};
    case RecipeKind::kMXFP4: return {Feature::kQuantizeMxfp4};
    case RecipeKind::kNVFP4: {
      std::vector<Feature> f{Feature::kQuantizeNvfp4};
      if (r.nvfp4_row_scaled()) f.push_back(Feature::kQuantizeNvfp4RowScaled);
      if (r.nvfp4_rht()) f.push_back(Feature::kQuantizeNvfp4Rht);
      return f;
    }
  }
  return {};
}

}  // namespace qtc::prop
