/// \file hybrid.cpp
/// \brief Hybrid planes (hybrid.hpp): the recipe, its rules and metadata, the CPU reference composition.
#include "qtc/hybrid.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "qtc/kind.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"

namespace qtc {

namespace {

constexpr RecipeRule kHybridRules[] = {
    {"hybrid-sub-recipe", "each plane's recipe is a valid recipe of its own (its kind's rules, recipe_rules())"},
    {"hybrid-source-dtype", "columnwise_source_dtype other than 'input' needs columnwise_source=rowwise_dequantized "
                            "(the original input is read in its own dtype)"},
    {"hybrid-grouped-local", "group_rows needs block-local plane recipes (mxfp8, mxfp4, fp8_block, nvfp4 without a "
                             "per-tensor scale): a recipe with a tensor-wide amax (fp8_tensor, nvfp4's global scale) "
                             "gives each group its own, which one tensor's planes cannot hold"},
    {"hybrid-grouped-layout", "a grouped hybrid vector in layout te holds TE's fused requantization output: both planes "
                              "MXFP8, every group a multiple of 128 rows and K a multiple of 128 (each group's "
                              "columnwise scales swizzled on their own)"},
    {"hybrid-group-aligned", "every group size is a multiple of the planes' block extent along M (the rowwise "
                             "recipe's block rows, the columnwise recipe's block length), and the sizes sum to M, so "
                             "that the groups' planes are the whole tensor's planes (TE's fused requantization: "
                             "multiples of 128)"},
};

const RecipeRule& hybrid_rule(std::string_view id) {
  for (const RecipeRule& r : kHybridRules)
    if (r.id == id) return r;
  QTC_FAIL("hybrid recipe: no rule '", id, "'");
}

[[noreturn]] void hybrid_broken(const HybridRecipe& h, std::string_view id, const std::string& detail) {
  const RecipeRule& r = hybrid_rule(id);
  QTC_FAIL("hybrid recipe ", h.name(), ": rule '", r.id, "': ", r.text, detail.empty() ? "" : ": ", detail);
}

bool block_local(const Recipe& r) {
  // No global amax: the kind has none, or NVFP4 without its per-tensor scale (per_tensor_scale=0).
  if (const Nvfp4Options* nv = r.nvfp4_or_null()) return !nv->per_tensor_scale;
  return !kind_info(r).global_amax;
}

/// The rows of x a group must be a multiple of: the rowwise blocks' height, the columnwise blocks' length along M.
int64_t group_quantum(const HybridRecipe& h) {
  const int64_t row = std::max(1, h.rowwise.block_rows());
  const int64_t col = std::max(1, h.columnwise.block_cols());
  return std::max(row, col);  // both powers of two: the larger is a multiple of the smaller
}

std::string_view source_name(ColumnwiseSource s) {
  return s == ColumnwiseSource::kOriginal ? "original" : "rowwise_dequantized";
}
std::string_view source_dtype_name(SourceDType d) {
  switch (d) {
    case SourceDType::kInput: return "input";
    case SourceDType::kF32: return "f32";
    case SourceDType::kBF16: return "bf16";
  }
  return "?";
}

std::string groups_text(const std::vector<int64_t>& g) {
  std::string s;
  for (size_t i = 0; i < g.size(); ++i) s += (i ? "," : "") + std::to_string(g[i]);
  return s;
}

}  // namespace

std::span<const RecipeRule> hybrid_rules() { return kHybridRules; }

HybridRecipe HybridRecipe::te_group_requantize(Fp8Type rowwise_fp8, bool fast_math, std::vector<int64_t> group_rows) {
  HybridRecipe h;
  Mxfp8Options row;
  row.fp8 = rowwise_fp8;
  h.rowwise = Recipe::of(row, Profile::kTE, true, false);
  h.columnwise = Recipe::of(Mxfp8Options{}, Profile::kTE, false, true);  // E4M3, rceil: the kernel's only output
  h.source = ColumnwiseSource::kRowwiseDequantized;
  h.source_dtype = fast_math ? SourceDType::kBF16 : SourceDType::kF32;
  h.group_rows = std::move(group_rows);
  return h;
}

Recipe HybridRecipe::plane_recipe(PlaneKind p) const {
  Recipe r = p == PlaneKind::kRowwise ? rowwise : columnwise;
  r.rowwise = p == PlaneKind::kRowwise;
  r.columnwise = p == PlaneKind::kColumnwise;
  return r;
}

DType HybridRecipe::source_dtype_for(DType input) const {
  if (source == ColumnwiseSource::kOriginal) return input;
  switch (source_dtype) {
    case SourceDType::kInput: return input;
    case SourceDType::kF32: return DType::kF32;
    case SourceDType::kBF16: return DType::kBF16;
  }
  return input;
}

std::string_view HybridRecipe::broken_rule() const {
  try {
    validate();
  } catch (const Error& e) {
    const std::string w = e.what();
    for (const RecipeRule& r : kHybridRules)
      if (w.find("rule '" + std::string(r.id) + "'") != std::string::npos) return r.id;
    return kHybridRules[0].id;
  }
  return {};
}

void HybridRecipe::validate() const {
  for (PlaneKind p : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    try {
      plane_recipe(p).validate();
    } catch (const Error& e) {
      hybrid_broken(*this, "hybrid-sub-recipe",
                    std::string(p == PlaneKind::kRowwise ? "rowwise" : "columnwise") + " plane: " + e.what());
    }
  }
  if (source == ColumnwiseSource::kOriginal && source_dtype != SourceDType::kInput)
    hybrid_broken(*this, "hybrid-source-dtype", "columnwise_source_dtype=" + std::string(source_dtype_name(source_dtype)));
  if (!group_rows.empty())
    for (const Recipe& r : {rowwise, columnwise})
      if (!block_local(r)) hybrid_broken(*this, "hybrid-grouped-local", "the " + r.name() + " plane has a tensor-wide amax");
}

void HybridRecipe::validate_input(DType input, int64_t rows, int64_t cols) const {
  validate();
  plane_recipe(PlaneKind::kRowwise).validate_input(input, rows, cols);
  plane_recipe(PlaneKind::kColumnwise).validate_input(source_dtype_for(input), rows, cols);
  if (group_rows.empty()) return;
  const int64_t q = group_quantum(*this);
  int64_t sum = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) {
    const int64_t n = group_rows[g];
    if (n > rows)  // also keeps the sum below from wrapping
      hybrid_broken(*this, "hybrid-group-aligned", "group " + std::to_string(g) + " has " + std::to_string(n) +
                                                       " rows, more than the input's " + std::to_string(rows));
    if (n < 0 || n % q != 0)
      hybrid_broken(*this, "hybrid-group-aligned", "group " + std::to_string(g) + " has " + std::to_string(n) +
                                                       " rows, not a multiple of " + std::to_string(q));
    sum += n;
    if (sum > rows)
      hybrid_broken(*this, "hybrid-group-aligned",
                    "the first " + std::to_string(g + 1) + " groups hold more rows than the input's " + std::to_string(rows));
  }
  if (sum != rows)
    hybrid_broken(*this, "hybrid-group-aligned",
                  "the group sizes sum to " + std::to_string(sum) + " rows, the input has " + std::to_string(rows));
}

