/// \file dispatch.cpp
/// \brief The choice between the vectorized and the scalar reference (cpu_path.hpp): QTC_SCALAR, the dispatch
///        predicate, and the instruction-set controls the tests use.
#include <hwy/targets.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "qtc/cpu_path.hpp"
#include "qtc/error.hpp"
#include "simd/simd.hpp"

namespace qtc::ref {

namespace {

/// -1: not read yet; else the CpuPath value.
std::atomic<int> g_path{-1};

CpuPath path_from_env() {
  const char* v = std::getenv("QTC_SCALAR");
  const bool scalar = v != nullptr && std::string_view(v) != "" && std::string_view(v) != "0";
  return scalar ? CpuPath::kScalar : CpuPath::kSimd;
}

bool fail(std::string* why, const std::string& text) {
  if (why != nullptr) *why = text;
  return false;
}

}  // namespace

CpuPath cpu_path() {
  int p = g_path.load(std::memory_order_relaxed);
  if (p < 0) {
    p = static_cast<int>(path_from_env());
    g_path.store(p, std::memory_order_relaxed);
  }
  return static_cast<CpuPath>(p);
}

void set_cpu_path(CpuPath p) { g_path.store(static_cast<int>(p), std::memory_order_relaxed); }

namespace {

/// The rules the vectorized code implements, read from the profile record (profile.hpp), not its name: a
/// profile or variant whose rules it does not implement takes the scalar path. Returns the first rule that
/// is outside, or nullptr.
const char* rule_outside_simd(const Recipe& r) {
  const ProfileRules& pr = profile_rules(r.profile);
  // The operation orders (profile.hpp): te only; the same check the CUDA backend makes (unimplemented_order).
  if (!unimplemented_order(r, ImplementedOrders{}).empty())
    return r.is(RecipeKind::kNVFP4)   ? "NVFP4: the vectorized path implements nvfp4.order te only"
           : r.is(RecipeKind::kMXFP4) ? "MXFP4: no vectorized path (the scalar reference quantizes every MXFP4 recipe)"
                                      : "MXFP8: the vectorized path implements mxfp8.order te only";
  switch (r.kind()) {
    case RecipeKind::kNVFP4:
      if (pr.nvfp4_order != Nvfp4Order::kTE) return "NVFP4: the vectorized path implements nvfp4.order te only";
      if (pr.nvfp4_tiny_block_floor) return "NVFP4: the vectorized path has no tiny-block scale floor";
      // One flag carries three rules in the vector code: all off (te) or all on (te_pyref).
      if (pr.nvfp4_neg_zero_positive != pr.nvfp4_nan_scale || pr.nvfp4_neg_zero_positive != pr.nan_amax)
        return "NVFP4: the vectorized path implements -0.0 -> 0x0, NaN scale 0x7F and NaN amax together or not at all";
      return nullptr;
    case RecipeKind::kMXFP8:
      if (pr.mx_order != MxOrder::kTE) return "MXFP8: the vectorized path implements mxfp8.order te only";
      if (r.mxfp8().scale_rule != MxScaleRule::kRceil && r.mxfp8().scale_rule != MxScaleRule::kOcpFloor)
        return "MXFP8: the vectorized path implements scale rules rceil and ocp_floor only";
      return nullptr;
    case RecipeKind::kFP8Block:
    case RecipeKind::kFP8Tensor:
      if (!pr.fp8_satfinite) return "FP8: the vectorized path implements the saturating data cast only";
      if (pr.fp8_form != Fp8Form::kTE || pr.fp8_tensor_form != Fp8Form::kTE) return "FP8: the vectorized path implements fp8.form te only";
      if (r.fp8_block_or_null() != nullptr && r.fp8_block().ue8m0_scales) return "FP8 block: the vectorized path writes F32 scales only";
      return nullptr;
    case RecipeKind::kMXFP4:
      return "MXFP4: no vectorized path (the scalar reference, mxfp4.cpp, quantizes and dequantizes every MXFP4 recipe)";
  }
  return "unknown recipe kind";
}

}  // namespace

bool simd_supports(const Recipe& r, DType input, std::string* why) {
  if (input != DType::kF32 && input != DType::kBF16 && input != DType::kF16)
    return fail(why, "input type is not F32, BF16 or F16");
  if (const char* rule = rule_outside_simd(r)) return fail(why, rule);
  return true;
}

bool simd_supports_dequantize(const Recipe& r, DType out, std::string* why) {
  if (out != DType::kF32 && out != DType::kBF16) return fail(why, "dequantize: the vectorized path writes F32 and BF16 only");
  if (const char* rule = rule_outside_simd(r)) return fail(why, (std::string(rule) + " (dequantize)").c_str());
  return true;
}

std::string simd_target() { return simd::dispatched_target(); }

std::vector<std::string> simd_available_targets() {
  std::vector<std::string> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) out.emplace_back(hwy::TargetName(t));
  return out;
}

void simd_force_target(const std::string& name) {
  if (name.empty()) {
    hwy::SetSupportedTargetsForTest(0);
    return;
  }
  hwy::SetSupportedTargetsForTest(0);
  for (int64_t t : hwy::SupportedAndGeneratedTargets())
    if (name == hwy::TargetName(t)) {
      hwy::SetSupportedTargetsForTest(t);
      return;
    }
  QTC_FAIL("simd_force_target: instruction set '", name, "' is not compiled in or not supported by this machine");
}

namespace simd {

bool enabled_any() { return cpu_path() == CpuPath::kSimd; }
bool enabled(const Recipe& r, DType input) { return enabled_any() && simd_supports(r, input); }
bool enabled_dequantize(const Recipe& r, DType out) { return enabled_any() && simd_supports_dequantize(r, out); }

}  // namespace simd

}  // namespace qtc::ref
