/// \file recipe.cpp
/// \brief Recipe validation, names and the VECTORS.md metadata mapping.
#include "qtc/recipe.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "qtc/profile.hpp"

namespace qtc {

std::string_view profile_name(Profile p) { return profile_rules(p).name; }

std::string_view recipe_kind_name(RecipeKind k) {
  switch (k) {
    case RecipeKind::kNVFP4: return "nvfp4";
    case RecipeKind::kMXFP8: return "mxfp8";
    case RecipeKind::kFP8Block: return "fp8_block";
    case RecipeKind::kFP8Tensor: return "fp8_tensor";
  }
  return "?";
}

float fp8_max(Fp8Type t) { return t == Fp8Type::kE4M3 ? 448.0f : 57344.0f; }

int Recipe::block_cols() const {
  switch (kind) {
    case RecipeKind::kNVFP4: return 16;
    case RecipeKind::kMXFP8: return 32;
    case RecipeKind::kFP8Block: return 128;
    case RecipeKind::kFP8Tensor: return 0;
  }
  return 0;
}

int Recipe::block_rows() const {
  switch (kind) {
    case RecipeKind::kNVFP4: return tile_2d ? 16 : 1;
    case RecipeKind::kMXFP8: return mx_2d ? 32 : 1;
    case RecipeKind::kFP8Block: return block_2d ? 128 : 1;
    case RecipeKind::kFP8Tensor: return 0;
  }
  return 0;
}

void Recipe::validate() const {
  QTC_CHECK(rowwise || columnwise, "recipe ", name(), ": at least one of the rowwise and columnwise planes must be requested");
  const bool nv = kind == RecipeKind::kNVFP4;
  if (!nv) {
    QTC_CHECK(!tile_2d && !row_scaled && !rht && !fourover6 && !stochastic,
              "recipe ", name(), ": tile 16x16, row_scaled, rht, fourover6 and stochastic rounding are NVFP4 options");
  }
  const ProfileRules& pr = profile_rules(profile);
  const bool defined[] = {pr.nvfp4, pr.mxfp8, pr.fp8_block, pr.fp8_tensor};
  QTC_CHECK(defined[static_cast<int>(kind)], "recipe ", name(), ": profile '", pr.name, "' does not define ",
            recipe_kind_name(kind), " (", pr.follows, ")");
  if (kind != RecipeKind::kMXFP8) {
    QTC_CHECK(!mx_2d && scale_rule == MxScaleRule::kRceil, "recipe ", name(), ": scale_rule and 32x32 blocks are MXFP8 options");
  }
  if (kind != RecipeKind::kFP8Block) QTC_CHECK(!block_2d, "recipe ", name(), ": 128x128 tiles are an FP8 block option");
  if (kind == RecipeKind::kNVFP4 || kind == RecipeKind::kMXFP8) {
    QTC_CHECK(!pow2_scales && eps == 0.0f, "recipe ", name(), ": pow2_scales and eps are FP8 block/tensor options");
    if (kind == RecipeKind::kNVFP4) QTC_CHECK(fp8 == Fp8Type::kE4M3, "recipe ", name(), ": NVFP4 data is E2M1 (no fp8_dtype)");
  }
  QTC_CHECK(per_tensor_scale || (kind == RecipeKind::kNVFP4 && pr.nvfp4_single_level), "recipe ", name(),
            ": per_tensor_scale=0 (block scales only) is defined for NVFP4 under profile torchao only");
  if (kind == RecipeKind::kNVFP4 && pr.nvfp4_order == Nvfp4Order::kTorchAO) {
    QTC_CHECK(!tile_2d && !row_scaled && !rht && !fourover6 && !stochastic, "recipe ", name(), ": profile '", pr.name,
              "' defines NVFP4 with 1x16 blocks only (no 16x16, row-scaled, RHT, 4over6 or stochastic rounding)");
  }
  if (kind == RecipeKind::kMXFP8) {
    const auto& rules = pr.mx_scale_rules;
    if (std::find(rules.begin(), rules.end(), scale_rule) == rules.end()) {
      std::string allowed;
      for (MxScaleRule x : rules) allowed += (allowed.empty() ? "" : ", ") + std::string(mx_scale_rule_name(x));
      QTC_FAIL("recipe ", name(), ": profile '", pr.name, "' defines scale_rule ", allowed, ", not ",
               mx_scale_rule_name(scale_rule));
    }
  }
  QTC_CHECK(std::isfinite(eps) && eps >= 0.0f, "recipe ", name(), ": eps must be a finite value >= 0");
  if (nv) {
    QTC_CHECK(e4m3_max == 448 || e4m3_max == 256, "recipe ", name(), ": e4m3_max must be 448 or 256");
    QTC_CHECK(e4m3_max == 448 || fourover6, "recipe ", name(), ": e4m3_max 256 is only defined with fourover6 (TE_FORMATS.md §1.12)");
    QTC_CHECK(!(row_scaled && tile_2d), "recipe ", name(), ": row-scaled NVFP4 cannot use 16x16 tiles (TE_FORMATS.md §1.11)");
    QTC_CHECK(!(row_scaled && rht), "recipe ", name(), ": row-scaled NVFP4 cannot use RHT (TE_FORMATS.md §1.11)");
    QTC_CHECK(!(row_scaled && stochastic), "recipe ", name(), ": row-scaled NVFP4 cannot use stochastic rounding (§1.11)");
    QTC_CHECK(!(rht && tile_2d), "recipe ", name(), ": RHT is not combined with 16x16 tiles (TE_FORMATS.md §1.7)");
    QTC_CHECK(!(fourover6 && rht), "recipe ", name(), ": 4over6 cannot be combined with RHT (TE_FORMATS.md §1.12)");
    QTC_CHECK(!(fourover6 && stochastic), "recipe ", name(), ": 4over6 cannot be combined with stochastic rounding (§1.12)");
    QTC_CHECK(!(fourover6 && row_scaled && columnwise), "recipe ", name(),
              ": row-scaled 4over6 produces the rowwise plane only (TE_FORMATS.md §1.12)");
    QTC_CHECK(!(row_scaled && !rowwise), "recipe ", name(), ": row-scaled NVFP4 needs the rowwise plane (§1.11)");
    QTC_CHECK(profile != Profile::kTEPyRef || !stochastic, "recipe ", name(),
              ": profile te_pyref has no stochastic rounding");
  }
}

void Recipe::validate_input(DType input, int64_t rows, int64_t cols) const {
  validate();
  QTC_CHECK(input == DType::kF32 || input == DType::kBF16 || input == DType::kF16, "recipe ", name(),
            ": input must be F32, BF16 or F16, got ", dtype_name(input));
  QTC_CHECK(rows >= 0 && cols >= 0, "recipe ", name(), ": negative shape [", rows, ", ", cols, "]");
  if (kind == RecipeKind::kNVFP4) {
    QTC_CHECK(cols % 16 == 0, "recipe ", name(), ": NVFP4 needs K % 16 == 0, got K = ", cols, " (TE_FORMATS.md §1.1)");
    // torchao's nvfp4_quantize blocks along K only: its rowwise plane takes any M (columnwise blocks run along M).
    const bool any_m = profile_rules(profile).nvfp4_order == Nvfp4Order::kTorchAO && !columnwise;
    QTC_CHECK(any_m || rows % 16 == 0, "recipe ", name(), ": NVFP4 needs M % 16 == 0, got M = ", rows,
              " (TE_FORMATS.md §1.1; torchao's rowwise-only plane takes any M)");
    QTC_CHECK(!rht || input == DType::kBF16, "recipe ", name(), ": RHT is only defined for BF16 input (TE_FORMATS.md §1.9), got ",
              dtype_name(input));
  }
}

std::string Recipe::name() const {
  std::ostringstream os;
  const char* fp8n = fp8 == Fp8Type::kE4M3 ? "e4m3" : "e5m2";
  switch (kind) {
    case RecipeKind::kNVFP4:
      os << "nvfp4_" << (tile_2d ? "16x16" : "1x16");
      if (row_scaled) os << "_rowscaled";
      if (rht) os << "_rht";
      if (fourover6) os << "_4over6" << (fourover6_err == ErrMode::kMAE ? "mae" : "mse") << e4m3_max;
      if (stochastic) os << "_sr";
      if (!per_tensor_scale) os << "_blockonly";
      break;
    case RecipeKind::kMXFP8:
      os << "mxfp8_" << fp8n << "_" << (scale_rule == MxScaleRule::kOcpFloor ? "ocpfloor" : mx_scale_rule_name(scale_rule))
         << (mx_2d ? "_32x32" : "");
      break;
    case RecipeKind::kFP8Block:
      os << "fp8block_" << (block_2d ? "128x128" : "1x128") << "_" << fp8n << (pow2_scales ? "_pow2" : "");
      if (eps != 0.0f) os << "_eps" << eps;
      break;
    case RecipeKind::kFP8Tensor:
      os << "fp8tensor_" << fp8n << (pow2_scales ? "_pow2" : "");
      if (eps != 0.0f) os << "_eps" << eps;
      break;
  }
  if (profile != Profile::kTE) os << "_" << profile_name(profile);
  if (!rowwise) os << "_colonly";
  if (!columnwise) os << "_rowonly";
  return os.str();
}

namespace {

std::string float_text(float v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;
  return std::string(buf, p);
}

}  // namespace

std::map<std::string, std::string> Recipe::to_metadata() const {
  std::map<std::string, std::string> md;
  md["qtc.schema"] = "1";
  md["recipe"] = std::string(recipe_kind_name(kind));
  md["profile"] = std::string(profile_name(profile));
  const char* fp8n = fp8 == Fp8Type::kE4M3 ? "e4m3" : "e5m2";
  switch (kind) {
    case RecipeKind::kNVFP4:
      md["tile"] = tile_2d ? "16x16" : "1x16";
      md["row_scaled"] = row_scaled ? "1" : "0";
      md["rht"] = rht ? "1" : "0";
      md["fourover6"] = fourover6 ? "1" : "0";
      md["fourover6_err"] = fourover6_err == ErrMode::kMAE ? "mae" : "mse";
      md["e4m3_max"] = std::to_string(e4m3_max);
      if (stochastic) {
        md["stochastic_rounding"] = "1";
        md["seed"] = std::to_string(seed);
      }
      if (rht_sign_mask != 0xD7E8) md["rht_sign_mask"] = std::to_string(rht_sign_mask);
      if (!per_tensor_scale) md["per_tensor_scale"] = "0";
      break;
    case RecipeKind::kMXFP8:
      md["fp8_dtype"] = fp8n;
      md["scale_rule"] = std::string(mx_scale_rule_name(scale_rule));
      md["rounding"] = "rne";
      if (mx_2d) md["tile"] = "32x32";
      break;
    case RecipeKind::kFP8Block:
      md["tile"] = block_2d ? "128x128" : "1x128";
      [[fallthrough]];
    case RecipeKind::kFP8Tensor:
      md["fp8_dtype"] = fp8n;
      md["pow2_scales"] = pow2_scales ? "1" : "0";
      md["eps"] = float_text(eps);
      break;
  }
  if (!rowwise) md["rowwise"] = "0";
  if (!columnwise) md["columnwise"] = "0";
  return md;
}

namespace {

struct MetaReader {
  const std::map<std::string, std::string>& md;
  std::string get(const std::string& key, const std::string& dflt) const {
    auto it = md.find(key);
    return it == md.end() ? dflt : it->second;
  }
  bool has(const std::string& key) const { return md.count(key) != 0; }
  bool flag(const std::string& key, bool dflt) const {
    const std::string v = get(key, dflt ? "1" : "0");
    if (v == "1" || v == "true") return true;
    if (v == "0" || v == "false") return false;
    QTC_FAIL("metadata key '", key, "': expected 0 or 1, got '", v, "'");
  }
  template <typename T>
  T choice(const std::string& key, const std::string& dflt, std::initializer_list<std::pair<const char*, T>> options) const {
    const std::string v = get(key, dflt);
    std::string allowed;
    for (const auto& [name, val] : options) {
      if (v == name) return val;
      allowed += allowed.empty() ? "" : ", ";
      allowed += name;
    }
    QTC_FAIL("metadata key '", key, "': unknown value '", v, "' (expected one of: ", allowed, ")");
  }
  float number(const std::string& key, float dflt) const {
    if (!has(key)) return dflt;
    const std::string v = get(key, "");
    float out = 0.0f;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec == std::errc::result_out_of_range && p == v.data() + v.size()) {
      // A well-formed number that float cannot hold: say which way it falls out of the range.
      double d = 0.0;
      const auto [pd, ecd] = std::from_chars(v.data(), v.data() + v.size(), d);
      const bool huge = ecd == std::errc::result_out_of_range ? (v.find_first_of("eE") != std::string::npos &&
                                                                 v.find('-', v.find_first_of("eE")) == std::string::npos)
                                                              : std::fabs(d) > 1.0;
      (void)pd;
      QTC_FAIL("metadata key '", key, "': '", v, "' is out of the float range (",
               huge ? "its magnitude exceeds the largest float, 3.4028235e38" : "it is below the smallest float, 1.4e-45, and is not 0",
               ")");
    }
    QTC_CHECK(ec == std::errc() && p == v.data() + v.size(), "metadata key '", key, "': '", v, "' is not a decimal number");
    return out;
  }
  uint64_t integer(const std::string& key, uint64_t dflt) const {
    if (!has(key)) return dflt;
    const std::string v = get(key, "");
    uint64_t out = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    QTC_CHECK(ec == std::errc() && p == v.data() + v.size() && !v.empty(), "metadata key '", key, "': '", v,
              "' is not a non-negative integer");
    return out;
  }
};

}  // namespace