std::string HybridRecipe::name() const {
  auto base = [](Recipe r) {  // the plane is fixed by the position: the name without the planes suffix
    r.rowwise = r.columnwise = true;
    return r.name();
  };
  std::string n = "hybrid_" + base(rowwise) + "__" + base(columnwise);
  if (source == ColumnwiseSource::kRowwiseDequantized) {
    n += "_rdq";
    if (source_dtype != SourceDType::kInput) n += "_" + std::string(source_dtype_name(source_dtype));
  }
  if (!group_rows.empty()) n += "_grouped";
  return n;
}

bool HybridRecipe::operator==(const HybridRecipe& o) const {
  return plane_recipe(PlaneKind::kRowwise) == o.plane_recipe(PlaneKind::kRowwise) &&
         plane_recipe(PlaneKind::kColumnwise) == o.plane_recipe(PlaneKind::kColumnwise) && source == o.source &&
         source_dtype == o.source_dtype && group_rows == o.group_rows;
}

bool HybridRecipe::is_hybrid(const std::map<std::string, std::string>& md) {
  auto it = md.find("recipe");
  return it != md.end() && it->second == "hybrid";
}

std::map<std::string, std::string> HybridRecipe::to_metadata() const {
  std::map<std::string, std::string> md;
  md["qtc.schema"] = "1";
  md["recipe"] = "hybrid";
  for (PlaneKind p : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const std::string prefix = p == PlaneKind::kRowwise ? "rowwise." : "columnwise.";
    Recipe r = p == PlaneKind::kRowwise ? rowwise : columnwise;
    r.rowwise = r.columnwise = true;  // the plane is fixed by the prefix; no rowwise/columnwise keys
    for (const auto& [k, v] : r.to_metadata())
      if (k != "qtc.schema" && k != "profile") md[prefix + k] = v;
  }
  // One profile for the file (what `qtc identify` varies), the columnwise plane's own only when it differs.
  md["profile"] = std::string(profile_name(rowwise.profile));
  if (columnwise.profile != rowwise.profile) md["columnwise.profile"] = std::string(profile_name(columnwise.profile));
  md["columnwise_source"] = std::string(source_name(source));
  if (source_dtype != SourceDType::kInput) md["columnwise_source_dtype"] = std::string(source_dtype_name(source_dtype));
  if (!group_rows.empty()) md["group_rows"] = groups_text(group_rows);
  return md;
}

