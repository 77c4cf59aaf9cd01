/// \file device_codec.cuh
/// \brief Device-side scalar codecs, bit-exact to qtc/codec.hpp (TE_FORMATS.md §0). Software only: Hopper has
///        no FP4/E8M0 conversion instructions, and the software FP8 path pins NaN to 0x7F exactly as the
///        reference does. All arithmetic uses explicit IEEE round-to-nearest intrinsics (no contraction).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace qtc::cuda::dev {

constexpr float kFltMax = 3.402823466e+38f;

__device__ __forceinline__ uint32_t fbits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float bitsf(uint32_t u) { return __uint_as_float(u); }

/// fminf/fmaxf (IEEE minNum/maxNum: a NaN operand is ignored) or their NaN-propagating torch variants.
__device__ __forceinline__ float min_p(float a, float b, bool propagate) {
  if (propagate && (a != a || b != b)) return __int_as_float(0x7FFFFFFF);
  return fminf(a, b);
}
__device__ __forceinline__ float max_p(float a, float b, bool propagate) {
  if (propagate && (a != a || b != b)) return __int_as_float(0x7FFFFFFF);
  return fmaxf(a, b);
}

template <int kMan, int kBias>
__device__ __forceinline__ uint32_t round_normal_bits(uint32_t u) {
  constexpr int kShift = 23 - kMan;
  constexpr uint32_t kHalf = 1u << (kShift - 1);
  const uint32_t rebased = u - (static_cast<uint32_t>(127 - kBias) << 23);
  const uint32_t rem = rebased & ((1u << kShift) - 1);
  uint32_t code = rebased >> kShift;
  if (rem > kHalf || (rem == kHalf && (code & 1u))) ++code;
  return code;
}

/// float -> E4M3, RN-even, satfinite; NaN -> 0x7F (codec.hpp encode_e4m3).
__device__ __forceinline__ uint8_t enc_e4m3(float x) {
  const uint32_t u = fbits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x43E80000u) return static_cast<uint8_t>(sign | 0x7Eu);
  if (a < 0x3C800000u) {
    const float q = rintf(__fmul_rn(bitsf(a), 512.0f));
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(q));
  }
  return static_cast<uint8_t>(sign | round_normal_bits<3, 7>(a));
}

/// float -> E5M2, RN-even, satfinite; NaN -> 0x7F (codec.hpp encode_e5m2).
__device__ __forceinline__ uint8_t enc_e5m2(float x) {
  const uint32_t u = fbits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  if (a >= 0x47700000u) return static_cast<uint8_t>(sign | 0x7Bu);
  if (a < 0x38800000u) {
    const float q = rintf(__fmul_rn(bitsf(a), 65536.0f));
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(q));
  }
  return static_cast<uint8_t>(sign | round_normal_bits<2, 15>(a));
}

__device__ __forceinline__ uint8_t enc_fp8(float x, bool e5m2) { return e5m2 ? enc_e5m2(x) : enc_e4m3(x); }

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
  return static_cast<uint32_t>(enc_fp8(lo, e5m2)) | (static_cast<uint32_t>(enc_fp8(hi, e5m2)) << 8);
#endif
}

