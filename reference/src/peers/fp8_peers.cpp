/// \file fp8_peers.cpp
/// \brief FP8 block and per-tensor quantization in the forms of the model toolkits and inference engines
///        (profile rule `fp8.form` other than te; issue 25): the stored dequantization scale s is computed
///        first from the amax, and the data is x / s or x * (1 / s). Every step follows the PyTorch (or Triton)
///        code of the implementation the profile names (profile.cpp), with PyTorch's NaN results on x86
///        (torchao_codec.hpp) where the profile says so (rule fp8.nan).
#include <cstring>

#include "internal.hpp"
#include "qtc/codec.hpp"
#include "qtc/peer_codec.hpp"
#include "qtc/profile.hpp"
#include "qtc/rcp_approx.hpp"
#include "qtc/torchao_codec.hpp"

namespace qtc::ref::detail {

namespace {

/// PyTorch's CPU elementwise loops on BF16 run 2 x 16 lanes at a time (AVX2) and the rest of the op's elements
/// one by one: a NaN result is 0xFFFF in the vector lanes and 0x7FC0 in the scalar tail.
constexpr int64_t kTorchBf16Chunk = 32;

struct PeerFp8 {
  const ProfileRules& pr;
  Fp8Form form;
  Fp8Type type;
  float fp8max;
  DType input;
  bool pow2;
  float eps;
  Overflow overflow;

  /// v rounded to the input dtype when the profile computes in it (BF16 / F16), else v. `vector_lane`: whether
  /// PyTorch's loop computed this element in a vector lane (BF16 NaN results differ, kTorchBf16Chunk).
  float round_to_input(float v, bool vector_lane) const {
    if (!pr.fp8_input_dtype_arith) return v;
    if (input == DType::kBF16) {
      if (v != v) return bf16_to_f32(vector_lane ? 0xFFFFu : 0x7FC0u);
      return bf16_to_f32(f32_to_bf16(v));
    }
    if (input == DType::kF16) {
      if (v != v) return torchao::quiet(v);  // the F16 conversions keep the NaN's sign
      return f16_to_f32(f32_to_f16(v));
    }
    return v;
  }

  /// A block amax of NaN as the profile's torch.maximum over the [blocks] tensor gives it (rule fp8.nan):
  /// 0xFFFFFFFF for block `idx` inside the op's vector chunks, 0x7FC00000 in its scalar tail.
  float block_amax(float a, int64_t idx, int64_t blocks) const {
    if (a == a || !pr.fp8_block_amax_nan_lanes) return a;
    const int64_t chunk = input == DType::kF32 ? 16 : 32;  // 2 x 8 float32 lanes, 2 x 16 BF16/F16 lanes (AVX2)
    return bits_f32(idx < blocks / chunk * chunk ? 0xFFFFFFFFu : 0x7FC00000u);
  }

  float div(float a, float b) const { return pr.fp8_torch_nan ? torchao::div(a, b) : a / b; }
  float mul(float a, float b) const { return pr.fp8_torch_nan ? torchao::mul(a, b) : a * b; }
  /// 1 / s as the form computes it: Triton's float32 `/` on sm_90 (kRcpMaxMulRcp) is a * rcp.approx(b), whose
  /// reciprocal is RN(1 / b) +- 1 ulp for 13% of the mantissas (qtc/rcp_approx.hpp); else IEEE (or PyTorch's) 1 / s.
  float recip(float s, Fp8Form f) const { return f == Fp8Form::kRcpMaxMulRcp ? rcp_approx_sm90(s) : div(1.0f, s); }

  /// The stored scale of a block (or tensor) whose absolute maximum is `a`.
  float scale(float a, Fp8Form f) const {
    if (a < eps) a = eps;  // torch.clamp(min=eps) / tl.maximum(amax, eps): a NaN stays NaN
    float s = f == Fp8Form::kRcpMaxDiv     ? mul(a, static_cast<float>(1.0 / static_cast<double>(fp8max)))
              : f == Fp8Form::kRcpMaxMulRcp ? mul(a, rcp_approx_sm90(fp8max))  // = RN(1/448) (table entry 0)
                                            : div(a, fp8max);
    s = round_to_input(s, false);
    if (pr.fp8_scale_min > 0.0f && s < pr.fp8_scale_min) s = pr.fp8_scale_min;  // torch.clamp(min=): NaN stays
    if (pow2) {
      if (pr.fp8_pow2 == Fp8Pow2::kCeilBits) {  // DeepGEMM ceil_to_ue8m0 on |s|'s float32 bits
        const uint32_t b = f32_bits(s) & 0x7FFFFFFFu;
        int e = static_cast<int>((b >> 23) & 0xFFu) + ((b & 0x7FFFFFu) != 0 ? 1 : 0);
        e = std::clamp(e, 1, 254);
        s = bits_f32(static_cast<uint32_t>(e) << 23);
      } else if (pr.fp8_pow2 == Fp8Pow2::kCeilLog2) {  // torch.exp2(torch.ceil(torch.log2(s)))
        if (s == s && !is_inf(s)) s = s == 0.0f ? 0.0f : std::ldexp(1.0f, static_cast<int>(torchao::ceil_log2f(s)));
      }
    }
    if (s == 0.0f && pr.fp8_zero_scale == Fp8ZeroScale::kDtypeEps)
      s = input == DType::kBF16 ? 0x1p-7f : (input == DType::kF16 ? 0x1p-10f : 0x1p-23f);  // torch.finfo(dtype).eps
    // PyTorch's CUDA ops: CUDA's canonical NaN, stored in the input dtype (BF16 / F16 0x7FFF) and widened to float32
    // (BF16 by its bits, F16 by cvt.f32.f16, which gives the canonical NaN again)
    if (s != s && pr.fp8_cuda_nan) s = bits_f32(input == DType::kBF16 ? 0x7FFF0000u : 0x7FFFFFFFu);
    return s;
  }

