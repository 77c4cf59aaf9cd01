/// \file peer_codec.hpp
/// \brief The scalar steps of the public quantizers that profiles other than te/torchao reproduce (profile.hpp:
///        Nvfp4Order / MxOrder kModelOpt, ...), each with its implementation's dtype, operation order and NaN
///        choices. PyTorch CPU arithmetic (NaN payloads included) comes from torchao_codec.hpp's mul/div/clamp/casts,
///        which model the same kernels. Host and device (QTC_HD), so that a kernel could call these very functions;
///        the CUDA backend refuses these orders today (cuda::unsupported_reason names the rule).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "qtc/codec.hpp"
#include "qtc/host_device.hpp"
#include "qtc/tensor.hpp"
#include "qtc/torchao_codec.hpp"

namespace qtc::peer {

// ---------------------------------------------------------------------------------------------------------------
// nvidia-modelopt 0.47.0, NVFP4QTensor.quantize (with get_weights_scaling_factor_2) and MXFP8QTensor.quantize.
// ---------------------------------------------------------------------------------------------------------------
namespace modelopt {

/// get_weights_scaling_factor_2: reduce_amax(x).float() / (6 * 448), float32.
QTC_HD float nvfp4_global(float amax) { return torchao::div(amax, 2688.0f); }

/// get_weights_scaling_factor: s = bamax / (6 * S) in float32; s == 0 -> 1.0; clamp to [2^-9, 448]; cast to E4M3
/// (PyTorch's cast: RN-even, a NaN keeps its sign: an all-zero tensor's 0/0 gives x86's negative NaN -> 0xFF).
/// The NaN that reduce_block_amax's torch.maximum(|amax|, |amin|) gives block `index` of `count` blocks (PyTorch's
/// AVX2 CPU kernel): the vectorized loop (two vectors at a time: 16 float32 or 32 BF16/F16 elements) ORs in an
/// all-ones NaN (F32 0xFFFFFFFF; BF16/F16 ones widened: 0xFFFF0000 / 0xFFFFE000, negative); the scalar tail
/// returns a positive NaN.
inline float block_amax_nan(int64_t index, int64_t count, DType t) {
  const int64_t chunk = t == DType::kF32 ? 16 : 32;
  if (index >= count / chunk * chunk) return bits_f32(0x7FC00000u);
  return bits_f32(t == DType::kF32 ? 0xFFFFFFFFu : (t == DType::kBF16 ? 0xFFFF0000u : 0xFFFFE000u));
}

/// `bamax` a NaN: the caller passes block_amax_nan's.
QTC_HD uint8_t nvfp4_scale(float bamax, float s_global) {
  float s = torchao::div(bamax, torchao::mul(s_global, 6.0f));
  if (s == 0.0f) s = 1.0f;
  return torchao::cast_fp8(torchao::clamp(s, 0x1p-9f, 448.0f), Fp8Type::kE4M3);
}

/// The divisor of quantize's data scaling: float32(sf) * S.
QTC_HD float nvfp4_divisor(uint8_t sf, float s_global) { return torchao::mul(torchao::decode_e4m3(sf), s_global); }

/// NVFP4QTensor._cast_fp4 of v: searchsorted(|v|) over the bounds {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} (lower
/// bound: a NaN passes every `bound >= v` test as false and lands past the end, ordinal 7), +1 at the odd bounds
/// 0.75, 1.75, 3.5 (RN-even ties), sign bit from v < 0 (so -0.0 and NaN give a positive code); saturates at 6.
QTC_HD uint8_t e2m1_searchsorted(float v) {
  const float a = fabsf(v);
  const float bounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  int lo = 0, hi = 7;
  while (lo < hi) {  // torch's lower_bound: start = mid + 1 unless bounds[mid] >= a
    const int mid = lo + ((hi - lo) >> 1);
    if (!(bounds[mid] >= a)) lo = mid + 1;
    else hi = mid;
  }
  const int odd = (a == 0.75f || a == 1.75f || a == 3.5f) ? 1 : 0;
  return static_cast<uint8_t>(((v < 0.0f) ? 8 : 0) + lo + odd);
}

/// quantize's code of element x (float32 value of the input): _cast_fp4(x / (float32(sf) * S)).
QTC_HD uint8_t nvfp4_code(float x, float divisor) { return e2m1_searchsorted(torchao::div(x, divisor)); }

/// _compute_e8m0_exponent + 127: descale = bamax / 448 (float32); e = ceil(log2(descale)) where descale > 0, else
/// -127 (zero and NaN blocks); clamp to [-127, 127] (Inf -> 254).
QTC_HD uint8_t mx_scale(float bamax) {
  const float descale = torchao::div(bamax, 448.0f);
  float e = descale > 0.0f ? torchao::ceil_log2f(descale) : -127.0f;
  e = e < -127.0f ? -127.0f : (e > 127.0f ? 127.0f : e);
  return static_cast<uint8_t>(static_cast<int>(e) + 127);
}

/// quantize_with_scale: x * exp2(127 - e) (2^127 for e = 0), clamped to +-448, PyTorch's E4M3 cast.
QTC_HD uint8_t mx_code(float x, uint8_t e) {
  const float m = ldexpf(1.0f, 127 - static_cast<int>(e));
  return torchao::cast_fp8(torchao::clamp(torchao::mul(x, m), -448.0f, 448.0f), Fp8Type::kE4M3);
}

}  // namespace modelopt

// ---------------------------------------------------------------------------------------------------------------
// JAX 0.10.2 / 0.11.0 jax._src.cudnn.scaled_matmul_stablehlo.quantize on XLA CPU (host only: F16 rounding).
// XLA's CPU code runs with denormals flushed: a subnormal float32 operand counts as zero and a subnormal result
// becomes zero (sign kept); conversions between float types do not flush. BF16/F16 arithmetic is float32
// arithmetic rounded back to the dtype. NaN choice as x86 (0/0 -> 0xFFC00000; a NaN operand passes through).
// ---------------------------------------------------------------------------------------------------------------
namespace jax {

inline float ftz(float v) { return fabsf(v) < 0x1p-126f ? copysignf(0.0f, v) : v; }
/// a / b and a * b in float32 under XLA CPU's flush-to-zero and denormals-are-zero.
inline float div(float a, float b) { return ftz(torchao::div(ftz(a), ftz(b))); }
inline float mul(float a, float b) { return ftz(torchao::mul(ftz(a), ftz(b))); }
// XLA's algebraic simplifier rewrites A / broadcast(B) as A * broadcast(1 / B): every division of quantize by a
// scalar or per-block value that is not a constant is a multiplication by its reciprocal (computed in the operands'
// dtype); a division by a constant (elem_max, 6) stays a division.
/// float32 -> dtype `t` -> float32 (RN-even; a NaN keeps its sign).
inline float round_to(float v, DType t) {
  if (t == DType::kBF16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::kF16) return v != v ? v : f16_to_f32(f32_to_f16(v));
  return v;
}
/// A block or tensor amax of dtype `t` as XLA's reduction gives it: a BF16/F32 maximum of subnormals is 0.
inline float amax(float a, DType t) { return t == DType::kF16 ? a : ftz(a); }

/// XLA CPU reduces a float32 tensor of at least this many elements along its last axis (the block of 16 or 32) in
/// vector lanes; smaller ones element by element, where a NaN propagates (measured on jax 0.10.2: 4064 elements
/// propagate, 4096 do not, whatever the shape).
inline constexpr int64_t kJaxLaneReduceMinElements = 4096;
/// The block maximum of the n (16 or 32) values v (|x|) as XLA CPU's vectorized float32 reduce-max computes it: 8
/// lanes, acc = v[0..7], acc = max(acc, v[8c..8c+7]) for each further group of 8, then lanes 0-3 with 4-7, 0-1 with
/// 2-3, 0 with 1, and last with the init value -Inf; every max is x86 maxps, a > b ? a : b, which returns its second
/// operand when either is NaN. So a NaN is dropped unless it reaches the last step (-Inf, scale 0xFF), and it drops
/// the lane's earlier values. Matched bit for bit on every block of 0-3 NaNs (shapes 64x64 .. 256x512, blocks 16, 32).
inline float lane_block_amax(const float* v, int n) {
  auto mx = [](float a, float b) { return a > b ? a : b; };
  float acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = v[i];
  for (int c = 8; c < n; c += 8)
    for (int i = 0; i < 8; ++i) acc[i] = mx(acc[i], v[c + i]);
  for (int w = 4; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) acc[i] = mx(acc[i], acc[i + w]);
  return mx(acc[0], -INFINITY);
}

/// The whole-tensor max(|x|) of n float32 values (row-major) as XLA CPU reduces a tensor of >= 4096 elements (n a
/// multiple of 8): chunks of 32768 elements, each in 8 lanes (lane = index mod 8, acc = max(acc, v) in index order,
/// then the lane tree of lane_block_amax), the chunk results combined with the same max from -Inf. jnp.max(jnp.abs(x))
/// of the dump scripts' NVFP4 global scale; matched on 220 tensors of 4096 .. 131072 elements with 1-5 NaNs (the
/// order in which chunk results combine is not told apart by them).
inline float lane_tensor_amax(const float* v, int64_t n) {
  auto mx = [](float a, float b) { return a > b ? a : b; };
  float total = -INFINITY;
  for (int64_t c0 = 0; c0 < n; c0 += 32768) {
    const int64_t c1 = std::min<int64_t>(n, c0 + 32768);
    float acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = std::fabs(v[c0 + i]);
    for (int64_t j = c0 + 8; j < c1; j += 8)
      for (int i = 0; i < 8; ++i) acc[i] = mx(acc[i], std::fabs(v[j + i]));
    for (int w = 4; w >= 1; w /= 2)
      for (int i = 0; i < w; ++i) acc[i] = mx(acc[i], acc[i + w]);
    total = mx(total, acc[0]);
  }
  return mx(total, -INFINITY);
}

/// cast_to_e8m0_with_rounding_up of the float32 bits of v: exponent + 1 when the mantissa is non-zero (not for
/// exponent 0xFE, nor for subnormals up to 2^-127); the 9-bit result (sign included) truncated to 8 bits, so a NaN
/// gives 0x00 and Inf 0xFF.
inline uint8_t e8m0_round_up(float v) {
  const uint32_t u = f32_bits(v);
  uint32_t e = u >> 23;
  const uint32_t m = u & 0x7FFFFFu;
  if (m > 0 && e != 0xFE && !(e == 0 && m <= 0x400000u)) ++e;
  return static_cast<uint8_t>(e & 0xFFu);
}

/// MXFP8 scale byte of a block of dtype-`t` values with amax `bamax`: round-up E8M0 of T(bamax / elem_max).
inline uint8_t mx_scale(float bamax, DType t, Fp8Type f) {
  const float max = f == Fp8Type::kE4M3 ? 448.0f : 57344.0f;
  // F32/BF16: a true division by the constant; F16: multiplied by the constant's reciprocal rounded to F16
  if (t == DType::kF16) return e8m0_round_up(round_to(mul(bamax, round_to(div(1.0f, max), t)), t));
  return e8m0_round_up(round_to(div(amax(bamax, t), max), t));
}

/// MXFP8 code of element x: XLA's convert of clip(T(x / T(scale)), +-elem_max), scale = 2^(e-127) (e = 0:
/// 2^-127, or 2^-15 for F16).
inline uint8_t mx_code(float x, uint8_t e, DType t, Fp8Type f) {
  const float max = f == Fp8Type::kE4M3 ? 448.0f : 57344.0f;
  float s = bits_f32(static_cast<uint32_t>(e) << 23);
  if (s == 0.0f) s = t == DType::kF16 ? 0x1p-15f : 0x1p-127f;
  s = round_to(s, t);
  float v = round_to(mul(x, round_to(div(1.0f, s), t)), t);  // x * broadcast(1 / s), 1 / s in T
  v = torchao::clamp(v, -max, max);
  if (v != v) {  // XLA's NaN conversions keep the sign; to E5M2: 0x7E | sign from F32, 0x7F from BF16 and F16
    const uint8_t sign = static_cast<uint8_t>((f32_bits(v) >> 24) & 0x80u);
    if (f == Fp8Type::kE4M3) return static_cast<uint8_t>(0x7Fu | sign);
    return static_cast<uint8_t>(t == DType::kF32 ? (0x7Eu | sign) : 0x7Fu);
  }
  return f == Fp8Type::kE4M3 ? encode_e4m3(v) : encode_e5m2(v);
}

/// NVFP4: the global scale float32(amax) / 2688 (JAX's tests) and the multiplier of `x /= global_scale`, 1 / S.
inline float nvfp4_global(float amax) { return div(amax, 2688.0f); }
inline float nvfp4_global_rcp(float s) { return div(1.0f, s); }
/// NVFP4 block scale byte of the scaled block amax: e4m3(clip(bamax / 6, 0, 448)), NaN keeps its sign.
inline uint8_t nvfp4_scale(float scaled_bamax) {
  return torchao::cast_fp8(torchao::clamp(div(ftz(scaled_bamax), 6.0f), 0.0f, 448.0f), Fp8Type::kE4M3);
}
/// NVFP4 code of a scaled element: XLA's E2M1 convert of clip(xs * (1 / float(sf)), -6, 6): RN-even, sign kept,
/// NaN 0x8.
inline uint8_t nvfp4_code(float xs, uint8_t sf) {
  const float v = torchao::clamp(mul(xs, div(1.0f, torchao::decode_e4m3(sf))), -6.0f, 6.0f);
  if (v != v) return 0x8;
  return encode_e2m1(v, NegZero::kKeepSign);
}

}  // namespace jax

// ---------------------------------------------------------------------------------------------------------------
// vLLM 0.33.0 ref_nvfp4_quant (vllm/model_executor/layers/quantization/utils/nvfp4_emulation_utils.py), PyTorch
// CPU float32, with the global scale of vLLM's tests: (448 * 6) / amax computed in the input's dtype.
// ---------------------------------------------------------------------------------------------------------------
namespace vllm {

/// Python's `2688 / tensor` is Tensor.__rtruediv__: reciprocal(amax) * 2688, each step rounded to dtype t.
inline float nvfp4_global(float amax, DType t) {
  auto rt = [t](float v) {
    if (v != v) return v;
    if (t == DType::kBF16) return bf16_to_f32(f32_to_bf16(v));
    if (t == DType::kF16) return f16_to_f32(f32_to_f16(v));
    return v;
  };
  return rt(torchao::mul(rt(torchao::div(1.0f, amax)), 2688.0f));
}
/// get_reciprocal: 1 / (x + (x == 0) * 1e8).
inline float reciprocal(float x) { return torchao::div(1.0f, x == 0.0f ? x + 1e8f : x); }
/// Block scale byte: e4m3(clamp(gs * (vec_max * RN(1/6)), -448, 448)).
inline uint8_t nvfp4_scale(float bamax, float gs) {
  const float s = torchao::mul(gs, torchao::mul(bamax, 1.0f / 6.0f));
  return torchao::cast_fp8(torchao::clamp(s, -448.0f, 448.0f), Fp8Type::kE4M3);
}
/// output_scale = get_reciprocal(float(sf) * get_reciprocal(gs)).
inline float nvfp4_multiplier(uint8_t sf, float gs) { return reciprocal(torchao::mul(torchao::decode_e4m3(sf), reciprocal(gs))); }
/// cast_to_fp4 of clamp(x * output_scale, -6, 6): value buckets (<= 0.25 -> 0, < 0.75 -> 0.5, <= 1.25 -> 1, < 1.75 ->
/// 1.5, <= 2.5 -> 2, < 3.5 -> 3, <= 5 -> 4, else 6) times torch.sign(x) (0 for +-0.0: -0.0 -> +0); the value's code
/// as ml_dtypes' float4_e2m1fn gives it (sign bit kept; a NaN value -> 0x8).
inline uint8_t nvfp4_code(float x, float mul) {
  const float v = torchao::clamp(torchao::mul(x, mul), -6.0f, 6.0f);
  if (v != v) return 0x8;
  const float a = fabsf(v);
  const uint8_t mag = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3 : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
  const bool neg = v < 0.0f;  // torch.sign(-0.0) = 0: the product is +0
  return static_cast<uint8_t>(mag | (neg ? 0x8u : 0u));
}

}  // namespace vllm

// ---------------------------------------------------------------------------------------------------------------
// Quantizers written with a library's own casts (profiles torch_cast, ml_dtypes_cast; conformance/peers/
// cast_mx_dump.py): float32 arithmetic (IEEE, no flush; x86 NaN choice as torchao_codec.hpp), the library's casts.
// ---------------------------------------------------------------------------------------------------------------
namespace cast {

/// PyTorch 2.11's float -> float8_e8m0fnu (c10 fp8e8m0fnu_from_fp32_value): the sign is dropped; exponent 0xFF (NaN,
/// Inf) -> 0xFF; rounded up when mantissa bit 22 is set and (any lower bit is set or the value is normal): a normal
/// 1.5 * 2^e goes up, a subnormal's 0x400000 stays (0x00 = 2^-127); 2^127 * [1.5, 2) -> 0xFF.
QTC_HD uint8_t e8m0_torch(float v) {
  const uint32_t b = f32_bits(v);
  uint32_t e = (b >> 23) & 0xFFu;
  if (e == 0xFFu) return 0xFF;
  if ((b & 0x400000u) != 0 && ((b & 0x3FFFFFu) != 0 || e > 0)) ++e;
  return static_cast<uint8_t>(e);
}
/// ml_dtypes 0.7's float32 -> float8_e8m0fnu: zero, negative values and NaN -> 0xFF (the type has no zero and no
/// sign); positive normals as PyTorch; subnormals round to the nearest of 2^-127 (0x00) and 2^-126 (0x01), the
/// midpoint 0x600000 going up.
QTC_HD uint8_t e8m0_ml_dtypes(float v) {
  if (!(v > 0.0f)) return 0xFF;
  const uint32_t b = f32_bits(v);
  if (((b >> 23) & 0xFFu) == 0) return b >= 0x600000u ? 1 : 0;
  return e8m0_torch(v);
}
/// float8_e8m0fnu -> float32: 0x00 -> 2^-127 (both libraries), 0xFF -> NaN (PyTorch 0x7F800001, ml_dtypes 0x7FC00000).
QTC_HD float e8m0_value(uint8_t e, bool torch) {
  if (e == 0) return bits_f32(0x00400000u);
  if (e == 0xFF) return bits_f32(torch ? 0x7F800001u : 0x7FC00000u);
  return bits_f32(static_cast<uint32_t>(e) << 23);
}
/// float32 -> float8_e4m3fn / float8_e5m2 as both libraries cast (RN-even, not saturating: E4M3 past 464 -> NaN,
/// E5M2 past 61440 -> Inf; a NaN keeps its sign: E4M3 0x7F | s, E5M2 0x7F | s (PyTorch) or 0x7E | s (ml_dtypes)).
QTC_HD uint8_t fp8(float v, Fp8Type t, bool torch) {
  if (v != v) {
    const uint8_t sign = static_cast<uint8_t>((f32_bits(v) >> 24) & 0x80u);
    return static_cast<uint8_t>(sign | ((t == Fp8Type::kE5M2 && !torch) ? 0x7Eu : 0x7Fu));
  }
  return t == Fp8Type::kE4M3 ? encode_e4m3(v, Overflow::kNaN) : encode_e5m2(v, Overflow::kNaN);
}

/// MXFP8 scale byte: (bamax / elem_max).to(float8_e8m0fnu), float32 (bamax: NaN propagated).
QTC_HD uint8_t mx_scale(float bamax, Fp8Type t, bool torch) {
  const float s = torchao::div(bamax, t == Fp8Type::kE4M3 ? 448.0f : 57344.0f);
  return torch ? e8m0_torch(s) : e8m0_ml_dtypes(s);
}
/// MXFP8 code: (x / float(scale)).to(float8).
QTC_HD uint8_t mx_code(float x, uint8_t e, Fp8Type t, bool torch) { return fp8(torchao::div(x, e8m0_value(e, torch)), t, torch); }

/// NVFP4 (ml_dtypes): S = amax / 2688; sf = float8_e4m3fn((bamax / 6) / S).
QTC_HD float nvfp4_global(float amax) { return torchao::div(amax, 2688.0f); }
QTC_HD uint8_t nvfp4_scale(float bamax, float s_global) {
  return fp8(torchao::div(torchao::div(bamax, 6.0f), s_global), Fp8Type::kE4M3, false);
}
/// The divisor float32(sf) * S (ml_dtypes decodes an E4M3 NaN to 0x7FC00000 | sign).
QTC_HD float nvfp4_divisor(uint8_t sf, float s_global) {
  const float d = (sf & 0x7Fu) == 0x7Fu ? bits_f32(0x7FC00000u | (static_cast<uint32_t>(sf & 0x80u) << 24)) : decode_e4m3(sf);
  return torchao::mul(d, s_global);
}
/// ml_dtypes' float32 -> float4_e2m1fn of x / divisor: RN-even, saturating (Inf -> +-6), -0.0 -> 0x8; a NaN -> 0x8
/// when its sign bit is clear, 0x0 when set (x86's 0 / 0 is the negative NaN: a zero block's codes are 0x0).
QTC_HD uint8_t nvfp4_code(float x, float divisor) {
  const float v = torchao::div(x, divisor);
  if (v != v) return (f32_bits(v) >> 31) != 0 ? 0x0 : 0x8;
  return encode_e2m1(v, NegZero::kKeepSign);
}

}  // namespace cast

}  // namespace qtc::peer
