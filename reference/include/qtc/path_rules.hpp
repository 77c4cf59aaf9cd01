/// \file path_rules.hpp
/// \brief What a code path other than the scalar reference (the vectorized CPU path, the CUDA kernels) implements of
///        the profile rules (profile.hpp), and the one check every such path makes before it runs a recipe: the
///        first rule of the recipe's profile whose value the path does not implement, by its name. A path never runs
///        a rule it lacks; a rule that no PathRules field names is implemented by every path at every value.
#pragma once
#include <string>
#include <string_view>

#include "qtc/recipe.hpp"

namespace qtc {

/// The rule values a path implements besides te's (te's value of every rule is implemented by every path).
struct PathRules {
  std::string_view path;  ///< who refuses, e.g. "the CUDA kernels" (the subject of the message)
  bool nvfp4_order_torchao = false;  ///< nvfp4.order torchao (with nvfp4.zero_and_tiny_block_scale both ways)
  bool mx_order_torchao = false;     ///< mxfp8.order torchao, for MXFP8 and MXFP4 (their shared `mx_order`)
  bool mx_order_triton_kernels = false;  ///< mxfp4.order triton_kernels and vllm_cutlass (MXFP4 only)
  bool mx_order_fbgemm = false;          ///< mxfp4.order fbgemm (MXFP4 only)
  bool mx_order_quark = false;           ///< mxfp4.order quark (MXFP4 only)
  /// NVFP4 under nvfp4.order te: nan_amax, nvfp4.nan_scale and nvfp4.neg_zero each at either value; else only all
  /// three off (te) or all three on (te_pyref).
  bool nvfp4_nan_rules_apart = false;
  bool fp8_cast_overflow_nan = false;  ///< fp8.cast_overflow NaN / Inf (else the saturating cast only)
  bool fp8_forms = false;              ///< fp8.form / fp8.tensor_form other than te (and the rules only they read)
};

/// Empty when `path` implements every rule of r's profile that r's kind reads; otherwise the first one it does not,
/// as "rule NAME VALUE (profile 'P') is not implemented by PATH (what it implements)". The rules a kind reads: nan_amax (NVFP4, FP8 block /
/// tensor), nvfp4.* (NVFP4), mxfp8.order and mxfp8.nonfinite_block (MXFP8, MXFP4), fp8.* (FP8 block / tensor).
std::string unimplemented_rule(const Recipe& r, const PathRules& path);

}  // namespace qtc
