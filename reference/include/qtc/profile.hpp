/// \file profile.hpp
/// \brief Profiles as data: each profile is one named, versioned record of the bit-level rules that
///        implementations choose differently (VECTORS.md "Profiles", DIVERGENCES.md). The reference
///        quantizers and the CUDA launchers read these records; nothing else tests a profile by name.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qtc/numeric.hpp"
#include "qtc/recipe.hpp"

namespace qtc {

// The profiles' constants (kTorchAOPerTensorDivisor, kTorchAOBlockScaleMin, ...) are in numeric.hpp, shared
// with the CUDA kernels.

/// NVFP4 block-scale operation order.
enum class Nvfp4Order : uint8_t {
  kTE,       ///< sf = e4m3(min(bamax * (S_enc * RN(1/6)), FLT_MAX)); x * min(1 / (sf * S_dec), FLT_MAX)
  kTorchAO,  ///< float32 throughout: sf = e4m3(clamp((bamax / 6) / (amax / 2688), 2^-6, 448));
             ///< x * ((1 / (amax / 2688)) / sf) clamped to +-6; torchao's bit-twiddling E2M1 cast
  kModelOpt,  ///< nvidia-modelopt 0.47.0, float32: S = amax / 2688; sf = e4m3(clamp(bamax / (6 * S) (0 -> 1.0), 2^-9,
              ///< 448)); codes of x / (sf * S) by searchsorted (RN-even, saturating, -0.0 and NaN -> +; NaN -> 6)
  kJax,       ///< JAX quantize on XLA CPU (denormals flushed in and out of every float32 operation): xs = x * RN(1/S),
              ///< S = amax / 2688; sf = e4m3(clip(max|xs| / 6, 0, 448)); codes of clip(xs * RN(1/sf), -6, 6), XLA's
              ///< E2M1 convert (NaN -> 0x8); zero blocks: 0 * Inf
  kVllm,      ///< vLLM ref_nvfp4_quant: gs = T(T(1 / amax) * 2688) in the input's dtype T; sf = e4m3(clamp(gs * (bamax * RN(1/6)),
              ///< +-448)); data x * (1 / (sf * (1 / gs))) (a zero divisor replaced by 1e8), clamp +-6, value buckets
};

/// MXFP8 block-scale and data-scaling implementation.
enum class MxOrder : uint8_t {
  kTE,       ///< E8M0 from bamax * RN(1/elem_max) (rceil) or the floor of the exponent (ocp_floor);
             ///< data x * 2^(127 - e) (TE `exp2f_rcp`), satfinite cast
  kTorchAO,  ///< torchao `to_mx`: rceil from ceil(log2f(bamax / elem_max)); floor/ceil/even from the bits
             ///< of bamax; data x / max(2^(e-127), 2^-126) (x * 2^(127-e), 1.0 for e = 0, under rceil);
             ///< clamp to +-elem_max, then the cast (NaN keeps its sign)
  kModelOpt,  ///< nvidia-modelopt 0.47.0 MXFP8QTensor: e = ceil(log2f(bamax / 448)) where > 0 else -127 (zero and NaN
              ///< blocks -> 0x00), clamp [-127, 127]; data clamp(x * 2^(127 - e), +-448) (2^127 for e = 0), PyTorch cast
  kJax,       ///< JAX quantize on XLA CPU, in the input's dtype T: e = round-up E8M0 of T(bamax / elem_max) (F16:
              ///< T(bamax * T(1 / elem_max)); a NaN amax -> 0x00); data T(x * T(1 / T(2^(e-127)))) (e = 0: 2^-127,
              ///< F16: 2^-15), clip +-elem_max; denormals flushed in float32 arithmetic (1 / 2^-127 is Inf)
};

/// What a NaN or Inf block does to an MXFP8 scale under the kTE order.
enum class MxNonFinite : uint8_t {
  kSatFinite,  ///< NaN ignored by the amax; Inf -> 0xFE (TE `float_to_e8m0`, satfinite)
  kNaN,        ///< NaN propagates into the amax; a NaN or Inf block -> 0xFF (OCP MX v1.0)
};

/// One profile's rules. Every field is a rule `qtc profiles` prints and `qtc identify` can toggle.
struct ProfileRules {
  Profile id = Profile::kTE;
  std::string name;     ///< metadata value
  int version = 1;      ///< bumped whenever a rule of this profile changes
  std::string follows;  ///< the implementation (and version) it reproduces
  bool nvfp4 = true, mxfp8 = true, fp8_block = true, fp8_tensor = true;  ///< recipe kinds it defines

