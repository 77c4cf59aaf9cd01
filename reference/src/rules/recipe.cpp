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
// The recipe policy's rules: one table, checked in order by validate().

namespace {


/// The NVFP4 options of `r`, or nullptr for another kind (the NVFP4 rules hold vacuously there).
const Nvfp4Options* nv(const Recipe& r) { return r.nvfp4_or_null(); }

/// One rule: violated(r, pr) says whether r breaks it; detail (optional) adds what exactly.
struct RuleCheck {
  RecipeRule rule;
  bool (*violated)(const Recipe& r, const ProfileRules& pr);
  std::string (*detail)(const Recipe& r, const ProfileRules& pr) = nullptr;
};

const RuleCheck kRules[] = {
    {{"planes", "at least one of the rowwise and columnwise planes must be requested"},
     [](const Recipe& r, const ProfileRules&) { return !r.rowwise && !r.columnwise; }},
    {{"profile-defines-kind", "the profile must define the recipe kind"},
     [](const Recipe& r, const ProfileRules& pr) {
       const bool defined[] = {pr.nvfp4, pr.mxfp8, pr.fp8_block, pr.fp8_tensor, pr.mxfp4};
       return !defined[static_cast<int>(r.kind())];
     },
     [](const Recipe& r, const ProfileRules& pr) {
       return "profile '" + pr.name + "' does not define " + std::string(recipe_kind_name(r.kind())) + " (" + pr.follows + ")";
     }},
    {{"nvfp4-e4m3-max", "NVFP4 e4m3_max must be 448 or 256"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->e4m3_max != 448 && nv(r)->e4m3_max != 256; }},
    {{"nvfp4-e4m3-max-256-needs-4over6", "NVFP4 e4m3_max 256 is only defined with fourover6 (TE_FORMATS.md §1.12)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->e4m3_max == 256 && !nv(r)->fourover6; }},
    {{"nvfp4-row-scaled-1x16", "row-scaled NVFP4 cannot use 16x16 tiles (TE_FORMATS.md §1.11)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->row_scaled && nv(r)->tile_2d; }},
    {{"nvfp4-row-scaled-no-rht", "row-scaled NVFP4 cannot use RHT (TE_FORMATS.md §1.11)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->row_scaled && nv(r)->rht; }},
    {{"nvfp4-row-scaled-no-sr", "row-scaled NVFP4 cannot use stochastic rounding (TE_FORMATS.md §1.11)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->row_scaled && nv(r)->stochastic; }},
    {{"nvfp4-row-scaled-needs-rowwise", "row-scaled NVFP4 needs the rowwise plane (TE_FORMATS.md §1.11)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->row_scaled && !r.rowwise; }},
    {{"nvfp4-rht-1x16", "RHT is not combined with 16x16 tiles (TE_FORMATS.md §1.7)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->rht && nv(r)->tile_2d; }},
    {{"nvfp4-4over6-no-rht", "4over6 cannot be combined with RHT (TE_FORMATS.md §1.12)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->fourover6 && nv(r)->rht; }},
    {{"nvfp4-4over6-no-sr", "4over6 cannot be combined with stochastic rounding (TE_FORMATS.md §1.12)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->fourover6 && nv(r)->stochastic; }},
    {{"nvfp4-row-scaled-4over6-rowwise-only", "row-scaled 4over6 produces the rowwise plane only (TE_FORMATS.md §1.12)"},
     [](const Recipe& r, const ProfileRules&) { return nv(r) && nv(r)->fourover6 && nv(r)->row_scaled && r.columnwise; }},
    {{"nvfp4-profile-sr", "the profile must define NVFP4 stochastic rounding (profile rule nvfp4.stochastic_rounding)"},
     [](const Recipe& r, const ProfileRules& pr) { return nv(r) && nv(r)->stochastic && !pr.nvfp4_stochastic; },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "' has no stochastic rounding"; }},
    {{"nvfp4-profile-order-1x16", "the profile's NVFP4 operation order defines 1x16 blocks only (no 16x16, row-scaled, "
                                  "RHT, 4over6 or stochastic rounding)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Nvfp4Options* o = nv(r);
       return o && pr.nvfp4_order != Nvfp4Order::kTE && (o->tile_2d || o->row_scaled || o->rht || o->fourover6 || o->stochastic);
     },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "'"; }},
    {{"nvfp4-single-level", "per_tensor_scale=0 (block scales only) needs a profile that defines single-level NVFP4 "
                            "(profile rule nvfp4.single_level: torchao)"},
     [](const Recipe& r, const ProfileRules& pr) { return nv(r) && !nv(r)->per_tensor_scale && !pr.nvfp4_single_level; },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "' does not"; }},
    {{"mxfp8-profile-scale-rule", "the profile must define the MXFP8 scale_rule"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Mxfp8Options* o = r.mxfp8_or_null();
       return o && std::find(pr.mx_scale_rules.begin(), pr.mx_scale_rules.end(), o->scale_rule) == pr.mx_scale_rules.end();
     },
     [](const Recipe& r, const ProfileRules& pr) {
       std::string allowed;
       for (MxScaleRule x : pr.mx_scale_rules) allowed += (allowed.empty() ? "" : ", ") + std::string(mx_scale_rule_name(x));
       return "profile '" + pr.name + "' defines scale_rule " + allowed + ", not " + std::string(mx_scale_rule_name(r.mxfp8().scale_rule));
     }},
    {{"mxfp4-profile-scale-rule", "the profile must define the MXFP4 scale_rule (profile rule mxfp4.scale_rules)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Mxfp4Options* o = r.mxfp4_or_null();
       return o && std::find(pr.mxfp4_scale_rules.begin(), pr.mxfp4_scale_rules.end(), o->scale_rule) == pr.mxfp4_scale_rules.end();
     },
     [](const Recipe& r, const ProfileRules& pr) {
       std::string allowed;
       for (MxScaleRule x : pr.mxfp4_scale_rules) allowed += (allowed.empty() ? "" : ", ") + std::string(mx_scale_rule_name(x));
       return "profile '" + pr.name + "' defines scale_rule " + allowed + ", not " + std::string(mx_scale_rule_name(r.mxfp4().scale_rule));
     }},
    {{"fp8-block-ue8m0-pow2", "FP8 block scales stored as UE8M0 (scale_dtype=ue8m0) must be powers of two (pow2_scales=1)"},
     [](const Recipe& r, const ProfileRules&) {
       const Fp8BlockOptions* o = r.fp8_block_or_null();
       return o && o->ue8m0_scales && !o->pow2_scales;
     }},
    {{"fp8-block-1x32", "FP8 block 1x32 tiles (DeepGEMM's per_token_cast_to_fp8 with gran_k=32) are defined by the profiles "
                        "whose fp8.form stores s = f(amax) (deepgemm, ...), not by TransformerEngine's 1x128 / 128x128 kernels"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Fp8BlockOptions* o = r.fp8_block_or_null();
       return o && !o->tile_2d && o->block_1d != 128 && (o->block_1d != 32 || pr.fp8_form == Fp8Form::kTE);
     },
     [](const Recipe& r, const ProfileRules& pr) {
       return "block length " + std::to_string(r.fp8_block().block_1d) + " under profile '" + pr.name + "'";
     }},
    {{"fp8-profile-pow2", "pow2_scales=1 needs a profile that defines power-of-two FP8 scales (profile rule fp8.pow2)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const bool fp8 = kind_info(r).fp8_scaling_options;
       const Fp8Form f = r.fp8_tensor_or_null() != nullptr ? pr.fp8_tensor_form : pr.fp8_form;
       return fp8 && r.pow2_scales() && f != Fp8Form::kTE && pr.fp8_pow2 == Fp8Pow2::kNone;
     },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "' does not"; }},
    {{"mxfp8-profile-order-e4m3", "the profile's MXFP8 operation order defines E4M3 elements only (mxfp8.order modelopt)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Mxfp8Options* o = r.mxfp8_or_null();
       return o && pr.mx_order == MxOrder::kModelOpt && o->fp8 != Fp8Type::kE4M3;
     },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "'"; }},
    {{"fp8-eps", "FP8 block/tensor eps must be a finite value >= 0"},
     [](const Recipe& r, const ProfileRules&) {
       const bool has_eps = kind_info(r).fp8_scaling_options;
       return has_eps && !(std::isfinite(r.eps()) && r.eps() >= 0.0f);
     }},
    {{"mxfp8-profile-order-ct", "the profile's MXFP8 operation order defines E4M3 elements in 1x32 blocks only "
                                "(mxfp8.order compressed_tensors, compressed_tensors_triton: groups of 32 along the row)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Mxfp8Options* o = r.mxfp8_or_null();
       const bool ct = pr.mx_order == MxOrder::kCompressedTensors || pr.mx_order == MxOrder::kCompressedTensorsTriton;
       return o && ct && (o->fp8 != Fp8Type::kE4M3 || o->tile_2d);
     },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "'"; }},
};

const RuleCheck* first_broken(const Recipe& r) {
  const ProfileRules& pr = profile_rules(r.profile);
  for (const RuleCheck& c : kRules)
    if (c.violated(r, pr)) return &c;
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
    for (const RuleCheck& c : kRules) out.push_back(c.rule);
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
