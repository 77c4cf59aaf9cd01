/// \file nvfp4_fast.cuh
/// \brief Packed E2M1 encoding for the fast NVFP4 kernel (nvfp4_fast.cu): two codes per integer/bf16x2 operation,
///        eight codes per 32-bit word, bit-identical to encode_e2m1_rn (numeric.hpp) for every float.
///
/// E2M1 RN-even of y only needs y to 2 significant bits plus "exactly on a tie or not", so y is first rounded to
/// odd at bf16 precision (8 significant bits, the fp32 exponent range): RZ = the high half of y's bits, RA = the
/// high half of (bits + 0xFFFF), round-to-odd = RZ with bit 0 set when they differ. Rounding to odd at 8 bits and
/// then RN-even at 2 bits equals one RN-even at 2 bits (8 >= 2 + 2), and the sign and NaN-ness of RZ are those
/// of y (NaN keeps an all-ones payload). On the bf16 pair r, with a = min(|r|, 6) (NaN -> 6, as encode_e2m1_rn
/// maps NaN to 7), the code is read off bf16 FMAs (e2m1x2_mag); the sign comes from r's sign bit.
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

/// E2M1 magnitude codes of the round-to-odd pair r: 0x4300 + code in each 16-bit half (bits 2:0 the code, bit 3
/// clear, bits 15:8 = 0x43), the sign left out. With a = min(|r|, 6) (NaN -> 6, as encode_e2m1_rn maps NaN to 7),
/// the code is RN-even of 2a on [0, 2), of a + 2 on [2, 4) and of a / 2 + 4 on [4, 6]; each candidate plus 128 is
/// one bf16 FMA (ulp 1 on [128, 256), a * s exact), and on every binade the right candidate is the smallest of the
/// three (2a <= a + 2 <= a / 2 + 4 below 2, and so on; rounding keeps the order), so 128 + code = min(c0, c1, c2):
/// three FMAs and two minima instead of integer exponent arithmetic, which keeps the packed encoder off the
/// integer pipe; with the bias 128 the bf16 bits are 0x4300 + code, so no subtraction is needed.
__device__ __forceinline__ uint32_t e2m1x2_mag(uint32_t r) {
  const __nv_bfloat162 a = __hmin2(u2bf2(r & 0x7FFF7FFFu), u2bf2(0x40C040C0u));  // min(|r|, 6)
  const __nv_bfloat162 c0 = __hfma2(a, u2bf2(0x40004000u), u2bf2(0x43004300u));  // 2a + 128
  const __nv_bfloat162 c1 = __hfma2(a, u2bf2(0x3F803F80u), u2bf2(0x43024302u));  // a + 130
  const __nv_bfloat162 c2 = __hfma2(a, u2bf2(0x3F003F00u), u2bf2(0x43044304u));  // a / 2 + 132
  return bf22u(__hmin2(__hmin2(c0, c1), c2));
}

/// 8 products y[0..7] -> their 8 E2M1 codes, y[i]'s in bits 4i+3..4i. The pairs are (y[j], y[j + 4]), so pair
/// j's two magnitude codes (bits 2:0 and 18:16) move to nibbles j and j + 4 by one shift left of 4j: the word
/// is a sum of disjoint shifted fields (integer multiply-adds, off the logic pipe), and the 8 sign bits (bits
/// 15 and 31 of each round-to-odd pair) move by one shift and mask each.
__device__ __forceinline__ uint32_t encode8(const float y[8]) {
  uint32_t r[4], c[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    r[j] = bf16x2_round_odd(y[j], y[j + 4]);
    c[j] = e2m1x2_mag(r[j]) & 0x00070007u;
  }
  const uint32_t sgn = ((r[0] >> 12) & 0x00080008u) | ((r[1] >> 8) & 0x00800080u) | ((r[2] >> 4) & 0x08000800u) |
                       (r[3] & 0x80008000u);
  return (c[0] | sgn) + c[1] * 16u + c[2] * 256u + c[3] * 4096u;
}

}  // namespace qtc::cuda::dev
