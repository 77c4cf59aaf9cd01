/// \file path_rules.cpp
/// \brief The one check of path_rules.hpp: which rule of a recipe's profile a code path does not implement.
#include "qtc/path_rules.hpp"

#include "qtc/profile.hpp"

namespace qtc {

namespace {

/// An order's name: the text before the ':' of nvfp4_order_text / mx_order_text.
std::string order_name(std::string_view text) { return std::string(text.substr(0, text.find(':'))); }

}  // namespace

std::string unimplemented_rule(const Recipe& r, const PathRules& path) {
  const ProfileRules& pr = profile_rules(r.profile);
  auto refuse = [&](std::string_view rule, std::string_view value, std::string_view implemented) {
    return "rule " + std::string(rule) + " " + std::string(value) + " (profile '" + pr.name + "') is not implemented by " +
           std::string(path.path) + " (" + std::string(implemented) + ")";
  };
  switch (r.kind()) {
    case RecipeKind::kNVFP4:
      if (pr.nvfp4_order == Nvfp4Order::kTorchAO) {
        if (!path.nvfp4_order_torchao) return refuse("nvfp4.order", "torchao", "nvfp4.order te only");
        return {};  // the torchao order reads nan_amax and nvfp4.zero_and_tiny_block_scale, both implemented with it
      }
      if (pr.nvfp4_order != Nvfp4Order::kTE)
        return refuse("nvfp4.order", order_name(nvfp4_order_text(pr.nvfp4_order)),
                      path.nvfp4_order_torchao ? "nvfp4.order te and torchao only" : "nvfp4.order te only");
      if (!path.nvfp4_nan_rules_apart && (pr.nvfp4_nan_scale != pr.nan_amax || pr.nvfp4_neg_zero_positive != pr.nan_amax)) {
        // Name the rule that differs from nan_amax (or, where both others do, nan_amax itself).
        const bool scale_off = pr.nvfp4_nan_scale != pr.nan_amax, zero_off = pr.nvfp4_neg_zero_positive != pr.nan_amax;
        const char* rule = scale_off && zero_off ? "nan_amax" : scale_off ? "nvfp4.nan_scale" : "nvfp4.neg_zero";
        const bool value = scale_off && zero_off ? pr.nan_amax : scale_off ? pr.nvfp4_nan_scale : pr.nvfp4_neg_zero_positive;
        return refuse(rule, value ? "on" : "off",
                      "nan_amax, nvfp4.nan_scale and nvfp4.neg_zero (NVFP4, order te) all off (te) or all on (te_pyref) only");
      }
      return {};
    case RecipeKind::kMXFP8:
    case RecipeKind::kMXFP4: {
      const char* rule = r.is(RecipeKind::kMXFP8) ? "mxfp8.order" : "mxfp4.order";
      const std::string implemented = std::string(path.mx_order_torchao ? "te's and torchao's orders" : "te's order") +
                                      (path.mx_order_triton_kernels && r.is(RecipeKind::kMXFP4) ? ", triton_kernels' and vllm_cutlass'" : "") +
                                      (path.mx_order_fbgemm && r.is(RecipeKind::kMXFP4) ? ", fbgemm's" : "") + " only";
      if (pr.mx_order == MxOrder::kTorchAO && !path.mx_order_torchao) return refuse(rule, "torchao", implemented);
      if ((pr.mx_order == MxOrder::kTritonKernels || pr.mx_order == MxOrder::kVllmCutlass) && r.is(RecipeKind::kMXFP4) &&
          path.mx_order_triton_kernels)
        return {};
      if (pr.mx_order == MxOrder::kFbgemm && r.is(RecipeKind::kMXFP4) && path.mx_order_fbgemm) return {};
      if (pr.mx_order != MxOrder::kTE && pr.mx_order != MxOrder::kTorchAO)
        return refuse(rule, order_name(mx_order_text(pr.mx_order)), implemented);
      return {};  // mxfp8.nonfinite_block: both values on every path
    }
    case RecipeKind::kFP8Block:
    case RecipeKind::kFP8Tensor: {
      const bool tensor = r.is(RecipeKind::kFP8Tensor);
      const Fp8Form form = tensor ? pr.fp8_tensor_form : pr.fp8_form;
      if (form != Fp8Form::kTE && !path.fp8_forms) {
        const std::string_view text = fp8_form_name(form);
        return refuse(tensor ? "fp8.tensor_form" : "fp8.form", text.substr(0, text.find(',')), "fp8.form te only");
      }
      if (!pr.fp8_satfinite && !path.fp8_cast_overflow_nan)
        return refuse("fp8.cast_overflow", "NaN (E4M3) / Inf (E5M2)", "the saturating cast only");
      return {};  // nan_amax, fp8.inf_amax_scale, fp8.scale_order: both values on every path
    }
  }
  return "unknown recipe kind";
}

}  // namespace qtc
