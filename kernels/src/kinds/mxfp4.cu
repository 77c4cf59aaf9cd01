/// \file mxfp4.cu
/// \brief MXFP4 quantization (VECTORS.md `mxfp4`): E2M1 data two per byte (element 2j in the low nibble), one E8M0
///        scale per 32 elements; rowwise blocks of 32 along K, data [M, ceil(K/2)]; columnwise = x^T, blocks of 32
///        along M, data [K, ceil(M/2)]. Any M, K: partial blocks reduce over their valid elements, an odd row length
///        leaves the last high nibble 0. Every scalar step (scale from the block amax, E2M1 code) is
///        reference/include/qtc/mxfp4_codec.hpp's, the functions the CPU reference runs, under the same profile
///        rules (te / ocp / torchao / triton_kernels / vllm_cutlass / fbgemm / quark).
///        One thread per block of 32: it owns the block's 16 data bytes and its scale
///        entry, so no two threads write one byte. A straightforward kernel (no tiling): correctness first.
#include "dequantize.cuh"
#include "device_util.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/mxfp4_codec.hpp"

namespace qtc::cuda {
namespace {

using namespace dev;

using detail::QuantizeArgs;
using detail::ScaleOut;

/// The profile's rules by name: mxfp4.order torchao, and mxfp4.nonfinite_block NaN (NaN propagates into the block
/// amax, a non-finite block gets 0xFF).
__device__ __forceinline__ bool mx_torchao(const QuantizeArgs& p) { return p.rules.mx_order == MxOrder::kTorchAO; }
__device__ __forceinline__ bool mx_nan(const QuantizeArgs& p) { return p.rules.mx_nonfinite == MxNonFinite::kNaN; }

/// mxfp4.order triton_kernels and vllm_cutlass: a NaN-ignoring amax from NaN, the scale byte from the bits, data
/// x * qs (mxfp4_codec.hpp).
__device__ __forceinline__ bool mx_vllm(const QuantizeArgs& p) { return p.rules.mx_order == MxOrder::kVllmCutlass; }
__device__ __forceinline__ bool mx_triton(const QuantizeArgs& p) {
  return p.rules.mx_order == MxOrder::kTritonKernels || mx_vllm(p);
}

__device__ __forceinline__ bool mx_fbgemm(const QuantizeArgs& p) { return p.rules.mx_order == MxOrder::kFbgemm; }
/// mxfp4.order quark: the triton_kernels amax (NaN ignored unless the block is all NaN); scale and data in the input type.
__device__ __forceinline__ bool mx_quark(const QuantizeArgs& p) { return p.rules.mx_order == MxOrder::kQuark; }

__device__ __forceinline__ uint8_t block_scale(float bamax, const QuantizeArgs& p) {
  if (mx_fbgemm(p)) return mxfp4::scale_fbgemm(bamax);
  if (mx_quark(p)) return mxfp4::scale_quark(bamax, p.dtype == DType::kF16);
  if (mx_vllm(p)) return mxfp4::scale_vllm_cutlass(bamax);
  if (mx_triton(p)) return mxfp4::scale_triton(bamax, p.mxfp4.scale_rule);
  return mx_torchao(p) ? mxfp4::scale_torchao(bamax, p.mxfp4.scale_rule) : mxfp4::scale_te(bamax, p.mxfp4.scale_rule, mx_nan(p));
}
__device__ __forceinline__ uint8_t code(float x, uint8_t e, const QuantizeArgs& p) {
  if (mx_fbgemm(p)) return mxfp4::code_fbgemm(x, e);
  if (mx_quark(p)) return mxfp4::code_quark(x, e, p.dtype == DType::kF16);
  if (mx_triton(p)) return mxfp4::code_triton(x, e);
  return mx_torchao(p) ? mxfp4::code_torchao(x, e, p.mxfp4.scale_rule) : mxfp4::code_te(x, e);
}

/// One plane: plane row a (x's row a, or x's column a when `transposed`), block b: elements [32b, 32b + 32) of
/// the plane row, clipped to its length.
/// An input element as float32, exactly as the reference's MatrixView::at reads it: F16 NaNs keep their payload
/// (f16_to_f32 of codec.hpp; cvt.f32.f16 makes every NaN canonical, and torchao's E2M1 cast turns the payload into
/// codes). Every other value converts exactly either way.
__device__ __forceinline__ float load_f32(float v) { return v; }
__device__ __forceinline__ float load_f32(__nv_bfloat16 v) { return InputTraits<__nv_bfloat16>::to_f32(v); }
__device__ __forceinline__ float load_f32(__half v) {
  const uint32_t h = __half_as_ushort(v);
  if ((h & 0x7C00u) != 0x7C00u || (h & 0x3FFu) == 0u) return __half2float(v);
  return bits_f32(((h & 0x8000u) << 16) | 0x7F800000u | ((h & 0x3FFu) << 13));
}

template <typename In, bool kTransposed>
__global__ void mxfp4_kernel(QuantizeArgs p) {
  const In* x = static_cast<const In*>(p.x);
  const int64_t rows = kTransposed ? p.K : p.M, len = kTransposed ? p.M : p.K;
  const int64_t nb = (len + 31) / 32, bytes = (len + 1) / 2;
  const int64_t n = rows * nb;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // Consecutive threads take consecutive plane rows of one block column: coalesced loads for x^T's columns.
    const int64_t a = kTransposed ? idx % rows : idx / nb, b = kTransposed ? idx / rows : idx % nb;
    const int64_t e0 = 32 * b, cnt = len - e0 < 32 ? len - e0 : 32;
    float v[32];
    const bool triton = mx_triton(p) || mx_quark(p);
    float amax = triton ? bits_f32(mxfp4::kTritonAmaxStart) : 0.0f;
    for (int t = 0; t < 32; ++t) {
      const int64_t e = e0 + t;
      v[t] = t < cnt ? load_f32(kTransposed ? x[e * p.K + a] : x[a * p.K + e]) : 0.0f;
      if (t < cnt) {  // the reference's amax_step: maxNum, or NaN-propagating (0x7FC00000); triton_kernels: fmaxf from NaN
        const float m = fabsf(v[t]);
        amax = triton ? mxfp4::amax_step_triton(amax, v[t])
                      : mx_nan(p) ? ((amax != amax || m != m) ? bits_f32(0x7FC00000u) : (m > amax ? m : amax)) : (m > amax ? m : amax);
      }
    }
    const uint8_t e = block_scale(amax, p);
    const ScaleOut& sc = kTransposed ? p.col_scale : p.row_scale;
    sc.p[scale_index(sc, a, b)] = e;
    uint8_t* row = (kTransposed ? p.col_data : p.row_data) + a * bytes + 16 * b;
    for (int t = 0; t < 32; t += 2) {
      if (t >= cnt) break;
      const uint32_t lo = code(v[t], e, p), hi = t + 1 < cnt ? code(v[t + 1], e, p) : 0u;
      row[t / 2] = static_cast<uint8_t>((lo & 0xFu) | ((hi & 0xFu) << 4));
    }
  }
}

template <typename In>
void launch_typed(const QuantizeArgs& p, cudaStream_t s) {
  for (int plane = 0; plane < 2; ++plane) {
    const bool col = plane == 1;
    if (col ? !p.columnwise : !p.rowwise) continue;
    const int64_t rows = col ? p.K : p.M, len = col ? p.M : p.K;
    const int64_t n = rows * ((len + 31) / 32);
    if (n == 0) continue;
    const int grid = static_cast<int>(std::min<int64_t>((n + 127) / 128, 65536));
    if (col)
      mxfp4_kernel<In, true><<<grid, 128, 0, s>>>(p);
    else
      mxfp4_kernel<In, false><<<grid, 128, 0, s>>>(p);
    QTC_CUDA_CHECK_LAUNCH();
  }
}

/// One plane as stored ([rows, len] elements: x for the rowwise plane, x^T for the columnwise one) decoded to BF16,
/// row-major: every value 2^(e-127) * E2M1 is exact in BF16 (8 exponent bits as float32, 2 significant bits).
__global__ void mxfp4_to_bf16_kernel(const uint8_t* data, ScaleOut sl, int64_t rows, int64_t len, uint16_t* out) {
  const int64_t n = rows * len, bytes = (len + 1) / 2;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t a = idx / len, b = idx % len;
    const uint32_t code = (data[a * bytes + b / 2] >> (4 * (b & 1))) & 0xFu;
    out[idx] = f32_to_bf16(mxfp4::decode(static_cast<uint8_t>(code), sl.p[scale_index(sl, a, b / 32)]));
  }
}

}  // namespace