  // Every recipe
  bool nan_amax = false;  ///< NaN propagates into block and tensor amaxes (else ignored, maxNum)

  // NVFP4
  Nvfp4Order nvfp4_order = Nvfp4Order::kTE;
  bool nvfp4_neg_zero_positive = false;  ///< -0.0 and NaN data -> code 0x0 (TE's PyTorch reference)
  bool nvfp4_nan_scale = false;          ///< a NaN block scale is stored as 0x7F (else fminf drops it)
  bool nvfp4_tiny_block_floor = false;   ///< block scale clamped up to 2^-6 (zero and tiny blocks)
  bool nvfp4_single_level = false;       ///< defines NVFP4 without a per-tensor scale (metadata per_tensor_scale=0)
  bool nvfp4_stochastic = true;          ///< defines NVFP4 stochastic rounding (TE's references have none)

  // MXFP8
  MxOrder mx_order = MxOrder::kTE;
  MxNonFinite mx_nonfinite = MxNonFinite::kSatFinite;
  std::vector<MxScaleRule> mx_scale_rules;  ///< scale rules this profile defines

  // FP8 block / tensor
  bool fp8_inf_amax_scale_zero = false;  ///< amax = +Inf -> scale 0 (TE's Python/C++ references), else 1
  bool fp8_scale_reciprocal = false;     ///< FP8 scale = fp8_max * RN(1 / amax) (PyTorch's `fp8_max / amax_tensor`),
                                         ///< else RN(fp8_max / amax) (TE)
  bool fp8_satfinite = true;             ///< FP8 block/tensor data cast saturates (cvt satfinite); else a value past
                                         ///< the range becomes NaN (E4M3) / Inf (E5M2), as PyTorch's and ml_dtypes' casts

  /// Rule name -> value, in a fixed order (what `qtc profiles` prints and identify toggles).
  std::vector<std::pair<std::string, std::string>> describe() const;
};

/// Every profile, in a fixed order (te, te_pyref, ocp, torchao).
std::span<const ProfileRules> all_profiles();
/// The rules of `p` (a built-in profile or a registered variant).
const ProfileRules& profile_rules(Profile p);
/// The profile whose metadata name is `name`; throws qtc::Error listing the known names otherwise.
Profile profile_from_name(std::string_view name);
/// The names of the built-in profiles, comma-separated (for error messages and help texts).
std::string profile_names();

/// A rule of a profile that `identify` can toggle: its name and a function that changes `rules` to
/// the alternative value (returns false when the alternative does not apply to `rules`).
struct RuleToggle {
  std::string rule;
  std::string alternative;
  bool (*apply)(ProfileRules& rules);
};
/// Every single-rule change of a profile that `identify` tries.
std::span<const RuleToggle> rule_toggles();

/// Registers a variant (a built-in profile with some rules changed, under a name of its own) and returns its
/// id; used by `qtc identify` to test which rule explains a mismatch. A name registered before returns the
/// earlier id. Thread-safe; ids are never reused; profile_from_name finds variants too.
Profile register_profile_variant(const ProfileRules& rules);

std::string_view mx_scale_rule_name(MxScaleRule r);
/// The operation orders a code path (the vectorized CPU path, the CUDA kernels) implements besides te's.
struct ImplementedOrders {
  bool nvfp4_torchao = false;  ///< Nvfp4Order::kTorchAO
  bool mx_torchao = false;     ///< MxOrder::kTorchAO
};
/// The rule of r's profile (name and value, e.g. "nvfp4.order modelopt") that a path implementing `impl` does not
/// implement, or an empty string. One check for every path that takes a recipe: a path never runs a rule it lacks.
std::string unimplemented_order(const Recipe& r, const ImplementedOrders& impl);

/// What each operation order computes (the value `qtc profiles` prints for nvfp4.order / mxfp8.order).
std::string_view nvfp4_order_text(Nvfp4Order o);
std::string_view mx_order_text(MxOrder o);

}  // namespace qtc
