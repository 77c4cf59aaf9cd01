/// \file launch.hpp
/// \brief Internal: kernel parameter blocks and the host launchers each .cu file exports to the dispatcher
///        (quantize.cpp). No device code here, so plain C++ translation units can include it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qtc/layout.hpp"
#include "qtc/tensor.hpp"

namespace qtc::cuda::detail {

/// Where a plane's scales go: the buffer and the plane's ScaleGeometry in its layout (layout.hpp), passed to the
/// kernels as it is (dev::ScaleOut is this type).
struct ScaleOutHost {
  uint8_t* p = nullptr;
  ScaleGeometry geom;  ///< compact entry (r, c) -> element geom.offset(r, c) of p
};

/// Which amaxes one pass over x produces (all zeroed by the launcher first, stream-ordered).
struct AmaxParams {
  const void* x = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0;
  bool propagate_nan = false;   ///< torch.amax semantics (TE PyTorch reference profile)
  float* global = nullptr;      ///< max |x|
  float* per_row = nullptr;     ///< [M] max over each row
  float* per_col = nullptr;     ///< [K] max over each column
  float* rht_global = nullptr;  ///< max |bf16 RHT(x^T)| (bf16 input only)
  uint16_t rht_sign_mask = 0;
};
void launch_amax(const AmaxParams& p, cudaStream_t s);
/// Writes `n` copies of v to p on the stream (a kernel: graph-capturable, no host staging).
void launch_fill(float* p, int64_t n, float v, cudaStream_t s);

struct Nvfp4Params {
  const void* x = nullptr;
  DType dtype = DType::kF32;
  int64_t M = 0, K = 0;
  bool rowwise = true, columnwise = true;
  bool tile2d = false, row_scaled = false, fourover6 = false, mse = false, stochastic = false, rht = false;
  bool pyref = false;  ///< TE PyTorch reference semantics (-0 -> 0x0, NaN propagates)
  bool torchao = false;  ///< torchao nvfp4_quantize (profile order kTorchAO, 1x16)
  bool torchao_two_level = true;  ///< torchao with the per-tensor scale (else block scales only)
  float e4m3_max = 448.0f;
  uint64_t seed = 0;
  uint16_t rht_sign_mask = 0;
  const float* amax_row = nullptr;  ///< [1] or [M]
  const float* amax_col = nullptr;  ///< [1] or [K]
  bool amax_from_host = false;      ///< the caller gave the amaxes (quantize_with_amax): no device amax pass ran
  uint8_t* row_data = nullptr;      ///< [M, K/2]
  ScaleOutHost row_scale;
  uint8_t* col_data = nullptr;      ///< [K, M/2]
  ScaleOutHost col_scale;
};
void launch_nvfp4(const Nvfp4Params& p, cudaStream_t s);
/// Test hook: the number of 8-value groups (2^32 of them: every float in each of the 8 slots) on which the fast
/// kernel's packed E2M1 encoder (encode8) differs from the scalar one (nvfp4_fast.cu). Synchronous.
int64_t e2m1x2_exhaustive_mismatches();

struct Mxfp8Params {
  const void* x = nullptr;
  DType dtype = DType::kF32;
  int64_t M = 0, K = 0;
  bool rowwise = true, columnwise = true;
  bool e5m2 = false, floor_rule = false, tile2d = false;
  bool ocp = false;  ///< NaN-propagating amax, a non-finite block amax gets scale 0xFF (profile rule mx_nonfinite)
  bool torchao = false;  ///< torchao to_mx (profile rule mxfp8.order): scale and data per torchao_device.cuh
  int scale_rule = 0;    ///< MxScaleRule: 0 rceil, 1 ocp_floor, 2 ceil, 3 even
  uint8_t* row_data = nullptr;  ///< [M, K]
  ScaleOutHost row_scale;
  uint8_t* col_data = nullptr;  ///< [M, K]
  ScaleOutHost col_scale;
};
void launch_mxfp8(const Mxfp8Params& p, cudaStream_t s);

struct Fp8BlockParams {
  const void* x = nullptr;
  DType dtype = DType::kF32;
  int64_t M = 0, K = 0;
  bool rowwise = true, columnwise = true;
  bool e5m2 = false, tile2d = false, pow2 = false, pyref = false;
  float eps = 0.0f;
  float value_for_inf = 0.0f;   ///< max finite of the input type
  uint8_t* row_data = nullptr;  ///< [M, K]
  ScaleOutHost row_scale;       ///< F32 scale_inv
  uint8_t* col_data = nullptr;  ///< [K, M]
  ScaleOutHost col_scale;
  bool ue8m0 = false;  ///< scale_dtype=ue8m0: scales written as UE8M0 bytes (pow2 scales only), else F32
};
void launch_fp8_block(const Fp8BlockParams& p, cudaStream_t s);

struct Fp8TensorParams {
  const void* x = nullptr;
  DType dtype = DType::kF32;
  int64_t M = 0, K = 0;
  bool rowwise = true, columnwise = true;
  bool e5m2 = false, pow2 = false, pyref = false;
  float eps = 0.0f;
  const float* amax = nullptr;    ///< global amax (device)
  float* scale_inv = nullptr;     ///< written by the kernel
  uint8_t* row_data = nullptr;    ///< [M, K]
  uint8_t* col_data = nullptr;    ///< [K, M]
};
void launch_fp8_tensor(const Fp8TensorParams& p, cudaStream_t s);

struct Mxfp4Params {
  const void* x = nullptr;
  DType dtype = DType::kF32;
  int64_t M = 0, K = 0;
  bool rowwise = true, columnwise = true;
  bool ocp = false;      ///< NaN-propagating amax, a non-finite block gets 0xFF (profile rule mx_nonfinite)
  bool torchao = false;  ///< torchao to_mx (profile rule mx_order): mxfp4_codec.hpp's torchao steps
  int scale_rule = 0;    ///< MxScaleRule: 0 rceil, 1 ocp_floor, 2 ceil, 3 even
  uint8_t* row_data = nullptr;  ///< [M, ceil(K/2)]
  ScaleOutHost row_scale;
  uint8_t* col_data = nullptr;  ///< [K, ceil(M/2)] (x^T)
  ScaleOutHost col_scale;
};
void launch_mxfp4(const Mxfp4Params& p, cudaStream_t s);  // mxfp4.cu
/// One MXFP4 plane as stored ([rows, len]: x, or x^T for the columnwise plane) to row-major BF16, exactly.
void launch_mxfp4_to_bf16(const uint8_t* data, const ScaleOutHost& scale, int64_t rows, int64_t len, void* out,
                          cudaStream_t s);

/// Dequantize: one plane to [M, K] in x's orientation.
struct DequantParams {
  int kind = 0;  ///< 0 NVFP4, 1 MXFP8, 2 FP8 block, 3 FP8 tensor, 4 MXFP4
  bool columnwise = false;
  int64_t M = 0, K = 0;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
  ScaleOutHost scale_layout;  ///< the stored scale's geometry (p unused)
  const float* amax = nullptr;  ///< NVFP4 amax [1] or per row/column; FP8 tensor: scale_inv
  bool per_row_amax = false;
  float nvfp4_factor = 0.0f;    ///< 1 / (6 * E4M3_MAX)
  bool torchao = false;         ///< NVFP4 torchao: (amax / 2688) * sf
  bool torchao_two_level = true;  ///< NVFP4 torchao without a per-tensor scale: sf alone
  bool e5m2 = false;
  bool tile2d = false;          ///< FP8 block 128x128 (scale index) / MXFP8 unused
  DType out = DType::kF32;
  void* y = nullptr;
  bool ue8m0 = false;  ///< FP8 block scales stored as UE8M0 bytes (scale_dtype=ue8m0)
};
void launch_dequantize(const DequantParams& p, cudaStream_t s);

/// Test hook (the determinism test): at most `n` CTAs for the grid-stride kernels (the persistent tile kernels and
/// the global amax pass); 0 (the default) = no cap. Process-wide; kernels whose grid is one CTA per tile ignore it.
void set_grid_stride_cap(int64_t n);
int64_t grid_stride_cap();

}  // namespace qtc::cuda::detail
