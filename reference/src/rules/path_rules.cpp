/// \file path_rules.cpp
/// \brief The one check of path_rules.hpp: which rule of a recipe's profile a code path does not implement.
#include "qtc/path_rules.hpp"

#include "kind_module.hpp"
#include "qtc/profile.hpp"

namespace qtc {

namespace ref::detail {

std::string order_name(std::string_view text) { return std::string(text.substr(0, text.find(':'))); }

std::string PathRefusal::operator()(std::string_view rule, std::string_view value, std::string_view implemented) const {
  return "rule " + std::string(rule) + " " + std::string(value) + " (profile '" + pr.name + "') is not implemented by " +
         std::string(path.path) + " (" + std::string(implemented) + ")";
}

std::string mx_unimplemented_rule(const char* rule, const PathRefusal& refuse, bool mxfp4) {
  const ProfileRules& pr = refuse.pr;
  const PathRules& path = refuse.path;
  // The engines' MXFP4 orders (triton_kernels, vllm_cutlass, fbgemm, quark) exist for MXFP4 only.
  const std::string implemented = std::string(path.mx_order_torchao ? "te's and torchao's orders" : "te's order") +
                                  (mxfp4 && path.mx_order_triton_kernels ? ", triton_kernels' and vllm_cutlass'" : "") +
                                  (mxfp4 && path.mx_order_fbgemm ? ", fbgemm's" : "") +
                                  (mxfp4 && path.mx_order_quark ? ", quark's" : "") + " only";
  if (pr.mx_order == MxOrder::kTorchAO && !path.mx_order_torchao) return refuse(rule, "torchao", implemented);
  if ((pr.mx_order == MxOrder::kTritonKernels || pr.mx_order == MxOrder::kVllmCutlass) && mxfp4 && path.mx_order_triton_kernels)
    return {};
  if (pr.mx_order == MxOrder::kFbgemm && mxfp4 && path.mx_order_fbgemm) return {};
  if (pr.mx_order == MxOrder::kQuark && mxfp4 && path.mx_order_quark) return {};
  if (pr.mx_order != MxOrder::kTE && pr.mx_order != MxOrder::kTorchAO)
    return refuse(rule, order_name(mx_order_text(pr.mx_order)), implemented);
  return {};  // mxfp8.nonfinite_block: both values on every path
}

std::string fp8_unimplemented_rule(bool tensor, const PathRefusal& refuse) {
  const ProfileRules& pr = refuse.pr;
  const Fp8Form form = tensor ? pr.fp8_tensor_form : pr.fp8_form;
  if (form != Fp8Form::kTE && !refuse.path.fp8_forms) {
    const std::string_view text = fp8_form_name(form);
    return refuse(tensor ? "fp8.tensor_form" : "fp8.form", text.substr(0, text.find(',')), "fp8.form te only");
  }
  if (!pr.fp8_satfinite && !refuse.path.fp8_cast_overflow_nan)
    return refuse("fp8.cast_overflow", "NaN (E4M3) / Inf (E5M2)", "the saturating cast only");
  return {};  // nan_amax, fp8.inf_amax_scale, fp8.scale_order: both values on every path
}

}  // namespace ref::detail

// The rules a kind reads are its module's (kinds/<kind>_kind.cpp); the shared MX and FP8 parts are above.
std::string unimplemented_rule(const Recipe& r, const PathRules& path) {
  const ref::detail::PathRefusal refuse{profile_rules(r.profile), path};
  return ref::detail::kind_module(r.kind()).unimplemented_rule(r, refuse);
}

}  // namespace qtc
