/// \file device_util.cuh
/// \brief Device-only helpers of the CUDA kernels: NaN-aware min/max, warp reductions, the hardware FP8 pair
///        conversion, input-element loads, scale destinations. The scalar codecs and block-scale formulas are
///        not here: the kernels call the host/device numeric core (reference/include/qtc/numeric.hpp), the
///        same functions the CPU reference runs.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "qtc/numeric.hpp"

namespace qtc::cuda::dev {

/// fminf/fmaxf (IEEE minNum/maxNum: a NaN operand is ignored) or their NaN-propagating torch variants.
__device__ __forceinline__ float min_p(float a, float b, bool propagate) {
  if (propagate && (a != a || b != b)) return __int_as_float(0x7FFFFFFF);
  return fminf(a, b);
}
__device__ __forceinline__ float max_p(float a, float b, bool propagate) {
  if (propagate && (a != a || b != b)) return __int_as_float(0x7FFFFFFF);
  return fmaxf(a, b);
}

/// Two floats -> two FP8 bytes (lo in bits 7:0), RN-even satfinite. sm_89+: one cvt.rn.satfinite instruction
/// (exact RN on the value, like the software path); NaN is pinned to 0x7F as the reference does.
__device__ __forceinline__ uint32_t cvt_fp8x2(float lo, float hi, bool e5m2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t r;
  if (e5m2)
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  uint32_t v = r;
  if (lo != lo) v = (v & 0xFF00u) | 0x7Fu;
  if (hi != hi) v = (v & 0x00FFu) | 0x7F00u;
  return v;
#else
  return static_cast<uint32_t>(encode_fp8(lo, e5m2)) | (static_cast<uint32_t>(encode_fp8(hi, e5m2)) << 8);
#endif
}

/// double -> bf16 bits with one RN-even rounding (round to odd at float precision, then RN to bf16).
__device__ __forceinline__ uint16_t f64_to_bf16(double d) {
  if (d != d) return (__double_as_longlong(d) < 0) ? 0xFFC0 : 0x7FC0;
  float f = __double2float_rz(d);
  uint32_t u = f32_bits(f);
  if (static_cast<double>(f) != d && (u & 0x7FFFFFFFu) < 0x7F800000u) u |= 1u;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// float -> f16 bits, RN-even (f32_to_bf16: numeric.hpp).
__device__ __forceinline__ uint16_t f32_to_f16(float f) { return __half_as_ushort(__float2half_rn(f)); }

/// Input element loads, exact conversion to float.
template <typename T>
struct InputTraits;
template <>
struct InputTraits<float> {
  static constexpr int kVec = 4;  // elements per 16-byte load
  __device__ static float to_f32(float v) { return v; }
};
template <>
struct InputTraits<__nv_bfloat16> {
  static constexpr int kVec = 8;
  __device__ static float to_f32(__nv_bfloat16 v) { return bf16_to_f32(__bfloat16_as_ushort(v)); }
};
template <>
struct InputTraits<__half> {
  static constexpr int kVec = 8;
  /// As the reference's MatrixView::at reads F16 (codec.hpp f16_to_f32): a NaN keeps its sign and payload (cvt.f32.f16
  /// makes every NaN canonical; torchao's casts turn payloads into codes). Every other value converts exactly either way.
  __device__ static float to_f32(__half v) {
    const uint32_t h = __half_as_ushort(v);
    if ((h & 0x7C00u) != 0x7C00u || (h & 0x3FFu) == 0u) return __half2float(v);
    return __uint_as_float(((h & 0x8000u) << 16) | 0x7F800000u | ((h & 0x3FFu) << 13));
  }
};

// Scale destinations (compact (r, c) -> offset in the plane's layout): launch.hpp's detail::ScaleOut and scale_index.

/// atomicMax on a float >= 0 (or NaN as 0x7FFFFFFF, which wins: NaN-propagating amax).
__device__ __forceinline__ void atomic_max_nonneg(float* p, float v) {
  atomicMax(reinterpret_cast<int*>(p), __float_as_int(v));
}

__device__ __forceinline__ float warp_max(float v, bool propagate) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max_p(v, __shfl_xor_sync(0xFFFFFFFFu, v, o), propagate);
  return v;
}

}  // namespace qtc::cuda::dev
