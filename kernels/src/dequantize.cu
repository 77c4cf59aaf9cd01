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

/// The plane's format (launch.hpp's DequantParams::kind: 0..3 in this order).
enum class DequantKind : int32_t { kNvfp4 = 0, kMxfp8 = 1, kFp8Block = 2, kFp8Tensor = 3, kMxfp4 = 4 };

struct KParams {
  DequantKind kind;
  bool columnwise, per_row_amax, e5m2, tile2d, torchao, torchao_two_level, ue8m0;
  int64_t M, K;
  const uint8_t* data;
  const uint8_t* scale;
  ScaleOut sl;
  const float* amax;
  float factor;
  DType out;  ///< F32, BF16 or F16
  void* y;
};

__global__ void dequant_kernel(KParams p) {
  const int64_t n = p.M * p.K;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx / p.K, j = idx % p.K;
    float v = 0.0f;
    switch (p.kind) {
      case DequantKind::kNvfp4: {
        uint32_t code;
        float sf, am;
        if (!p.columnwise) {
          code = (p.data[i * (p.K / 2) + j / 2] >> (4 * (j & 1))) & 0xFu;
          sf = decode_e4m3(p.scale[scale_index(p.sl, i, j / 16)]);
          am = p.amax[p.per_row_amax ? i : 0];
        } else {
          code = (p.data[j * (p.M / 2) + i / 2] >> (4 * (i & 1))) & 0xFu;
          sf = decode_e4m3(p.scale[scale_index(p.sl, j, i / 16)]);
          am = p.amax[p.per_row_amax ? j : 0];
        }
        const float fs = p.torchao ? (p.torchao_two_level ? __fmul_rn(__fdiv_rn(am, kTorchAOPerTensorDivisor), sf) : sf)
                                   : __fmul_rn(__fmul_rn(sf, am), p.factor);
        v = __fmul_rn(decode_e2m1(code), fs);
        break;
      }
      case DequantKind::kMxfp8: {  // both planes in x's orientation
        const uint32_t q = p.data[i * p.K + j];
        const uint32_t e = p.columnwise ? p.scale[scale_index(p.sl, i / 32, j)] : p.scale[scale_index(p.sl, i, j / 32)];
        v = __fmul_rn(decode_e8m0(e), decode_fp8(q, p.e5m2));
        break;
      }
      case DequantKind::kFp8Block: {
        const float* s = reinterpret_cast<const float*>(p.scale);
        uint32_t q;
        int64_t si_at;
        if (!p.columnwise) {
          q = p.data[i * p.K + j];
          si_at = p.tile2d ? scale_index(p.sl, i / 128, j / 128) : scale_index(p.sl, i, j / 128);
        } else {
          q = p.data[j * p.M + i];
          si_at = p.tile2d ? scale_index(p.sl, j / 128, i / 128) : scale_index(p.sl, j, i / 128);
        }
        const float si = p.ue8m0 ? decode_e8m0(p.scale[si_at]) : s[si_at];
        v = __fmul_rn(decode_fp8(q, p.e5m2), si);
        break;
      }
      case DequantKind::kMxfp4: {  // rowwise [M, ceil(K/2)], columnwise x^T [K, ceil(M/2)]; 2^(e-127) * E2M1
        const int64_t a = p.columnwise ? j : i, b = p.columnwise ? i : j, len = p.columnwise ? p.M : p.K;
        const uint32_t code = (p.data[a * ((len + 1) / 2) + b / 2] >> (4 * (b & 1))) & 0xFu;
        v = __fmul_rn(decode_e8m0(p.scale[scale_index(p.sl, a, b / 32)]), decode_e2m1(code));
        break;
      }
      default: {  // DequantKind::kFp8Tensor
        const uint32_t q = p.columnwise ? p.data[j * p.M + i] : p.data[i * p.K + j];
        v = __fmul_rn(decode_fp8(q, p.e5m2), *p.amax);
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
void launch_dequantize(const DequantParams& h, cudaStream_t s) {
  KParams p{};
  QTC_CHECK(h.kind >= 0 && h.kind <= 4, "dequantize: unknown plane kind ", h.kind);
  p.kind = static_cast<DequantKind>(h.kind);
  p.columnwise = h.columnwise;
  p.per_row_amax = h.per_row_amax;
  p.e5m2 = h.e5m2;
  p.tile2d = h.tile2d;
  p.ue8m0 = h.ue8m0;
  p.torchao = h.torchao;
  p.torchao_two_level = h.torchao_two_level;
  p.M = h.M;
  p.K = h.K;
  p.data = h.data;
  p.scale = h.scale;
  p.sl = to_scale_out(h.scale_layout);
  p.sl.p = nullptr;
  p.amax = h.amax;
  p.factor = h.nvfp4_factor;
  p.out = h.out;
  QTC_CHECK(h.out == DType::kF32 || h.out == DType::kBF16 || h.out == DType::kF16,
            "dequantize: output must be F32, BF16 or F16");
  p.y = h.y;
  const int64_t n = h.M * h.K;
  if (n == 0) return;
  const int grid = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65536));
  dequant_kernel<<<grid, 256, 0, s>>>(p);
  QTC_CUDA_CHECK_LAUNCH();
}
}  // namespace detail

}  // namespace qtc::cuda