  /// The FP8 code of element x of a block with stored scale s (rcp = recip(s), used by kInvMulRcp / kRcpMaxMulRcp).
  uint8_t code(float x, float s, float rcp, Fp8Form f, bool vector_lane) const {
    if (f == Fp8Form::kCast) return peer::cast::fp8(mul(x, rcp), type, pr.mx_order == MxOrder::kTorchCast);  // rcp: the scale
    float y = (f == Fp8Form::kInvMulRcp || f == Fp8Form::kRcpMaxMulRcp) ? mul(x, rcp) : div(x, s);
    if (!pr.fp8_data_f32) y = round_to_input(y, vector_lane);  // rule fp8.data_dtype: the Triton kernel's float32
    if (pr.fp8_zero_point_add && y == 0.0f) y = 0.0f;  // (x / s) + 0: -0.0 + 0.0 = +0.0
    if (y != y && pr.fp8_clamp_nan != Fp8ClampNaN::kNaN) {  // Triton's clamp returns a bound for a NaN (rule fp8.clamp_nan)
      const uint8_t max_code = type == Fp8Type::kE4M3 ? 0x7E : 0x7B;
      return static_cast<uint8_t>(max_code | (pr.fp8_clamp_nan == Fp8ClampNaN::kMinusMax ? 0x80u : 0u));
    }
    if (y != y) {
      if (!pr.fp8_torch_nan || (pr.fp8_bf16_nan_positive && input == DType::kBF16)) return 0x7F;
      return static_cast<uint8_t>(0x7Fu | ((f32_bits(y) >> 24) & 0x80u));  // PyTorch's cast keeps a NaN's sign
    }
    return encode_fp8(y, type, overflow);
  }
};

PeerFp8 make_peer(const Recipe& r, DType input) {
  const ProfileRules& pr = profile_rules(r.profile);
  QTC_CHECK(!r.pow2_scales() || pr.fp8_pow2 != Fp8Pow2::kNone, "recipe ", r.name(), ": rule 'fp8-profile-pow2': profile '", pr.name,
            "' defines no power-of-two FP8 scales (profile rule fp8.pow2)");
  return PeerFp8{pr,
                 pr.fp8_form,
                 r.fp8_type(),
                 fp8_max(r.fp8_type()),
                 input,
                 r.pow2_scales(),
                 r.eps(),
                 pr.fp8_satfinite ? Overflow::kSatFinite : Overflow::kNaN};
}

std::vector<float> load_all(const MatrixView& x) {
  std::vector<float> v(static_cast<size_t>(x.rows * x.cols));
  if (!v.empty()) load_rows(x, 0, x.rows, v.data());
  return v;
}

}  // namespace

bool fp8_peer_form(const Recipe& r) {
  const ProfileRules& pr = profile_rules(r.profile);
  return (r.fp8_tensor_or_null() != nullptr ? pr.fp8_tensor_form : pr.fp8_form) != Fp8Form::kTE;
}

QuantizedTensor quantize_fp8_block_peer(const MatrixView& x, const Recipe& r) {
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  start_output(q, r, x.dtype, M, K);
  const PeerFp8 p = make_peer(r, x.dtype);
  const bool prop = p.pr.nan_amax;
  const std::vector<float> v = load_all(x);
  const int64_t kbs = ceil_div(K, 128), mbs = ceil_div(M, 128);
  auto at = [&](int64_t i, int64_t j) { return v[static_cast<size_t>(i * K + j)]; };
  // The blocks of the input dtype's op are the padded tensor's (multiples of 128): every element is in a vector lane.
  if (r.fp8_block().tile_2d) {
    for (int64_t mb = 0; mb < mbs; ++mb)
      for (int64_t kb = 0; kb < kbs; ++kb) {
        const int64_t i1 = std::min(M, mb * 128 + 128), j1 = std::min(K, kb * 128 + 128);
        float a = 0.0f;
        for (int64_t i = mb * 128; i < i1; ++i)
          for (int64_t j = kb * 128; j < j1; ++j) a = amax_step(a, at(i, j), prop);
        const float s = p.scale(p.block_amax(a, mb * kbs + kb, mbs * kbs), p.form);
        const float rcp = p.recip(s, p.form);
        if (r.rowwise) q.rowwise->scale.set_f32(mb, kb, s);
        if (r.columnwise) q.columnwise->scale.set_f32(kb, mb, s);
        for (int64_t i = mb * 128; i < i1; ++i)
          for (int64_t j = kb * 128; j < j1; ++j) {
            const uint8_t c = p.code(at(i, j), s, rcp, p.form, true);
            if (r.rowwise) q.rowwise->data[static_cast<size_t>(i * K + j)] = c;
            if (r.columnwise) q.columnwise->data[static_cast<size_t>(j * M + i)] = c;
          }
      }
    return q;
  }
  // 1D blocks of b = 128 (1x128) or 32 (1x32) elements along the row (rowwise) or the column (columnwise): one loop
  // over the plane's rows (x's rows, or x^T's: x's columns), `elem(row, e)` reading element e of that row.
  const int64_t b = r.fp8_block().block_1d;
  auto plane_1d = [&](Plane& pl, int64_t rows, int64_t len, auto elem) {
    const int64_t nb = ceil_div(len, b);
    for (int64_t a = 0; a < rows; ++a)
      for (int64_t kb = 0; kb < nb; ++kb) {
        const int64_t e1 = std::min(len, kb * b + b);
        float am = 0.0f;
        for (int64_t e = kb * b; e < e1; ++e) am = amax_step(am, elem(a, e), prop);
        const float s = p.scale(p.block_amax(am, a * nb + kb, rows * nb), p.form);
        const float rcp = p.recip(s, p.form);
        pl.scale.set_f32(a, kb, s);
        for (int64_t e = kb * b; e < e1; ++e) pl.data[static_cast<size_t>(a * len + e)] = p.code(elem(a, e), s, rcp, p.form, true);
      }
  };
  if (r.rowwise) plane_1d(*q.rowwise, M, K, [&](int64_t i, int64_t j) { return at(i, j); });
  if (r.columnwise) plane_1d(*q.columnwise, K, M, [&](int64_t j, int64_t i) { return at(i, j); });
  return q;
}

QuantizedTensor quantize_fp8_tensor_peer(const MatrixView& x, const Recipe& r, const float* amax_override) {
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  start_output(q, r, x.dtype, M, K);
  const PeerFp8 p = make_peer(r, x.dtype);
  float a = amax_override != nullptr ? amax_override[0] : amax(x, p.pr.nan_amax);
  // torch.max(x.abs()) over a whole float32 tensor returns the NaN 0xFFFFFFFF, over BF16/F16 0x7FC0 / 0x7E00
  // (vLLM's per-tensor amax, converted to float32 after the reduction)
  // (a one-element tensor returns its own |NaN|, 0x7FC00000)
  if (a != a && p.pr.fp8_tensor_amax_full_reduction) a = bits_f32(x.dtype == DType::kF32 && M * K > 1 ? 0xFFFFFFFFu : 0x7FC00000u);
  const Fp8Form f = p.pr.fp8_tensor_form;
  float s, rcp;
  if (f == Fp8Form::kCast) {  // scale = fp8_max / amax (no guard), data cast(x * scale), stored 1 / scale
    // PyTorch's `448.0 / amax` is Tensor.__rtruediv__: amax.reciprocal() * 448; numpy's a true division
    rcp = p.pr.mx_order == MxOrder::kTorchCast ? p.mul(p.div(1.0f, a), p.fp8max) : p.div(p.fp8max, a);
    s = p.div(1.0f, rcp);
  } else {
    s = p.scale(a, f);
    rcp = p.recip(s, f);
  }
  q.scale_inv = s;
  for (auto* pl : {&q.rowwise, &q.columnwise})
    if (*pl) {
      (*pl)->scale.set_f32(0, 0, s);
      (*pl)->amax.at(0) = a;
    }
  const std::vector<float> v = load_all(x);
  const int64_t n = M * K, vec_end = n / kTorchBf16Chunk * kTorchBf16Chunk;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const int64_t flat = i * K + j;
      const uint8_t c = p.code(v[static_cast<size_t>(flat)], s, rcp, f, flat < vec_end);
      if (r.rowwise) q.rowwise->data[static_cast<size_t>(flat)] = c;
      if (r.columnwise) q.columnwise->data[static_cast<size_t>(j * M + i)] = c;
    }
  return q;
}

}  // namespace qtc::ref::detail