namespace detail {
void launch_mxfp4_to_bf16(const uint8_t* data, const ScaleOut& scale, int64_t rows, int64_t len, void* out,
                          cudaStream_t s) {
  const int64_t n = rows * len;
  if (n == 0) return;
  const int grid = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65536));
  mxfp4_to_bf16_kernel<<<grid, 256, 0, s>>>(data, scale, rows, len, static_cast<uint16_t*>(out));
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_mxfp4(const QuantizeArgs& p, cudaStream_t s) {
  switch (p.dtype) {
    case DType::kF32: launch_typed<float>(p, s); break;
    case DType::kBF16: launch_typed<__nv_bfloat16>(p, s); break;
    case DType::kF16: launch_typed<__half>(p, s); break;
    default: QTC_FAIL("MXFP4 quantize: input must be F32, BF16 or F16, got ", dtype_name(p.dtype));
  }
}
}  // namespace detail

namespace mxfp4 {
/// One MXFP4 element: rowwise [M, ceil(K/2)], columnwise x^T [K, ceil(M/2)]; 2^(e-127) * E2M1.
struct Dequant {
  __device__ float operator()(const detail::DequantizeArgs& p, int64_t i, int64_t j) const {
    const int64_t a = p.columnwise ? j : i, b = p.columnwise ? i : j, len = p.columnwise ? p.M : p.K;
    const uint32_t code = (p.data[a * ((len + 1) / 2) + b / 2] >> (4 * (b & 1))) & 0xFu;
    return __fmul_rn(qtc::decode_e8m0(p.scale[scale_index(p.scale_layout, a, b / 32)]), qtc::decode_e2m1(code));
  }
};
}  // namespace mxfp4

namespace detail {
void launch_dequantize_mxfp4(const DequantizeArgs& a, cudaStream_t s) { dev::launch_dequantize_with(a, mxfp4::Dequant{}, s); }
}  // namespace detail

}  // namespace qtc::cuda