/// E4M3 byte -> float (0x7F/0xFF -> NaN).
__device__ __forceinline__ float dec_e4m3(uint32_t c) {
  const uint32_t s = (c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xFu, m = c & 7u;
  if ((c & 0x7Fu) == 0x7Fu) return bitsf(s | 0x7FC00000u);
  if (e == 0) return bitsf(s | fbits(static_cast<float>(m) * 0x1p-9f));
  return bitsf(s | ((e + 120u) << 23) | (m << 20));
}

/// E5M2 byte -> float (IEEE-like: Inf and NaN).
__device__ __forceinline__ float dec_e5m2(uint32_t c) {
  const uint32_t s = (c & 0x80u) << 24;
  const uint32_t e = (c >> 2) & 0x1Fu, m = c & 3u;
  if (e == 0x1F) return bitsf(s | (m == 0 ? 0x7F800000u : 0x7FC00000u));
  if (e == 0) return bitsf(s | fbits(static_cast<float>(m) * 0x1p-16f));
  return bitsf(s | ((e + 112u) << 23) | (m << 21));
}

__device__ __forceinline__ float dec_fp8(uint32_t c, bool e5m2) { return e5m2 ? dec_e5m2(c) : dec_e4m3(c); }

/// float -> E2M1 code, RN-even, satfinite (TE_FORMATS.md §0.3). keep_sign: -0 and tiny negatives -> 0x8,
/// NaN -> 0x7 (CUDA); otherwise `x < 0` decides the sign and NaN -> 0x0 (TE's PyTorch reference).
__device__ __forceinline__ uint32_t enc_e2m1(float x, bool keep_sign = true) {
  if (x != x) return keep_sign ? 0x7u : 0x0u;
  const float a = fabsf(x);
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                     static_cast<uint32_t>(a > 5.0f);
  const bool neg = keep_sign ? (fbits(x) >> 31) != 0 : (x < 0.0f);
  return c | (neg ? 0x8u : 0u);
}

/// The same encoding (keep-sign variant), branch-free: E2M1 rounds to a quantum of 0.5 below 2, 1 in [2, 4) and 2
/// above, so code = rint(a * s) + o with (s, o) = (2, 0), (1, 2), (0.5, 4), saturated at 7. One FFMA computes
/// a * s + (1.5 * 2^23 + o) exactly rounded (RN-even at the integer quantum; o is even, so ties stay even) and the
/// code is read off the low bits. NaN and Inf give 7. GPU arithmetic never produces a negative NaN, so the sign
/// bit of x is the sign of the code (-0 -> 0x8), as the CUDA conversion does.
__device__ __forceinline__ uint32_t enc_e2m1_rn(float x) {
  const float a = fabsf(x);
  const bool lt2 = a < 2.0f, lt4 = a < 4.0f;
  const float s = lt2 ? 2.0f : (lt4 ? 1.0f : 0.5f);
  const float o = lt2 ? 12582912.0f : (lt4 ? 12582914.0f : 12582916.0f);
  const uint32_t q = min(__float_as_uint(__fmaf_rn(a, s, o)) - 0x4B400000u, 7u);
  return q | ((__float_as_uint(x) >> 28) & 8u);
}

/// Stochastic E2M1 rounding, TE's software emulation (codec.hpp encode_e2m1_stochastic).
__device__ __forceinline__ uint32_t enc_e2m1_sr(float v, uint32_t rbyte) {
  const float u = __fmul_rn(static_cast<float>(rbyte), 1.0f / 256.0f);
  const float a = fabsf(v);
  const float step = a >= 4.0f ? 2.0f : (a >= 2.0f ? 1.0f : 0.5f);
  const float t = __fmaf_rn(u, step, a);
  const float step_t = t >= 4.0f ? 2.0f : (t >= 2.0f ? 1.0f : 0.5f);
  const float inv = t >= 4.0f ? 0.5f : (t >= 2.0f ? 1.0f : 2.0f);
  const float q = fminf(__fmul_rn(floorf(__fmul_rn(t, inv)), step_t), 6.0f);
  const float r = copysignf(q, v != v ? 1.0f : v);
  return enc_e2m1(r);
}

/// E2M1 code -> float, without a table (a table indexed at run time would live in local memory).
__device__ __forceinline__ float dec_e2m1(uint32_t c) {
  const uint32_t m = c & 7u;
  const float v = m < 2u ? 0.5f * static_cast<float>(m) : __uint_as_float((((m >> 1) + 126u) << 23) | ((m & 1u) << 22));
  return (c & 8u) ? -v : v;
}

/// float -> E8M0 rounded up (TE `float_to_e8m0`; codec.hpp encode_e8m0 kUp).
__device__ __forceinline__ uint32_t enc_e8m0_up(float v) {
  if (v != v || (v < 0.0f)) return 0xFF;
  if (isinf(v)) return 0xFE;
  if (v == 0.0f) return 0x00;
  const uint32_t u = fbits(v);
  uint32_t e = u >> 23;
  const uint32_t m = u & 0x7FFFFFu;
  if ((m > 0 && e != 0xFE) && !(e == 0 && m <= 0x400000u)) ++e;
  return e;
}

/// floor(log2 |v|) of a finite non-zero float (subnormals included).
__device__ __forceinline__ int floor_log2(float v) {
  const uint32_t a = fbits(v) & 0x7FFFFFFFu;
  const int e = static_cast<int>(a >> 23);
  if (e != 0) return e - 127;
  return (31 - __clz(a)) - 149;
}

/// 2^(127-e); e==254 -> 2^-127; 255 -> NaN (TE `exp2f_rcp`).
__device__ __forceinline__ float e8m0_rcp(uint32_t e) {
  if (e == 0xFF) return bitsf(0x7FFFFFFFu);
  if (e == 254) return bitsf(0x00400000u);
  return bitsf((254u - e) << 23);
}
/// 2^(e-127); 0 -> 2^-127; 255 -> NaN.
__device__ __forceinline__ float e8m0_dec(uint32_t e) {
  if (e == 0xFF) return bitsf(0x7FFFFFFFu);
  if (e == 0) return bitsf(0x00400000u);
  return bitsf(e << 23);
}

/// double -> bf16 bits with one RN-even rounding (round to odd at float precision, then RN to bf16).
__device__ __forceinline__ uint16_t f64_to_bf16(double d) {
  if (d != d) return (__double_as_longlong(d) < 0) ? 0xFFC0 : 0x7FC0;
  float f = __double2float_rz(d);
  uint32_t u = fbits(f);
  if (static_cast<double>(f) != d && (u & 0x7FFFFFFFu) < 0x7F800000u) u |= 1u;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// float -> bf16 / f16 bits, RN-even (NaN stays NaN).
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint32_t u = fbits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
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
  __device__ static float to_f32(__nv_bfloat16 v) { return bitsf(static_cast<uint32_t>(__bfloat16_as_ushort(v)) << 16); }
};
template <>
struct InputTraits<__half> {
  static constexpr int kVec = 8;
  __device__ static float to_f32(__half v) { return __half2float(v); }
};

/// Scale destination: compact coordinates (r, c) of the reference's compact layout mapped to the bytes of
/// the requested layout.
struct ScaleOut {
  uint8_t* p = nullptr;
  int mode = 0;         ///< 0: row-major r*ld + c; 1: transposed c*ld + r; 2: swizzled (r, c); 3: swizzled (c, r)
  int64_t ld = 0;       ///< leading dimension for modes 0/1
  int64_t num_kb = 0;   ///< k-block count for modes 2/3
};

__device__ __forceinline__ int64_t swizzled_offset(int64_t row, int64_t kb, int64_t num_kb) {
  const int64_t tiles_k = (num_kb + 3) / 4;
  return ((row / 128) * tiles_k + kb / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + (kb % 4);
}

__device__ __forceinline__ int64_t scale_index(const ScaleOut& s, int64_t r, int64_t c) {
  switch (s.mode) {
    case 0: return r * s.ld + c;
    case 1: return c * s.ld + r;
    case 2: return swizzled_offset(r, c, s.num_kb);
    default: return swizzled_offset(c, r, s.num_kb);
  }
}

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
