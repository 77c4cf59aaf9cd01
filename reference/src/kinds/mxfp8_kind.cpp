/// \file mxfp8_kind.cpp
/// \brief The MXFP8 module (TE_FORMATS.md §2): names, metadata keys and mapping, block geometry, quantizers
///        (mxfp8.cpp scalar, simd/fp8_simd.cpp vectorized).
#include <sstream>

#include "internal.hpp"
#include "kind_module.hpp"
#include "qtc/codec.hpp"
#include "qtc/profile.hpp"
#include "simd/simd.hpp"

namespace qtc::ref::detail {
namespace mxfp8_kind {  // named, not anonymous: the unity build puts the kind files in one TU

constexpr std::string_view kKeys[] = {"fp8_dtype", "scale_rule", "rounding", "tile"};

const Mxfp8Options& opts(const RecipeOptions& o) { return std::get<Mxfp8Options>(o); }

std::string name_of(const RecipeOptions& ro) {
  const Mxfp8Options& o = opts(ro);
  std::ostringstream os;
  os << "mxfp8_" << fp8_type_text(o.fp8) << "_"
     << (o.scale_rule == MxScaleRule::kOcpFloor ? "ocpfloor" : mx_scale_rule_name(o.scale_rule)) << (o.tile_2d ? "_32x32" : "");
  return os.str();
}

void to_metadata(const RecipeOptions& ro, std::map<std::string, std::string>& md) {
  const Mxfp8Options& o = opts(ro);
  md["fp8_dtype"] = fp8_type_text(o.fp8);
  md["scale_rule"] = std::string(mx_scale_rule_name(o.scale_rule));
  md["rounding"] = "rne";
  if (o.tile_2d) md["tile"] = "32x32";
}

RecipeOptions from_metadata(const MetadataReader& m) {
  Mxfp8Options o;
  o.fp8 = m.fp8_type();
  o.scale_rule = m.choice<MxScaleRule>("scale_rule", "rceil", {{"rceil", MxScaleRule::kRceil}, {"ocp_floor", MxScaleRule::kOcpFloor},
                                                              {"ceil", MxScaleRule::kCeil}, {"even", MxScaleRule::kEven},
                                                              {"pow2_round", MxScaleRule::kPow2Round}});
  (void)m.choice<int>("rounding", "rne", {{"rne", 0}});
  o.tile_2d = m.choice<bool>("tile", "1x32", {{"1x32", false}, {"32x32", true}});
  return o;
}


// Data keeps x's orientation in both planes; only the scale blocks differ: plane row i is x's row i.
PlaneRows plane_rows(const DequantInput& in) {
  const Plane& p = in.p;
  const PlaneSpec& spec = in.spec;
  const int64_t K = in.q.cols;
  const Fp8Type fp8 = in.q.recipe.fp8_type();
  return {in.q.rows, false, [&p, &spec, K, fp8](int64_t i, float* v) {
            for (int64_t j = 0; j < K; ++j) {
              const Index2 se = spec.scale_entry(i, j);
              const uint8_t e = p.scale.byte(se.row, se.col);
              v[j] = decode_e8m0(e) * decode_fp8(p.data[static_cast<size_t>(i * K + j)], fp8);
            }
          }};
}


// §2: E8M0 scales; the columnwise plane keeps x's orientation, blocks down columns.
void plane_geometry(const RecipeOptions& ro, PlaneKind pk, int64_t M, int64_t K, PlaneSpec& s) {
  using namespace geom;
  s.scale_type = ScaleType::kE8M0;
  const int64_t h = opts(ro).tile_2d ? 32 : 1;
  if (pk == PlaneKind::kRowwise) {
    s.compact = {M, cdiv(K, 32)};
    s.padded = {roundup(M, 128), roundup(cdiv(K, 32), 4)};
    s.block_rows = h;
    s.block_cols = 32;
    s.scale_step_k = 32;
  } else {
    s.compact = {cdiv(M, 32), K};
    s.padded = {roundup(cdiv(M, 32), 4), roundup(K, 128)};
    s.tiles_transposed = true;
    s.block_rows = 32;
    s.block_cols = h;
    s.scale_step_m = 32;
  }
  s.scale_m_axis = MAxis::kRows;
  s.layouts = kTiledLayouts;
}


std::string unimplemented_rule(const Recipe&, const PathRefusal& refuse) {
  return mx_unimplemented_rule("mxfp8.order", refuse, false);
}


std::string columnwise_not_derivable(const Recipe& r) {
  if (!r.is_2d())
    return "MXFP8 1x32: columnwise blocks (32 rows) differ from rowwise blocks (32 columns); the columnwise plane must be "
           "quantized or gathered, not derived (TE_FORMATS.md §8.3)";
  return {};
}

void check_fsdp(const Recipe&, int64_t shard_M, bool) {
  QTC_CHECK(shard_M % 32 == 0, "FSDP2 requires shard_M (", shard_M, ") of an MXFP8 tensor to be a multiple of 32 (TE_FORMATS.md §8.3)");
}


double operand_value(const OperandPlane& op, int64_t r, int64_t c) {
  const double v = operand::fp8_value(op.p.data[static_cast<size_t>(r * op.C + c)], op.fp8);
  const uint8_t e = op.mx_col ? op.p.scale.byte(r / 32, c) : op.p.scale.byte(r, c / 32);
  return v * static_cast<double>(decode_e8m0(e));
}

void conform_variants(const ProfileRules& pr, std::vector<Recipe>& out) {
  // element type x scale rule x 32x32 blocks.
  for (Fp8Type t : {Fp8Type::kE4M3, Fp8Type::kE5M2})
    for (MxScaleRule rule : pr.mx_scale_rules)
      for (bool b2 : {false, true}) out.push_back(Recipe::of(Mxfp8Options{.fp8 = t, .scale_rule = rule, .tile_2d = b2}, pr.id));
}


// The kind's recipe rules (Recipe::validate, after the rules every recipe keeps), in the order they are checked.
const RuleCheck kProfileScaleRule = {{"mxfp8-profile-scale-rule", "the profile must define the MXFP8 scale_rule"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Mxfp8Options* o = r.mxfp8_or_null();
       return o && std::find(pr.mx_scale_rules.begin(), pr.mx_scale_rules.end(), o->scale_rule) == pr.mx_scale_rules.end();
     },
     [](const Recipe& r, const ProfileRules& pr) {
       std::string allowed;
       for (MxScaleRule x : pr.mx_scale_rules) allowed += (allowed.empty() ? "" : ", ") + std::string(mx_scale_rule_name(x));
       return "profile '" + pr.name + "' defines scale_rule " + allowed + ", not " + std::string(mx_scale_rule_name(r.mxfp8().scale_rule));
     }};
const RuleCheck kProfileOrderE4m3 = {{"mxfp8-profile-order-e4m3", "the profile's MXFP8 operation order defines E4M3 elements only (mxfp8.order modelopt)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Mxfp8Options* o = r.mxfp8_or_null();
       return o && pr.mx_order == MxOrder::kModelOpt && o->fp8 != Fp8Type::kE4M3;
     },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "'"; }};
const RuleCheck kProfileOrderCt = {{"mxfp8-profile-order-ct", "the profile's MXFP8 operation order defines E4M3 elements in 1x32 blocks only "
                                "(mxfp8.order compressed_tensors, compressed_tensors_triton: groups of 32 along the row)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Mxfp8Options* o = r.mxfp8_or_null();
       const bool ct = pr.mx_order == MxOrder::kCompressedTensors || pr.mx_order == MxOrder::kCompressedTensorsTriton;
       return o && ct && (o->fp8 != Fp8Type::kE4M3 || o->tile_2d);
     },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "'"; }};
