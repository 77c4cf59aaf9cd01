/// \file prop_gating.cpp
/// \brief Property 5: the capability gating table (reference/include/qtc/gating.hpp).
///
/// | property             | inputs                                                        | edges |
/// |----------------------|---------------------------------------------------------------|-------|
/// | EveryFeatureHasARow  | every Feature; every recipe's quantizer and GEMM features     | — |
/// | ReasonsAndMonotone   | (SM, cuBLAS, CUDA runtime) pairs, same SM and runtime         | SM 0, 8.9, 9.0, 10.0, 10.3, 10.7, 11.0, 12.x, 13.0; cuBLAS at every threshold ±1 |
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "features.hpp"
#include "gen.hpp"
#include "harness.hpp"
#include "qtc/gating.hpp"

namespace qtc::prop {
namespace {

using gating::Feature;

/// The GEMM features a recipe's operands need (dense and grouped).
std::vector<Feature> gemm_features(const Recipe& r) {
  switch (r.kind()) {
    case RecipeKind::kFP8Tensor: return {Feature::kGemmFp8Tensor, Feature::kGemmGroupedFp8Tensor};
    case RecipeKind::kFP8Block: return {Feature::kGemmFp8Block, Feature::kGemmGroupedFp8Block};
    case RecipeKind::kMXFP8: return {Feature::kGemmMxfp8, Feature::kGemmGroupedMxfp8};
    case RecipeKind::kMXFP4: return {Feature::kGemmMxfp4, Feature::kGemmMxfp4Emulated};
    case RecipeKind::kNVFP4:
      if (r.nvfp4_row_scaled()) return {Feature::kGemmNvfp4RowScaled, Feature::kGemmGroupedNvfp4RowScaled};
      return {Feature::kGemmNvfp4, Feature::kGemmNvfp4Emulated, Feature::kGemmGroupedNvfp4};
  }
  return {};
}

// Guards against: a feature added to the enum without a row (query would index past the table), rows out
// of order or duplicated (one feature answering with another's rule), names that do not round-trip, a
// recipe whose GPU path has no row to gate on (a GPU test that can neither run nor skip with a reason).
TEST(GatingProperty, EveryFeatureHasARow) {
  check_property({"nvfp4", "mxfp8", "fp8_block", "fp8_tensor", "row_scaled", "rht"}, [] {
    const auto rows = gating::table();
    RC_ASSERT(rows.size() == static_cast<size_t>(Feature::kCount));
    std::set<std::string_view> names;
    for (size_t i = 0; i < rows.size(); ++i) {
      RC_ASSERT(static_cast<size_t>(rows[i].feature) == i);
      RC_ASSERT(!rows[i].name.empty());
      RC_ASSERT(!rows[i].requirement.empty());
      RC_ASSERT(!rows[i].source.empty());
      RC_ASSERT(names.insert(rows[i].name).second);
      RC_ASSERT(gating::feature_from_name(rows[i].name) == rows[i].feature);
      RC_ASSERT(gating::feature_name(rows[i].feature) == rows[i].name);
      RC_ASSERT(rows[i].name.starts_with(i < static_cast<size_t>(Feature::kGemmFp8Tensor) ? "quantize." : "gemm."));
    }
    const Recipe r = *gen_recipe(RecipeSpace{});
    tag(recipe_kind_name(r.kind()));
    tag_if(r.nvfp4_row_scaled(), "row_scaled");
    tag_if(r.nvfp4_rht(), "rht");
    for (Feature f : quantize_features(r)) RC_ASSERT(static_cast<size_t>(f) < rows.size());
    for (Feature f : gemm_features(r)) RC_ASSERT(static_cast<size_t>(f) < rows.size());
  });
}

rc::Gen<int> gen_sm() {
  return rc::gen::element(0, 75, 80, 86, 89, 90, 100, 101, 103, 107, 110, 119, 120, 121, 129, 130, 140);
}
rc::Gen<int> gen_cublas() {
  return rc::gen::exec([] {
    const int base = *rc::gen::element(0, 120103, 120800, 120900, 130000, 130100, 130300, 130400, 130500);
    return std::max(0, base + *rc::gen::element(-1, 0, 0, 1));
  });
}

// Guards against: "not supported" without a reason (a skip message that says nothing), a reason that
// does not name its feature, a supported answer that carries a stale reason, a table that flips to
// unsupported when cuBLAS gets newer (a version check written backwards or an upper bound by mistake),
// query throwing on unknown capabilities, and format_table disagreeing with query.
TEST(GatingProperty, ReasonsAndMonotone) {
  check_property({"supported", "not_supported", "cublas_threshold_crossed", "sm_excluded_range", "no_device", "runtime_gated"}, [] {
    gating::Capability a;
    const int sm = *gen_sm();
    a.cc_major = sm / 10;
    a.cc_minor = sm % 10;
    a.cuda_runtime = *rc::gen::element(0, 120800, 120900, 130000);
    a.cublas = *gen_cublas();
    gating::Capability b = a;
    b.cublas = std::max(a.cublas, *gen_cublas());
    const std::string table = gating::format_table(a);
    for (int fi = 0; fi < static_cast<int>(Feature::kCount); ++fi) {
      const Feature f = static_cast<Feature>(fi);
      const gating::Support sa = gating::query(f, a);
      const gating::Support sb = gating::query(f, b);
      const std::string name(gating::feature_name(f));
      for (const auto* s : {&sa, &sb}) {
        if (s->supported) {
          RC_ASSERT(s->reason.empty());
          tag("supported");
        } else {
          tag("not_supported");
          if (s->reason.empty()) RC_FAIL(name + ": not supported without a reason");
          if (s->reason.find(name) == std::string::npos) RC_FAIL(name + ": the reason does not name the feature: " + s->reason);
        }
      }
      tag_if(sm == 0, "no_device");
      tag_if(sm >= 120 && sm <= 129 && !sa.supported, "sm_excluded_range");
      // Monotone in cuBLAS on a fixed card and runtime.
      if (sa.supported && !sb.supported)
        RC_FAIL(name + " is supported with cuBLAS " + gating::cublas_version_string(a.cublas) + " but not with the newer " +
                gating::cublas_version_string(b.cublas) + ": " + sb.reason);
      tag_if(!sa.supported && sb.supported, "cublas_threshold_crossed");
      // Monotone in the CUDA runtime as well.
      gating::Capability c = b;
      c.cuda_runtime = b.cuda_runtime == 0 ? 0 : std::max(b.cuda_runtime, 130000);
      if (sb.supported) RC_ASSERT(gating::query(f, c).supported);
      gating::Capability old_rt = b;
      old_rt.cuda_runtime = 120000;
      tag_if(sb.supported && b.cuda_runtime != 0 && !gating::query(f, old_rt).supported, "runtime_gated");
      // The printed table says the same as query.
      std::istringstream is(table);
      std::string line;
      bool found = false;
      while (std::getline(is, line)) {
        if (line.rfind(name + " ", 0) != 0) continue;
        found = true;
        const std::string rest = line.substr(name.size());
        const auto p = rest.find_first_not_of(' ');
        RC_ASSERT(p != std::string::npos);
        RC_ASSERT(rest.compare(p, 3, sa.supported ? "yes" : "no ") == 0);
      }
      RC_ASSERT(found);
    }
  });
}

}  // namespace
}  // namespace qtc::prop
