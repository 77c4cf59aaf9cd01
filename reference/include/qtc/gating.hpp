/// \file gating.hpp
/// \brief Capability gating: one table, a pure function of (compute capability, cuBLAS version, feature)
///        to "supported" or "not supported, because ...". The CUDA kernels refuse unsupported calls with
///        the reason, GPU tests skip with it, and `qtc gating` prints the table (TE_FORMATS.md §7.7, §7.6,
///        §1.5, §1.7, §1.9, §1.10, §2.2, §3.1).
///
/// No CUDA header here: the device side (kernels/include/qtc/cuda/capability.hpp) only fills a
/// Capability from the card and the cuBLASLt it loaded.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace qtc::gating {

/// CUBLAS_VERSION of the cuBLASLt headers this build compiled its CUDA layer against (0 without CUDA).
int build_cublas_headers();
/// Whether this build has the CUTLASS sm_90a grouped GEMM (QTC_CUTLASS=ON).
bool build_cutlass_sm90();

/// A card and a cuBLAS library. `cublas` uses CUBLAS_VERSION's encoding: major*10000 + minor*100 + patch
/// (cuBLAS 13.1.0 -> 130100). `cuda_runtime` likewise (CUDA 13.0 -> 130000); 0 means "not known", and
/// rows that need the runtime then only look at cuBLAS.
struct Capability {
  int cc_major = 0;
  int cc_minor = 0;
  int cublas = 0;
  int cuda_runtime = 0;
  /// What this build of qtc's CUDA layer holds (not the card; defaults are the build's own, see build_*()):
  /// the CUBLAS_VERSION of the cuBLASLt headers it was compiled against (0: built without CUDA), and whether
  /// it has the CUTLASS sm_90a grouped GEMM (CMake option QTC_CUTLASS).
  int cublas_headers = build_cublas_headers();
  bool cutlass_sm90 = build_cutlass_sm90();
  int sm() const { return cc_major * 10 + cc_minor; }  ///< 9.0 -> 90, 10.0 -> 100, 12.1 -> 121
};

/// Everything qtc may be asked to run on a GPU, quantizers first, then GEMMs.
enum class Feature : uint8_t {
  // Quantizers (qtc's own kernels: software FP4/E8M0 conversions on Hopper, bit-exact to the reference)
  kQuantizeFp8Tensor,
  kQuantizeFp8Block,
  kQuantizeMxfp8,
  kQuantizeNvfp4,
  kQuantizeNvfp4RowScaled,
  kQuantizeNvfp4Rht,
  kQuantizeNvfp4StochasticHw,   ///< cvt.rs.satfinite.e2m1x4 (sm_100a/103a/107a); software elsewhere
  kQuantizeNvfp4RhtCastFusion,  ///< TE's fused RHT+cast kernel (SM 100-110)
  kQuantizeNvfp42dSwizzleFusion,///< TE's in-kernel swizzle on the NVFP4 2D path (SM 100-110)
  kQuantizeGrouped,             ///< qtc's grouped quantize (device group sizes, graph-capturable)
  kQuantizeGroupedRht,          ///< TE's grouped RHT (SM 100-110)
  kQuantizeMxfp4,               ///< qtc's MXFP4 quantize / dequantize (software E2M1/E8M0 on Hopper)
  // GEMMs
  kGemmFp8Tensor,               ///< cuBLASLt FP8, per-tensor scales (TN)
  kGemmFp8TensorNonTn,          ///< FP8 per-tensor in NN/NT layouts without transposed copies
  kGemmFp8Block,                ///< cuBLASLt VEC128_32F / BLK128x128_32F (Hopper native)
  kGemmMxfp8,                   ///< cuBLASLt VEC32_UE8M0
  kGemmNvfp4,                   ///< cuBLASLt VEC16_UE4M3, device alpha
  kGemmNvfp4Emulated,           ///< qtc: NVFP4 as dequantize-to-BF16 + BF16 GEMM (exact products)
  kGemmNvfp4RowScaled,          ///< §7.5: neutralised NVFP4 GEMM into FP32 + row/column post-scale
  kGemmGrouped,                 ///< cuBLASLt grouped GEMM (TE check_grouped_gemm_requirements)
  kGemmGroupedPerGroupAlpha,
  kGemmGroupedNvfp4,
  kGemmGroupedMxfp8,
  kGemmGroupedFp8Block,
  kGemmGroupedFp8Tensor,
  kGemmGroupedNvfp4RowScaled,   ///< qtc's grouped row-scaled NVFP4 GEMM (per-tensor GEMMs + post-scale)
  kGemmGroupedRowScaledSm90,    ///< qtc's device-driven grouped row-scaled NVFP4 GEMM: CUTLASS sm_90a (Hopper)
  kGemmGroupedRowScaledCublasLt,///< the same through cuBLASLt's grouped NVFP4 GEMM (Blackwell, cuBLAS >= 13.4)
  kGemmMxfp4,                   ///< cuBLASLt block-scaled FP4: CUDA_R_4F_E2M1 with VEC32_UE8M0 scales
  kGemmMxfp4Emulated,           ///< qtc: MXFP4 as exact dequantize-to-BF16 + BF16 GEMM (Hopper)
  kCount
};

/// The answer for one feature: supported, or not with the rule that excludes it.
struct Support {
  bool supported = false;
  std::string reason;  ///< empty when supported, e.g. "MXFP8 GEMM needs SM 10.x-11.x (TE_FORMATS.md §7.7), found SM 9.0"
  explicit operator bool() const { return supported; }
};

/// One row of the table, for printing.
struct Row {
  Feature feature;
  std::string_view name;         ///< stable, e.g. "gemm.fp8_block"
  std::string_view requirement;  ///< human-readable requirement
  std::string_view source;       ///< where the rule comes from
};

/// Every row, in Feature order.
std::span<const Row> table();
std::string_view feature_name(Feature f);
/// The feature with that stable name, if any.
std::optional<Feature> feature_from_name(std::string_view name);

/// The pure decision. Never throws.
Support query(Feature f, const Capability& cap);

/// "13.1.0" from 130100.
std::string cublas_version_string(int v);
/// Parses "13.1", "13.1.0" or "130100"; throws qtc::Error on anything else.
int parse_cublas_version(std::string_view s);
/// Parses "9.0" / "10.0" / "12.1" into cap's cc fields; throws qtc::Error on anything else.
void parse_compute_capability(std::string_view s, Capability& cap);

/// Which engine the device-driven grouped row-scaled NVFP4 GEMM (device group sizes, graph-capturable) gets on
/// a capability: cuBLASLt's grouped NVFP4 GEMM where its row is supported, else qtc's CUTLASS sm_90a kernel, else
/// none (only the per-group path with host group sizes, gemm.grouped_nvfp4_row_scaled, remains).
struct GroupedPath {
  std::optional<Feature> engine;  ///< kGemmGroupedRowScaledCublasLt, kGemmGroupedRowScaledSm90 or none
  std::string why;                ///< the reason for the choice: the rows that refused the engines before it
};
GroupedPath grouped_row_scaled_path(const Capability& cap);

/// The table for one capability: one line per feature, "yes" or "no: reason", then the grouped path line.
std::string format_table(const Capability& cap);

}  // namespace qtc::gating
