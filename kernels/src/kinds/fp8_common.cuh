/// \file fp8_common.cuh
/// \brief What fp8.cu's kernels and the pipelined FP8 kernel (fp8_pipe.cu) share: the scale from an amax with the
///        call's options and rules, the scale_inv store, and what one scale covers in the register-resident kernels.
#pragma once
#include "device_util.cuh"
#include "launch.hpp"

namespace qtc::cuda::dev {

using detail::QuantizeArgs;
using detail::ScaleOut;

/// TE compute_scale_from_amax (§3.2, numeric.hpp) with the call's options (FP8 block or tensor) and the profile's
/// rules fp8.inf_amax_scale and fp8.scale_order. FP8 tensor: an infinite scale becomes FLT_MAX.
__device__ __forceinline__ float fp8_scale(float amax, const QuantizeArgs& p) {
  const bool block = !p.per_tensor;
  return fp8_scale_from_amax(amax, fp8_max_of(p), block ? p.fp8_block.pow2_scales : p.fp8_tensor.pow2_scales,
                             block ? p.fp8_block.eps : p.fp8_tensor.eps, block ? p.value_for_inf : kFltMax,
                             p.rules.fp8_inf_amax_scale_zero, p.rules.fp8_scale_reciprocal);
}


/// One scale_inv: F32, or (ue8m0) its UE8M0 byte, the exponent field of the power of two (numeric.hpp e8m0_of_pow2).
__device__ __forceinline__ void store_scale(const ScaleOut& s, int64_t r, int64_t c, float v, bool ue8m0) {
  if (ue8m0)
    s.p[scale_index(s, r, c)] = e8m0_of_pow2(v);
  else
    reinterpret_cast<float*>(s.p)[scale_index(s, r, c)] = v;
}

constexpr int kFT = 128;

/// What one scale covers in the register-resident FP8 kernel.
enum class Fp8Scaling : int32_t { kBlock1x128, kBlock128x128, kTensor };

/// What one scale of the call covers.
__host__ __device__ __forceinline__ Fp8Scaling fp8_scaling(const QuantizeArgs& p) {
  if (p.per_tensor) return Fp8Scaling::kTensor;
  return p.fp8_block.tile_2d ? Fp8Scaling::kBlock128x128 : Fp8Scaling::kBlock1x128;
}

}  // namespace qtc::cuda::dev
