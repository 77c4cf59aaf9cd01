/// \file nvfp4_fast.cuh
/// \brief Packed E2M1 encoding for the fast NVFP4 kernel (nvfp4_fast.cu): two codes per integer/bf16x2 operation,
///        bit-identical to encode_e2m1_rn (device_util.cuh) for every float.
///
/// E2M1 RN-even of y only needs y to 2 significant bits plus "exactly on a tie or not", so y is first rounded to
/// odd at bf16 precision (8 significant bits, the fp32 exponent range): RZ = the high half of y's bits, RA = the
/// high half of (bits + 0xFFFF), round-to-odd = RZ with bit 0 set when they differ. Rounding to odd at 8 bits and
/// then RN-even at 2 bits equals one RN-even at 2 bits (8 >= 2 + 2), and the sign and NaN-ness of RZ are those
/// of y (NaN keeps an all-ones payload). On the bf16 pair r, with a = min(|r|, 6) (NaN -> 6, as encode_e2m1_rn
/// maps NaN to 7), the code is read off bf16 FMAs (e2m1x2_from_ro); the sign comes from r's sign bit.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace qtc::cuda::dev {

__device__ __forceinline__ __nv_bfloat162 u2bf2(uint32_t u) {
  __nv_bfloat162 h;
  memcpy(&h, &u, 4);
  return h;
}
__device__ __forceinline__ uint32_t bf22u(__nv_bfloat162 h) {
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}

/// (y0, y1) rounded to odd at bf16 precision, packed (y0 in the low half).
__device__ __forceinline__ uint32_t bf16x2_round_odd(float y0, float y1) {
  const uint32_t u0 = __float_as_uint(y0), u1 = __float_as_uint(y1);
  const uint32_t z = __byte_perm(u0, u1, 0x7632);
  const uint32_t a = __byte_perm(u0 + 0xFFFFu, u1 + 0xFFFFu, 0x7632);
  return z | ((z ^ a) & 0x00010001u);
}

/// E2M1 codes (sign included) of the round-to-odd pair r: y0's code in bits 3:0, y1's in bits 19:16.
/// With a = min(|r|, 6) (NaN -> 6), the code is RN-even of 2a on [0, 2), of a + 2 on [2, 4) and of a / 2 + 4 on
/// [4, 6]; each candidate plus 192 is one bf16 FMA (ulp 1 on [128, 256), a * s exact), and on every binade the
/// right candidate is the smallest of the three (2a <= a + 2 <= a / 2 + 4 below 2, and so on; rounding keeps
/// the order), so code = min(c0, c1, c2) - 192: three FMAs and two minima instead of integer exponent
/// arithmetic, which keeps the packed encoder off the integer pipe. Checked against the scalar encode_e2m1_rn on
/// all 2^32 floats (test_quantize_cuda, Nvfp4PackedEncoder).
__device__ __forceinline__ uint32_t e2m1x2_from_ro(uint32_t r) {
  const __nv_bfloat162 a = __hmin2(u2bf2(r & 0x7FFF7FFFu), u2bf2(0x40C040C0u));  // min(|r|, 6)
  const __nv_bfloat162 c0 = __hfma2(a, u2bf2(0x40004000u), u2bf2(0x43404340u));  // 2a + 192
  const __nv_bfloat162 c1 = __hfma2(a, u2bf2(0x3F803F80u), u2bf2(0x43424342u));  // a + 194
  const __nv_bfloat162 c2 = __hfma2(a, u2bf2(0x3F003F00u), u2bf2(0x43444344u));  // a / 2 + 196
  const uint32_t t = bf22u(__hmin2(__hmin2(c0, c1), c2));
  return (t - 0x43404340u) | ((r >> 12) & 0x00080008u);
}

__device__ __forceinline__ uint32_t e2m1x2(float y0, float y1) { return e2m1x2_from_ro(bf16x2_round_odd(y0, y1)); }

/// Four code pairs (codes 2j, 2j+1 in bits 3:0 / 19:16 of c[j]) -> 8 nibbles, element 0 lowest.
__device__ __forceinline__ uint32_t pack8(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3) {
  uint32_t u = c0 | (c1 << 8), v = c2 | (c3 << 8);
  u |= u >> 12;
  v |= v >> 12;
  return __byte_perm(u, v, 0x5410);
}

/// 8 values times enc (one RN fp32 multiply each), packed E2M1 codes, low nibble first.
__device__ __forceinline__ uint32_t encode8_packed(const float x[8], float enc) {
  uint32_t c[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) c[j] = e2m1x2(__fmul_rn(x[2 * j], enc), __fmul_rn(x[2 * j + 1], enc));
  return pack8(c[0], c[1], c[2], c[3]);
}

}  // namespace qtc::cuda::dev