HybridRecipe HybridRecipe::from_metadata(const std::map<std::string, std::string>& md) {
  QTC_CHECK(is_hybrid(md), "metadata key 'recipe': a hybrid vector has recipe=hybrid");
  auto get = [&](const std::string& k, const std::string& d) {
    auto it = md.find(k);
    return it == md.end() ? d : it->second;
  };
  if (md.count("qtc.schema"))
    QTC_CHECK(get("qtc.schema", "") == "1", "metadata key 'qtc.schema': unsupported schema '", get("qtc.schema", ""),
              "' (this qtc reads schema 1)");
  static const std::vector<std::string> kTop = {"qtc.schema", "recipe", "source", "profile", "layout", "swizzled",
                                                "columnwise_source", "columnwise_source_dtype", "group_rows"};
  std::map<std::string, std::string> sub[2];
  for (const auto& [key, value] : md) {
    if (key.rfind("rowwise.", 0) == 0) {
      sub[0][key.substr(8)] = value;
      continue;
    }
    if (key.rfind("columnwise.", 0) == 0) {
      sub[1][key.substr(11)] = value;
      continue;
    }
    const bool known = std::find(kTop.begin(), kTop.end(), key) != kTop.end() || key.rfind("case", 0) == 0 ||
                       key.rfind("comment", 0) == 0 || key.rfind("flags", 0) == 0 || key.rfind("qtc.note", 0) == 0 ||
                       key.rfind("acceptable", 0) == 0;
    QTC_CHECK(known, "metadata key '", key, "' is not a parameter of recipe 'hybrid' (a plane's parameters are "
              "'rowwise.<key>' and 'columnwise.<key>'; conformance/README.md, Hybrid planes)");
  }
  HybridRecipe h;
  for (int i = 0; i < 2; ++i) {
    const char* plane = i == 0 ? "rowwise" : "columnwise";
    auto& s = sub[i];
    QTC_CHECK(s.count("recipe"), "metadata key '", plane, ".recipe' is missing (the recipe of the ", plane, " plane)");
    QTC_CHECK(s.at("recipe") != "hybrid", "metadata key '", plane, ".recipe': a plane's recipe cannot be 'hybrid'");
    for (const char* fixed : {"rowwise", "columnwise", "layout", "swizzled", "source", "qtc.schema"})
      QTC_CHECK(!s.count(fixed), "metadata key '", plane, ".", fixed, "' is not a plane parameter (",
                std::string_view(fixed) == "rowwise" || std::string_view(fixed) == "columnwise"
                    ? "the prefix fixes the plane"
                    : "it is a key of the whole file",
                ")");
    if (!s.count("profile") && md.count("profile")) s["profile"] = md.at("profile");
    Recipe r;
    try {
      r = Recipe::from_metadata(s);
    } catch (const Error& e) {
      QTC_FAIL("metadata of the ", plane, " plane (keys '", plane, ".*'): ", e.what());
    }
    (i == 0 ? h.rowwise : h.columnwise) = r;
  }
  const std::string src = get("columnwise_source", "original");
  if (src == "original")
    h.source = ColumnwiseSource::kOriginal;
  else if (src == "rowwise_dequantized")
    h.source = ColumnwiseSource::kRowwiseDequantized;
  else
    QTC_FAIL("metadata key 'columnwise_source': unknown value '", src, "' (expected one of: original, rowwise_dequantized)");
  const std::string sd = get("columnwise_source_dtype", "input");
  if (sd == "input")
    h.source_dtype = SourceDType::kInput;
  else if (sd == "f32")
    h.source_dtype = SourceDType::kF32;
  else if (sd == "bf16")
    h.source_dtype = SourceDType::kBF16;
  else
    QTC_FAIL("metadata key 'columnwise_source_dtype': unknown value '", sd, "' (expected one of: input, f32, bf16)");
  if (md.count("group_rows")) {
    const std::string g = md.at("group_rows");
    size_t pos = 0;
    while (pos <= g.size()) {
      const size_t end = std::min(g.find(',', pos), g.size());
      int64_t v = 0;
      const auto [p, ec] = std::from_chars(g.data() + pos, g.data() + end, v);
      QTC_CHECK(ec == std::errc() && p == g.data() + end && end > pos && v >= 0, "metadata key 'group_rows': '", g,
                "' is not a comma-separated list of non-negative integers");
      h.group_rows.push_back(v);
      pos = end + 1;
    }
  }
  h.validate();
  return h;
}

