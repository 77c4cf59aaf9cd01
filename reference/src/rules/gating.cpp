/// \file gating.cpp
/// \brief The capability table (gating.hpp): every rule is one entry of kRules, read by query().
#include "qtc/gating.hpp"

#include <array>
#include <charconv>
#include <sstream>

#include "qtc/error.hpp"

namespace qtc::gating {
namespace {

/// SM range [lo, hi] inclusive, in sm() units (90 = 9.0, 110 = 11.0); hi = 0 means "no upper bound".
struct SmRange {
  int lo = 0;
  int hi = 0;
};

/// One rule: the SM ranges that pass, excluded SMs, minimum cuBLAS (per SM family), minimum CUDA runtime.
struct Rule {
  Row row;
  std::array<SmRange, 2> ranges;  ///< an SM passes if it lies in any non-empty range
  int exclude_lo = 0;             ///< SMs in [exclude_lo, exclude_hi] fail with exclude_why
  int exclude_hi = 0;
  std::string_view exclude_why;
  int min_cublas_hopper = 0;      ///< needed on SM 9.x
  int min_cublas_other = 0;       ///< needed elsewhere
  int min_cuda = 0;
  std::string_view sm_text;       ///< how the SM requirement reads in a reason
};

constexpr int kNoUpper = 0;

// The rules. Sources are TE_FORMATS.md sections; "qtc" marks a choice of this project (its kernels are
// built for sm_90 and sm_100a, and do FP4/E8M0 conversions in software where the hardware has none).
constexpr std::array<Rule, static_cast<size_t>(Feature::kCount)> kRules{{
    {{Feature::kQuantizeFp8Tensor, "quantize.fp8_tensor", "SM >= 9.0 (qtc kernels; TE: SM >= 8.9)", "§4, §7.7; qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kQuantizeFp8Block, "quantize.fp8_block", "SM >= 9.0, CUDA >= 12.9", "§3.1 (is_fp8_block_scaling_available)"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 120900, "SM >= 9.0"},
    {{Feature::kQuantizeMxfp8, "quantize.mxfp8", "SM >= 9.0 (qtc: software E8M0 on Hopper; TE kernels sm_100+)", "§2.2; qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kQuantizeNvfp4, "quantize.nvfp4", "SM >= 9.0 (qtc: software E2M1 on Hopper; TE kernels sm_100+)", "§1.5; qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kQuantizeNvfp4RowScaled, "quantize.nvfp4_row_scaled", "SM >= 9.0 (qtc)", "§1.11; qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kQuantizeNvfp4Rht, "quantize.nvfp4_rht", "SM >= 9.0 (qtc, unfused RHT then cast)", "§1.9; qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kQuantizeNvfp4StochasticHw, "quantize.nvfp4_sr_hardware", "sm_100a/103a/107a (cvt.rs); software SR elsewhere",
      "§1.10, §7.7"},
     {{{100, 100}, {103, 103}}}, 0, 0, {}, 0, 0, 0, "SM 10.0, 10.3 or 10.7 (arch-specific cvt.rs)"},
    {{Feature::kQuantizeNvfp4RhtCastFusion, "quantize.nvfp4_rht_cast_fusion", "SM 10.0-11.0", "§1.9, §7.7"},
     {{{100, 110}}}, 0, 0, {}, 0, 0, 0, "SM 10.0-11.0"},
    {{Feature::kQuantizeNvfp42dSwizzleFusion, "quantize.nvfp4_2d_swizzle_fusion", "SM 10.0-11.0", "§1.7, §7.7"},
     {{{100, 110}}}, 0, 0, {}, 0, 0, 0, "SM 10.0-11.0"},
    {{Feature::kQuantizeGrouped, "quantize.grouped", "SM >= 9.0 (qtc: device group sizes, no host sync)", "§1.13; qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kQuantizeGroupedRht, "quantize.grouped_rht", "SM 10.0-11.0", "§1.13, §7.7"},
     {{{100, 110}}}, 0, 0, {}, 0, 0, 0, "SM 10.0-11.0"},

    {{Feature::kQuantizeMxfp4, "quantize.mxfp4", "SM >= 9.0 (qtc: software E2M1 and E8M0 on Hopper)", "VECTORS.md mxfp4; qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kGemmFp8Tensor, "gemm.fp8_tensor", "SM >= 8.9; on SM 8.9 cuBLAS >= 12.1.3", "§7.2, §7.7"},
     {{{89, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 8.9"},
    {{Feature::kGemmFp8TensorNonTn, "gemm.fp8_tensor_non_tn", "SM 10.0-11.9 or >= 13.0 (TN only below 10.0 and on 12.x)",
      "§4.1, §7.1 (nvte_is_non_tn_fp8_gemm_supported)"},
     {{{100, 119}, {130, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM 10.0-11.9 or >= 13.0"},
    {{Feature::kGemmFp8Block, "gemm.fp8_block", "SM 9.0 (native VEC128_32F/BLK128x128_32F), cuBLAS >= 12.9",
      "§7.3, §7.7; on SM >= 10.0 TE converts to MXFP8 (§3.4), which qtc does not"},
     {{{90, 90}}}, 0, 0, {}, 120900, 120900, 0, "SM 9.0 (on SM >= 10.0 TE runs block FP8 as MXFP8, §3.4)"},
    {{Feature::kGemmMxfp8, "gemm.mxfp8", "SM 10.x-11.x, cuBLAS >= 12.8", "§2.2, §7.4, §7.7"},
     {{{100, 119}}}, 0, 0, {}, 120800, 120800, 0, "SM 10.x-11.x (\"not supported on 12.0+\")"},
    {{Feature::kGemmNvfp4, "gemm.nvfp4", "SM >= 10.0, cuBLAS >= 12.8, CUDA >= 12.8", "§7.4, §7.7"},
     {{{100, kNoUpper}}}, 0, 0, {}, 120800, 120800, 120800, "SM >= 10.0"},
    {{Feature::kGemmNvfp4Emulated, "gemm.nvfp4_emulated_bf16", "SM 9.x (qtc: exact BF16 dequantize + BF16 GEMM)",
      "qtc (DESIGN.md, Kernels)"},
     {{{90, 99}}}, 0, 0, {}, 0, 0, 0, "SM 9.x (native NVFP4 elsewhere)"},
    {{Feature::kGemmNvfp4RowScaled, "gemm.nvfp4_row_scaled", "SM >= 9.0 (native NVFP4 on SM >= 10.0, emulated on 9.x)",
      "§7.5; qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kGemmGrouped, "gemm.grouped", "SM 9.0-11.0 (SM 12.x excluded); cuBLAS >= 13.4 on Hopper, >= 13.3 on Blackwell",
      "§7.6 (check_grouped_gemm_requirements)"},
     {{{90, 110}}}, 120, 129, "SM 12.x is excluded by TE's grouped GEMM", 130400, 130300, 0, "SM 9.0-11.0"},
    {{Feature::kGemmGroupedPerGroupAlpha, "gemm.grouped_per_group_alpha", "SM 10.0-11.0", "§7.6"},
     {{{100, 110}}}, 0, 0, {}, 130300, 130300, 0, "SM 10.0-11.0"},
    {{Feature::kGemmGroupedNvfp4, "gemm.grouped_nvfp4", "SM 10.0-11.0 (per-group alpha), cuBLAS >= 13.4", "§7.6"},
     {{{100, 110}}}, 0, 0, {}, 130400, 130400, 0, "SM 10.0-11.0"},
    {{Feature::kGemmGroupedMxfp8, "gemm.grouped_mxfp8", "SM 10.0-11.0, cuBLAS >= 13.3", "§7.6, §7.7"},
     {{{100, 110}}}, 0, 0, {}, 130300, 130300, 0, "SM 10.0-11.0"},
    {{Feature::kGemmGroupedFp8Block, "gemm.grouped_fp8_block", "SM 9.0 only, cuBLAS >= 13.4 (use MXFP8 on Blackwell)", "§7.6"},
     {{{90, 90}}}, 0, 0, {}, 130400, 130400, 0, "SM 9.0 (\"use MXFP8 on Blackwell\")"},
    {{Feature::kGemmGroupedFp8Tensor, "gemm.grouped_fp8_tensor", "SM 9.0-11.0; cuBLAS >= 13.5 on Hopper, >= 13.3 on Blackwell",
      "§7.6"},
     {{{90, 110}}}, 0, 0, {}, 130500, 130300, 0, "SM 9.0-11.0"},
    {{Feature::kGemmGroupedNvfp4RowScaled, "gemm.grouped_nvfp4_row_scaled",
      "SM >= 9.0 (qtc: per-tensor GEMMs into FP32 scratch + per-group post-scale)", "§7.5 (grouped); qtc"},
     {{{90, kNoUpper}}}, 0, 0, {}, 0, 0, 0, "SM >= 9.0"},
    {{Feature::kGemmGroupedRowScaledSm90, "gemm.grouped_nvfp4_row_scaled_sm90",
      "SM 9.0 (qtc: CUTLASS sm_90a grouped BF16 GEMM with the post-scale epilogue, device group sizes, graph-capturable; "
      "build with QTC_CUTLASS)",
      "§7.5 (grouped); qtc"},
     {{{90, 90}}}, 0, 0, {}, 0, 0, 0, "SM 9.0 (sm_90a kernel: wgmma, TMA)"},
    {{Feature::kGemmGroupedRowScaledCublasLt, "gemm.grouped_nvfp4_row_scaled_cublaslt",
      "SM 10.0-11.0, cuBLAS >= 13.4 (cuBLASLt grouped NVFP4 GEMM, per-group alpha), built against cuBLASLt headers >= 13.4",
      "§7.6 (check_grouped_gemm_requirements, NVFP4 grouped)"},
     {{{100, 110}}}, 0, 0, {}, 130400, 130400, 0, "SM 10.0-11.0 (per-group alpha)"},
    {{Feature::kGemmMxfp4, "gemm.mxfp4", "SM 10.x-11.x, cuBLAS >= 12.8 (block-scaled FP4: E2M1 with VEC32_UE8M0 scales)",
      "§7.4, §7.7 (cuBLASLt block-scaled FP4, as MXFP8's VEC32_UE8M0); qtc's call of it has not run on a card"},
     {{{100, 119}}}, 0, 0, {}, 120800, 120800, 0, "SM 10.x-11.x (block-scaled FP4 GEMM)"},
    {{Feature::kGemmMxfp4Emulated, "gemm.mxfp4_emulated_bf16",
      "SM 9.x (qtc: exact BF16 dequantize + BF16 GEMM, as gemm.nvfp4_emulated_bf16); the reference's exact GEMM reads MXFP4",
      "qtc (DESIGN.md, Kernels)"},
     {{{90, 99}}}, 0, 0, {}, 0, 0, 0, "SM 9.x (native FP4 elsewhere)"},
}};

constexpr bool rules_in_order() {
  for (size_t i = 0; i < kRules.size(); ++i)
    if (static_cast<size_t>(kRules[i].row.feature) != i) return false;
  return true;
}
static_assert(rules_in_order(), "kRules must list every Feature once, in enum order");

const std::array<Row, kRules.size()> kRows = [] {
  std::array<Row, kRules.size()> rows{};
  for (size_t i = 0; i < kRules.size(); ++i) rows[i] = kRules[i].row;
  return rows;
}();

std::string sm_string(int sm) {
  std::ostringstream os;
  os << sm / 10 << "." << sm % 10;
  return os.str();
}

bool sm_in(const SmRange& r, int sm) {
  if (r.lo == 0 && r.hi == 0) return false;
  return sm >= r.lo && (r.hi == kNoUpper || sm <= r.hi);
}

int parse_int(std::string_view s, std::string_view what) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  QTC_CHECK(ec == std::errc() && p == s.data() + s.size() && !s.empty(), "cannot parse ", what, " from \"", s, "\"");
  return v;
}

}  // namespace

#ifndef QTC_BUILD_CUBLAS_HEADERS
#define QTC_BUILD_CUBLAS_HEADERS 0
#endif
#ifndef QTC_BUILD_CUTLASS_SM90
#define QTC_BUILD_CUTLASS_SM90 0
#endif
int build_cublas_headers() { return QTC_BUILD_CUBLAS_HEADERS; }
bool build_cutlass_sm90() { return QTC_BUILD_CUTLASS_SM90 != 0; }

std::span<const Row> table() { return kRows; }

std::string_view feature_name(Feature f) {
  const auto i = static_cast<size_t>(f);
  return i < kRules.size() ? kRules[i].row.name : std::string_view("unknown");
}

std::optional<Feature> feature_from_name(std::string_view name) {
  for (const auto& r : kRules)
    if (r.row.name == name) return r.row.feature;
  return std::nullopt;
}

std::string cublas_version_string(int v) {
  std::ostringstream os;
  os << v / 10000 << "." << (v / 100) % 100 << "." << v % 100;
  return os.str();
}

int parse_cublas_version(std::string_view s) {
  const auto d1 = s.find('.');
  if (d1 == std::string_view::npos) {
    const int v = parse_int(s, "cuBLAS version");
    QTC_CHECK(v >= 10000, "cuBLAS version \"", s, "\" must be major.minor[.patch] or CUBLAS_VERSION (e.g. 130100)");
    return v;
  }
  const auto rest = s.substr(d1 + 1);
  const auto d2 = rest.find('.');
  const int major = parse_int(s.substr(0, d1), "cuBLAS major version");
  const int minor = parse_int(rest.substr(0, d2), "cuBLAS minor version");
  const int patch = d2 == std::string_view::npos ? 0 : parse_int(rest.substr(d2 + 1), "cuBLAS patch version");
  QTC_CHECK(minor < 100 && patch < 100, "cuBLAS version \"", s, "\" out of range");
  return major * 10000 + minor * 100 + patch;
}

void parse_compute_capability(std::string_view s, Capability& cap) {
  const auto d = s.find('.');
  QTC_CHECK(d != std::string_view::npos, "compute capability \"", s, "\" must be major.minor, e.g. 9.0");
  cap.cc_major = parse_int(s.substr(0, d), "compute capability major");
  cap.cc_minor = parse_int(s.substr(d + 1), "compute capability minor");
  QTC_CHECK(cap.cc_minor >= 0 && cap.cc_minor < 10, "compute capability minor of \"", s, "\" must be one digit");
}

Support query(Feature f, const Capability& cap) {
  const auto i = static_cast<size_t>(f);
  if (i >= kRules.size()) return {false, "unknown feature"};
  const Rule& r = kRules[i];
  const int sm = cap.sm();
  std::ostringstream why;
  const std::string name(r.row.name);
  if (sm == 0) return {false, name + " needs a CUDA device, none given"};
  if (r.exclude_lo != 0 && sm >= r.exclude_lo && sm <= r.exclude_hi) {
    why << name << ": " << r.exclude_why << " (" << r.row.source << "), found SM " << sm_string(sm);
    return {false, why.str()};
  }
  // The SM 8.9 special case of FP8 per-tensor: Ada needs cuBLASLt >= 12.1.3 (§7.7).
  // cuBLAS 0 means "no cuBLAS" here as in every other rule, so support stays monotone in the version.
  if (f == Feature::kGemmFp8Tensor && sm == 89 && cap.cublas < 120103) {
    why << name << " needs cuBLAS >= 12.1.3 on SM 8.9 (" << r.row.source << "), found "
        << (cap.cublas == 0 ? std::string("none") : "cuBLAS " + cublas_version_string(cap.cublas));
    return {false, why.str()};
  }
  if (!sm_in(r.ranges[0], sm) && !sm_in(r.ranges[1], sm) && !(f == Feature::kQuantizeNvfp4StochasticHw && sm == 107)) {
    why << name << " needs " << r.sm_text << " (" << r.row.source << "), found SM " << sm_string(sm);
    return {false, why.str()};
  }
  const int need_cublas = cap.cc_major == 9 ? r.min_cublas_hopper : r.min_cublas_other;
  if (need_cublas != 0 && cap.cublas < need_cublas) {
    why << name << " needs cuBLAS >= " << cublas_version_string(need_cublas) << " on SM " << sm_string(sm) << " ("
        << r.row.source << "), found " << (cap.cublas == 0 ? std::string("none") : cublas_version_string(cap.cublas));
    return {false, why.str()};
  }
  if (r.min_cuda != 0 && cap.cuda_runtime != 0 && cap.cuda_runtime < r.min_cuda) {
    why << name << " needs CUDA >= " << cublas_version_string(r.min_cuda) << " (" << r.row.source << "), found "
        << cublas_version_string(cap.cuda_runtime);
    return {false, why.str()};
  }
  // What the build holds (the card and library passed).
  if (f == Feature::kGemmGroupedRowScaledSm90 && !cap.cutlass_sm90) {
    why << name << ": this build has no CUTLASS sm_90a grouped GEMM (configure with -DQTC_CUTLASS=ON and the CUTLASS "
        << "headers scripts/setup.sh installs)";
    return {false, why.str()};
  }
  if (f == Feature::kGemmGroupedRowScaledCublasLt && cap.cublas_headers < 130400) {
    why << name << ": this build was compiled against "
        << (cap.cublas_headers == 0 ? std::string("no cuBLASLt headers")
                                    : "cuBLASLt " + cublas_version_string(cap.cublas_headers) + " headers")
        << ", which lack the grouped GEMM API (cuBLASLt >= 13.4, " << r.row.source << "); rebuild against cuBLAS >= 13.4";
    return {false, why.str()};
  }
  return {true, {}};
}

GroupedPath grouped_row_scaled_path(const Capability& cap) {
  GroupedPath p;
  const Support lt = query(Feature::kGemmGroupedRowScaledCublasLt, cap);
  if (lt.supported) {
    p.engine = Feature::kGemmGroupedRowScaledCublasLt;
    p.why = "cuBLASLt's grouped NVFP4 GEMM (SM 10.0-11.0, cuBLAS >= 13.4)";
    return p;
  }
  const Support own = query(Feature::kGemmGroupedRowScaledSm90, cap);
  if (own.supported) {
    p.engine = Feature::kGemmGroupedRowScaledSm90;
    p.why = "qtc's CUTLASS sm_90a grouped GEMM, because " + lt.reason;
    return p;
  }
  p.why = "only the per-group path with host group sizes, because " + lt.reason + "; and " + own.reason;
  return p;
}

std::string format_table(const Capability& cap) {
  std::ostringstream os;
  os << "SM " << sm_string(cap.sm()) << ", cuBLAS "
     << (cap.cublas == 0 ? std::string("unknown") : cublas_version_string(cap.cublas));
  if (cap.cuda_runtime != 0) os << ", CUDA runtime " << cublas_version_string(cap.cuda_runtime);
  os << "\n";
  size_t w = 0;
  for (const auto& row : kRows) w = std::max(w, row.name.size());
  for (const auto& row : kRows) {
    const Support s = query(row.feature, cap);
    os << row.name << std::string(w + 2 - row.name.size(), ' ');
    if (s.supported)
      os << "yes   " << row.requirement;
    else
      os << "no    " << s.reason;
    os << "\n";
  }
  const GroupedPath gp = grouped_row_scaled_path(cap);
  os << "grouped row-scaled NVFP4 with device group sizes -> "
     << (gp.engine ? std::string(feature_name(*gp.engine)) : std::string("none")) << ": " << gp.why << "\n";
  return os.str();
}

}  // namespace qtc::gating
