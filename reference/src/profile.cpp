/// \file profile.cpp
/// \brief The profile records (the one list of profiles), their description and the variants that
///        `qtc identify` builds by toggling one rule.
#include "qtc/profile.hpp"

#include <deque>
#include <mutex>

#include "qtc/error.hpp"

namespace qtc {

namespace {

std::vector<ProfileRules> make_builtin() {
  std::vector<ProfileRules> v;
  ProfileRules te;
  te.id = Profile::kTE;
  te.name = "te";
  te.version = 1;
  te.follows = "TransformerEngine's CUDA kernels (2.x)";
  te.mx_scale_rules = {MxScaleRule::kRceil, MxScaleRule::kOcpFloor};
  v.push_back(te);

  ProfileRules py = te;
  py.id = Profile::kTEPyRef;
  py.name = "te_pyref";
  py.follows = "TransformerEngine's pure-PyTorch and C++ test references";
  py.nan_amax = true;
  py.nvfp4_neg_zero_positive = true;
  py.nvfp4_nan_scale = true;
  py.fp8_inf_amax_scale_zero = true;
  py.nvfp4_stochastic = false;
  v.push_back(py);

  ProfileRules ocp;
  ocp.id = Profile::kOCP;
  ocp.name = "ocp";
  ocp.follows = "OCP Microscaling Formats (MX) v1.0";
  ocp.nvfp4 = ocp.fp8_block = ocp.fp8_tensor = false;
  ocp.nan_amax = true;
  ocp.mx_nonfinite = MxNonFinite::kNaN;
  ocp.mx_scale_rules = {MxScaleRule::kOcpFloor};
  v.push_back(ocp);

  ProfileRules ao;
  ao.id = Profile::kTorchAO;
  ao.name = "torchao";
  ao.version = 2;  // 1: two-level NVFP4 dividing by the total scale, MXFP8 with TE's scale arithmetic
  ao.follows = "torchao 0.18.0 (nvfp4_quantize, to_mx)";
  ao.fp8_block = ao.fp8_tensor = false;
  ao.nan_amax = true;
  ao.nvfp4_order = Nvfp4Order::kTorchAO;
  ao.nvfp4_nan_scale = true;
  ao.nvfp4_tiny_block_floor = true;
  ao.nvfp4_single_level = true;
  ao.nvfp4_stochastic = false;
  ao.mx_order = MxOrder::kTorchAO;
  ao.mx_nonfinite = MxNonFinite::kNaN;
  ao.mx_scale_rules = {MxScaleRule::kRceil, MxScaleRule::kOcpFloor, MxScaleRule::kCeil, MxScaleRule::kEven};
  v.push_back(ao);

  // nvidia-modelopt 0.47.0 (FP8 recipes: not defined here).
  ProfileRules mo;
  mo.id = Profile::kModelOpt;
  mo.name = "modelopt";
  mo.follows = "nvidia-modelopt 0.47.0 (NVFP4QTensor.quantize with get_weights_scaling_factor_2, MXFP8QTensor.quantize)";
  mo.fp8_block = mo.fp8_tensor = false;
  mo.nan_amax = true;
  mo.nvfp4_order = Nvfp4Order::kModelOpt;
  mo.nvfp4_nan_scale = true;
  mo.nvfp4_neg_zero_positive = true;
  mo.nvfp4_stochastic = false;
  mo.mx_order = MxOrder::kModelOpt;
  mo.mx_nonfinite = MxNonFinite::kNaN;  // NaN reaches the block amax (then the scale 0x00 of the order)
  mo.mx_scale_rules = {MxScaleRule::kRceil};
  v.push_back(mo);

  // JAX's block-scale quantizer (jax.nn.scaled_dot_general) on XLA CPU.
  ProfileRules jx;
  jx.id = Profile::kJax;
  jx.name = "jax";
  jx.follows = "JAX 0.10.2 / 0.11.0 jax._src.cudnn.scaled_matmul_stablehlo.quantize (mxfp8, nvfp4 with global_scale "
               "amax / 2688) on XLA CPU";
  jx.fp8_block = jx.fp8_tensor = false;
  jx.nan_amax = true;
  jx.nvfp4_order = Nvfp4Order::kJax;
  jx.nvfp4_nan_scale = true;
  jx.nvfp4_stochastic = false;
  jx.mx_order = MxOrder::kJax;
  jx.mx_nonfinite = MxNonFinite::kNaN;
  jx.mx_scale_rules = {MxScaleRule::kRceil};
  v.push_back(jx);

  // vLLM's NVFP4 emulation reference.
  ProfileRules vl;
  vl.id = Profile::kVllm;
  vl.name = "vllm";
  vl.follows = "vLLM 0.33.0 ref_nvfp4_quant (global_scale = 2688 / amax in the input's dtype, as vLLM's tests)";
  vl.mxfp8 = vl.fp8_block = vl.fp8_tensor = false;
  vl.nan_amax = true;
  vl.nvfp4_order = Nvfp4Order::kVllm;
  vl.nvfp4_nan_scale = true;
  vl.nvfp4_neg_zero_positive = true;
  vl.nvfp4_stochastic = false;
  v.push_back(vl);
  return v;
}

const std::vector<ProfileRules>& builtin() {
  static const std::vector<ProfileRules> v = make_builtin();
  return v;
}

std::mutex g_variant_mutex;
std::deque<ProfileRules>& variants() {
  static std::deque<ProfileRules> v;  // a deque: references stay valid as variants are added
  return v;
}

const char* yes(bool b) { return b ? "yes" : "no"; }

}  // namespace

std::string_view mx_scale_rule_name(MxScaleRule r) {
  switch (r) {
    case MxScaleRule::kRceil: return "rceil";
    case MxScaleRule::kOcpFloor: return "ocp_floor";
    case MxScaleRule::kCeil: return "ceil";
    case MxScaleRule::kEven: return "even";
  }
  return "?";
}

std::span<const ProfileRules> all_profiles() { return builtin(); }

std::string_view nvfp4_order_text(Nvfp4Order o) {
  switch (o) {
    case Nvfp4Order::kTE: return "te: sf = e4m3(bamax * (S_enc * RN(1/6))), data x * (1 / (sf * S_dec))";
    case Nvfp4Order::kTorchAO:
      return "torchao: f32; sf = e4m3(clamp((bamax / 6) / (amax / 2688), 2^-6, 448)), data clamp(x * ((1 / (amax / 2688)) / sf), -6, 6)";
    case Nvfp4Order::kModelOpt:
      return "modelopt: f32; S = amax / 2688; sf = e4m3(clamp(bamax / (6 * S), 2^-9, 448)); data x / (sf * S), "
             "E2M1 by searchsorted (-0.0 -> 0x0, NaN -> 0x7)";
    case Nvfp4Order::kJax:
      return "jax: XLA CPU f32 with denormals flushed; xs = x * RN(1 / (amax / 2688)); sf = e4m3(clip(max|xs| / 6, 0, 448)); "
             "data XLA E2M1 of clip(xs * RN(1 / sf), -6, 6) (NaN -> 0x8; a zero block is 0 * Inf)";
    case Nvfp4Order::kVllm:
      return "vllm: gs = T(T(1 / amax) * 2688) in the input dtype T; sf = e4m3(clamp(gs * (bamax * RN(1/6)), +-448)); data "
             "x * rcp(sf * rcp(gs)), rcp(0) = 1e-8; clamp +-6; value buckets (-0.0 -> 0x0, NaN -> 0x8)";
  }
  return "?";
}

std::string unimplemented_order(const Recipe& r, const ImplementedOrders& impl) {
  const ProfileRules& pr = profile_rules(r.profile);
  auto name = [](std::string_view text) { return std::string(text.substr(0, text.find(':'))); };
  if (r.is(RecipeKind::kNVFP4) && pr.nvfp4_order != Nvfp4Order::kTE &&
      !(pr.nvfp4_order == Nvfp4Order::kTorchAO && impl.nvfp4_torchao))
    return "rule nvfp4.order " + name(nvfp4_order_text(pr.nvfp4_order)) + " (profile '" + pr.name + "')";
  if (r.is(RecipeKind::kMXFP8) && pr.mx_order != MxOrder::kTE && !(pr.mx_order == MxOrder::kTorchAO && impl.mx_torchao))
    return "rule mxfp8.order " + name(mx_order_text(pr.mx_order)) + " (profile '" + pr.name + "')";
  return {};
}

std::string_view mx_order_text(MxOrder o) {
  switch (o) {
    case MxOrder::kTE: return "te: E8M0 from bamax * RN(1/elem_max); data x * 2^(127-e), satfinite";
    case MxOrder::kTorchAO:
      return "torchao to_mx: rceil ceil(log2f(bamax / elem_max)), data x * 2^(127-e) (1.0 for e=0); floor/ceil/even from "
             "bamax's bits, data x / max(2^(e-127), 2^-126); clamp +-elem_max";
    case MxOrder::kModelOpt:
      return "modelopt: e = ceil(log2f(bamax / 448)) if > 0 else -127, clamp [-127, 127]; data clamp(x * 2^(127-e), +-448)";
    case MxOrder::kJax:
      return "jax: in the input dtype T, E8M0 rounded up from T(bamax / elem_max) (F16: T(bamax * T(1 / elem_max))), a NaN "
             "-> 0x00; data T(x * T(1 / T(2^(e-127)))) (e = 0: 2^-127, F16 2^-15), clip +-elem_max; XLA CPU flushes denormals";
  }
  return "?";
}

const ProfileRules& profile_rules(Profile p) {
  const auto i = static_cast<size_t>(p);
  if (i < builtin().size()) return builtin()[i];
  std::lock_guard<std::mutex> lock(g_variant_mutex);
  const size_t vi = i - builtin().size();
  QTC_CHECK(vi < variants().size(), "unknown profile id ", i);
  return variants()[vi];
}

Profile profile_from_name(std::string_view name) {
  for (const auto& p : builtin())
    if (p.name == name) return p.id;
  {
    std::lock_guard<std::mutex> lock(g_variant_mutex);
    for (const auto& p : variants())
      if (p.name == name) return p.id;
  }
  QTC_FAIL("metadata key 'profile': unknown value '", std::string(name), "' (expected one of: ", profile_names(), ")");
}

std::string profile_names() {
  std::string s;
  for (const auto& p : builtin()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

Profile register_profile_variant(const ProfileRules& rules) {
  std::lock_guard<std::mutex> lock(g_variant_mutex);
  for (const auto& p : builtin()) QTC_CHECK(p.name != rules.name, "profile variant '", rules.name, "' takes a built-in name");
  for (const auto& p : variants())
    if (p.name == rules.name) return p.id;  // the same variant registered again (identify, file after file)
  const size_t id = builtin().size() + variants().size();
  QTC_CHECK(id < 256, "too many profile variants");
  variants().push_back(rules);
  variants().back().id = static_cast<Profile>(id);
  return variants().back().id;
}

std::vector<std::pair<std::string, std::string>> ProfileRules::describe() const {
  std::vector<std::pair<std::string, std::string>> d;
  std::string kinds;
  for (auto [on, n] : {std::pair{nvfp4, "nvfp4"}, {mxfp8, "mxfp8"}, {fp8_block, "fp8_block"}, {fp8_tensor, "fp8_tensor"}})
    if (on) kinds += (kinds.empty() ? "" : ", ") + std::string(n);
  d.emplace_back("recipes", kinds);
  if (nvfp4 || fp8_block || fp8_tensor)
    d.emplace_back("nan_amax", nan_amax ? "propagate (a NaN makes the NVFP4/FP8 block and tensor amax NaN)" : "ignore (maxNum)");
  if (nvfp4) {
    d.emplace_back("nvfp4.order", std::string(nvfp4_order_text(nvfp4_order)));
    d.emplace_back("nvfp4.zero_and_tiny_block_scale",
                   nvfp4_order == Nvfp4Order::kModelOpt
                       ? "zero -> 1.0 (0x38), tiny clamped up to 2^-9 (0x01); all-zero tensor: NaN (0xFF)"
                   : nvfp4_order == Nvfp4Order::kJax ? "0x00, data 0 * (1 / 0) (NaN, code 0x8)"
                   : nvfp4_order == Nvfp4Order::kVllm ? "0x00, data multiplier 1 / (1e8 * ...)"
                       : (nvfp4_tiny_block_floor ? "clamped up to 2^-6 (0x08)" : "0x00 below E4M3's range"));
    d.emplace_back("nvfp4.nan_scale", nvfp4_nan_scale ? "0x7F" : "fminf drops it (NaN amax -> S_enc = FLT_MAX)");
    d.emplace_back("nvfp4.neg_zero", nvfp4_neg_zero_positive ? "-0.0 -> 0x0, NaN data -> 0x0" : "-0.0 -> 0x8");
    d.emplace_back("nvfp4.single_level", yes(nvfp4_single_level));
    d.emplace_back("nvfp4.stochastic_rounding", nvfp4_stochastic ? "defined" : "not defined");
  }
  if (mxfp8) {
    std::string rules;
    for (MxScaleRule r : mx_scale_rules) rules += (rules.empty() ? "" : ", ") + std::string(mx_scale_rule_name(r));
    d.emplace_back("mxfp8.scale_rules", rules);
    d.emplace_back("mxfp8.order", std::string(mx_order_text(mx_order)));
    d.emplace_back("mxfp8.nonfinite_block",
                   mx_order == MxOrder::kTorchAO
                       ? "NaN -> 0xFF and NaN data; Inf -> finite scale (rceil 0xFE), Inf -> +-elem_max"
                       : mx_order == MxOrder::kModelOpt
                             ? "NaN -> 0x00, data of the other elements x * 2^127 clamped to +-448; Inf -> 0xFE"
                       : mx_order == MxOrder::kJax
                             ? "NaN -> 0x00 (data x * (1 / 2^-127) = x * Inf: +-elem_max, 0 * Inf NaN); Inf -> 0xFF (data x * 0)"
                             : (mx_nonfinite == MxNonFinite::kNaN ? "NaN propagates; NaN or Inf -> 0xFF, NaN data"
                                                                  : "NaN ignored (maxNum), Inf -> 0xFE (satfinite)"));
    d.emplace_back("mxfp8.zero_block_scale", mx_order == MxOrder::kTorchAO ? "0x00 (data divided by 2^-126; rceil: by 1)"
                                             : mx_order == MxOrder::kModelOpt ? "0x00 (data multiplied by 2^127)"
                                             : mx_order == MxOrder::kJax ? "0x00 (data 0 * (1 / 2^-127): NaN under XLA CPU's denormal flush; F16 0)"
                                                                             : "0x00");
  }
  if (fp8_block || fp8_tensor) {
    d.emplace_back("fp8.inf_amax_scale", fp8_inf_amax_scale_zero ? "0" : "1");
    d.emplace_back("fp8.scale_order", fp8_scale_reciprocal ? "fp8_max * (1 / amax)" : "fp8_max / amax");
    d.emplace_back("fp8.cast_overflow", fp8_satfinite ? "saturate to +-max (satfinite)" : "NaN (E4M3) / Inf (E5M2)");
    d.emplace_back("fp8.eps", "recipe parameter eps (amax clamped to at least eps)");
  }
  d.emplace_back("neg_zero_fp8", "-0.0 -> 0x80 (sign kept)");
  return d;
}

std::span<const RuleToggle> rule_toggles() {
  static const std::vector<RuleToggle> t = {
      {"nan_amax", "flipped", [](ProfileRules& r) { r.nan_amax = !r.nan_amax; return true; }},
      {"nvfp4.order", "te <-> torchao",
       [](ProfileRules& r) {
         if (!r.nvfp4) return false;
         r.nvfp4_order = r.nvfp4_order == Nvfp4Order::kTE ? Nvfp4Order::kTorchAO : Nvfp4Order::kTE;
         r.nvfp4_tiny_block_floor = r.nvfp4_order == Nvfp4Order::kTorchAO;
         return true;
       }},
      {"nvfp4.zero_and_tiny_block_scale", "flipped",
       [](ProfileRules& r) {
         if (!r.nvfp4 || r.nvfp4_order != Nvfp4Order::kTorchAO) return false;
         r.nvfp4_tiny_block_floor = !r.nvfp4_tiny_block_floor;
         return true;
       }},
      {"nvfp4.nan_scale", "flipped", [](ProfileRules& r) { if (!r.nvfp4) return false; r.nvfp4_nan_scale = !r.nvfp4_nan_scale; return true; }},
      {"nvfp4.neg_zero", "flipped",
       [](ProfileRules& r) { if (!r.nvfp4) return false; r.nvfp4_neg_zero_positive = !r.nvfp4_neg_zero_positive; return true; }},
      {"mxfp8.order", "te <-> torchao",
       [](ProfileRules& r) {
         if (!r.mxfp8) return false;
         r.mx_order = r.mx_order == MxOrder::kTE ? MxOrder::kTorchAO : MxOrder::kTE;
         return true;
       }},
      {"mxfp8.nonfinite_block", "flipped",
       [](ProfileRules& r) {
         if (!r.mxfp8 || r.mx_order != MxOrder::kTE) return false;
         r.mx_nonfinite = r.mx_nonfinite == MxNonFinite::kNaN ? MxNonFinite::kSatFinite : MxNonFinite::kNaN;
         return true;
       }},
      {"fp8.scale_order", "fp8_max * (1 / amax) <-> fp8_max / amax",
       [](ProfileRules& r) {
         if (!r.fp8_block && !r.fp8_tensor) return false;
         r.fp8_scale_reciprocal = !r.fp8_scale_reciprocal;
         return true;
       }},
      {"fp8.cast_overflow", "flipped",
       [](ProfileRules& r) {
         if (!r.fp8_block && !r.fp8_tensor) return false;
         r.fp8_satfinite = !r.fp8_satfinite;
         return true;
       }},
      {"fp8.inf_amax_scale", "flipped",
       [](ProfileRules& r) {
         if (!r.fp8_block && !r.fp8_tensor) return false;
         r.fp8_inf_amax_scale_zero = !r.fp8_inf_amax_scale_zero;
         return true;
       }},
  };
  return t;
}

}  // namespace qtc
