/// \file vector_layout.cpp
/// \brief VECTORS.md `layout`: output shapes per layout, and layout=te vectors rewritten to compact with the
///        reference's layout functions (ref::unswizzle, ref::to_compact).
#include "qtc/vector_layout.hpp"

#include <algorithm>

#include "qtc/error.hpp"
#include "qtc/layouts.hpp"

namespace qtc::conformance {

namespace {

int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // no overflow at 2^63 - 1 (issue 14)

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool is_scale(const std::string& n) { return n == "rowwise_scale_inv" || n == "columnwise_scale_inv"; }

}  // namespace

VectorLayout VectorLayout::from_metadata(const std::map<std::string, std::string>& md, const Recipe& r) {
  VectorLayout l;
  if (auto it = md.find("layout"); it != md.end()) {
    QTC_CHECK(it->second == "compact" || it->second == "te", "metadata key 'layout' has value '", it->second,
              "'; expected compact or te (VECTORS.md, Native layouts)");
    l.te = it->second == "te";
  }
  if (auto it = md.find("swizzled"); it != md.end()) {
    QTC_CHECK(it->second == "0" || it->second == "1", "metadata key 'swizzled' has value '", it->second,
              "'; expected 0 or 1 (VECTORS.md, Native layouts)");
    l.swizzled = it->second == "1";
  }
  QTC_CHECK(!l.swizzled || l.te, "metadata key 'swizzled' = 1 needs layout = te (VECTORS.md, Native layouts)");
  QTC_CHECK(!l.swizzled || r.kind == RecipeKind::kNVFP4 || r.kind == RecipeKind::kMXFP8, "metadata key 'swizzled' = 1: recipe ",
            recipe_kind_name(r.kind), " has no swizzled scales (NVFP4 and MXFP8 only, TE_FORMATS.md §6)");
  return l;
}

void VectorLayout::to_metadata(std::map<std::string, std::string>& md) const {
  md.erase("layout");
  md.erase("swizzled");
  if (!te) return;
  md["layout"] = "te";
  if (swizzled) md["swizzled"] = "1";
}

std::string VectorLayout::name() const { return !te ? "compact" : swizzled ? "te (swizzled)" : "te"; }

std::vector<int64_t> output_shape(const std::string& name, const Recipe& r, int64_t M, int64_t K, const VectorLayout& layout) {
  const bool nv = r.kind == RecipeKind::kNVFP4, mx = r.kind == RecipeKind::kMXFP8, ten = r.kind == RecipeKind::kFP8Tensor;
  const std::string rk(recipe_kind_name(r.kind));
  auto no = [&]() -> std::vector<int64_t> {
    QTC_FAIL("tensor '", name, "' is not an output of recipe ", rk, " (VECTORS.md, Tensors)");
  };
  if (name == "rowwise_data") return nv ? std::vector<int64_t>{M, cdiv(K, 2)} : std::vector<int64_t>{M, K};
  if (name == "columnwise_data") {
    if (nv) return {K, cdiv(M, 2)};
    return mx ? std::vector<int64_t>{M, K} : std::vector<int64_t>{K, M};
  }
  if (is_scale(name)) {
    if (ten) return no();
    const PlaneKind p = name[0] == 'r' ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
    const ref::ScaleShape s = layout.te ? ref::padded_scale_shape(r, p, M, K) : ref::compact_scale_shape(r, p, M, K);
    return {s.rows, s.cols};
  }
  if (name == "amax_rowwise" || name == "amax_columnwise") {
    if (!nv) return no();
    return {r.row_scaled ? (name == "amax_rowwise" ? M : K) : 1};
  }
  if (name == "scale_inv" || name == "amax") return ten ? std::vector<int64_t>{1} : no();
  if (name == "dequantized_rowwise" || name == "dequantized_columnwise") {
    if (ten && name == "dequantized_columnwise") return no();
    return {M, K};
  }
  return no();
}

void convert_to_compact(io::File& f) {
  std::map<std::string, std::string> recipe_md = f.metadata;  // the layout keys are not recipe parameters
  recipe_md.erase("layout");
  recipe_md.erase("swizzled");
  const Recipe r = Recipe::from_metadata(recipe_md);
  const VectorLayout layout = VectorLayout::from_metadata(f.metadata, r);
  if (!layout.te) {
    f.metadata.erase("layout");
    f.metadata.erase("swizzled");
    return;
  }
  const io::Tensor* xt = f.find("x");
  QTC_CHECK(xt != nullptr && xt->shape.size() == 2, "missing required tensor 'x' (the input) of shape [M, K]");
  const int64_t M = xt->shape[0], K = xt->shape[1];
  for (io::Tensor& t : f.tensors) {
    if (!is_scale(t.name) || r.kind == RecipeKind::kFP8Tensor) continue;
    const PlaneKind p = t.name[0] == 'r' ? PlaneKind::kRowwise : PlaneKind::kColumnwise;
    const std::vector<int64_t> want = output_shape(t.name, r, M, K, layout);
    // MXFP8 columnwise swizzled scales are one cuBLAS operand of K rows: accepted as [roundup(K,128), ...] too.
    const bool mx_col_swz = layout.swizzled && r.kind == RecipeKind::kMXFP8 && p == PlaneKind::kColumnwise;
    const bool transposed_ok = mx_col_swz && t.shape == std::vector<int64_t>{want[1], want[0]};
    QTC_CHECK(t.shape == want || transposed_ok, "tensor '", t.name, "' has shape ", shape_str(t.shape), ", expected ", shape_str(want),
              mx_col_swz ? std::string(" (or its transpose)") : std::string(), " for x of shape [", M, ", ", K, "] in layout ",
              layout.name(), " (recipe ", recipe_kind_name(r.kind), ", TE_FORMATS.md §5)");
    ScaleMatrix s;
    s.type = r.kind == RecipeKind::kNVFP4 ? ScaleType::kE4M3 : r.kind == RecipeKind::kMXFP8 ? ScaleType::kE8M0 : ScaleType::kF32;
    QTC_CHECK(s.type == ScaleType::kF32 ? t.dtype == "F32" : t.is_byte_tensor(), "tensor '", t.name, "' has dtype ", t.dtype,
              ", expected ", s.type == ScaleType::kF32 ? "F32" : "a byte type (U8, F8_E4M3, F8_E8M0)");
    s.layout = layout.swizzled ? ScaleLayout::kSwizzled : ScaleLayout::kPadded;
    s.rows = want[0];
    s.cols = want[1];
    s.bytes = t.bytes;
    if (layout.swizzled) s = ref::unswizzle(s, r, p, M, K);
    s = ref::to_compact(s, r, p, M, K);
    t.shape = {s.rows, s.cols};
    t.bytes = std::move(s.bytes);
  }
  f.metadata.erase("layout");
  f.metadata.erase("swizzled");
}

}  // namespace qtc::conformance
