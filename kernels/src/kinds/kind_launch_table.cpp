/// \file kind_launch_table.cpp
/// \brief The kernels' table of recipe kinds (kind_launch.hpp): one entry per RecipeKind, in enumerator order, each
///        naming the kind's module (kinds/<kind>_launch.cpp). Checked at compile time (entry i is of kind i, one
///        entry per kind) and at first use (the module an entry points to is of that kind).
#include <array>

#include "kind_launch.hpp"
#include "qtc/kind.hpp"

namespace qtc::cuda::detail {
namespace kind_launch_table {  // named, not anonymous: the unity build shares anonymous namespaces

struct Entry {
  RecipeKind kind;
  const CudaKindModule* module;
};

// One line per kind, in RecipeKind order.
constexpr Entry kLaunchTable[] = {
    {kind_of_options<Nvfp4Options>, &kNvfp4Launch},
    {kind_of_options<Mxfp8Options>, &kMxfp8Launch},
    {kind_of_options<Fp8BlockOptions>, &kFp8BlockLaunch},
    {kind_of_options<Fp8TensorOptions>, &kFp8TensorLaunch},
    {kind_of_options<Mxfp4Options>, &kMxfp4Launch},
};

constexpr bool in_kind_order() {
  for (int i = 0; i < static_cast<int>(std::size(kLaunchTable)); ++i)
    if (static_cast<int>(kLaunchTable[i].kind) != i) return false;
  return true;
}
static_assert(std::size(kLaunchTable) == static_cast<size_t>(kRecipeKindCount),
              "kind_launch_table.cpp: one entry per RecipeKind (per alternative of RecipeOptions)");
static_assert(in_kind_order(), "kind_launch_table.cpp: entry i must be of RecipeKind i (RecipeOptions order)");

}  // namespace kind_launch_table

const CudaKindModule& cuda_kind_module(RecipeKind k) {
  using namespace kind_launch_table;
  static const bool checked = [] {
    for (size_t i = 0; i < std::size(kLaunchTable); ++i)
      QTC_CHECK(kLaunchTable[i].module->kind == kLaunchTable[i].kind, "kernels' kind table: entry ", i,
                " points to the module of kind ", static_cast<int>(kLaunchTable[i].module->kind),
                ": each entry must point to its own kind's module");
    return true;
  }();
  (void)checked;
  const auto i = static_cast<size_t>(k);
  QTC_CHECK(i < std::size(kLaunchTable), "unknown recipe kind ", i, " (the kernels' kind table has ",
            std::size(kLaunchTable), " kinds)");
  return *kLaunchTable[i].module;
}

}  // namespace qtc::cuda::detail
