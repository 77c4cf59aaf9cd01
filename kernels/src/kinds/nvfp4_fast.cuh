/// \file nvfp4_fast.cuh
/// \brief Packed E2M1 encoding for the fast NVFP4 kernel (nvfp4_fast.cu): two codes per integer/bf16x2 operation,
///        eight codes per 32-bit word, bit-identical to encode_e2m1_rn (numeric.hpp) for every float.
///
/// E2M1 RN-even of y only needs y to 2 significant bits plus "exactly on a tie or not", so y is first rounded to
/// odd at bf16 precision (8 significant bits, the fp32 exponent range): RZ = the high half of y's bits, and
/// round-to-odd = RZ with bit 0 set when the low half (the bits RZ drops) is not zero. Rounding to odd at 8 bits
/// and then RN-even at 2 bits equals one RN-even at 2 bits (8 >= 2 + 2), and the sign and NaN-ness of RZ are
/// those of y (NaN keeps an all-ones payload). On the bf16 pair |r|, with a = min(|r|, 6) (NaN -> 6, as
/// encode_e2m1_rn maps NaN to 7), the code is read off bf16 FMAs (e2m1x2_mag); the sign comes from RZ's sign bit.
/// Per 8 codes: 4 x (2 byte permutations, a 16x2 minimum, a LOP3, a clamp, 3 FMAs, a 3-input minimum), 3
/// multiply-adds and a constant for the nibbles, 2 permutations and 2 LOP3s for the signs: 44 instructions.
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

/// Per 16-bit half, the smaller of a and b as unsigned integers (one VIMNMX.U16x2 on sm_90).
__device__ __forceinline__ uint32_t min_u16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("min.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

/// prmt.b32 with a compile-time selector, sign-replicating nibbles included (__byte_perm keeps only the byte index
/// of each selector nibble).
template <uint32_t kSel>
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "n"(kSel));
  return d;
}

/// (y0, y1) rounded toward zero at bf16 precision, packed (y0 in the low half): the high halves of their bits.
/// Sign and NaN-ness are those of y.
__device__ __forceinline__ uint32_t bf16x2_rz(float y0, float y1) {
  return __byte_perm(__float_as_uint(y0), __float_as_uint(y1), 0x7632);
}

/// |round-to-odd| of the pair: z (bf16x2_rz of the pair) with bit 0 of a half set where that half's low 16 bits
/// (the sticky part, gathered by one byte permutation) are not zero, and the sign bits cleared: a byte
/// permutation, a 16x2 minimum with 1 and one LOP3.
__device__ __forceinline__ uint32_t bf16x2_abs_round_odd(float y0, float y1, uint32_t z) {
  const uint32_t low = __byte_perm(__float_as_uint(y0), __float_as_uint(y1), 0x5410);
  return (z | min_u16x2(low, 0x00010001u)) & 0x7FFF7FFFu;
}

/// E2M1 magnitude codes of the |round-to-odd| pair ra: 0x4300 + code in each 16-bit half (bits 2:0 the code,
/// bit 3 clear, bits 15:8 = 0x43). With a = min(ra, 6) (NaN -> 6, as encode_e2m1_rn maps NaN to 7), the code is
/// RN-even of 2a on [0, 2), of a + 2 on [2, 4) and of a / 2 + 4 on [4, 6]; each candidate plus 128 is one bf16
/// FMA (ulp 1 on [128, 256), a * s exact), and on every binade the right candidate is the smallest of the three
/// (2a <= a + 2 <= a / 2 + 4 below 2, and so on; rounding keeps the order), so 128 + code = min(c0, c1, c2):
/// three FMAs and one three-input minimum instead of integer exponent arithmetic; with the bias 128 the bf16
/// bits are 0x4300 + code.
__device__ __forceinline__ uint32_t e2m1x2_mag(uint32_t ra) {
  const __nv_bfloat162 a = __hmin2(u2bf2(ra), u2bf2(0x40C040C0u));               // min(|r|, 6)
  const __nv_bfloat162 c0 = __hfma2(a, u2bf2(0x40004000u), u2bf2(0x43004300u));  // 2a + 128
  const __nv_bfloat162 c1 = __hfma2(a, u2bf2(0x3F803F80u), u2bf2(0x43024302u));  // a + 130
  const __nv_bfloat162 c2 = __hfma2(a, u2bf2(0x3F003F00u), u2bf2(0x43044304u));  // a / 2 + 132
  return bf22u(__hmin2(__hmin2(c0, c1), c2));
}

/// 0x43004300 in every nibble position of encode8's magnitude sum: sum over j of 0x43004300 * 16^j (mod 2^32).
constexpr uint32_t kMagBias = 0x43004300u * 0x1111u;

/// 8 products y[0..7] -> their 8 E2M1 codes, y[i]'s in bits 4i+3..4i. The pairs are (y[j], y[j + 4]), so pair
/// j's two magnitude words 0x4300 + code move to nibbles j and j + 4 by a multiplication by 16^j: the word is
/// the sum of the four (three integer multiply-adds) less the four biases (one constant, kMagBias; the codes'
/// fields are disjoint, so the sum carries nothing between them). The sign bits (bits 15 and 31 of each RZ
/// pair, which NaN and -0 keep as encode_e2m1_rn does) go to bit 3 of their nibbles through two sign-replicating
/// byte permutations (bytes of y[0], y[2], y[4], y[6] and of y[1], y[3], y[5], y[7]) and two masked ORs.
__device__ __forceinline__ uint32_t encode8(const float y[8]) {
  uint32_t z[4], m[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    z[j] = bf16x2_rz(y[j], y[j + 4]);
    m[j] = e2m1x2_mag(bf16x2_abs_round_odd(y[j], y[j + 4], z[j]));
  }
  const uint32_t mag = m[0] + m[1] * 16u + m[2] * 256u + m[3] * 4096u - kMagBias;
  // Selector 0xFBD9: result bytes 0..3 = the sign of byte 1 of a, byte 1 of b, byte 3 of a, byte 3 of b.
  const uint32_t s_even = prmt<0xFBD9u>(z[0], z[2]), s_odd = prmt<0xFBD9u>(z[1], z[3]);
  return mag | (s_even & 0x08080808u) | (s_odd & 0x80808080u);
}

}  // namespace qtc::cuda::dev
