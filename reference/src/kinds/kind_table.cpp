/// \file kind_table.cpp
/// \brief The table of recipe kinds (qtc/kind.hpp): one entry per RecipeKind, in enumerator order, each naming the
///        kind's module (kinds/<kind>_kind.cpp). Checked twice: at compile time every entry's kind is its index and
///        the table has one entry per alternative of RecipeOptions; at first use (and in test_kind_table) the module
///        an entry points to is of that kind.
#include <array>

#include "kind_module.hpp"

namespace qtc {

namespace ref::detail {
namespace kind_table_impl {  // named, not anonymous: the unity build shares anonymous namespaces

struct Entry {
  RecipeKind kind;
  const KindModule* module;
};

// One line per kind, in RecipeKind order (adding a kind: its options alternative, its module file, a line here).
constexpr Entry kTable[] = {
    {kind_of_options<Nvfp4Options>, &kNvfp4Module},
    {kind_of_options<Mxfp8Options>, &kMxfp8Module},
    {kind_of_options<Fp8BlockOptions>, &kFp8BlockModule},
    {kind_of_options<Fp8TensorOptions>, &kFp8TensorModule},
    {kind_of_options<Mxfp4Options>, &kMxfp4Module},
};

constexpr bool table_in_kind_order() {
  for (int i = 0; i < static_cast<int>(std::size(kTable)); ++i)
    if (static_cast<int>(kTable[i].kind) != i) return false;
  return true;
}
static_assert(std::size(kTable) == static_cast<size_t>(kRecipeKindCount),
              "kind_table.cpp: one entry per RecipeKind (per alternative of RecipeOptions)");
static_assert(table_in_kind_order(), "kind_table.cpp: entry i must be of RecipeKind i (RecipeOptions order)");

/// The modules in table order, each checked against its entry once.
const std::array<const KindModule*, std::size(kTable)>& modules() {
  static const auto v = [] {
    std::array<const KindModule*, std::size(kTable)> out{};
    for (size_t i = 0; i < std::size(kTable); ++i) {
      const KindModule* m = kTable[i].module;
      QTC_CHECK(m->info.kind == kTable[i].kind, "kind table: entry ", i, " points to the module of kind ",
                static_cast<int>(m->info.kind), " ('", m->info.name, "'): each entry must point to its own kind's module");
      out[i] = m;
    }
    return out;
  }();
  return v;
}

}  // namespace kind_table_impl

const KindModule& kind_module(RecipeKind k) {
  using namespace kind_table_impl;
  const auto i = static_cast<size_t>(k);
  QTC_CHECK(i < std::size(kTable), "unknown recipe kind ", i, " (the kind table has ", std::size(kTable), " kinds)");
  return *modules()[i];
}

}  // namespace ref::detail

const KindInfo& kind_info(RecipeKind k) { return ref::detail::kind_module(k).info; }

std::span<const KindInfo* const> kind_table() {
  static const auto v = [] {
    std::array<const KindInfo*, kRecipeKindCount> out{};
    for (int i = 0; i < kRecipeKindCount; ++i) out[static_cast<size_t>(i)] = &kind_info(static_cast<RecipeKind>(i));
    return out;
  }();
  return v;
}

const KindInfo* find_kind(std::string_view name) {
  for (const KindInfo* k : kind_table())
    if (k->name == name) return k;
  return nullptr;
}

}  // namespace qtc
