/// \file cast_common.cuh
/// \brief Helpers of the register-resident FP8 cast kernels (mxfp8.cu, fp8.cu) for 16-bit inputs (BF16, F16):
///        a thread holds 8 consecutive elements of a row (one 16-byte load) as four packed words; block amaxes
///        are taken on the packed words (abs = clear the sign bits, then max.{bf16x2,f16x2}), which equals the
///        float amax since both types convert to float exactly. Without .NaN the max ignores a NaN operand
///        (fmaxf, TE_FORMATS.md §0.5) unless both are NaN, so callers finish with amax_finish(), which maps a
///        surviving NaN to 0 (a block of only NaNs has amax 0); with .NaN (NaN-propagating profiles) any NaN
///        wins, as max_p(.., true) does.
#pragma once
#include "device_util.cuh"

namespace qtc::cuda::dev {

template <typename In>
struct Packed16;

template <>
struct Packed16<__nv_bfloat16> {
  __device__ static __forceinline__ uint32_t max2(uint32_t a, uint32_t b, bool nan) {
    uint32_t d;
    if (nan)
      asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    else
      asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  __device__ static __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
  __device__ static __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
};

template <>
struct Packed16<__half> {
  __device__ static __forceinline__ uint32_t max2(uint32_t a, uint32_t b, bool nan) {
    uint32_t d;
    if (nan)
      asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    else
      asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
  __device__ static __forceinline__ float lo(uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xFFFFu)));
  }
  __device__ static __forceinline__ float hi(uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
  }
};

constexpr uint32_t kAbs2 = 0x7FFF7FFFu;

__device__ __forceinline__ uint32_t word(const uint4& v, int j) {
  return j == 0 ? v.x : (j == 1 ? v.y : (j == 2 ? v.z : v.w));
}

/// Float amax of a reduced packed half: NaN-ignoring reductions map a NaN that survived (all inputs NaN) to 0.
__device__ __forceinline__ float amax_finish(float m, bool propagate) { return propagate ? m : fmaxf(m, 0.0f); }

/// Per-row packed maxima of two rows -> one word [max of row a, max of row b] (each row word holds 2 partials).
template <typename In>
__device__ __forceinline__ uint32_t fold_rows(uint32_t a, uint32_t b, bool nan) {
  return Packed16<In>::max2(__byte_perm(a, b, 0x5410), __byte_perm(a, b, 0x7632), nan);
}

/// 4x4 byte transpose: a[i] holds bytes (row i, cols 0..3); returns c[j] = bytes (rows 0..3, col j).
__device__ __forceinline__ void transpose4x4(const uint32_t a[4], uint32_t c[4]) {
  const uint32_t t0 = __byte_perm(a[0], a[1], 0x5140), t1 = __byte_perm(a[0], a[1], 0x7362);
  const uint32_t t2 = __byte_perm(a[2], a[3], 0x5140), t3 = __byte_perm(a[2], a[3], 0x7362);
  c[0] = __byte_perm(t0, t2, 0x5410);
  c[1] = __byte_perm(t0, t2, 0x7632);
  c[2] = __byte_perm(t1, t3, 0x5410);
  c[3] = __byte_perm(t1, t3, 0x7632);
}

}  // namespace qtc::cuda::dev
