/// \file test_kind_table.cpp
/// \brief The table of recipe kinds (qtc/kind.hpp): one module per RecipeKind, in enumerator order, with unique names
///        that metadata and recipe_kind_name agree on, and each module's metadata mapping closed over its own keys.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "qtc/kind.hpp"
#include "qtc/recipe.hpp"

namespace qtc {
namespace {

TEST(KindTable, OneModulePerKindInEnumeratorOrder) {
  const auto table = kind_table();
  ASSERT_EQ(static_cast<int>(table.size()), kRecipeKindCount);
  std::set<std::string_view> names, titles;
  for (int i = 0; i < kRecipeKindCount; ++i) {
    const KindInfo* k = table[static_cast<size_t>(i)];
    ASSERT_NE(k, nullptr) << "entry " << i;
    EXPECT_EQ(static_cast<int>(k->kind), i) << "entry " << i << " is the module of '" << k->name << "'";
    EXPECT_EQ(&kind_info(static_cast<RecipeKind>(i)), k);
    EXPECT_EQ(find_kind(k->name), k) << k->name;
    EXPECT_EQ(recipe_kind_name(k->kind), k->name);
    EXPECT_TRUE(names.insert(k->name).second) << "two kinds named '" << k->name << "'";
    EXPECT_TRUE(titles.insert(k->title).second) << "two kinds titled '" << k->title << "'";
    EXPECT_EQ(static_cast<int>(k->default_options().index()), i) << k->name << ": default options of another kind";
  }
  EXPECT_EQ(find_kind("nvfp5"), nullptr);
}

TEST(KindTable, MetadataOfTheDefaultsRoundTripsThroughTheModuleKeys) {
  const std::set<std::string> common = {"qtc.schema", "recipe", "profile", "rowwise", "columnwise"};
  for (const KindInfo* k : kind_table()) {
    const Recipe r = Recipe::of(k->default_options());
    EXPECT_EQ(r.kind(), k->kind);
    const auto md = r.to_metadata();
    EXPECT_EQ(md.at("recipe"), k->name);
    for (const auto& [key, value] : md) {
      if (common.count(key) != 0) continue;
      bool own = false;
      for (std::string_view mk : k->metadata_keys) own = own || mk == key;
      EXPECT_TRUE(own) << k->name << " writes key '" << key << "' that is not among its metadata_keys";
    }
    EXPECT_EQ(Recipe::from_metadata(md), r) << k->name;
    EXPECT_EQ(r.name().rfind(k->name_of(r.options()), 0), 0u) << r.name();
  }
}

TEST(KindTable, BlockGeometryComesFromTheModule) {
  for (const KindInfo* k : kind_table()) {
    const Recipe r = Recipe::of(k->default_options());
    EXPECT_EQ(r.block_cols(), k->block_cols(r.options())) << k->name;
    EXPECT_EQ(r.block_cols() == 0, k->per_tensor_scale) << k->name << ": no scale blocks exactly when one scale per tensor";
    EXPECT_EQ(r.is_2d(), k->is_2d(r.options())) << k->name;
  }
  EXPECT_EQ(kind_info(RecipeKind::kNVFP4).block_cols(Recipe().options()), 16);
}

}  // namespace
}  // namespace qtc
