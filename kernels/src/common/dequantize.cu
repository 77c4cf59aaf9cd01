/// \file dequantize.cu
/// \brief Dequantization of one plane to a [M, K] matrix in x's orientation (TE_FORMATS.md §1.14, §2.3, §3.3,
///        §4.2): NVFP4 (sf * amax) * 1/(6 * E4M3_MAX) times the E2M1 value, MXFP8 2^(e-127) * q, FP8 q * scale_inv,
///        rounded once (RN-even) to the output type.
#include "device_util.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"

namespace qtc::cuda {
namespace {

using namespace dev;

using detail::DequantizeArgs;

__global__ void dequant_kernel(DequantizeArgs p) {
  const int64_t n = p.M * p.K;
  const bool e5m2 = (p.kind == RecipeKind::kMXFP8 ? p.mxfp8.fp8 : p.kind == RecipeKind::kFP8Block ? p.fp8_block.fp8 : p.fp8_tensor.fp8) ==
                    Fp8Type::kE5M2;
  const float factor = __fdiv_rn(1.0f, 6.0f * static_cast<float>(p.nvfp4.e4m3_max));  // NVFP4: 1 / (6 * E4M3_MAX)
  const bool torchao = p.nvfp4_order == Nvfp4Order::kTorchAO;  // rule nvfp4.order torchao: (amax / 2688) * sf
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / p.K, j = idx % p.K;
    float v = 0.0f;
    switch (p.kind) {
      case RecipeKind::kNVFP4: {
        uint32_t code;
        float sf, am;
        if (!p.columnwise) {
          code = (p.data[i * (p.K / 2) + j / 2] >> (4 * (j & 1))) & 0xFu;
          sf = decode_e4m3(p.scale[scale_index(p.scale_layout, i, j / 16)]);
          am = p.amax[p.per_row_amax ? i : 0];
        } else {
          code = (p.data[j * (p.M / 2) + i / 2] >> (4 * (i & 1))) & 0xFu;
          sf = decode_e4m3(p.scale[scale_index(p.scale_layout, j, i / 16)]);
          am = p.amax[p.per_row_amax ? j : 0];
        }
        const float fs = torchao ? (p.nvfp4.per_tensor_scale ? __fmul_rn(__fdiv_rn(am, kTorchAOPerTensorDivisor), sf) : sf)
                                 : __fmul_rn(__fmul_rn(sf, am), factor);
        v = __fmul_rn(decode_e2m1(code), fs);
        break;
      }
      case RecipeKind::kMXFP8: {  // both planes in x's orientation
        const uint32_t q = p.data[i * p.K + j];
        const uint32_t e = p.columnwise ? p.scale[scale_index(p.scale_layout, i / 32, j)] : p.scale[scale_index(p.scale_layout, i, j / 32)];
        v = __fmul_rn(decode_e8m0(e), decode_fp8(q, e5m2));
        break;
      }
      case RecipeKind::kFP8Block: {
        const float* s = reinterpret_cast<const float*>(p.scale);
        uint32_t q;
        int64_t si_at;
        if (!p.columnwise) {
          q = p.data[i * p.K + j];
          si_at = p.fp8_block.tile_2d ? scale_index(p.scale_layout, i / 128, j / 128) : scale_index(p.scale_layout, i, j / 128);
        } else {
          q = p.data[j * p.M + i];
          si_at = p.fp8_block.tile_2d ? scale_index(p.scale_layout, j / 128, i / 128) : scale_index(p.scale_layout, j, i / 128);
        }
        const float si = p.fp8_block.ue8m0_scales ? decode_e8m0(p.scale[si_at]) : s[si_at];
        v = __fmul_rn(decode_fp8(q, e5m2), si);
        break;
      }
      case RecipeKind::kMXFP4: {  // rowwise [M, ceil(K/2)], columnwise x^T [K, ceil(M/2)]; 2^(e-127) * E2M1
        const int64_t a = p.columnwise ? j : i, b = p.columnwise ? i : j, len = p.columnwise ? p.M : p.K;
        const uint32_t code = (p.data[a * ((len + 1) / 2) + b / 2] >> (4 * (b & 1))) & 0xFu;
        v = __fmul_rn(decode_e8m0(p.scale[scale_index(p.scale_layout, a, b / 32)]), decode_e2m1(code));
        break;
      }
      case RecipeKind::kFP8Tensor: {
        const uint32_t q = p.columnwise ? p.data[j * p.M + i] : p.data[i * p.K + j];
        v = __fmul_rn(decode_fp8(q, e5m2), *p.amax);
        break;
      }
    }
    if (p.out == DType::kF32)
      static_cast<float*>(p.y)[idx] = v;
    else if (p.out == DType::kBF16)
      static_cast<uint16_t*>(p.y)[idx] = f32_to_bf16(v);
    else
      static_cast<uint16_t*>(p.y)[idx] = f32_to_f16(v);
  }
}

}  // namespace

namespace detail {
void launch_dequantize(const DequantizeArgs& p, cudaStream_t s) {
  QTC_CHECK(p.out == DType::kF32 || p.out == DType::kBF16 || p.out == DType::kF16,
            "dequantize: output must be F32, BF16 or F16");
  const int64_t n = p.M * p.K;
  if (n == 0) return;
  const int grid = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65536));
  dequant_kernel<<<grid, 256, 0, s>>>(p);
  QTC_CUDA_CHECK_LAUNCH();
}
}  // namespace detail

}  // namespace qtc::cuda
