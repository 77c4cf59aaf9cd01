/// \file nvfp4_common.cuh
/// \brief NVFP4 block arithmetic on the device (TE_FORMATS.md §1.3, §1.4, §1.10, §1.12), in the reference's
///        exact order of operations: explicit _rn intrinsics, no contraction.
#pragma once
#include "device_util.cuh"
#include "torchao_device.cuh"
#include "qtc/rng.hpp"

namespace qtc::cuda::dev {

constexpr float kRcp6 = kNvfp4Rcp6;  // RN(1/6), TE fp4_max_inv (numeric.hpp)

/// S_enc (§1.3) from a global amax (numeric.hpp); rule nvfp4.nan_scale keeps a NaN (torch.min).
__device__ __forceinline__ float nvfp4_s_enc(float amax, float e4m3_max, bool nan_scale) {
  return nvfp4_global_encode_scale(amax, e4m3_max, nan_scale);
}

/// The NVFP4 choices one kernel specialization reads (nvfp4_kernel.cuh's nvfp4_cfg builds it from QuantizeArgs): the
/// recipe's options and the profile's rules under their names, constant-false where a specialization lacks them.
struct Nvfp4Cfg {
  bool nan_amax;           ///< rule nan_amax: NaN propagates into the block amax
  bool nan_scale;          ///< rule nvfp4.nan_scale: NaN S_enc kept, a NaN block scale stored as 0x7F
  bool neg_zero_positive;  ///< rule nvfp4.neg_zero: -0.0 and NaN data -> code 0x0
  bool torchao;            ///< rule nvfp4.order torchao (1x16 only): torchao_device.cuh
  bool tiny_block_floor;   ///< rule nvfp4.zero_and_tiny_block_scale (order torchao): block scale at least 2^-6
  bool sr;                 ///< option stochastic
  bool f46;                ///< option fourover6
  bool mse;                ///< option fourover6_err = mse
  float e4m3_max;          ///< option e4m3_max
  float k6max;             ///< 6 * e4m3_max
  uint64_t seed;           ///< option seed
  bool ao_two_level;       ///< option per_tensor_scale (torchao: else block scales only)
  bool ao_bf16;            ///< BF16 input (torchao: the NaN a per-tensor amax of a NaN tensor carries)
};

/// enc = fminf(1 / (float(sf) * S_dec), FLT_MAX), a NaN kept (numeric.hpp).
__device__ __forceinline__ float nvfp4_enc(uint32_t sf, float s_dec) { return nvfp4_encode_factor(sf, s_dec); }

/// Standard block scale (numeric.hpp): sf = e4m3(min(bamax * (S_enc * RN(1/6)), FLT_MAX)); enc = min(1/(sf * S_dec),
/// FLT_MAX).
__device__ __forceinline__ void nvfp4_std_scale(float bamax, float s_enc, float s_dec, bool nan_scale, uint32_t& sf,
                                                float& enc) {
  sf = nvfp4_block_scale(bamax, s_enc, nan_scale);
  enc = nvfp4_enc(sf, s_dec);
}

/// The two 4over6 candidates (§1.12, numeric.hpp): base = bamax / 6 * S_enc; map-to-4 uses base * 1.5.
__device__ __forceinline__ void nvfp4_46_candidates(float bamax, float s_enc, float s_dec, uint32_t& sf4, float& enc4,
                                                    uint32_t& sf6, float& enc6) {
  uint8_t b4 = 0, b6 = 0;
  nvfp4_4over6_scales(bamax, s_enc, b4, b6);
  sf4 = b4;
  sf6 = b6;
  enc4 = nvfp4_enc(sf4, s_dec);
  enc6 = nvfp4_enc(sf6, s_dec);
}

/// Sequential error sum of one 16-element row of a candidate (§1.12, exact error arithmetic).
__device__ __forceinline__ float nvfp4_46_err(const float x[16], uint32_t sf, float enc, float amax, const Nvfp4Cfg& c) {
  const float sff = decode_e4m3(sf);
  float err = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i)
    err = __fadd_rn(err, nvfp4_4over6_err(x[i], encode_e2m1_rn(__fmul_rn(x[i], enc)), sff, amax, c.k6max, c.mse));
  return err;
}

/// Encodes 16 values with the block's enc: RN (or SR keyed by the element's index in its plane's storage
/// order, idx0 = index of element 0, a multiple of 16). Returns the 8 packed bytes (low nibble = even element).
__device__ __forceinline__ uint2 nvfp4_encode16(const float x[16], float enc, const Nvfp4Cfg& c, uint32_t plane,
                                                uint64_t idx0) {
  uint32_t w[2] = {0u, 0u};
  if (c.sr) {
    uint32_t ctr[4] = {static_cast<uint32_t>(idx0 >> 4), static_cast<uint32_t>(idx0 >> 36), plane, 0x51A7u};
    philox4x32_10(ctr, static_cast<uint32_t>(c.seed), static_cast<uint32_t>(c.seed >> 32));
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t rb = (ctr[i >> 2] >> (8 * (i & 3))) & 0xFFu;
      w[i >> 3] |= static_cast<uint32_t>(encode_e2m1_stochastic(__fmul_rn(x[i], enc), rb)) << (4 * (i & 7));
    }
  } else {
    if (c.neg_zero_positive) {
#pragma unroll
      for (int i = 0; i < 16; ++i) w[i >> 3] |= static_cast<uint32_t>(encode_e2m1(__fmul_rn(x[i], enc), NegZero::kPositiveZero)) << (4 * (i & 7));
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) w[i >> 3] |= encode_e2m1_rn(__fmul_rn(x[i], enc)) << (4 * (i & 7));
    }
  }
  return make_uint2(w[0], w[1]);
}

/// One 1-D block (1x16 along a row of its plane): scale and codes.
__device__ __forceinline__ uint2 nvfp4_block_1d(const float x[16], float s_enc, float amax_err, const Nvfp4Cfg& c,
                                                uint32_t plane, uint64_t idx0, uint32_t& sf) {
  const float s_dec = __fdiv_rn(1.0f, s_enc);
  float bamax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) bamax = max_p(bamax, fabsf(x[i]), c.nan_amax);
  float enc;
  if (c.torchao) return ao::nvfp4_block(x, amax_err, c.ao_two_level, c.ao_bf16, c.nan_amax, c.tiny_block_floor, sf);
  if (c.f46) {
    uint32_t sf4, sf6;
    float enc4, enc6;
    nvfp4_46_candidates(bamax, s_enc, s_dec, sf4, enc4, sf6, enc6);
    const float e4 = nvfp4_46_err(x, sf4, enc4, amax_err, c);
    const float e6 = nvfp4_46_err(x, sf6, enc6, amax_err, c);
    const bool use4 = e4 < e6;
    sf = use4 ? sf4 : sf6;
    enc = use4 ? enc4 : enc6;
  } else {
    nvfp4_std_scale(bamax, s_enc, s_dec, c.nan_scale, sf, enc);
  }
  return nvfp4_encode16(x, enc, c, plane, idx0);
}

}  // namespace qtc::cuda::dev
