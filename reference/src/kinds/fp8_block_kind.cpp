/// \file fp8_block_kind.cpp
/// \brief The FP8 block module (TE_FORMATS.md §3): names, metadata keys and mapping, block geometry, quantizers
///        (fp8.cpp and peers/fp8_peers.cpp scalar, simd/fp8_simd.cpp vectorized).
#include <sstream>

#include "internal.hpp"
#include "kind_module.hpp"
#include "qtc/profile.hpp"
#include "simd/simd.hpp"

namespace qtc::ref::detail {
namespace fp8_block_kind {  // named, not anonymous: the unity build puts the kind files in one TU

constexpr std::string_view kKeys[] = {"tile", "pow2_scales", "eps", "fp8_dtype", "scale_dtype"};

const Fp8BlockOptions& opts(const RecipeOptions& o) { return std::get<Fp8BlockOptions>(o); }

std::string name_of(const RecipeOptions& ro) {
  const Fp8BlockOptions& o = opts(ro);
  std::ostringstream os;
  os << "fp8block_" << (o.tile_2d ? "128x128" : (o.block_1d == 32 ? "1x32" : "1x128")) << "_" << fp8_type_text(o.fp8)
     << (o.pow2_scales ? "_pow2" : "");
  if (o.eps != 0.0f) os << "_eps" << o.eps;
  if (o.ue8m0_scales) os << "_ue8m0";
  return os.str();
}

void to_metadata(const RecipeOptions& ro, std::map<std::string, std::string>& md) {
  const Fp8BlockOptions& o = opts(ro);
  md["tile"] = o.tile_2d ? "128x128" : (o.block_1d == 32 ? "1x32" : "1x128");
  md["fp8_dtype"] = fp8_type_text(o.fp8);
  md["pow2_scales"] = o.pow2_scales ? "1" : "0";
  md["eps"] = float_text(o.eps);
  if (o.ue8m0_scales) md["scale_dtype"] = "ue8m0";
}

RecipeOptions from_metadata(const MetadataReader& m) {
  Fp8BlockOptions o;
  const int tile = m.choice<int>("tile", "1x128", {{"1x128", 128}, {"128x128", 0}, {"1x32", 32}});
  o.tile_2d = tile == 0;
  o.block_1d = tile == 0 ? 128 : tile;
  o.fp8 = m.fp8_type();
  o.pow2_scales = m.flag("pow2_scales", false);
  o.eps = m.number("eps", 0.0f);
  o.ue8m0_scales = m.choice<bool>("scale_dtype", "f32", {{"f32", false}, {"ue8m0", true}});
  return o;
}



// §3: F32 scale_inv per 1x128 or 128x128 block (UE8M0 bytes: scale_dtype=ue8m0).
void plane_geometry(const RecipeOptions& ro, PlaneKind pk, int64_t M, int64_t K, PlaneSpec& s) {
  using namespace geom;
  const bool row = pk == PlaneKind::kRowwise;
  const Fp8BlockOptions& o = opts(ro);
  s.scale_type = o.ue8m0_scales ? ScaleType::kE8M0 : ScaleType::kF32;
  const int64_t rows = row ? M : K, len = row ? K : M;
  if (o.tile_2d) {
    s.compact = {cdiv(rows, 128), cdiv(len, 128)};
    s.padded = {cdiv(rows, 128), roundup(cdiv(len, 128), 4)};
    s.block_rows = 128;
    s.block_cols = 128;
    s.scale_step_m = 128;
    s.scale_step_k = 128;
  } else {
    const int64_t b = o.block_1d;  // 128, or 32 (tile 1x32)
    s.compact = {rows, cdiv(len, b)};
    s.padded = {cdiv(len, b), roundup(rows, 4)};  // TE's GEMM-ready transposed layout
    s.padded_transposed = true;
    s.block_rows = row ? 1 : b;
    s.block_cols = row ? b : 1;
    s.scale_step_m = row ? 1 : b;
    s.scale_step_k = row ? b : 1;
  }
  s.scale_m_axis = row ? MAxis::kRows : MAxis::kCols;
  s.layouts = kTeLayouts | (s.scale_type == ScaleType::kE8M0 ? bit(Layout::kDeepGemmPackedUe8m0) : 0u);
}


std::string unimplemented_rule(const Recipe&, const PathRefusal& refuse) {
  return fp8_unimplemented_rule(false, refuse);
}


std::string columnwise_not_derivable(const Recipe& r) {
  if (!r.is_2d())
    return "FP8 block 1x128: columnwise blocks are 128 rows of a column, not a transpose of the rowwise plane; only "
           "128x128 recipes can derive it (§3.3)";
  return {};
}

void check_fsdp(const Recipe& r, int64_t shard_M, bool) {
  QTC_CHECK(r.is_2d(), "FSDP2 all-gather of FP8 block 1x128 is not supported: the 1D scale layout has M in dim 1, which is "
                       "incompatible with a dim-0 all-gather (TE_FORMATS.md §8.2); use 128x128");
  QTC_CHECK(shard_M % 128 == 0, "FSDP2 requires shard_M (", shard_M,
            ") of an FP8 128x128 tensor to be a multiple of 128: a shard would split a 128x128 tile (§8.2)");
}


double operand_value(const OperandPlane& op, int64_t r, int64_t c) {
  const double v = operand::fp8_value(op.p.data[static_cast<size_t>(r * op.C + c)], op.fp8);
  const int64_t sr = op.two_d ? r / 128 : r;
  return v * static_cast<double>(operand::f32_at(op.p.scale, sr, c / 128));
}

void check_gemm_pair(const Recipe& a, const Recipe& b, DType) {
  QTC_CHECK(!(a.is_2d() && b.is_2d()), "FP8 block scaling: 128x128 x 128x128 GEMMs are not supported (TE_FORMATS.md §7.3)");
}

void conform_variants(const ProfileRules& pr, std::vector<Recipe>& out) {
  // tile x element type x pow2 x eps.
  if (!pr.fp8_block) return;
  for (bool b2 : {false, true})
    for (Fp8Type t : {Fp8Type::kE4M3, Fp8Type::kE5M2})
      for (bool p2 : {false, true})
        for (float eps : {0.0f, 0.5f})
          out.push_back(Recipe::of(Fp8BlockOptions{.fp8 = t, .tile_2d = b2, .pow2_scales = p2, .eps = eps}, pr.id));
}


// The kind's recipe rules (Recipe::validate, after the rules every recipe keeps), in the order they are checked.
const RuleCheck kUe8m0Pow2 = {{"fp8-block-ue8m0-pow2", "FP8 block scales stored as UE8M0 (scale_dtype=ue8m0) must be powers of two (pow2_scales=1)"},
     [](const Recipe& r, const ProfileRules&) {
       const Fp8BlockOptions* o = r.fp8_block_or_null();
       return o && o->ue8m0_scales && !o->pow2_scales;
     }};
const RuleCheck kBlock1x32 = {{"fp8-block-1x32", "FP8 block 1x32 tiles (DeepGEMM's per_token_cast_to_fp8 with gran_k=32) are defined by the profiles "
                        "whose fp8.form stores s = f(amax) (deepgemm, ...), not by TransformerEngine's 1x128 / 128x128 kernels"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Fp8BlockOptions* o = r.fp8_block_or_null();
       return o && !o->tile_2d && o->block_1d != 128 && (o->block_1d != 32 || pr.fp8_form == Fp8Form::kTE);
     },
     [](const Recipe& r, const ProfileRules& pr) {
       return "block length " + std::to_string(r.fp8_block().block_1d) + " under profile '" + pr.name + "'";
     }};
const RuleCheck* const kRules[] = {&kUe8m0Pow2, &kBlock1x32, &kFp8ProfilePow2Rule, &kFp8EpsRule};

}  // namespace fp8_block_kind

PlaneRows fp8_plane_rows(const DequantInput& in) {
  const QuantizedTensor& q = in.q;
  const Plane& p = in.p;
  const PlaneSpec& spec = in.spec;
  const bool col = in.pk == PlaneKind::kColumnwise;
  const int64_t len = col ? q.rows : q.cols;
  const Fp8Type fp8 = q.recipe.fp8_type();
  return {spec.data_rows, col, [&q, &p, &spec, len, fp8](int64_t a, float* v) {
            const uint8_t* d = p.data.data() + a * p.data_cols;
            for (int64_t b = 0; b < len; ++b) {
              float s_b = q.scale_inv;
              if (!spec.per_tensor) {
                int64_t i = 0, j = 0;
                spec.data_to_x(a, b, i, j);
                const Index2 se = spec.scale_entry(i, j);
                s_b = p.scale.f32(se.row, se.col);
              }
              v[b] = decode_fp8(d[b], fp8) * s_b;
            }
          }};
}

const KindModule kFp8BlockModule = {
    .info = {.kind = kind_of_options<Fp8BlockOptions>,
             .name = "fp8_block",
             .title = "FP8 block",
             .metadata_keys = fp8_block_kind::kKeys,
             .e2m1_data = false,
             .e8m0_scales = false,
             .per_tensor_scale = false,
             .global_amax = false,
             .plane_amax = false,
             .columnwise_transposed = true,
             .fp8_scaling_options = true,
             .input_rows_multiple = 1,
             .default_options = [] { return RecipeOptions(Fp8BlockOptions{}); },
             .block_cols = [](const RecipeOptions& o) { return fp8_block_kind::opts(o).tile_2d ? 128 : fp8_block_kind::opts(o).block_1d; },
             .is_2d = [](const RecipeOptions& o) { return fp8_block_kind::opts(o).tile_2d; },
             .name_of = fp8_block_kind::name_of,
             .to_metadata = fp8_block_kind::to_metadata,
             .from_metadata = fp8_block_kind::from_metadata,
             .conform_variants = fp8_block_kind::conform_variants,
             .conform_odd_shapes = false,
             .bound_exempt = nullptr},
    .defined_by = [](const ProfileRules& pr) { return pr.fp8_block; },
    .rules = fp8_block_kind::kRules,
    .quantize = quantize_fp8_block,
    .quantize_simd = simd::quantize_fp8_block,
    .quantize_amax = nullptr,
    .quantize_amax_simd = nullptr,
    .plane_rows = fp8_plane_rows,
    .dequantize_simd = simd::dequantize_fp8,
    .simd_refusal = [](const Recipe& r) -> std::string {
      return r.fp8_block().ue8m0_scales ? "FP8 block: the vectorized path writes F32 scales only" : "";
    },
    .plane_geometry = fp8_block_kind::plane_geometry,
    .unimplemented_rule = fp8_block_kind::unimplemented_rule,
    .columnwise_not_derivable = fp8_block_kind::columnwise_not_derivable,
    .check_fsdp = fp8_block_kind::check_fsdp,
    .operand_value = fp8_block_kind::operand_value,
    .check_gemm_pair = fp8_block_kind::check_gemm_pair,
};

}  // namespace qtc::ref::detail
