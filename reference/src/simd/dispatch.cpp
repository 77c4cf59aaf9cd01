/// \file dispatch.cpp
/// \brief The choice between the vectorized and the scalar reference (cpu_path.hpp): QTC_SCALAR, the dispatch
///        predicate, and the instruction-set controls the tests use.
#include <hwy/targets.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "kind_module.hpp"
#include "qtc/cpu_path.hpp"
#include "qtc/error.hpp"
#include "qtc/kind.hpp"
#include "qtc/path_rules.hpp"
#include "qtc/profile.hpp"
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

/// The profile rules the vectorized code implements besides te's values (path_rules.hpp): the check the CUDA backend
/// makes too, with its own PathRules.
constexpr PathRules kSimdRules{.path = "the vectorized CPU path", .mx_order_triton_kernels = true};

/// The first rule or recipe option the vectorized code does not implement, or an empty string: the profile's rules
/// through the shared check (a profile or variant whose rules it lacks takes the scalar path), then the options.
std::string rule_outside_simd(const Recipe& r) {
  if (std::string rule = unimplemented_rule(r, kSimdRules); !rule.empty()) return rule;
  return detail::kind_module(r.kind()).simd_refusal(r);
}

}  // namespace

bool simd_supports(const Recipe& r, DType input, std::string* why) {
  if (input != DType::kF32 && input != DType::kBF16 && input != DType::kF16)
    return fail(why, "input type is not F32, BF16 or F16");
  if (const std::string rule = rule_outside_simd(r); !rule.empty()) return fail(why, rule);
  return true;
}

bool simd_supports_dequantize(const Recipe& r, DType out, std::string* why) {
  if (out != DType::kF32 && out != DType::kBF16) return fail(why, "dequantize: the vectorized path writes F32 and BF16 only");
  if (const std::string rule = rule_outside_simd(r); !rule.empty()) return fail(why, rule + " (dequantize)");
  if (detail::kind_module(r.kind()).dequantize_simd == nullptr) {
    const std::string t(kind_info(r).title);
    return fail(why, t + " dequantize: no vectorized decode (the scalar reference decodes every " + t + " plane)");
  }
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
