/// \file recipe.cpp
/// \brief Recipe validation, names and the VECTORS.md metadata mapping.
#include "qtc/recipe.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <sstream>
#include <type_traits>
#include <vector>

#include "kind_module.hpp"
#include "qtc/kind.hpp"
#include "qtc/profile.hpp"

namespace qtc {

std::string_view profile_name(Profile p) { return profile_rules(p).name; }

std::string_view recipe_kind_name(RecipeKind k) {
  return static_cast<int>(k) < kRecipeKindCount ? kind_info(k).name : std::string_view("?");
}

float fp8_max(Fp8Type t) { return t == Fp8Type::kE4M3 ? 448.0f : 57344.0f; }

namespace {

/// The kind as the messages name it.
std::string_view kind_title(RecipeKind k) {
  return static_cast<int>(k) < kRecipeKindCount ? kind_info(k).title : std::string_view("?");
}

}  // namespace

int Recipe::block_cols() const { return kind_info(kind()).block_cols(options_); }

int Recipe::block_rows() const {
  if (kind_info(kind()).per_tensor_scale) return 0;
  return is_2d() ? block_cols() : 1;
}

bool Recipe::is_2d() const { return kind_info(kind()).is_2d(options_); }

Fp8Type Recipe::fp8_type() const {
  if (const auto* o = mxfp8_or_null()) return o->fp8;
  if (const auto* o = fp8_block_or_null()) return o->fp8;
  if (const auto* o = fp8_tensor_or_null()) return o->fp8;
  QTC_FAIL("recipe ", name(), ": rule 'kind-options': the FP8 element type (fp8_dtype) is an option of MXFP8, FP8 block "
           "and FP8 tensor, not of ",
           kind_title(kind()), " (its data is E2M1)");
}

void Recipe::set_fp8_type(Fp8Type t) {
  if (auto* o = std::get_if<Mxfp8Options>(&options_)) o->fp8 = t;
  else if (auto* o = std::get_if<Fp8BlockOptions>(&options_)) o->fp8 = t;
  else if (auto* o = std::get_if<Fp8TensorOptions>(&options_)) o->fp8 = t;
  else (void)fp8_type();  // throws, naming the rule
}

void Recipe::set_pow2_scales(bool on) {
  if (auto* o = std::get_if<Fp8BlockOptions>(&options_)) o->pow2_scales = on;
  else if (auto* o = std::get_if<Fp8TensorOptions>(&options_)) o->pow2_scales = on;
  else (void)pow2_scales();  // throws, naming the rule
}

void Recipe::set_eps(float v) {
  if (auto* o = std::get_if<Fp8BlockOptions>(&options_)) o->eps = v;
  else if (auto* o = std::get_if<Fp8TensorOptions>(&options_)) o->eps = v;
  else (void)eps();  // throws, naming the rule
}

bool Recipe::pow2_scales() const {
  if (const auto* o = fp8_block_or_null()) return o->pow2_scales;
  if (const auto* o = fp8_tensor_or_null()) return o->pow2_scales;
  QTC_FAIL("recipe ", name(), ": rule 'kind-options': pow2_scales is an option of FP8 block and FP8 tensor, not of ",
           kind_title(kind()));
}

float Recipe::eps() const {
  if (const auto* o = fp8_block_or_null()) return o->eps;
  if (const auto* o = fp8_tensor_or_null()) return o->eps;
  QTC_FAIL("recipe ", name(), ": rule 'kind-options': eps is an option of FP8 block and FP8 tensor, not of ",
           kind_title(kind()));
}

// ---------------------------------------------------------------------------------------------------
// The recipe policy's rules, checked in order by validate(): the rules every recipe keeps, then its kind's own, in
// the order its module lists them (kinds/<kind>_kind.cpp, KindModule::rules).

namespace {

using ref::detail::RuleCheck;

const RuleCheck kCommonRules[] = {
    {{"planes", "at least one of the rowwise and columnwise planes must be requested"},
     [](const Recipe& r, const ProfileRules&) { return !r.rowwise && !r.columnwise; }},
    {{"profile-defines-kind", "the profile must define the recipe kind"},
     [](const Recipe& r, const ProfileRules& pr) { return !ref::detail::kind_module(r.kind()).defined_by(pr); },
     [](const Recipe& r, const ProfileRules& pr) {
       return "profile '" + pr.name + "' does not define " + std::string(recipe_kind_name(r.kind())) + " (" + pr.follows + ")";
     }},
};

const RuleCheck* first_broken(const Recipe& r) {
  const ProfileRules& pr = profile_rules(r.profile);
  for (const RuleCheck& c : kCommonRules)
    if (c.violated(r, pr)) return &c;
  for (const RuleCheck* c : ref::detail::kind_module(r.kind()).rules)
    if (c->violated(r, pr)) return c;
  return nullptr;
}

}  // namespace

bool Nvfp4Options::operator==(const Nvfp4Options&) const = default;
bool Mxfp8Options::operator==(const Mxfp8Options&) const = default;
bool Fp8BlockOptions::operator==(const Fp8BlockOptions&) const = default;
bool Fp8TensorOptions::operator==(const Fp8TensorOptions&) const = default;
bool Mxfp4Options::operator==(const Mxfp4Options&) const = default;
bool Recipe::operator==(const Recipe&) const = default;

std::span<const RecipeRule> recipe_rules() {
  static const std::vector<RecipeRule> v = [] {
    std::vector<RecipeRule> out;
    for (const RuleCheck& c : kCommonRules) out.push_back(c.rule);
    for (const KindInfo* k : kind_table())  // each kind's rules; a rule two kinds share (FP8 block, tensor) once
      for (const RuleCheck* c : ref::detail::kind_module(k->kind).rules)
        if (std::none_of(out.begin(), out.end(), [&](const RecipeRule& x) { return x.id == c->rule.id; })) out.push_back(c->rule);
    return out;
  }();
  return v;
}

std::string_view Recipe::broken_rule() const {
  const RuleCheck* c = first_broken(*this);
  return c == nullptr ? std::string_view() : c->rule.id;
}

void Recipe::validate() const {
  const RuleCheck* c = first_broken(*this);
  if (c == nullptr) return;
  const std::string detail = c->detail != nullptr ? c->detail(*this, profile_rules(profile)) : std::string();
  QTC_FAIL("recipe ", name(), ": rule '", c->rule.id, "': ", c->rule.text, detail.empty() ? "" : ": ", detail);
}

Recipe Recipe::of(const RecipeOptions& o, Profile p, bool rowwise_plane, bool columnwise_plane) {
  Recipe r;
  r.options_ = o;
  r.profile = p;
  r.rowwise = rowwise_plane;
  r.columnwise = columnwise_plane;
  return r;
}

RecipeOptions Recipe::default_options(RecipeKind k) {
  QTC_CHECK(static_cast<int>(k) < kRecipeKindCount, "unknown recipe kind ", static_cast<int>(k));
  return kind_info(k).default_options();
}

void Recipe::wrong_kind(RecipeKind wanted) const {
  QTC_FAIL("recipe ", name(), ": rule 'kind-options': ", kind_title(wanted), " options were asked of a recipe of kind ",
           kind_title(kind()), " (a recipe holds the options of its own kind only)");
}

void Recipe::validate_input(DType input, int64_t rows, int64_t cols) const {
  validate();
  // The input rules, named like the recipe rules (their ids start with the kind they concern, or "input").
  QTC_CHECK(input == DType::kF32 || input == DType::kBF16 || input == DType::kF16, "recipe ", name(),
            ": rule 'input-dtype': input must be F32, BF16 or F16, got ", dtype_name(input));
  QTC_CHECK(rows >= 0 && cols >= 0, "recipe ", name(), ": rule 'input-shape': negative shape [", rows, ", ", cols, "]");
  if (const Nvfp4Options* nv = nvfp4_or_null()) {
    QTC_CHECK(cols % 16 == 0, "recipe ", name(), ": rule 'nvfp4-input-k16': NVFP4 needs K % 16 == 0, got K = ", cols,
              " (TE_FORMATS.md §1.1)");
    // torchao's nvfp4_quantize blocks along K only: its rowwise plane takes any M (columnwise blocks run along M).
    const bool any_m = profile_rules(profile).nvfp4_order != Nvfp4Order::kTE && !columnwise;
    QTC_CHECK(any_m || rows % 16 == 0, "recipe ", name(), ": rule 'nvfp4-input-m16': NVFP4 needs M % 16 == 0, got M = ", rows,
              " (TE_FORMATS.md §1.1; torchao's rowwise-only plane takes any M)");
    QTC_CHECK(!nv->rht || input == DType::kBF16, "recipe ", name(),
              ": rule 'nvfp4-input-rht-bf16': RHT is only defined for BF16 input (TE_FORMATS.md §1.9), got ", dtype_name(input));
  }
}

std::string Recipe::name() const {
  std::ostringstream os;
  os << kind_info(kind()).name_of(options_);
  if (profile != Profile::kTE) os << "_" << profile_name(profile);
  if (!rowwise) os << "_colonly";
  if (!columnwise) os << "_rowonly";
  return os.str();
}

std::string float_text(float v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  (void)ec;
  return std::string(buf, p);
}

const char* fp8_type_text(Fp8Type t) { return t == Fp8Type::kE4M3 ? "e4m3" : "e5m2"; }

std::map<std::string, std::string> Recipe::to_metadata() const {
  std::map<std::string, std::string> md;
  md["qtc.schema"] = "1";
  md["recipe"] = std::string(recipe_kind_name(kind()));
  md["profile"] = std::string(profile_name(profile));
  kind_info(kind()).to_metadata(options_, md);
  if (!rowwise) md["rowwise"] = "0";
  if (!columnwise) md["columnwise"] = "0";
  return md;
}

bool MetadataReader::flag(const std::string& key, bool dflt) const {
  const std::string v = get(key, dflt ? "1" : "0");
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  QTC_FAIL("metadata key '", key, "': expected 0 or 1, got '", v, "'");
}

float MetadataReader::number(const std::string& key, float dflt) const {
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

uint64_t MetadataReader::integer(const std::string& key, uint64_t dflt) const {
  if (!has(key)) return dflt;
  const std::string v = get(key, "");
  uint64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  QTC_CHECK(ec == std::errc() && p == v.data() + v.size() && !v.empty(), "metadata key '", key, "': '", v,
            "' is not a non-negative integer");
  return out;
}

Recipe Recipe::from_metadata(const std::map<std::string, std::string>& md) {
  MetadataReader m{md};
  QTC_CHECK(m.has("recipe"), "metadata key 'recipe' is missing");
  if (m.has("qtc.schema")) QTC_CHECK(m.get("qtc.schema", "") == "1", "metadata key 'qtc.schema': unsupported schema '", m.get("qtc.schema", ""), "' (this qtc reads schema 1)");
  const std::string kind_name = m.get("recipe", "");
  const KindInfo* kind = find_kind(kind_name);
  if (kind == nullptr) {
    std::string allowed;
    for (const KindInfo* k : kind_table()) allowed += (allowed.empty() ? "" : ", ") + std::string(k->name);
    QTC_FAIL("metadata key 'recipe': unknown value '", kind_name, "' (expected one of: ", allowed, ")");
  }
  const Profile profile = profile_from_name(m.get("profile", "te"));
  const bool rowwise = m.flag("rowwise", true);
  const bool columnwise = m.flag("columnwise", true);
  // Keys that belong to other recipes are rejected, so a typo cannot be silently ignored.
  static const std::vector<std::string> kCommon = {"qtc.schema", "recipe", "source", "profile", "rowwise", "columnwise",
                                                     "layout", "swizzled"};  // layout keys: native_layout.hpp
  for (const auto& [key, value] : md) {
    bool known = std::find(kCommon.begin(), kCommon.end(), key) != kCommon.end();
    const auto& ks = kind->metadata_keys;
    known = known || std::find(ks.begin(), ks.end(), key) != ks.end();
    // Free-form annotations (Wycheproof-style case ids, comments, flags) live under "qtc.note." / "case." / "comment".
    known = known || key.rfind("case", 0) == 0 || key.rfind("comment", 0) == 0 || key.rfind("flags", 0) == 0 ||
            key.rfind("qtc.note", 0) == 0 || key.rfind("acceptable", 0) == 0;
    QTC_CHECK(known, "metadata key '", key, "' is not a parameter of recipe '", kind->name, "'");
  }
  // The kind's alternative, holding only its options (keys of other kinds were refused above).
  const RecipeOptions opts = kind->from_metadata(m);
  const Recipe r = Recipe::of(opts, profile, rowwise, columnwise);
  r.validate();
  return r;
}

}  // namespace qtc
