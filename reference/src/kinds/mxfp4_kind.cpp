/// \file mxfp4_kind.cpp
/// \brief The MXFP4 module (OCP MX v1.0 FP4; VECTORS.md `mxfp4`): names, metadata keys and mapping, block geometry,
///        quantizer (mxfp4.cpp; scalar only: cpu_path.hpp).
#include <sstream>

#include "internal.hpp"
#include "kind_module.hpp"
#include "simd/simd.hpp"
#include "qtc/mxfp4_codec.hpp"
#include "qtc/profile.hpp"

namespace qtc::ref::detail {
namespace mxfp4_kind {  // named, not anonymous: the unity build puts the kind files in one TU

constexpr std::string_view kKeys[] = {"scale_rule", "rounding"};

const Mxfp4Options& opts(const RecipeOptions& o) { return std::get<Mxfp4Options>(o); }

std::string name_of(const RecipeOptions& ro) {
  const Mxfp4Options& o = opts(ro);
  std::ostringstream os;
  os << "mxfp4_" << (o.scale_rule == MxScaleRule::kOcpFloor ? "ocpfloor" : mx_scale_rule_name(o.scale_rule));
  return os.str();
}

void to_metadata(const RecipeOptions& ro, std::map<std::string, std::string>& md) {
  md["scale_rule"] = std::string(mx_scale_rule_name(opts(ro).scale_rule));
  md["rounding"] = "rne";
}

RecipeOptions from_metadata(const MetadataReader& m) {
  Mxfp4Options o;
  o.scale_rule = m.choice<MxScaleRule>("scale_rule", "ocp_floor", {{"ocp_floor", MxScaleRule::kOcpFloor}, {"rceil", MxScaleRule::kRceil},
                                                                  {"ceil", MxScaleRule::kCeil}, {"even", MxScaleRule::kEven},
                                                                  {"pow2_round", MxScaleRule::kPow2Round}});
  (void)m.choice<int>("rounding", "rne", {{"rne", 0}});
  return o;
}


// Plane rows (x's rows, or x's columns for the columnwise plane) in blocks of 32 elements, one E8M0 each.
PlaneRows plane_rows(const DequantInput& in) {
  const Plane& p = in.p;
  const int64_t len = in.pk == PlaneKind::kColumnwise ? in.q.rows : in.q.cols;
  return {p.data_rows, in.pk == PlaneKind::kColumnwise, [&p, len](int64_t a, float* v) {
            const uint8_t* d = p.data.data() + a * p.data_cols;
            const uint8_t* sc = p.scale.bytes.data() + a * p.scale.cols;
            for (int64_t b = 0; b < len; ++b) {
              const uint8_t byte = d[b >> 1];
              v[b] = mxfp4::decode(static_cast<uint8_t>((b & 1) ? byte >> 4 : byte & 0xF), sc[b / 32]);
            }
          }};
}


// VECTORS.md mxfp4: NVFP4's geometry with blocks of 32 and E8M0 scales. TE-padded shapes as NVFP4's (the columnwise
// plane is x^T, so both planes pad [rows, blocks] alike and swizzle alike): rowwise [roundup(M,128),
// roundup(ceil(K/32),4)] = MXFP8's rowwise; columnwise [roundup(K,128), roundup(ceil(M/32),4)] (docs:
// conformance/README.md, MXFP4).
void plane_geometry(const RecipeOptions&, PlaneKind pk, int64_t M, int64_t K, PlaneSpec& s) {
  using namespace geom;
  const bool row = pk == PlaneKind::kRowwise;
  s.scale_type = ScaleType::kE8M0;
  const int64_t rows = row ? M : K, len = row ? K : M;
  s.compact = {rows, cdiv(len, 32)};
  s.padded = {roundup(rows, 128), roundup(cdiv(len, 32), 4)};
  s.scale_m_axis = row ? MAxis::kRows : MAxis::kCols;
  s.layouts = kTiledLayouts;
  s.combined_layouts = kMx4RowLayouts;  // FBGEMM's MX4 rows: each data row's groups of 32, codes then E8M0 byte
  s.block_rows = row ? 1 : 32;
  s.block_cols = row ? 32 : 1;
  s.scale_step_m = row ? 1 : 32;
  s.scale_step_k = row ? 32 : 1;
}


std::string unimplemented_rule(const Recipe&, const PathRefusal& refuse) {
  // TE's PyTorch reference (te_pyref) keeps mx_order te for its MXFP8; no path but the scalar one implements its MXFP4.
  if (refuse.pr.mxfp4_te_reference) return refuse("mxfp4.order", "te_pyref", "other MXFP4 orders only");
  return mx_unimplemented_rule("mxfp4.order", refuse, true);
}


std::string columnwise_not_derivable(const Recipe&) {
  return "MXFP4: columnwise blocks (32 rows of a column) differ from rowwise blocks (32 columns of a row); the "
         "columnwise plane must be quantized or gathered, not derived (as MXFP8 1x32)";
}

// Rowwise blocks run along K: any shard_M gathers. The columnwise plane is x^T (blocks of 32 along M), so the shards'
// pieces would have to be interleaved column-wise, not concatenated in dim 0; and it cannot be derived.
void check_fsdp(const Recipe&, int64_t, bool columnwise_usage) {
  QTC_CHECK(!columnwise_usage, "FSDP2 all-gather of an MXFP4 columnwise plane is not supported: it is stored as x^T "
                               "(blocks of 32 along M), so a dim-0 all-gather cannot concatenate it, and it cannot be "
                               "derived from the rowwise plane; gather the rowwise plane and quantize x^T after the gather");
}


// [R, C] = x (rowwise) or x^T (columnwise), blocks of 32 along C.
double operand_value(const OperandPlane& op, int64_t r, int64_t c) {
  return static_cast<double>(decode_e2m1(operand::e2m1_code(op.p, r, c))) *
         static_cast<double>(decode_e8m0(op.p.scale.byte(r, c / 32)));
}

void check_gemm_pair(const Recipe&, const Recipe&, DType out) {
  QTC_CHECK(out != DType::kF16, "FP4 GEMM does not support FP16 output (TE_FORMATS.md §7.4; cuBLASLt block-scaled FP4)");
}

void conform_variants(const ProfileRules& pr, std::vector<Recipe>& out) {
  // every scale rule the profile defines for MXFP4.
  if (!pr.mxfp4) return;
  for (MxScaleRule rule : pr.mxfp4_scale_rules) out.push_back(Recipe::of(Mxfp4Options{.scale_rule = rule}, pr.id));
}


// The kind's recipe rules (Recipe::validate, after the rules every recipe keeps), in the order they are checked.
const RuleCheck kProfileScaleRule = {{"mxfp4-profile-scale-rule", "the profile must define the MXFP4 scale_rule (profile rule mxfp4.scale_rules)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Mxfp4Options* o = r.mxfp4_or_null();
       return o && std::find(pr.mxfp4_scale_rules.begin(), pr.mxfp4_scale_rules.end(), o->scale_rule) == pr.mxfp4_scale_rules.end();
     },
     [](const Recipe& r, const ProfileRules& pr) {
       std::string allowed;
       for (MxScaleRule x : pr.mxfp4_scale_rules) allowed += (allowed.empty() ? "" : ", ") + std::string(mx_scale_rule_name(x));
       return "profile '" + pr.name + "' defines scale_rule " + allowed + ", not " + std::string(mx_scale_rule_name(r.mxfp4().scale_rule));
     }};
const RuleCheck* const kRules[] = {&kProfileScaleRule};

}  // namespace mxfp4_kind

const KindModule kMxfp4Module = {
    .info = {.kind = kind_of_options<Mxfp4Options>,
             .name = "mxfp4",
             .title = "MXFP4",
             .metadata_keys = mxfp4_kind::kKeys,
             .e2m1_data = true,
             .e8m0_scales = true,
             .per_tensor_scale = false,
             .global_amax = false,
             .plane_amax = false,
             .columnwise_transposed = true,
             .fp8_scaling_options = false,
             .input_rows_multiple = 1,
             .default_options = [] { return RecipeOptions(Mxfp4Options{}); },
             .block_cols = [](const RecipeOptions&) { return 32; },
             .is_2d = [](const RecipeOptions&) { return false; },
             .name_of = mxfp4_kind::name_of,
             .to_metadata = mxfp4_kind::to_metadata,
             .from_metadata = mxfp4_kind::from_metadata,
             .conform_variants = mxfp4_kind::conform_variants,
             .conform_odd_shapes = true,
             .bound_exempt = nullptr},
    .defined_by = [](const ProfileRules& pr) { return pr.mxfp4; },
    .rules = mxfp4_kind::kRules,
    .quantize = quantize_mxfp4,
    .quantize_simd = simd::quantize_mxfp4,  // simd/mxfp4_simd.cpp; cpu_path.hpp says which orders it runs
    .quantize_amax = nullptr,
    .quantize_amax_simd = nullptr,
    .plane_rows = mxfp4_kind::plane_rows,
    .dequantize_simd = nullptr,
    .simd_refusal = [](const Recipe&) { return std::string(); },  // mxfp4_simd.cpp: every scale rule
    .plane_geometry = mxfp4_kind::plane_geometry,
    .unimplemented_rule = mxfp4_kind::unimplemented_rule,
    .columnwise_not_derivable = mxfp4_kind::columnwise_not_derivable,
    .check_fsdp = mxfp4_kind::check_fsdp,
    .operand_value = mxfp4_kind::operand_value,
    .check_gemm_pair = mxfp4_kind::check_gemm_pair,
};

}  // namespace qtc::ref::detail
