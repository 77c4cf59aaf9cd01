/// \file nvfp4_kind.cpp
/// \brief The NVFP4 module (TE_FORMATS.md §1): names, metadata keys and mapping, block geometry, quantizers.
///        The quantizers themselves are nvfp4.cpp (scalar) and simd/nvfp4_simd.cpp (vectorized).
#include <cfloat>
#include <sstream>

#include "internal.hpp"
#include "kind_module.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "simd/simd.hpp"

namespace qtc::ref::detail {
namespace nvfp4_kind {  // named, not anonymous: the unity build puts the kind files in one TU

constexpr std::string_view kKeys[] = {"tile", "row_scaled", "rht", "fourover6", "fourover6_err", "e4m3_max",
                                      "stochastic_rounding", "seed", "rht_sign_mask", "per_tensor_scale"};

const Nvfp4Options& opts(const RecipeOptions& o) { return std::get<Nvfp4Options>(o); }

std::string name_of(const RecipeOptions& ro) {
  const Nvfp4Options& o = opts(ro);
  std::ostringstream os;
  os << "nvfp4_" << (o.tile_2d ? "16x16" : "1x16");
  if (o.row_scaled) os << "_rowscaled";
  if (o.rht) os << "_rht";
  if (o.fourover6) os << "_4over6" << (o.fourover6_err == ErrMode::kMAE ? "mae" : "mse") << o.e4m3_max;
  if (o.stochastic) os << "_sr";
  if (!o.per_tensor_scale) os << "_blockonly";
  return os.str();
}

void to_metadata(const RecipeOptions& ro, std::map<std::string, std::string>& md) {
  const Nvfp4Options& o = opts(ro);
  md["tile"] = o.tile_2d ? "16x16" : "1x16";
  md["row_scaled"] = o.row_scaled ? "1" : "0";
  md["rht"] = o.rht ? "1" : "0";
  md["fourover6"] = o.fourover6 ? "1" : "0";
  md["fourover6_err"] = o.fourover6_err == ErrMode::kMAE ? "mae" : "mse";
  md["e4m3_max"] = std::to_string(o.e4m3_max);
  if (o.stochastic) {
    md["stochastic_rounding"] = "1";
    md["seed"] = std::to_string(o.seed);
  }
  if (o.rht_sign_mask != 0xD7E8) md["rht_sign_mask"] = std::to_string(o.rht_sign_mask);
  if (!o.per_tensor_scale) md["per_tensor_scale"] = "0";
}

RecipeOptions from_metadata(const MetadataReader& m) {
  Nvfp4Options o;
  o.tile_2d = m.choice<bool>("tile", "1x16", {{"1x16", false}, {"16x16", true}});
  o.row_scaled = m.flag("row_scaled", false);
  o.rht = m.flag("rht", false);
  o.fourover6 = m.flag("fourover6", false);
  o.fourover6_err = m.choice<ErrMode>("fourover6_err", "mae", {{"mae", ErrMode::kMAE}, {"mse", ErrMode::kMSE}});
  o.e4m3_max = m.choice<int>("e4m3_max", "448", {{"448", 448}, {"256", 256}});
  o.stochastic = m.flag("stochastic_rounding", false);
  o.seed = m.integer("seed", 0);
  const uint64_t mask = m.integer("rht_sign_mask", 0xD7E8);
  QTC_CHECK(mask <= 0xFFFF, "metadata key 'rht_sign_mask': ", mask, " does not fit 16 bits");
  o.rht_sign_mask = static_cast<uint16_t>(mask);
  o.per_tensor_scale = m.flag("per_tensor_scale", true);
  return o;
}


PlaneRows plane_rows(const DequantInput& in) {
  const Plane& p = in.p;
  const int64_t len = in.pk == PlaneKind::kColumnwise ? in.q.rows : in.q.cols;
  const Nvfp4BlockDequant block_scale(in.q.recipe);
  return {p.data_rows, in.pk == PlaneKind::kColumnwise, [&p, len, block_scale](int64_t a, float* v) {
            const float am = p.amax.size() > 1 ? p.amax[static_cast<size_t>(a)] : p.amax.at(0);
            const uint8_t* d = p.data.data() + a * p.data_cols;
            const uint8_t* sc = p.scale.bytes.data() + a * p.scale.cols;
            for (int64_t blk = 0; blk < len / 16; ++blk) {
              const float s_blk = block_scale(am, sc[blk]);
              float table[16];  // every E2M1 value times this block's scale: the same products as per element
              for (int c = 0; c < 16; ++c) table[c] = kE2M1Values[c] * s_blk;
              for (int64_t t = 0; t < 8; ++t) {
                const uint8_t byte = d[blk * 8 + t];
                v[blk * 16 + 2 * t] = table[byte & 0xF];
                v[blk * 16 + 2 * t + 1] = table[byte >> 4];
              }
            }
          }};
}


// §1: E4M3 block scales, 1x16 (or 16x16) blocks along each plane's rows.
void plane_geometry(const RecipeOptions& ro, PlaneKind pk, int64_t M, int64_t K, PlaneSpec& s) {
  using namespace geom;
  const bool row = pk == PlaneKind::kRowwise;
  s.scale_type = ScaleType::kE4M3;
  const int64_t rows = row ? M : K, len = row ? K : M;
  s.compact = {rows, cdiv(len, 16)};
  s.padded = {roundup(rows, 128), roundup(cdiv(len, 16), 4)};
  s.scale_m_axis = row ? MAxis::kRows : MAxis::kCols;
  s.layouts = kTiledLayouts;
  const Nvfp4Options& o = opts(ro);
  const int64_t h = o.tile_2d ? 16 : 1;
  s.block_rows = row ? h : 16;
  s.block_cols = row ? 16 : h;
  s.scale_step_m = row ? 1 : 16;
  s.scale_step_k = row ? 16 : 1;
  s.amax_per_line = o.row_scaled;
  s.amax_count = o.row_scaled ? rows : 1;
}


std::string unimplemented_rule(const Recipe&, const PathRefusal& refuse) {
  const ProfileRules& pr = refuse.pr;
  const PathRules& path = refuse.path;
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
}


std::string columnwise_not_derivable(const Recipe& r) {
  if (!r.is_2d())
    return "NVFP4 1x16: rowwise and columnwise blocks differ (16 consecutive elements of a row vs of a column), so the "
           "columnwise plane is not a transpose of the rowwise one (TE_FORMATS.md §1.8); only 16x16 (2D) recipes can "
           "derive it";
  if (r.nvfp4_rht()) return "NVFP4 with RHT: the columnwise plane is of RHT(x^T), not a transpose (§1.9)";
  if (r.nvfp4_row_scaled()) return "row-scaled NVFP4: per-row and per-column amaxes differ (§1.11)";
  if (r.nvfp4().stochastic) return "NVFP4 stochastic rounding draws different random bits per plane (§1.10)";
  return {};
}

void check_fsdp(const Recipe& r, int64_t shard_M, bool columnwise_usage) {
  QTC_CHECK(shard_M % 16 == 0, "FSDP2 requires shard_M (", shard_M,
            ") to be a multiple of NVFP4_BLOCK_SCALING_SIZE (16): 16-row blocks must not straddle shards (TE_FORMATS.md §8.1)");
  QTC_CHECK(!r.nvfp4_row_scaled(), "FSDP2 all-gather of row-scaled NVFP4 is not supported: the gathered tensor would carry only the "
                                   "local shard's per-row amax (TE_FORMATS.md §8.1)");
  if (columnwise_usage) {
    const std::string why = columnwise_not_derivable(r);
    QTC_CHECK(why.empty(), "FSDP2 with a columnwise NVFP4 plane requires 16x16 (2D) quantization, since "
                           "the columnwise plane is rebuilt locally as a transpose (§8.1): ", why);
  }
}


double operand_value(const OperandPlane& op, int64_t r, int64_t c) {
  const uint8_t sf = op.p.scale.byte(operand::scale_row(op.p.scale, r, op.R, 16), c / 16);
  return static_cast<double>(decode_e2m1(operand::e2m1_code(op.p, r, c))) * static_cast<double>(decode_e4m3(sf));
}

void check_gemm_pair(const Recipe& a, const Recipe& b, DType out) {
  QTC_CHECK(!a.nvfp4_row_scaled() && !b.nvfp4_row_scaled(),
            "row-scaled NVFP4 operands are rejected by the plain NVFP4 GEMM; use gemm_nvfp4_row_scaled (TE_FORMATS.md §7.5)");
  QTC_CHECK(out != DType::kF16, "FP4 GEMM does not support FP16 output (TE_FORMATS.md §7.4)");
}

void conform_variants(const ProfileRules& pr, std::vector<Recipe>& out) {
  // tile x row_scaled x rht x 4over6 (off, mae/mse x 448/256) x stochastic rounding.
  if (!pr.nvfp4) return;
  for (bool t2 : {false, true})
    for (bool rs : {false, true})
      for (bool rht : {false, true})
        for (int f46 = 0; f46 < 5; ++f46)
          for (bool sr : {false, true})
            out.push_back(Recipe::of(Nvfp4Options{.tile_2d = t2,
                                                  .row_scaled = rs,
                                                  .rht = rht,
                                                  .fourover6 = f46 > 0,
                                                  .fourover6_err = (f46 == 2 || f46 == 4) ? ErrMode::kMSE : ErrMode::kMAE,
                                                  .e4m3_max = f46 >= 3 ? 256 : 448,
                                                  .stochastic = sr,
                                                  .seed = sr ? 0x5EEDull : 0},
                                     pr.id));
}

/// TE's dequantization, (sf * A) * (1 / (6 * E4M3_MAX)) (TE_FORMATS.md §1.14), is not the inverse of quantization when
/// S_enc = 6 * E4M3_MAX / A was clamped to FLT_MAX (A < 6 * E4M3_MAX / FLT_MAX, §11.3) or when sf * A overflows
/// (A > FLT_MAX / 448).
std::string bound_exempt(const Recipe& r, double a) {
  const double s6 = 6.0 * r.nvfp4().e4m3_max;
  if (a > 0.0 && (a < s6 / FLT_MAX || a > FLT_MAX / 448.0))
    return "NVFP4 amax outside [6*E4M3_MAX/FLT_MAX, FLT_MAX/448], where TE's dequantization is not the inverse of its "
           "quantization (TE_FORMATS.md §1.14, §11.2-3)";
  return {};
}


// The kind's recipe rules (Recipe::validate, after the rules every recipe keeps), in the order they are checked.
const RuleCheck kE4m3Max = {{"nvfp4-e4m3-max", "NVFP4 e4m3_max must be 448 or 256"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->e4m3_max != 448 && r.nvfp4_or_null()->e4m3_max != 256; }};
const RuleCheck kE4m3Max256 = {{"nvfp4-e4m3-max-256-needs-4over6", "NVFP4 e4m3_max 256 is only defined with fourover6 (TE_FORMATS.md §1.12)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->e4m3_max == 256 && !r.nvfp4_or_null()->fourover6; }};
const RuleCheck kRowScaled1x16 = {{"nvfp4-row-scaled-1x16", "row-scaled NVFP4 cannot use 16x16 tiles (TE_FORMATS.md §1.11)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->row_scaled && r.nvfp4_or_null()->tile_2d; }};
const RuleCheck kRowScaledNoRht = {{"nvfp4-row-scaled-no-rht", "row-scaled NVFP4 cannot use RHT (TE_FORMATS.md §1.11)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->row_scaled && r.nvfp4_or_null()->rht; }};
const RuleCheck kRowScaledNoSr = {{"nvfp4-row-scaled-no-sr", "row-scaled NVFP4 cannot use stochastic rounding (TE_FORMATS.md §1.11)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->row_scaled && r.nvfp4_or_null()->stochastic; }};
const RuleCheck kRowScaledRowwise = {{"nvfp4-row-scaled-needs-rowwise", "row-scaled NVFP4 needs the rowwise plane (TE_FORMATS.md §1.11)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->row_scaled && !r.rowwise; }};
const RuleCheck kRht1x16 = {{"nvfp4-rht-1x16", "RHT is not combined with 16x16 tiles (TE_FORMATS.md §1.7)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->rht && r.nvfp4_or_null()->tile_2d; }};
const RuleCheck k4over6NoRht = {{"nvfp4-4over6-no-rht", "4over6 cannot be combined with RHT (TE_FORMATS.md §1.12)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->fourover6 && r.nvfp4_or_null()->rht; }};
const RuleCheck k4over6NoSr = {{"nvfp4-4over6-no-sr", "4over6 cannot be combined with stochastic rounding (TE_FORMATS.md §1.12)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->fourover6 && r.nvfp4_or_null()->stochastic; }};
const RuleCheck kRowScaled4over6 = {{"nvfp4-row-scaled-4over6-rowwise-only", "row-scaled 4over6 produces the rowwise plane only (TE_FORMATS.md §1.12)"},
     [](const Recipe& r, const ProfileRules&) { return r.nvfp4_or_null() && r.nvfp4_or_null()->fourover6 && r.nvfp4_or_null()->row_scaled && r.columnwise; }};
const RuleCheck kProfileSr = {{"nvfp4-profile-sr", "the profile must define NVFP4 stochastic rounding (profile rule nvfp4.stochastic_rounding)"},
     [](const Recipe& r, const ProfileRules& pr) { return r.nvfp4_or_null() && r.nvfp4_or_null()->stochastic && !pr.nvfp4_stochastic; },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "' has no stochastic rounding"; }};
const RuleCheck kProfileOrder1x16 = {{"nvfp4-profile-order-1x16", "the profile's NVFP4 operation order defines 1x16 blocks only (no 16x16, row-scaled, "
                                  "RHT, 4over6 or stochastic rounding)"},
     [](const Recipe& r, const ProfileRules& pr) {
       const Nvfp4Options* o = r.nvfp4_or_null();
       return o && pr.nvfp4_order != Nvfp4Order::kTE && (o->tile_2d || o->row_scaled || o->rht || o->fourover6 || o->stochastic);
     },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "'"; }};
const RuleCheck kSingleLevel = {{"nvfp4-single-level", "per_tensor_scale=0 (block scales only) needs a profile that defines single-level NVFP4 "
                            "(profile rule nvfp4.single_level: torchao)"},
     [](const Recipe& r, const ProfileRules& pr) { return r.nvfp4_or_null() && !r.nvfp4_or_null()->per_tensor_scale && !pr.nvfp4_single_level; },
     [](const Recipe&, const ProfileRules& pr) { return "profile '" + pr.name + "' does not"; }};
const RuleCheck* const kRules[] = {&kE4m3Max, &kE4m3Max256, &kRowScaled1x16, &kRowScaledNoRht, &kRowScaledNoSr, &kRowScaledRowwise, &kRht1x16, &k4over6NoRht, &k4over6NoSr, &kRowScaled4over6, &kProfileSr, &kProfileOrder1x16, &kSingleLevel};

}  // namespace nvfp4_kind

const KindModule kNvfp4Module = {
    .info = {.kind = kind_of_options<Nvfp4Options>,
             .name = "nvfp4",
             .title = "NVFP4",
             .metadata_keys = nvfp4_kind::kKeys,
             .e2m1_data = true,
             .e8m0_scales = false,
             .per_tensor_scale = false,
             .global_amax = true,
             .plane_amax = true,
             .columnwise_transposed = true,
             .fp8_scaling_options = false,
             .input_rows_multiple = 16,
             .default_options = [] { return RecipeOptions(Nvfp4Options{}); },
             .block_cols = [](const RecipeOptions&) { return 16; },
             .is_2d = [](const RecipeOptions& o) { return nvfp4_kind::opts(o).tile_2d; },
             .name_of = nvfp4_kind::name_of,
             .to_metadata = nvfp4_kind::to_metadata,
             .from_metadata = nvfp4_kind::from_metadata,
             .conform_variants = nvfp4_kind::conform_variants,
             .conform_odd_shapes = false,
             .bound_exempt = nvfp4_kind::bound_exempt},
    .defined_by = [](const ProfileRules& pr) { return pr.nvfp4; },
    .rules = nvfp4_kind::kRules,
    .quantize = [](const MatrixView& x, const Recipe& r) { return quantize_nvfp4(x, r, nullptr); },
    .quantize_simd = [](const MatrixView& x, const Recipe& r) { return simd::quantize_nvfp4(x, r, nullptr); },
    .quantize_amax = quantize_nvfp4,
    .quantize_amax_simd = simd::quantize_nvfp4,
    .plane_rows = nvfp4_kind::plane_rows,
    .dequantize_simd = simd::dequantize_nvfp4,
    .simd_refusal = [](const Recipe&) { return std::string(); },
    .plane_geometry = nvfp4_kind::plane_geometry,
    .unimplemented_rule = nvfp4_kind::unimplemented_rule,
    .columnwise_not_derivable = nvfp4_kind::columnwise_not_derivable,
    .check_fsdp = nvfp4_kind::check_fsdp,
    .operand_value = nvfp4_kind::operand_value,
    .check_gemm_pair = nvfp4_kind::check_gemm_pair,
};

}  // namespace qtc::ref::detail
