/// \file launch.hpp
/// \brief Internal: the argument structs of the quantize and dequantize launches and the host launchers each .cu
///        file exports to the dispatcher (quantize.cpp). One QuantizeArgs per quantize call, built once
///        (make_quantize_args in quantize.cpp) from the two plane descriptions, the recipe's options alternative and
///        the profile's rules, and passed unchanged to every launcher and kernel; likewise DequantizeArgs. Both are
///        plain and host/device-safe. No device code here, so plain C++ translation units can include it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qtc/cuda/quantize.hpp"
#include "qtc/host_device.hpp"
#include "qtc/layout.hpp"
#include "qtc/numeric.hpp"
#include "qtc/profile.hpp"
#include "qtc/recipe.hpp"
#include "qtc/tensor.hpp"

namespace qtc::cuda::detail {

/// Where a plane's scales go: the buffer and the plane's ScaleGeometry in its layout (layout.hpp), passed to the
/// kernels as it is. Unused for a plane that is not produced.
struct ScaleOut {
  uint8_t* p = nullptr;
  ScaleGeometry geom;  ///< compact entry (r, c) -> element geom.offset(r, c) of p
};
using ScaleOutHost = ScaleOut;  // the name the GEMM paths use

/// Compact scale entry (r, c) -> element offset in the plane's layout: the one offset function of host and device.
QTC_HD int64_t scale_index(const ScaleOut& s, int64_t r, int64_t c) { return s.geom.offset(r, c); }

/// The profile rules the kernels read, under their names in ProfileRules (profile.hpp) and `qtc profiles`. Which
/// values the kernels implement: kCudaRules (quantize.cpp) through the shared check of path_rules.hpp.
struct KernelRules {
  bool nan_amax = false;                  ///< NaN propagates into block and tensor amaxes (NVFP4, FP8)
  Nvfp4Order nvfp4_order = Nvfp4Order::kTE;
  bool nvfp4_neg_zero_positive = false;   ///< nvfp4.neg_zero: -0.0 and NaN data -> code 0x0
  bool nvfp4_nan_scale = false;           ///< nvfp4.nan_scale: a NaN block scale stored as 0x7F, NaN S_enc kept
  bool nvfp4_tiny_block_floor = false;    ///< nvfp4.zero_and_tiny_block_scale (order torchao): floor 2^-6
  MxOrder mx_order = MxOrder::kTE;        ///< MXFP8 and MXFP4
  MxNonFinite mx_nonfinite = MxNonFinite::kSatFinite;
  bool fp8_inf_amax_scale_zero = false;   ///< fp8.inf_amax_scale: amax = +Inf -> scale 0
  bool fp8_scale_reciprocal = false;      ///< fp8.scale_order: fp8_max * (1 / amax)
};

/// One quantize call: the input, the recipe (kind, options, rules), where every output goes and the launch choices.
struct QuantizeArgs {
  const void* x = nullptr;  ///< [M, K] row-major
  DType dtype = DType::kF32;
  int64_t M = 0, K = 0;
  bool vec_ok = false;  ///< x 16-byte aligned and each row a multiple of 16 bytes: the 16-byte load paths apply
  RecipeKind kind{};
  Fp8Type fp8 = Fp8Type::kE4M3;  ///< the FP8 data type (MXFP8, FP8 block, FP8 tensor; E4M3 where data is E2M1)
  bool per_tensor = false;       ///< one scale for the tensor (FP8 tensor: KindInfo::per_tensor_scale)
  /// The recipe's options alternative: the member of `kind` holds the recipe's options, the others their defaults.
  Nvfp4Options nvfp4{};
  Mxfp8Options mxfp8{};
  Fp8BlockOptions fp8_block{};
  Fp8TensorOptions fp8_tensor{};
  Mxfp4Options mxfp4{};
  KernelRules rules{};
  bool rowwise = true, columnwise = true;
  uint8_t* row_data = nullptr;  ///< as describe_plane(kRowwise) says
  ScaleOut row_scale{};
  uint8_t* col_data = nullptr;  ///< as describe_plane(kColumnwise) says
  ScaleOut col_scale{};
  float* amax_row = nullptr;  ///< NVFP4: [1] or [M] (row-scaled); FP8 tensor: the global amax [1]
  float* amax_col = nullptr;  ///< NVFP4: [1] or [K]
  float* scale_inv = nullptr;       ///< FP8 tensor: 1 / scale, written
  float value_for_inf = 0.0f;       ///< FP8 block: the input type's largest finite value (an infinite scale's value)
  LaunchOptions launch{};           ///< kernel choices that never change the bytes
};

/// FP8 data type and range of the FP8 recipes (block, tensor) and MXFP8.
QTC_HD bool e5m2_of(const QuantizeArgs& a) { return a.fp8 == Fp8Type::kE5M2; }
QTC_HD float fp8_max_of(const QuantizeArgs& a) { return e5m2_of(a) ? 57344.0f : 448.0f; }

/// Which amaxes one pass over x produces (all zeroed by the launcher first, stream-ordered).
struct AmaxParams {
  const void* x = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0;
  bool nan_amax = false;        ///< profile rule nan_amax: torch.amax semantics
  float* global = nullptr;      ///< max |x|
  float* per_row = nullptr;     ///< [M] max over each row
  float* per_col = nullptr;     ///< [K] max over each column
  float* rht_global = nullptr;  ///< max |bf16 RHT(x^T)| (bf16 input only)
  uint16_t rht_sign_mask = 0;
  /// Global amax only, BF16/F16 aligned input: the packed pass that visits x from its end (amax.cu; the pipelined
  /// casts' choice, LaunchOptions::cast_kernel); same value.
  bool packed_reverse = false;
};
void launch_amax(const AmaxParams& p, cudaStream_t s);
/// Writes `n` copies of v to p on the stream (a kernel: graph-capturable, no host staging).
void launch_fill(float* p, int64_t n, float v, cudaStream_t s);

void launch_nvfp4(const QuantizeArgs& a, cudaStream_t s);       // nvfp4.cu
void launch_mxfp8(const QuantizeArgs& a, cudaStream_t s);       // mxfp8.cu
void launch_fp8_block(const QuantizeArgs& a, cudaStream_t s);   // fp8.cu
void launch_fp8_tensor(const QuantizeArgs& a, cudaStream_t s);  // fp8.cu
/// The pipelined FP8 block / tensor cast (fp8_pipe.cu) when a.launch.cast_kernel asks for it and it applies (BF16/F16,
/// E4M3, a.vec_ok); false (nothing launched) otherwise.
bool launch_fp8_pipelined(const QuantizeArgs& a, cudaStream_t s);
void launch_mxfp4(const QuantizeArgs& a, cudaStream_t s);       // mxfp4.cu
/// Test hook: the number of 8-value groups (2^32 of them: every float in each of the 8 slots) on which the fast
/// kernel's packed E2M1 encoder (encode8) differs from the scalar one (nvfp4_fast.cu). Synchronous.
int64_t e2m1x2_exhaustive_mismatches();
/// One MXFP4 plane as stored ([rows, len]: x, or x^T for the columnwise plane) to row-major BF16, exactly.
void launch_mxfp4_to_bf16(const uint8_t* data, const ScaleOut& scale, int64_t rows, int64_t len, void* out,
                          cudaStream_t s);

/// Dequantize: one plane to [M, K] in x's orientation. Built once (quantize.cpp's dequantize) from the plane's
/// description, the recipe's options alternative and the profile's rules.
struct DequantizeArgs {
  RecipeKind kind{};
  Fp8Type fp8 = Fp8Type::kE4M3;  ///< as QuantizeArgs::fp8
  bool columnwise = false;
  int64_t M = 0, K = 0;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
  ScaleOut scale_layout{};  ///< the stored scale's geometry (p unused)
  const float* amax = nullptr;  ///< NVFP4 amax [1] or per row/column; FP8 tensor: scale_inv
  bool per_row_amax = false;
  Nvfp4Options nvfp4{};         ///< the recipe's options alternative (the member of `kind`)
  Mxfp8Options mxfp8{};
  Fp8BlockOptions fp8_block{};
  Fp8TensorOptions fp8_tensor{};
  Nvfp4Order nvfp4_order = Nvfp4Order::kTE;  ///< profile rule nvfp4.order (torchao: (amax / 2688) * sf)
  DType out = DType::kF32;
  void* y = nullptr;
};
// The kinds' dequantize launchers (each kind's decoder on the shared pass of dequantize.cuh), named by its module.
void launch_dequantize_nvfp4(const DequantizeArgs& a, cudaStream_t s);      // nvfp4.cu
void launch_dequantize_mxfp8(const DequantizeArgs& a, cudaStream_t s);      // mxfp8.cu
void launch_dequantize_fp8_block(const DequantizeArgs& a, cudaStream_t s);  // fp8.cu
void launch_dequantize_fp8_tensor(const DequantizeArgs& a, cudaStream_t s); // fp8.cu
void launch_dequantize_mxfp4(const DequantizeArgs& a, cudaStream_t s);      // mxfp4.cu

/// Test hook (the determinism test): at most `n` CTAs for the grid-stride kernels (the persistent tile kernels and
/// the global amax pass); 0 (the default) = no cap. Process-wide; kernels whose grid is one CTA per tile ignore it.
void set_grid_stride_cap(int64_t n);
int64_t grid_stride_cap();

}  // namespace qtc::cuda::detail