const RuleCheck* const kRules[] = {&kProfileScaleRule, &kProfileOrderE4m3, &kProfileOrderCt};

}  // namespace mxfp8_kind

const KindModule kMxfp8Module = {
    .info = {.kind = kind_of_options<Mxfp8Options>,
             .name = "mxfp8",
             .title = "MXFP8",
             .metadata_keys = mxfp8_kind::kKeys,
             .e2m1_data = false,
             .e8m0_scales = true,
             .per_tensor_scale = false,
             .global_amax = false,
             .plane_amax = false,
             .columnwise_transposed = false,
             .fp8_scaling_options = false,
             .input_rows_multiple = 1,
             .default_options = [] { return RecipeOptions(Mxfp8Options{}); },
             .block_cols = [](const RecipeOptions&) { return 32; },
             .is_2d = [](const RecipeOptions& o) { return mxfp8_kind::opts(o).tile_2d; },
             .name_of = mxfp8_kind::name_of,
             .to_metadata = mxfp8_kind::to_metadata,
             .from_metadata = mxfp8_kind::from_metadata,
             .conform_variants = mxfp8_kind::conform_variants,
             .conform_odd_shapes = false,
             .bound_exempt = nullptr},
    .defined_by = [](const ProfileRules& pr) { return pr.mxfp8; },
    .rules = mxfp8_kind::kRules,
    .quantize = quantize_mxfp8,
    .quantize_simd = simd::quantize_mxfp8,
    .quantize_amax = nullptr,
    .quantize_amax_simd = nullptr,
    .plane_rows = mxfp8_kind::plane_rows,
    .dequantize_simd = simd::dequantize_mxfp8,
    .simd_refusal = [](const Recipe& r) -> std::string {
      const MxScaleRule rule = r.mxfp8().scale_rule;
      return rule == MxScaleRule::kRceil || rule == MxScaleRule::kOcpFloor
                 ? "" : "MXFP8: the vectorized path implements scale rules rceil and ocp_floor only";
    },
    .plane_geometry = mxfp8_kind::plane_geometry,
    .unimplemented_rule = mxfp8_kind::unimplemented_rule,
    .columnwise_not_derivable = mxfp8_kind::columnwise_not_derivable,
    .check_fsdp = mxfp8_kind::check_fsdp,
    .operand_value = mxfp8_kind::operand_value,
    .check_gemm_pair = [](const Recipe&, const Recipe&, DType) {},
};

}  // namespace qtc::ref::detail