Recipe Recipe::from_metadata(const std::map<std::string, std::string>& md) {
  MetaReader m{md};
  QTC_CHECK(m.has("recipe"), "metadata key 'recipe' is missing");
  if (m.has("qtc.schema")) QTC_CHECK(m.get("qtc.schema", "") == "1", "metadata key 'qtc.schema': unsupported schema '", m.get("qtc.schema", ""), "' (this qtc reads schema 1)");
  Recipe r;
  r.kind = m.choice<RecipeKind>("recipe", "", {{"nvfp4", RecipeKind::kNVFP4}, {"mxfp8", RecipeKind::kMXFP8},
                                               {"fp8_block", RecipeKind::kFP8Block}, {"fp8_tensor", RecipeKind::kFP8Tensor}});
  r.profile = profile_from_name(m.get("profile", "te"));
  r.rowwise = m.flag("rowwise", true);
  r.columnwise = m.flag("columnwise", true);
  std::initializer_list<std::pair<const char*, Fp8Type>> fp8s = {{"e4m3", Fp8Type::kE4M3}, {"e5m2", Fp8Type::kE5M2}};
  // Keys that belong to other recipes are rejected, so a typo cannot be silently ignored.
  static const std::map<RecipeKind, std::vector<std::string>> kKeys = {
      {RecipeKind::kNVFP4, {"tile", "row_scaled", "rht", "fourover6", "fourover6_err", "e4m3_max", "stochastic_rounding", "seed", "rht_sign_mask", "per_tensor_scale"}},
      {RecipeKind::kMXFP8, {"fp8_dtype", "scale_rule", "rounding", "tile"}},
      {RecipeKind::kFP8Block, {"tile", "pow2_scales", "eps", "fp8_dtype"}},
      {RecipeKind::kFP8Tensor, {"pow2_scales", "eps", "fp8_dtype"}}};
  static const std::vector<std::string> kCommon = {"qtc.schema", "recipe", "source", "profile", "rowwise", "columnwise",
                                                     "layout", "swizzled"};  // layout keys: native_layout.hpp
  for (const auto& [key, value] : md) {
    bool known = std::find(kCommon.begin(), kCommon.end(), key) != kCommon.end();
    const auto& ks = kKeys.at(r.kind);
    known = known || std::find(ks.begin(), ks.end(), key) != ks.end();
    // Free-form annotations (Wycheproof-style case ids, comments, flags) live under "qtc.note." / "case." / "comment".
    known = known || key.rfind("case", 0) == 0 || key.rfind("comment", 0) == 0 || key.rfind("flags", 0) == 0 ||
            key.rfind("qtc.note", 0) == 0 || key.rfind("acceptable", 0) == 0;
    QTC_CHECK(known, "metadata key '", key, "' is not a parameter of recipe '", recipe_kind_name(r.kind), "'");
  }
  switch (r.kind) {
    case RecipeKind::kNVFP4: {
      r.tile_2d = m.choice<bool>("tile", "1x16", {{"1x16", false}, {"16x16", true}});
      r.row_scaled = m.flag("row_scaled", false);
      r.rht = m.flag("rht", false);
      r.fourover6 = m.flag("fourover6", false);
      r.fourover6_err = m.choice<ErrMode>("fourover6_err", "mae", {{"mae", ErrMode::kMAE}, {"mse", ErrMode::kMSE}});
      r.e4m3_max = m.choice<int>("e4m3_max", "448", {{"448", 448}, {"256", 256}});
      r.stochastic = m.flag("stochastic_rounding", false);
      r.seed = m.integer("seed", 0);
      const uint64_t mask = m.integer("rht_sign_mask", 0xD7E8);
      QTC_CHECK(mask <= 0xFFFF, "metadata key 'rht_sign_mask': ", mask, " does not fit 16 bits");
      r.rht_sign_mask = static_cast<uint16_t>(mask);
      r.per_tensor_scale = m.flag("per_tensor_scale", true);
      break;
    }
    case RecipeKind::kMXFP8:
      r.fp8 = m.choice<Fp8Type>("fp8_dtype", "e4m3", fp8s);
      r.scale_rule = m.choice<MxScaleRule>("scale_rule", "rceil", {{"rceil", MxScaleRule::kRceil}, {"ocp_floor", MxScaleRule::kOcpFloor},
                                                                          {"ceil", MxScaleRule::kCeil}, {"even", MxScaleRule::kEven}});
      (void)m.choice<int>("rounding", "rne", {{"rne", 0}});
      r.mx_2d = m.choice<bool>("tile", "1x32", {{"1x32", false}, {"32x32", true}});
      break;
    case RecipeKind::kFP8Block:
      r.block_2d = m.choice<bool>("tile", "1x128", {{"1x128", false}, {"128x128", true}});
      [[fallthrough]];
    case RecipeKind::kFP8Tensor:
      r.fp8 = m.choice<Fp8Type>("fp8_dtype", "e4m3", fp8s);
      r.pow2_scales = m.flag("pow2_scales", false);
      r.eps = m.number("eps", 0.0f);
      break;
  }
  r.validate();
  return r;
}

}  // namespace qtc
