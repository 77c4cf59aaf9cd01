/// \file cpu_only_check.cpp
/// \brief Links qtc::reference alone (C++17, no GoogleTest): a recipe parses and names itself.
#include <qtc/recipe.hpp>

#include <cstdio>

int main() {
  const qtc::Recipe r = qtc::Recipe::from_metadata({{"recipe", "nvfp4"}, {"tile", "16x16"}});
  const bool ok = r.nvfp4_or_null() != nullptr && r.is_2d() && r == r;
  std::printf("%s: %s\n", r.name().c_str(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
