/// \file roundtrip_peer_rules.hpp
/// \brief The E2M1 round-trip property's prediction (prop_roundtrip.cpp) for a block whose values the dequantized dtype (F16) does not hold
///        as they were decoded (prop_roundtrip.cpp): each peer profile's block rule evaluated on the block's dtype
///        values w under the carried global amax A, assembled here from the profile's scalar steps (qtc/peer_codec.hpp,
///        qtc/torchao_codec.hpp; compressed_tensors' written out below, its reference functions being private to
///        ct_peers.cpp). The te rule does not reach such a block: F16 rounds a subnormal to its 2^-24 grid (an error that
///        is not a relative 2^-11), so the block's max, its E4M3 scale and each code are the profile's arithmetic on w.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "qtc/codec.hpp"
#include "qtc/mxfp4_codec.hpp"
#include "qtc/peer_codec.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe.hpp"
#include "qtc/torchao_codec.hpp"

namespace qtc::prop {

/// One block re-quantized: its E4M3 scale byte and the code of each value (the order of w).
struct Nvfp4BlockRequant {
  uint8_t sf = 0;
  std::vector<uint8_t> codes;
};

/// v rounded to dtype t and back (RN-even; a NaN passes).
inline float round_to_dtype(float v, DType t) {
  if (v != v) return v;
  if (t == DType::kBF16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::kF16) return f16_to_f32(f32_to_f16(v));
  return v;
}

/// The block rule of `prof` (torchao, modelopt, jax, vllm, compressed_tensors(_triton), ml_dtypes_cast) on the finite values w of
/// one block of 16, the tensor's global amax A carried, the input of dtype `in_dt` (jax, vllm and compressed_tensors
/// compute the global scale in it; the others in float32). Throws for another profile.
inline Nvfp4BlockRequant nvfp4_peer_requant(const std::string& prof, const Recipe& r, const std::vector<float>& w, float A, DType in_dt) {
  Nvfp4BlockRequant out;
  out.codes.resize(w.size());
  float bamax = 0.0f;
  for (float v : w) bamax = std::fmax(bamax, std::fabs(v));
  if (prof == "torchao") {
    // pts = A / 2688; sf = e4m3(clamp((bamax / 6) / pts, 2^-6 (the profile's floor), 448)); codes of clamp(w * ((1 / pts)
    // / sf), +-6).
    const bool two = r.nvfp4().per_tensor_scale, floor6 = profile_rules(r.profile).nvfp4_tiny_block_floor;
    const float pts = torchao::div(A, 2688.0f);
    out.sf = torchao::nvfp4_scale(bamax, two, pts, floor6);
    const float mul = torchao::nvfp4_multiplier(out.sf, two, pts);
    for (size_t k = 0; k < w.size(); ++k) out.codes[k] = torchao::nvfp4_code(w[k], mul);
  } else if (prof == "modelopt") {
    // S = A / 2688; sf = e4m3(clamp(bamax / (6 S) (0 -> 1), 2^-9, 448)); codes searchsorted(w / (sf * S)).
    const float s = peer::modelopt::nvfp4_global(A);
    out.sf = peer::modelopt::nvfp4_scale(bamax, s);
    const float div = peer::modelopt::nvfp4_divisor(out.sf, s);
    for (size_t k = 0; k < w.size(); ++k) out.codes[k] = peer::modelopt::nvfp4_code(w[k], div);
  } else if (prof == "jax") {
    // xs = w * RN(1 / (A / 2688)) (float32, flushed); sf = e4m3(clip(max|xs| / 6, 0, 448)) (F32 input: a division; BF16 /
    // F16: times RN(1/6)); codes of clip(xs / sf, +-6).
    const float rcp = peer::jax::nvfp4_global_rcp(peer::jax::nvfp4_global(peer::jax::amax(A, in_dt)));
    std::vector<float> xs(w.size());
    float sam = 0.0f;
    for (size_t k = 0; k < w.size(); ++k) {
      xs[k] = peer::jax::mul(w[k], rcp);
      sam = std::fmax(sam, std::fabs(xs[k]));
    }
    out.sf = in_dt == DType::kF32
                 ? peer::jax::nvfp4_scale(sam)
                 : torchao::cast_fp8(torchao::clamp(peer::jax::mul(sam, 1.0f / 6.0f), 0.0f, 448.0f), Fp8Type::kE4M3);
    for (size_t k = 0; k < w.size(); ++k) out.codes[k] = peer::jax::nvfp4_code(xs[k], out.sf);
  } else if (prof == "vllm") {
    // gs = T(T(1 / A) * 2688); sf = e4m3(clamp(gs * (bamax * RN(1/6)), +-448)); codes of clamp(w * rcp(sf * rcp(gs)), +-6).
    const float gs = peer::vllm::nvfp4_global(A, in_dt);
    out.sf = peer::vllm::nvfp4_scale(bamax, gs);
    const float mul = peer::vllm::nvfp4_multiplier(out.sf, gs);
    for (size_t k = 0; k < w.size(); ++k) out.codes[k] = peer::vllm::nvfp4_code(w[k], mul);
  } else if (prof == "ml_dtypes_cast") {
    // S = A / 2688; sf = float8_e4m3fn((bamax / 6) / S); codes float4_e2m1fn(w / (sf * S)) (RN-even, sign kept).
    const float s = peer::cast::nvfp4_global(A);
    out.sf = peer::cast::nvfp4_scale(bamax, s);
    const float div = peer::cast::nvfp4_divisor(out.sf, s);
    for (size_t k = 0; k < w.size(); ++k) out.codes[k] = peer::cast::nvfp4_code(w[k], div);
  } else if (prof == "compressed_tensors" || prof == "compressed_tensors_triton") {
    // (compressed_tensors_triton, the CUDA path, differs only for NaN and Inf: its finite arithmetic is the same.)
    // generate_gparam: gs = T(T(1 / max(A, tiny_T)) * 2688) (NaN / Inf -> 1); calculate_qparams: sf = e4m3(clamp(gs *
    // T(bamax / 6), +-448)) (the product in float32), an E4M3 0 -> 0.125 (0x20); quantize: y = w / (sf / gs) + 0 (-0.0 ->
    // +0.0), clamped to +-6, cast_to_fp4's buckets (RN-even), the sign bit from y < 0.
    const float tiny = in_dt == DType::kF16 ? 0x1p-14f : 0x1p-126f;
    float gs = round_to_dtype(round_to_dtype(1.0f / std::fmax(A, tiny), in_dt) * 2688.0f, in_dt);
    if (!std::isfinite(gs)) gs = 1.0f;
    const float s = gs * round_to_dtype(bamax / 6.0f, in_dt);
    out.sf = torchao::cast_fp8(std::fmin(std::fmax(s, -448.0f), 448.0f), Fp8Type::kE4M3);
    if ((out.sf & 0x7Fu) == 0) out.sf = 0x20;
    const float div = decode_e4m3(out.sf) / gs;
    for (size_t k = 0; k < w.size(); ++k) {
      float y = w[k] / div;
      if (y == 0.0f) y = 0.0f;
      y = std::fmin(std::fmax(y, -6.0f), 6.0f);
      const float a = std::fabs(y);
      const uint8_t mag = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3 : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
      out.codes[k] = static_cast<uint8_t>(mag | (y < 0.0f ? 0x8u : 0u));
    }
  } else {
    throw std::runtime_error("nvfp4_peer_requant: no block rule for profile " + prof);
  }
  return out;
}

/// An MXFP4 block re-quantized: its stored scale byte and the code of each value.
struct MxBlockRequant {
  uint8_t byte = 0;
  std::vector<uint8_t> codes;
};

/// (dtype value w, q's code, back's code) of each element of a block, in plane order.
using RoundTripElems = std::vector<std::tuple<float, uint8_t, uint8_t>>;

/// cast_to_fp4's buckets of y (RN-even; y clamped to +-6 before), the sign bit from y < 0; a NaN y gives 0x0, or 0x8
/// when `nan_negative` (compressed_tensors: a BF16 value written by a vector lane).
inline uint8_t ct_e2m1_code(float y, bool nan_negative) {
  if (y != y) return nan_negative ? 0x8 : 0x0;
  const float a = std::fabs(y);
  const uint8_t mag = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3 : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
  return static_cast<uint8_t>(mag | (y < 0.0f ? 0x8u : 0u));
}

/// compressed_tensors MXFP4 (pow2_round), which computes in the input's dtype t, re-quantizing one block of dtype-t
/// values w: round_to_power_2 on w_max's bits in t (+ half of E2M1's mantissa step, then sign and exponent only: up iff
/// the mantissa >= 0.75; an F16 subnormal w_max gives 2^-14 when its bits are >= 0x300, i.e. w_max >= 0.75 * 2^-14, else
/// 0); e = 127 + log2(p) - 2 clamped to [0, 255] (p = 0: e = 0; Inf: 255); s = t(2^(e-127)) (255: Inf), 0 -> 1.0 (the
/// uint8 scale's eps); stored 127 + log2(s) (Inf: int32(Inf) on x86, 0x7F). Codes: y = t(w / s) + 0 (-0.0 -> +0.0),
/// clamped to +-6, ct_e2m1_code (`nan_negative(k)`: element k's NaN sign, BF16 vector lanes). So an F16 block with 0 <
/// w_max < 0.75 * 2^-14 gets s = 1.0 (byte 127) and codes all 0 (|w| < 2^-14 <= 0.25); one with w_max in [0.75, 1) *
/// 2^-14 gets s = 2^-16 (byte 111) and codes of w * 2^16 (exact: w is on the 2^-24 grid).
/// MXFP8 (`fp8`, E4M3) the same with emax 8, codes E4M3 of y clamped to +-448 (a NaN y: 0x7F, its sign kept except in
/// BF16).
template <typename NanNeg>
MxBlockRequant ct_mx_requant(const RoundTripElems& elems, DType t, bool fp8, NanNeg nan_negative) {
  MxBlockRequant out;
  float m = 0.0f;
  for (const auto& el : elems) m = std::fmax(m, std::fabs(std::get<0>(el)));
  float p;
  if (t == DType::kF32) p = bits_f32((f32_bits(m) + (1u << 21)) & 0xFF800000u);
  else if (t == DType::kBF16) p = bf16_to_f32(static_cast<uint16_t>(((f32_bits(m) >> 16) + 32u) & 0xFF80u));
  else p = f16_to_f32(static_cast<uint16_t>((f32_to_f16(m) + 256u) & 0xFC00u));
  const int e = p == 0.0f ? 0 : std::isinf(p) ? 255 : std::min(std::max(127 + std::ilogb(p) - (fp8 ? 8 : 2), 0), 255);
  const float elem_max = fp8 ? 448.0f : 6.0f;
  float s = round_to_dtype(e == 255 ? INFINITY : std::ldexp(1.0f, e - 127), t);
  if (s == 0.0f) s = 1.0f;
  out.byte = std::isinf(s) ? 0x7F : static_cast<uint8_t>((127 + std::ilogb(s)) & 0xFF);
  for (size_t k = 0; k < elems.size(); ++k) {
    float y = torchao::div(std::get<0>(elems[k]), s);
    if (y == y) y = round_to_dtype(y, t);
    if (y == 0.0f) y = 0.0f;
    y = torchao::clamp(y, -elem_max, elem_max);
    if (!fp8) out.codes.push_back(ct_e2m1_code(y, nan_negative(k)));
    else if (y != y) out.codes.push_back(t == DType::kBF16 ? 0x7F : static_cast<uint8_t>(0x7Fu | ((f32_bits(y) >> 24) & 0x80u)));
    else out.codes.push_back(encode_e4m3(y));
  }
  return out;
}

/// te / ocp (mxfp4.order te) and torchao (to_mx) re-quantizing one block of values w (float32 arithmetic on the dtype's
/// values): mxfp4_codec.hpp's scale and code of the profile's order and rule.
inline MxBlockRequant mxfp4_requant(const Recipe& r, const RoundTripElems& elems) {
  MxBlockRequant out;
  const ProfileRules& pr = profile_rules(r.profile);
  const MxScaleRule rule = r.mxfp4().scale_rule;
  const bool torchao = pr.mx_order == MxOrder::kTorchAO;
  float m = 0.0f;
  for (const auto& el : elems) m = std::fmax(m, std::fabs(std::get<0>(el)));
  out.byte = torchao ? mxfp4::scale_torchao(m, rule) : mxfp4::scale_te(m, rule, pr.mx_nonfinite == MxNonFinite::kNaN);
  for (const auto& el : elems)
    out.codes.push_back(torchao ? mxfp4::code_torchao(std::get<0>(el), out.byte, rule) : mxfp4::code_te(std::get<0>(el), out.byte));
  return out;
}

/// MXFP8 under the other orders (te / ocp, torchao, modelopt, jax, torch_cast, ml_dtypes_cast) re-quantizing one block
/// of values w of dtype in_dt (jax computes its scale and scaled values in it; the others in float32): the scalar steps
/// of the profile's order (qtc/torchao_codec.hpp, qtc/peer_codec.hpp, TE's mx_block_scale and E8M0 reciprocal).
/// The block max: NaN when a value is NaN and the profile propagates it (mx_nonfinite NaN), else the largest |w|; `lanes`
/// (jax, float32 input of >= 4096 elements, a full block): XLA's vector-lane reduction (peer::jax::lane_block_amax).
inline MxBlockRequant mxfp8_requant(const Recipe& r, DType in_dt, const RoundTripElems& elems, bool lanes) {
  MxBlockRequant out;
  const ProfileRules& pr = profile_rules(r.profile);
  const Mxfp8Options& o = r.mxfp8();
  const bool e5 = o.fp8 == Fp8Type::kE5M2, cast = pr.mx_order == MxOrder::kTorchCast || pr.mx_order == MxOrder::kMlDtypesCast;
  const bool torch = pr.mx_order == MxOrder::kTorchCast;
  float m = 0.0f;
  bool nan = false;
  std::vector<float> v;
  for (const auto& el : elems) {
    v.push_back(std::fabs(std::get<0>(el)));
    nan = nan || v.back() != v.back();
    if (v.back() > m) m = v.back();
  }
  if (nan && pr.mx_nonfinite == MxNonFinite::kNaN) m = NAN;
  if (lanes) m = peer::jax::lane_block_amax(v.data(), static_cast<int>(v.size()));
  if (pr.mx_order == MxOrder::kTorchAO) out.byte = torchao::mx_scale(m, o.scale_rule, o.fp8);
  else if (pr.mx_order == MxOrder::kModelOpt) out.byte = peer::modelopt::mx_scale(m);
  else if (pr.mx_order == MxOrder::kJax) out.byte = peer::jax::mx_scale(m, in_dt, o.fp8);
  else if (cast) out.byte = peer::cast::mx_scale(m, o.fp8, torch);
  else out.byte = mx_block_scale(m, e5, o.scale_rule == MxScaleRule::kOcpFloor, pr.mx_nonfinite == MxNonFinite::kNaN);
  for (const auto& el : elems) {
    const float x = std::get<0>(el);
    uint8_t c;
    if (pr.mx_order == MxOrder::kTorchAO) c = torchao::mx_code(x, out.byte, o.scale_rule, o.fp8);
    else if (pr.mx_order == MxOrder::kModelOpt) c = peer::modelopt::mx_code(x, out.byte);
    else if (pr.mx_order == MxOrder::kJax) c = peer::jax::mx_code(x, out.byte, in_dt, o.fp8);
    else if (cast) c = peer::cast::mx_code(x, out.byte, o.fp8, torch);
    else c = encode_fp8(x * e8m0_reciprocal(out.byte), e5);
    out.codes.push_back(c);
  }
  return out;
}

/// One FP8 block (te: MXFP8, FP8 block, FP8 tensor) re-quantized: its stored scale bits (E8M0 byte, F32 scale_inv bits),
/// its decoded scale, and the code of each value.
struct Fp8BlockRequant {
  uint32_t scale_bits = 0;
  double scale = 1.0;
  std::vector<uint8_t> codes;
};

/// te's quantization (profile te) of one block of dtype-dt values w: MXFP8 by mxfp8_requant; FP8 block §3: scale =
/// fp8_scale_from_amax(w_max, max, pow2, eps, dtype max of dt (an Inf amax's stand-in), te), codes RN8(w * scale) (the
/// profile's saturation), stored 1 / scale; FP8 tensor §4: the same with the carried amax A (FLT_MAX for Inf).
inline Fp8BlockRequant fp8_te_requant(const Recipe& r, DType dt, float A, const RoundTripElems& elems) {
  Fp8BlockRequant out;
  if (r.kind() == RecipeKind::kMXFP8) {
    const MxBlockRequant mx = mxfp8_requant(r, dt, elems, false);
    out.scale_bits = mx.byte;
    out.scale = decode_e8m0(mx.byte);
    out.codes = mx.codes;
    return out;
  }
  const bool block = r.kind() == RecipeKind::kFP8Block, e5 = r.fp8_type() == Fp8Type::kE5M2;
  const ProfileRules& pr = profile_rules(r.profile);
  const Overflow ov = pr.fp8_satfinite ? Overflow::kSatFinite : Overflow::kNaN;
  float a = A;
  if (block) {
    a = 0.0f;
    for (const auto& el : elems) a = std::fmax(a, std::fabs(std::get<0>(el)));
  }
  const bool pow2 = r.pow2_scales();
  const float sc = ref::fp8_scale_from_amax(a, e5 ? 57344.0f : 448.0f, pow2, r.eps(), block ? dtype_max(dt) : FLT_MAX, r.profile);
  out.scale_bits = f32_bits(1.0f / sc);
  out.scale = 1.0f / sc;
  for (const auto& el : elems) out.codes.push_back(encode_fp8(std::get<0>(el) * sc, e5, ov));
  return out;
}

/// A block's predicted round trip against q's scale byte e and the bytes back holds: whether bytes change (scale or a
/// code), whether every decoded value (mxfp4::decode, as dequantize) stays (as values: a NaN never equals), and whether
/// back's scale byte eb and codes are exactly the prediction.
struct MxVerdict {
  bool change = false, equal = true, bytes_ok = true;
};
inline MxVerdict mx_verdict(uint8_t e, uint8_t eb, const MxBlockRequant& pr, const RoundTripElems& elems) {
  MxVerdict v;
  v.change = pr.byte != e;
  v.bytes_ok = pr.byte == eb;
  for (size_t n = 0; n < elems.size(); ++n) {
    const uint8_t ca = std::get<1>(elems[n]), cb = std::get<2>(elems[n]);
    v.change = v.change || pr.codes[n] != ca;
    v.equal = v.equal && mxfp4::decode(pr.codes[n], pr.byte) == mxfp4::decode(ca, e);
    v.bytes_ok = v.bytes_ok && pr.codes[n] == cb;
  }
  return v;
}

}  // namespace qtc::prop
