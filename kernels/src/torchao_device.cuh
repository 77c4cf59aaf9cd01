/// \file torchao_device.cuh
/// \brief The device twin of reference/include/qtc/torchao_codec.hpp (profile torchao: torchao 0.18.0's
///        to_mx and nvfp4_quantize), step for step with explicit _rn intrinsics and the NaN payloads the
///        reference models (PyTorch's x86 CPU kernels; a GPU's own NaN results are canonical, so every NaN
///        is chosen explicitly here).
#pragma once
#include "device_util.cuh"

namespace qtc::cuda::dev::ao {

constexpr uint32_t kDefaultNaN = 0xFFC00000u;  // x86's NaN of an invalid operation
constexpr uint32_t kAmaxNaN = 0x7FC00000u;     // torch.amax of a block holding a NaN

__device__ __forceinline__ float quiet(float v) { return bits_f32(f32_bits(v) | 0x00400000u); }
__device__ __forceinline__ float nan_choice(float a, float b, float r, bool first) {
  const bool na = a != a, nb = b != b;
  if (na && nb) return quiet(first ? a : b);
  if (na) return quiet(a);
  if (nb) return quiet(b);
  if (r != r) return bits_f32(kDefaultNaN);
  return r;
}
__device__ __forceinline__ float mul(float a, float b) { return nan_choice(a, b, __fmul_rn(a, b), false); }
__device__ __forceinline__ float div(float a, float b) { return nan_choice(a, b, __fdiv_rn(a, b), true); }
__device__ __forceinline__ float clamp(float v, float lo, float hi) { return v != v ? v : (v < lo ? lo : (v > hi ? hi : v)); }

/// float32 -> float8 as PyTorch casts (RN-even; a NaN keeps its sign). Inputs are already clamped.
__device__ __forceinline__ uint32_t cast_fp8(float v, bool e5m2) {
  if (v != v) return 0x7Fu | ((f32_bits(v) >> 24) & 0x80u);
  return e5m2 ? encode_e5m2(v) : encode_e4m3(v);
}
/// float8_e4m3fn -> float32 as PyTorch converts it (NaN codes -> 0x7FF00000 with the sign).
__device__ __forceinline__ float decode_e4m3(uint32_t c) {
  if ((c & 0x7Fu) == 0x7Fu) return bits_f32(0x7FF00000u | ((c & 0x80u) << 24));
  return qtc::decode_e4m3(c);
}

/// torchao `_f32_to_floatx_unpacked(x, 2, 1)` bit for bit.
__device__ __forceinline__ uint32_t f32_to_e2m1(float v) {
  const uint32_t u = f32_bits(v), sign = u & 0x80000000u, a = u ^ sign;
  const float x = bits_f32(a);
  uint32_t code;
  if (x >= 6.0f) {
    code = 7u;
  } else if (x < 1.0f) {
    code = (f32_bits(__fadd_rn(x, 0x1p22f)) - (149u << 23)) & 0xFFu;
  } else {
    const uint32_t odd = (a >> 22) & 1u;
    const uint32_t n = a + static_cast<uint32_t>((1 - 127) * (1 << 23) + ((1 << 21) - 1)) + odd;
    code = (static_cast<uint32_t>(static_cast<int32_t>(n) >> 22)) & 0xFFu;
  }
  return code | ((sign >> 28) & 0x8u);
}

/// to_mx's E8M0 byte. rule: 0 rceil, 1 floor (ocp_floor), 2 ceil, 3 even (MxScaleRule's order).
__device__ __forceinline__ uint32_t mx_scale(float bamax, int rule, bool e5m2) {
  if (rule == 0) {
    const float descale = div(bamax, e5m2 ? 57344.0f : 448.0f);
    if (descale != descale) return 0xFFu;
    if (isinf(descale)) return 0xFEu;
    float e = descale == 0.0f ? -INFINITY : ceilf(__double2float_rn(log2(static_cast<double>(descale))));
    e = fminf(fmaxf(e, -127.0f), 127.0f);
    return static_cast<uint32_t>(static_cast<int>(e) + 127);
  }
  if (bamax != bamax) return 0xFFu;
  const int target = e5m2 ? 15 : 8, mbits = e5m2 ? 2 : 3;
  uint32_t bits = f32_bits(bamax);
  if (rule == 3) bits = (bits + (1u << (23 - mbits - 1))) & 0xFF800000u;
  int ex = static_cast<int>((bits >> 23) & 0xFFu) - 127;
  if (rule == 2 && (bits & 0x7FFFFFu) != 0u) ++ex;
  int ub = ex - target;
  ub = ub < -127 ? -127 : (ub > 128 ? 128 : ub);
  return static_cast<uint32_t>(ub + 127);
}

/// to_mx's data byte of x in a block with scale byte e.
__device__ __forceinline__ uint32_t mx_code(float x, uint32_t e, int rule, bool e5m2) {
  const float max_pos = e5m2 ? 57344.0f : 448.0f;
  float v;
  if (rule == 0) {
    const float rcp = e == 0xFFu ? bits_f32(kAmaxNaN)
                                 : (e == 0xFEu ? 0x1p-127f : (e == 0u ? 1.0f : bits_f32((254u - e) << 23)));
    v = mul(x, rcp);
  } else {
    v = div(x, fmaxf(bits_f32(e << 23), 0x1p-126f));
  }
  return cast_fp8(clamp(v, -max_pos, max_pos), e5m2);
}

/// The per-tensor amax torch.max(torch.abs(x)) gives for a tensor holding a NaN (0xFFFFFFFF from float32,
/// 0x7FC00000 from bfloat16); F16 reaches torchao as float32.
__device__ __forceinline__ float tensor_amax(float amax, bool bf16) {
  return amax == amax ? amax : bits_f32(bf16 ? 0x7FC00000u : 0xFFFFFFFFu);
}

/// nvfp4_quantize on one 1x16 block: the E4M3 scale byte and the 8 packed bytes.
__device__ __forceinline__ uint2 nvfp4_block(const float x[16], float tensor_amax_v, bool two_level, bool bf16,
                                             uint32_t& sf) {
  float bamax = 0.0f;
  bool has_nan = false;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    has_nan |= x[i] != x[i];
    bamax = fmaxf(bamax, fabsf(x[i]));
  }
  if (has_nan) bamax = bits_f32(kAmaxNaN);
  const float pts = div(tensor_amax(tensor_amax_v, bf16), kTorchAOPerTensorDivisor);
  float s = div(bamax, 6.0f);
  if (two_level) s = div(s, pts);
  sf = cast_fp8(clamp(s, 0x1p-6f, 448.0f), false);
  const float sd = decode_e4m3(sf);
  const float m = two_level ? div(div(1.0f, pts), sd) : div(1.0f, sd);
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 16; ++i) w[i >> 3] |= f32_to_e2m1(clamp(mul(x[i], m), -6.0f, 6.0f)) << (4 * (i & 7));
  return make_uint2(w[0], w[1]);
}

}  // namespace qtc::cuda::dev::ao
