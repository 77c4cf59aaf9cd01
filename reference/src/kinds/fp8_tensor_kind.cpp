/// \file fp8_tensor_kind.cpp
/// \brief The FP8 per-tensor module (TE_FORMATS.md §4): names, metadata keys and mapping, quantizers (fp8.cpp and
///        peers/fp8_peers.cpp scalar, simd/fp8_simd.cpp vectorized). One scale per tensor: no blocks, no layout.
#include <sstream>

#include "internal.hpp"
#include "kind_module.hpp"
#include "qtc/profile.hpp"
#include "simd/simd.hpp"

namespace qtc::ref::detail {
namespace fp8_tensor_kind {  // named, not anonymous: the unity build puts the kind files in one TU

constexpr std::string_view kKeys[] = {"pow2_scales", "eps", "fp8_dtype"};

const Fp8TensorOptions& opts(const RecipeOptions& o) { return std::get<Fp8TensorOptions>(o); }

std::string name_of(const RecipeOptions& ro) {
  const Fp8TensorOptions& o = opts(ro);
  std::ostringstream os;
  os << "fp8tensor_" << fp8_type_text(o.fp8) << (o.pow2_scales ? "_pow2" : "");
  if (o.eps != 0.0f) os << "_eps" << o.eps;
  return os.str();
}

void to_metadata(const RecipeOptions& ro, std::map<std::string, std::string>& md) {
  const Fp8TensorOptions& o = opts(ro);
  md["fp8_dtype"] = fp8_type_text(o.fp8);
  md["pow2_scales"] = o.pow2_scales ? "1" : "0";
  md["eps"] = float_text(o.eps);
}

RecipeOptions from_metadata(const MetadataReader& m) {
  Fp8TensorOptions o;
  o.fp8 = m.fp8_type();
  o.pow2_scales = m.flag("pow2_scales", false);
  o.eps = m.number("eps", 0.0f);
  return o;
}



// §4: one scale_inv (a 1x1 F32 matrix in each plane) and one amax.
void plane_geometry(const RecipeOptions&, PlaneKind, int64_t M, int64_t K, PlaneSpec& s) {
  using namespace geom;
  s.per_tensor = true;
  s.scale_type = ScaleType::kF32;
  s.compact = {1, 1};
  s.padded = {1, 1};
  s.scale_m_axis = MAxis::kNone;
  s.block_rows = M;
  s.block_cols = K;
  s.amax_count = 1;
  s.layouts = kTeLayouts;  // the 1x1 matrix is the same in both
}


std::string unimplemented_rule(const Recipe&, const PathRefusal& refuse) {
  return fp8_unimplemented_rule(true, refuse);
}


std::string columnwise_not_derivable(const Recipe&) { return {}; }

void check_fsdp(const Recipe&, int64_t, bool) {}


double operand_value(const OperandPlane& op, int64_t r, int64_t c) {
  return operand::fp8_value(op.p.data[static_cast<size_t>(r * op.C + c)], op.fp8) * static_cast<double>(op.scale_inv);
}

void conform_variants(const ProfileRules& pr, std::vector<Recipe>& out) {
  // element type x pow2 x eps.
  if (!pr.fp8_tensor) return;
  for (Fp8Type t : {Fp8Type::kE4M3, Fp8Type::kE5M2})
    for (bool p2 : {false, true})
      for (float eps : {0.0f, 0.5f}) out.push_back(Recipe::of(Fp8TensorOptions{.fp8 = t, .pow2_scales = p2, .eps = eps}, pr.id));
}


// The kind's recipe rules (Recipe::validate, after the rules every recipe keeps), in the order they are checked.
const RuleCheck* const kRules[] = {&kFp8ProfilePow2Rule, &kFp8EpsRule};

}  // namespace fp8_tensor_kind

const KindModule kFp8TensorModule = {
    .info = {.kind = kind_of_options<Fp8TensorOptions>,
             .name = "fp8_tensor",
             .title = "FP8 tensor",
             .metadata_keys = fp8_tensor_kind::kKeys,
             .e2m1_data = false,
             .e8m0_scales = false,
             .per_tensor_scale = true,
             .global_amax = true,
             .plane_amax = false,
             .columnwise_transposed = true,
             .fp8_scaling_options = true,
             .input_rows_multiple = 1,
             .default_options = [] { return RecipeOptions(Fp8TensorOptions{}); },
             .block_cols = [](const RecipeOptions&) { return 0; },
             .is_2d = [](const RecipeOptions&) { return false; },
             .name_of = fp8_tensor_kind::name_of,
             .to_metadata = fp8_tensor_kind::to_metadata,
             .from_metadata = fp8_tensor_kind::from_metadata,
             .conform_variants = fp8_tensor_kind::conform_variants,
             .conform_odd_shapes = false,
             .bound_exempt = nullptr},
    .defined_by = [](const ProfileRules& pr) { return pr.fp8_tensor; },
    .rules = fp8_tensor_kind::kRules,
    .quantize = [](const MatrixView& x, const Recipe& r) { return quantize_fp8_tensor(x, r, nullptr); },
    .quantize_simd = [](const MatrixView& x, const Recipe& r) { return simd::quantize_fp8_tensor(x, r, nullptr); },
    .quantize_amax = quantize_fp8_tensor,
    .quantize_amax_simd = simd::quantize_fp8_tensor,
    .plane_rows = fp8_plane_rows,
    .dequantize_simd = simd::dequantize_fp8,
    .simd_refusal = [](const Recipe&) { return std::string(); },
    .plane_geometry = fp8_tensor_kind::plane_geometry,
    .unimplemented_rule = fp8_tensor_kind::unimplemented_rule,
    .columnwise_not_derivable = fp8_tensor_kind::columnwise_not_derivable,
    .check_fsdp = fp8_tensor_kind::check_fsdp,
    .operand_value = fp8_tensor_kind::operand_value,
    .check_gemm_pair = [](const Recipe&, const Recipe&, DType) {},
};

}  // namespace qtc::ref::detail
