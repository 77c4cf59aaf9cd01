/// \file rule_toggles.cpp
/// \brief The single-rule changes of a profile that `qtc identify` tries (profile.hpp rule_toggles), each under the
///        rule's name as `qtc profiles` prints it (ProfileRules::describe, profile.cpp).
#include <vector>

#include "qtc/profile.hpp"

namespace qtc {

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
      {"fp8.form", "x / s <-> x * (1 / s)",
       [](ProfileRules& r) {
         // x / s <-> x * (1 / s), for the forms that store s (te's form has its own toggle, fp8.scale_order)
         if ((!r.fp8_block && !r.fp8_tensor) || r.fp8_form == Fp8Form::kTE) return false;
         auto swap = [](Fp8Form f) {
           if (f == Fp8Form::kCast) return f;  // the libraries' casts multiply: no division form to swap with
           if (f == Fp8Form::kRcpMaxDiv || f == Fp8Form::kRcpMaxMulRcp)
             return f == Fp8Form::kRcpMaxDiv ? Fp8Form::kRcpMaxMulRcp : Fp8Form::kRcpMaxDiv;
           return f == Fp8Form::kInvMulRcp ? Fp8Form::kInvDiv : Fp8Form::kInvMulRcp;
         };
         r.fp8_form = swap(r.fp8_form);
         r.fp8_tensor_form = swap(r.fp8_tensor_form);
         return true;
       }},
      {"fp8.arith_dtype", "flipped",
       [](ProfileRules& r) {
         if ((!r.fp8_block && !r.fp8_tensor) || r.fp8_form == Fp8Form::kTE) return false;
         r.fp8_input_dtype_arith = !r.fp8_input_dtype_arith;
         return true;
       }},
      {"fp8.data_dtype", "flipped",
       [](ProfileRules& r) {
         if ((!r.fp8_block && !r.fp8_tensor) || r.fp8_form == Fp8Form::kTE || !r.fp8_input_dtype_arith) return false;
         r.fp8_data_f32 = !r.fp8_data_f32;
         return true;
       }},
      {"fp8.zero_scale", "flipped",
       [](ProfileRules& r) {
         if ((!r.fp8_block && !r.fp8_tensor) || r.fp8_form == Fp8Form::kTE) return false;
         r.fp8_zero_scale = r.fp8_zero_scale == Fp8ZeroScale::kKeep ? Fp8ZeroScale::kDtypeEps : Fp8ZeroScale::kKeep;
         return true;
       }},
      {"fp8.pow2", "ceil_to_ue8m0 <-> exp2(ceil(log2f))",
       [](ProfileRules& r) {
         if ((!r.fp8_block && !r.fp8_tensor) || r.fp8_pow2 == Fp8Pow2::kNone) return false;
         r.fp8_pow2 = r.fp8_pow2 == Fp8Pow2::kCeilBits ? Fp8Pow2::kCeilLog2 : Fp8Pow2::kCeilBits;
         return true;
       }},
      {"fp8.inf_amax_scale", "flipped",
       [](ProfileRules& r) {
         if (!r.fp8_block && !r.fp8_tensor) return false;
         r.fp8_inf_amax_scale_zero = !r.fp8_inf_amax_scale_zero;
         return true;
       }},
      {"fp8.clamp_nan", "+fp8_max <-> -fp8_max",
       [](ProfileRules& r) {
         if ((!r.fp8_block && !r.fp8_tensor) || r.fp8_clamp_nan == Fp8ClampNaN::kNaN) return false;
         r.fp8_clamp_nan = r.fp8_clamp_nan == Fp8ClampNaN::kPlusMax ? Fp8ClampNaN::kMinusMax : Fp8ClampNaN::kPlusMax;
         return true;
       }},
  };
  return t;
}

}  // namespace qtc
