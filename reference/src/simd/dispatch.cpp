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

bool simd_supports(const Recipe& r, DType input, std::string* why) {
  if (input != DType::kF32 && input != DType::kBF16 && input != DType::kF16)
    return fail(why, "input type is not F32, BF16 or F16");
  // A whitelist: a profile or rule added later takes the scalar path until the vector code implements it.
  switch (r.kind) {
    case RecipeKind::kNVFP4:
      if (r.profile != Profile::kTE && r.profile != Profile::kTEPyRef)
        return fail(why, "NVFP4: the vectorized path implements profiles te and te_pyref only");
      return true;
    case RecipeKind::kMXFP8:
      if (r.profile != Profile::kTE && r.profile != Profile::kTEPyRef && r.profile != Profile::kOCP)
        return fail(why, "MXFP8: the vectorized path implements profiles te, te_pyref and ocp only");
      if (r.scale_rule != MxScaleRule::kRceil && r.scale_rule != MxScaleRule::kOcpFloor)
        return fail(why, "MXFP8: the vectorized path implements scale rules rceil and ocp_floor only");
      return true;
    case RecipeKind::kFP8Block:
    case RecipeKind::kFP8Tensor:
      if (r.profile != Profile::kTE && r.profile != Profile::kTEPyRef)
        return fail(why, "FP8: the vectorized path implements profiles te and te_pyref only");
      return true;
  }
  return fail(why, "unknown recipe kind");
}

bool simd_supports_dequantize(const Recipe& r, DType out, std::string* why) {
  if (out != DType::kF32 && out != DType::kBF16) return fail(why, "dequantize: the vectorized path writes F32 and BF16 only");
  if (r.kind == RecipeKind::kNVFP4 && r.profile != Profile::kTE && r.profile != Profile::kTEPyRef)
    return fail(why, "NVFP4 dequantize: the vectorized path implements profiles te and te_pyref only");
  if (r.kind == RecipeKind::kMXFP8 && r.profile != Profile::kTE && r.profile != Profile::kTEPyRef && r.profile != Profile::kOCP)
    return fail(why, "MXFP8 dequantize: the vectorized path implements profiles te, te_pyref and ocp only");
  if ((r.kind == RecipeKind::kFP8Block || r.kind == RecipeKind::kFP8Tensor) && r.profile != Profile::kTE &&
      r.profile != Profile::kTEPyRef)
    return fail(why, "FP8 dequantize: the vectorized path implements profiles te and te_pyref only");
  return true;
}

std::string simd_target() {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? std::string("none") : std::string(hwy::TargetName(targets.front()));
}

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