namespace ref {

HybridQuantized quantize_hybrid(const MatrixView& x, const HybridRecipe& h) {
  HybridRecipe one = h;
  one.group_rows.clear();
  one.validate_input(x.dtype, x.rows, x.cols);
  HybridQuantized out;
  out.rowwise = quantize(x, h.plane_recipe(PlaneKind::kRowwise));
  if (h.source == ColumnwiseSource::kOriginal) {
    out.columnwise = quantize(x, h.plane_recipe(PlaneKind::kColumnwise));
    return out;
  }
  out.source = dequantize(out.rowwise, PlaneKind::kRowwise, h.source_dtype_for(x.dtype));
  out.columnwise = quantize(out.source->view(), h.plane_recipe(PlaneKind::kColumnwise));
  return out;
}

GroupedRows hybrid_groups(const HybridRecipe& h, int64_t m, int64_t k) {
  return GroupedRows::packed(h.group_rows.empty() ? std::vector<int64_t>{m} : h.group_rows, k, m);
}

std::vector<HybridQuantized> quantize_hybrid_grouped(const MatrixView& x, const GroupedRows& rows, const HybridRecipe& h) {
  if (h.group_rows.empty()) h.validate();
  else h.validate_input(x.dtype, x.rows, x.cols);  // the grouping rules (block-local planes, aligned groups)
  rows.validate();
  QTC_CHECK(x.cols == rows.last_dim && x.rows == rows.capacity, "grouped hybrid quantize: input is ", x.rows, "x",
            x.cols, ", the grouped layout is ", rows.capacity, "x", rows.last_dim);
  std::vector<HybridQuantized> out;
  for (int64_t g = 0; g < rows.groups(); ++g) {
    MatrixView part = x;
    part.data = static_cast<const uint8_t*>(x.data) +
                rows.row_offset(g) * x.cols * static_cast<int64_t>(dtype_size(x.dtype));
    part.rows = rows.first_dims[static_cast<size_t>(g)];
    if (part.rows == 0) {  // a zero-token group: nothing to quantize
      HybridQuantized e;
      e.rowwise.recipe = h.plane_recipe(PlaneKind::kRowwise);
      e.columnwise.recipe = h.plane_recipe(PlaneKind::kColumnwise);
      e.rowwise.input_dtype = e.columnwise.input_dtype = x.dtype;
      e.rowwise.cols = e.columnwise.cols = x.cols;
      out.push_back(std::move(e));
      continue;
    }
    out.push_back(quantize_hybrid(part, h));
  }
  return out;
}

void check_grouped_layout(const HybridRecipe& h, int64_t m, int64_t k, Layout lo) {
  if (h.group_rows.empty() || lo == Layout::kCompact) return;
  if (h.rowwise.mxfp8_or_null() == nullptr || h.columnwise.mxfp8_or_null() == nullptr)
    hybrid_broken(h, "hybrid-grouped-layout", "the planes are " + h.rowwise.name() + " and " + h.columnwise.name());
  if (k % 128 != 0) hybrid_broken(h, "hybrid-grouped-layout", "K is " + std::to_string(k));
  for (size_t g = 0; g < h.group_rows.size(); ++g)
    if (h.group_rows[g] % 128 != 0)
      hybrid_broken(h, "hybrid-grouped-layout", "group " + std::to_string(g) + " has " + std::to_string(h.group_rows[g]) + " rows");
  (void)m;
}

namespace {

std::vector<uint8_t> grouped_scales_convert(const HybridRecipe& h, int64_t m, int64_t k, Layout lo,
                                            std::span<const uint8_t> in, bool to_compact) {
  check_grouped_layout(h, m, k, lo);
  const Recipe r = h.plane_recipe(PlaneKind::kColumnwise);
  std::vector<uint8_t> out;
  size_t at = 0;
  for (int64_t mg : h.group_rows) {
    if (mg == 0) continue;
    const auto ol = OutputLayout::find("columnwise_scale_inv", r, mg, k, lo);
    QTC_CHECK(ol.has_value(), "grouped hybrid layout: no columnwise_scale_inv for ", r.name());
    const size_t n = static_cast<size_t>(to_compact ? ol->elements() : ol->compact_elements());
    if (at + n > in.size())
      hybrid_broken(h, "hybrid-grouped-layout",
                    "columnwise_scale_inv holds " + std::to_string(in.size()) + " bytes, too few for the groups");
    const auto part = in.subspan(at, n);
    const std::vector<uint8_t> conv = to_compact ? ol->to_compact(part) : ol->from_compact(part);
    out.insert(out.end(), conv.begin(), conv.end());
    at += n;
  }
  if (at != in.size())
    hybrid_broken(h, "hybrid-grouped-layout", "columnwise_scale_inv holds " + std::to_string(in.size()) +
                                                  " bytes, the groups' scales " + std::to_string(at));
  return out;
}

}  // namespace

std::vector<uint8_t> grouped_columnwise_scales_to_compact(const HybridRecipe& h, int64_t m, int64_t k,
                                                         Layout lo, std::span<const uint8_t> bytes) {
  return grouped_scales_convert(h, m, k, lo, bytes, true);
}

std::vector<uint8_t> grouped_columnwise_scales_from_compact(const HybridRecipe& h, int64_t m, int64_t k,
                                                           Layout lo, std::span<const uint8_t> compact) {
  return grouped_scales_convert(h, m, k, lo, compact, false);
}

}  // namespace ref
}  // namespace qtc
