/// \file torchao_device.cuh
/// \brief Profile torchao on the device (torchao 0.18.0's to_mx and nvfp4_quantize): thin adapters from the
///        kernels' argument types to the shared host/device steps of reference/include/qtc/torchao_codec.hpp,
///        which the CPU reference runs too (one copy of every step, NaN payloads included).
#pragma once
#include "device_util.cuh"
#include "qtc/torchao_codec.hpp"

namespace qtc::cuda::dev::ao {

constexpr uint32_t kAmaxNaN = 0x7FC00000u;  // torch.amax of a block holding a NaN

__device__ __forceinline__ Fp8Type fp8_type(bool e5m2) { return e5m2 ? Fp8Type::kE5M2 : Fp8Type::kE4M3; }

/// to_mx's E8M0 byte of a block amax (NaN-propagating).
__device__ __forceinline__ uint32_t mx_scale(float bamax, MxScaleRule rule, bool e5m2) {
  return torchao::mx_scale(bamax, rule, fp8_type(e5m2));
}

/// to_mx's data byte of x in a block with scale byte e.
__device__ __forceinline__ uint32_t mx_code(float x, uint32_t e, MxScaleRule rule, bool e5m2) {
  return torchao::mx_code(x, static_cast<uint8_t>(e), rule, fp8_type(e5m2));
}

/// nvfp4_quantize on one 1x16 block: the E4M3 scale byte and the 8 packed bytes. tensor_amax_v: the per-tensor
/// amax (a NaN becomes the payload torch.max gives for a BF16 or F32 tensor); the block amax of a block holding a
/// NaN is torch.amax's NaN under rule nan_amax (else the NaN is ignored, maxNum); tiny_block_floor: rule
/// nvfp4.zero_and_tiny_block_scale (block scale at least 2^-6).
__device__ __forceinline__ uint2 nvfp4_block(const float x[16], float tensor_amax_v, bool two_level, bool bf16,
                                             bool nan_amax, bool tiny_block_floor, uint32_t& sf) {
  float bamax = 0.0f;
  bool has_nan = false;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    has_nan |= x[i] != x[i];
    bamax = fmaxf(bamax, fabsf(x[i]));
  }
  if (has_nan && nan_amax) bamax = bits_f32(kAmaxNaN);
  const float pts =
      torchao::div(torchao::tensor_amax(tensor_amax_v, bf16 ? DType::kBF16 : DType::kF32), kTorchAOPerTensorDivisor);
  sf = torchao::nvfp4_scale(bamax, two_level, pts, tiny_block_floor);
  const float m = torchao::nvfp4_multiplier(static_cast<uint8_t>(sf), two_level, pts);
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 16; ++i) w[i >> 3] |= static_cast<uint32_t>(torchao::nvfp4_code(x[i], m)) << (4 * (i & 7));
  return make_uint2(w[0], w[1]);
}

}  // namespace qtc::cuda::dev::ao
