/// \file ct_peers.cpp
/// \brief compressed-tensors 0.20.0's NVFP4, MXFP8 and MXFP4 quantizers (profile compressed_tensors: nvfp4.order,
///        mxfp8.order and mxfp4.order `compressed_tensors`, MX scale rule `pow2_round`; issue 25), as its presets'
///        weight arguments run on the CPU: `generate_gparam`, `compute_dynamic_scales_and_zp` / `calculate_qparams`,
///        `quantize` (eager `cast_to_fp4`), `pack_fp4_to_uint8` and `compress_mx_scale`
///        (conformance/peers/compressed_tensors_dump.py). Every step is PyTorch arithmetic in the input's dtype T
///        (F32, BF16, F16) where compressed-tensors computes in it, with the NaNs PyTorch's AVX2 CPU kernels give:
///        an elementwise op on T runs two vectors at a time (16 float32 or 32 BF16/F16 lanes) over the flattened
///        tensor and its remainder one element at a time; torch.max of two NaN-holding tensors is the all-ones NaN in
///        the vector lanes and the (positive) NaN of the reductions in the remainder.
///        The same presets on CUDA tensors (profile compressed_tensors_triton, orders kCompressedTensorsTriton; `gpu`
///        below): the scales by the same PyTorch ops on the GPU, whose NaNs are CUDA's canonical positive NaN
///        (0x7FFFFFFF, 0x7FFF: a NaN block's max(|min|, |max|), a product such as 0 * Inf; seen in the H100 dumps), then
///        the Triton `_quantize_kernel` (forward_helpers.py): y = div_rn(x.f32, scale.f32) in float32 (NVFP4: scale =
///        div_rn(sf, gs)), + the zero point, tl.clamp(y, q_min, q_max) with bounds loaded at run time (max.f32 then
///        min.f32: a NaN becomes q_min), then tl.float8e4nv or _round_to_fp4 (sign from y < 0), stored in T; FP4
///        values packed by pack_fp4_to_uint8's Triton kernel (the sign bit of the BF16 / F16 value).
#include "internal.hpp"
#include "qtc/codec.hpp"
#include "qtc/profile.hpp"
#include "qtc/torchao_codec.hpp"

namespace qtc::ref::detail {

namespace {
namespace ct {  // the reference sources are compiled as unity builds: names of their own

/// Whether element `idx` of an `n`-element tensor of dtype t is computed in a vector lane of PyTorch's CPU loop.
bool vector_lane(int64_t idx, int64_t n, DType t) {
  const int64_t chunk = t == DType::kF32 ? 16 : 32;
  return idx < n / chunk * chunk;
}

/// v rounded to dtype t (RN-even; BF16 and F16 keep float32's value when it is exact), as PyTorch stores an op's
/// float32 result in a BF16 / F16 tensor. A NaN passes unchanged (the callers choose its sign).
float round_to(float v, DType t) {
  if (v != v) return v;
  if (t == DType::kBF16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::kF16) return f16_to_f32(f32_to_f16(v));
  return v;
}

/// The NaN that max(|min|, |max|) of a block holding a NaN gives (calculate_qparams on the [rows, groups] tensors
/// of dtype t): all ones in a vector lane (negative), the reductions' quiet NaN in the remainder (positive).
float block_pos_nan(int64_t block, int64_t blocks, DType t) {
  return bits_f32(vector_lane(block, blocks, t) ? 0xFFFFFFFFu : 0x7FC00000u);
}

/// The absolute maximum of a block's valid elements (exact in the input dtype), or NaN when one is NaN.
template <typename Elem>
float block_pos(Elem elem, int64_t a, int64_t e0, int64_t e1, bool& nan) {
  float m = 0.0f;
  nan = false;
  for (int64_t e = e0; e < e1; ++e) {
    const float v = elem(a, e);
    if (v != v) nan = true;
    else m = std::max(m, std::fabs(v));
  }
  return m;
}

/// E2M1 code of cast_to_fp4(clamp(y, -6, 6)) as pack_fp4_to_uint8 stores it: the magnitude by value buckets
/// (<= 0.25 -> 0, < 0.75 -> 0.5, <= 1.25 -> 1, < 1.75 -> 1.5, <= 2.5 -> 2, < 3.5 -> 3, <= 5 -> 4, else 6: RN-even),
/// times torch.sign(y), the sign bit from torch.signbit (a negative y that rounds to 0 is -0.0: 0x8). A NaN: sign(NaN)
/// = 0 and |NaN| * 0 is a positive NaN, code 0x0, unless `nan_negative` (a BF16 result written by a vector lane,
/// where PyTorch's float32 -> BF16 conversion makes every NaN 0xFFFF): 0x8.
uint8_t e2m1_code(float y, bool nan_negative) {
  if (y != y) return nan_negative ? 0x8 : 0x0;
  const float a = std::fabs(y);
  const uint8_t mag = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3 : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
  return static_cast<uint8_t>(mag | (y < 0.0f ? 0x8u : 0u));
}

inline void put_nibble(uint8_t* row, int64_t idx, uint8_t code) {
  uint8_t& b = row[idx >> 1];
  b = (idx & 1) ? static_cast<uint8_t>((b & 0x0F) | (code << 4)) : static_cast<uint8_t>((b & 0xF0) | (code & 0x0F));
}

// ---------------------------------------------------------------------------------------------------------------
// NVFP4 (preset NVFP4: TENSOR_GROUP, groups of 16, E4M3 scales)
// ---------------------------------------------------------------------------------------------------------------

/// generate_gparam(min, max) of a tensor of dtype t with max(|min|, |max|) = amax: 2688 / clamp(amax, finfo(t).tiny)
/// in t (Python's `2688 / tensor` is reciprocal(tensor) * 2688, each step rounded to t), NaN and +-Inf replaced by
/// 1, then float32. amax NaN -> 1; amax +Inf -> 0 (the reciprocal is 0); a tiny amax overflows the product -> 1.
float nvfp4_global(float amax, DType t) {
  if (amax != amax) return 1.0f;
  const float tiny = t == DType::kF16 ? 0x1p-14f : 0x1p-126f;
  const float a = amax < tiny ? tiny : amax;
  const float g = round_to(round_to(1.0f / a, t) * 2688.0f, t);
  return (g != g || is_inf(g)) ? 1.0f : g;
}

/// calculate_qparams' block scale byte: e4m3(clamp(gs * t(bpos / 6), +-448)) (the product in float32: gs is a
/// float32 tensor), PyTorch's cast (RN-even, a NaN keeps its sign); a scale that is 0 after the cast becomes
/// 0.125, the eps of the E4M3 scale dtype (byte 0x20). `bpos` carries its NaN's sign (block_pos_nan).
uint8_t nvfp4_scale(float bpos, float gs, DType t, bool gpu) {
  if (gpu) {  // CUDA: every NaN here is positive (a NaN block, gs * q = 0 * Inf for amax Inf): E4M3 0x7F
    const float s = gs * round_to(bpos / 6.0f, t);
    if (s != s) return 0x7F;
    const uint8_t b = torchao::cast_fp8(std::clamp(s, -448.0f, 448.0f), Fp8Type::kE4M3);
    return (b & 0x7Fu) == 0 ? 0x20 : b;
  }
  float q = torchao::div(bpos, 6.0f);
  if (q == q) q = round_to(q, t);
  const float s = torchao::mul(gs, q);
  const uint8_t b = torchao::cast_fp8(torchao::clamp(s, -448.0f, 448.0f), Fp8Type::kE4M3);
  return (b & 0x7Fu) == 0 ? 0x20 : b;
}

/// The Triton _quantize_kernel's y after its zero point and clamp: y + 0 (-0.0 -> +0.0), then tl.clamp(y, -max, max)
/// with bounds loaded at run time, max.f32 then min.f32 on sm_90, which return the non-NaN operand: NaN -> -max.
float triton_clamp(float y, float max) {
  if (y != y) return -max;
  if (y == 0.0f) return 0.0f;
  return std::min(std::max(y, -max), max);
}

template <typename Elem>
void nvfp4_plane(Plane& p, int64_t rows, int64_t len, DType t, float amax, bool gpu, Elem elem) {
  const float gs = nvfp4_global(amax, t);
  const int64_t nb = len / 16, blocks = rows * nb;
  for (float& a : p.amax) a = amax;
  for (int64_t a = 0; a < rows; ++a) {
    uint8_t* drow = p.data.data() + a * p.data_cols;
    for (int64_t b = 0; b < nb; ++b) {
      bool nan = false;
      float bpos = block_pos(elem, a, b * 16, b * 16 + 16, nan);
      if (nan) bpos = gpu ? NAN : block_pos_nan(a * nb + b, blocks, t);
      const uint8_t sf = nvfp4_scale(bpos, gs, t, gpu);
      p.scale.bytes[static_cast<size_t>(a * nb + b)] = sf;
      if (gpu) {  // the Triton kernel: div_rn(sf, gs), div_rn(x, that), + 0, clamp (NaN -> -6), _round_to_fp4
        const float div = torchao::decode_e4m3(sf) / gs;
        for (int64_t k = 0; k < 16; ++k)
          put_nibble(drow, b * 16 + k, e2m1_code(triton_clamp(elem(a, b * 16 + k) / div, 6.0f), false));
        continue;
      }
      // quantize: scale / global_scale, then x / that (float32: x of dtype t over a float32 tensor), + the zero
      // point (-0.0 -> +0.0), clamp to +-6, cast_to_fp4; the values go back to t (BF16 NaNs -> 0xFFFF) and are packed.
      const float div = torchao::div(torchao::decode_e4m3(sf), gs);
      for (int64_t k = 0; k < 16; ++k) {
        float y = torchao::div(elem(a, b * 16 + k), div);
        if (y == 0.0f) y = 0.0f;
        put_nibble(drow, b * 16 + k, e2m1_code(torchao::clamp(y, -6.0f, 6.0f), t == DType::kBF16));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// MXFP8 and MXFP4 (presets MXFP8 / MXFP4: GROUP, groups of 32, uint8 E8M0 scales; scale rule pow2_round)
// ---------------------------------------------------------------------------------------------------------------

/// The bits of a block's max(|min|, |max|) in dtype t: float32 bits, BF16 bits, or F16 bits.
uint32_t pos_bits(float v, DType t) {
  if (t == DType::kF32) return f32_bits(v);
  if (t == DType::kBF16) return f32_bits(v) >> 16;
  return f32_to_f16(v);
}

/// The scale (a value of dtype t) of a block whose max(|min|, |max|) has the dtype-t bits `pos`
/// (calculate_qparams with generate_mx_scales, emax_elem = floor(log2(elem_max)): 8 for E4M3, 2 for E2M1):
///  * round_to_power_2 on the integer view: + half the mantissa below E2M1's one bit, then only sign and exponent
///    kept (a mantissa >= 0.75 rounds up: the amax goes to 2^floor or 2^(floor+1); an all-ones NaN wraps to 0, a
///    quiet NaN becomes +Inf);
///  * e = 127 + floor(log2(p)) - emax_elem, clamped to [0, 255] and rounded (the uint8 scale dtype);
///  * maybe_convert_from_mx_exp: 2^(e - 127) in float32 (e = 255: Inf), then dtype t (F16: 0 below 2^-24, Inf
///    above 2^15); a 0 becomes 1 (the eps of the uint8 scale dtype).
float mx_scale(uint32_t pos, DType t, int emax_elem) {
  float p;
  if (t == DType::kF32) p = bits_f32((pos + (1u << 21)) & 0xFF800000u);
  else if (t == DType::kBF16) p = bf16_to_f32(static_cast<uint16_t>((pos + 32u) & 0xFF80u));
  else p = f16_to_f32(static_cast<uint16_t>((pos + 256u) & 0xFC00u));
  int e;
  if (p != p || p < 0.0f) e = 0;  // log2 of a negative is NaN, and NaN.to(uint8) gives 0 (x86); no pos reaches it
  else if (p == 0.0f) e = 0;      // log2(0) = -Inf -> clamped to 0
  else if (is_inf(p)) e = 255;
  else e = std::clamp(127 + std::ilogb(p) - emax_elem, 0, 255);
  float s = e == 255 ? INFINITY : std::ldexp(1.0f, e - 127);
  s = round_to(s, t);
  return s == 0.0f ? 1.0f : s;
}

/// compress_mx_scale: 127 + floor(log2(scale)) as int32, stored as uint8 (an Inf scale: int32(Inf) is INT_MIN on
/// x86, stored 0x7F).
uint8_t mx_scale_byte(float s, bool gpu) {
  if (is_inf(s)) return gpu ? 0x7E : 0x7F;  // CUDA: int32(Inf) saturates to INT32_MAX, + 127 wraps to 0x8000007E
  return static_cast<uint8_t>((127 + std::ilogb(s)) & 0xFF);
}

template <typename Elem, typename Put>
void mx_plane(int64_t rows, int64_t len, DType t, bool fp4, bool gpu, Elem elem, Put put) {
  const int64_t nb = ceil_div(len, 32), blocks = rows * nb, numel = rows * len;
  const int emax = fp4 ? 2 : 8;
  const float elem_max = fp4 ? 6.0f : 448.0f;
  for (int64_t a = 0; a < rows; ++a)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t e0 = b * 32, e1 = std::min(len, e0 + 32);
      bool nan = false;
      const float m = block_pos(elem, a, e0, e1, nan);
      // A NaN block: the all-ones NaN in a CPU vector lane, the quiet NaN in the CPU's remainder, CUDA's canonical
      // NaN (0x7FFFFFFF, 0x7FFF) on the GPU, which wraps to -0 in round_to_power_2 like the all-ones one
      const uint32_t pb = !nan ? pos_bits(m, t)
                          : gpu ? (t == DType::kF32 ? 0x7FFFFFFFu : 0x7FFFu)
                          : vector_lane(a * nb + b, blocks, t) ? (t == DType::kF32 ? 0xFFFFFFFFu : 0xFFFFu)
                                                               : (t == DType::kF32 ? 0x7FC00000u : t == DType::kBF16 ? 0x7FC0u : 0x7E00u);
      const float s = mx_scale(pb, t, emax);
      const uint8_t sb = mx_scale_byte(s, gpu);
      for (int64_t e = e0; e < e1; ++e) {
        if (gpu) {  // the Triton kernel: div_rn(x, scale) in float32, + 0, clamp (NaN -> -elem_max), cast
          const float y = triton_clamp(elem(a, e) / s, elem_max);
          put(a, b, e, sb, fp4 ? e2m1_code(y, false) : encode_e4m3(y));
          continue;
        }
        // quantize in dtype t: x / scale (a NaN keeps its sign; Inf / Inf is x86's negative default NaN), + the
        // zero point (-0.0 -> +0.0), clamp to +-elem_max
        float y = torchao::div(elem(a, e), s);
        if (y == y) y = round_to(y, t);
        if (y == 0.0f) y = 0.0f;
        y = torchao::clamp(y, -elem_max, elem_max);
        uint8_t c;
        if (fp4) {
          c = e2m1_code(y, t == DType::kBF16 && vector_lane(a * len + e, numel, t));
        } else if (y != y) {
          // round_to_quantized_type_args casts the E4M3 codes back to t and quantize casts them to E4M3 again: the
          // scalar E4M3 -> BF16 conversion makes a NaN positive; F32 and F16 keep its sign.
          c = t == DType::kBF16 ? 0x7F : static_cast<uint8_t>(0x7Fu | ((f32_bits(y) >> 24) & 0x80u));
        } else {
          c = encode_e4m3(y);
        }
        put(a, b, e, sb, c);
      }
    }
}

std::vector<float> load_all(const MatrixView& x) {
  std::vector<float> v(static_cast<size_t>(x.rows * x.cols));
  if (!v.empty()) load_rows(x, 0, x.rows, v.data());
  return v;
}

}  // namespace ct
}  // namespace

QuantizedTensor quantize_nvfp4_ct(const MatrixView& x, const Recipe& r, const float* amax_override) {
  const int64_t M = x.rows, K = x.cols;
  QuantizedTensor q;
  start_output(q, r, x.dtype, M, K);
  const std::vector<float> v = ct::load_all(x);
  // generate_gparam's max(|min|, |max|) of the whole tensor (torch.aminmax propagates NaN)
  float amax = 0.0f;
  for (float e : v) amax = amax_step(amax, e, true);
  auto at = [&](int64_t i, int64_t j) { return v[static_cast<size_t>(i * K + j)]; };
  // quantize_with_amax: the amax generate_gparam was given (a checkpoint's fused q/k/v or gate/up group)
  const float a_row = amax_override != nullptr ? amax_override[0] : amax;
  const float a_col = amax_override != nullptr ? amax_override[1] : amax;
  const bool gpu = profile_rules(r.profile).nvfp4_order == Nvfp4Order::kCompressedTensorsTriton;
  if (q.rowwise) ct::nvfp4_plane(*q.rowwise, M, K, x.dtype, a_row, gpu, at);
  if (q.columnwise) ct::nvfp4_plane(*q.columnwise, K, M, x.dtype, a_col, gpu, [&](int64_t j, int64_t i) { return at(i, j); });
  return q;
}

QuantizedTensor quantize_mx_ct(const MatrixView& x, const Recipe& r) {
  const int64_t M = x.rows, K = x.cols;
  const bool fp4 = r.mxfp4_or_null() != nullptr;
  const bool gpu = profile_rules(r.profile).mx_order == MxOrder::kCompressedTensorsTriton;
  QuantizedTensor q;
  start_output(q, r, x.dtype, M, K);
  const std::vector<float> v = ct::load_all(x);
  auto at = [&](int64_t i, int64_t j) { return v[static_cast<size_t>(i * K + j)]; };
  if (Plane* p = q.rowwise ? &*q.rowwise : nullptr)
    ct::mx_plane(M, K, x.dtype, fp4, gpu, at, [&](int64_t i, int64_t b, int64_t j, uint8_t sb, uint8_t c) {
      p->scale.bytes[static_cast<size_t>(i * p->scale.cols + b)] = sb;
      if (fp4) ct::put_nibble(p->data.data() + i * p->data_cols, j, c);
      else p->data[static_cast<size_t>(i * K + j)] = c;
    });
  // The columnwise plane is the quantization of x.t().contiguous(): MXFP8 stores it in x's orientation with
  // scales [ceil(M/32), K]; MXFP4 as x^T's rows (VECTORS.md).
  if (Plane* p = q.columnwise ? &*q.columnwise : nullptr)
    ct::mx_plane(K, M, x.dtype, fp4, gpu, [&](int64_t j, int64_t i) { return at(i, j); },
             [&](int64_t j, int64_t b, int64_t i, uint8_t sb, uint8_t c) {
               if (fp4) {
                 p->scale.bytes[static_cast<size_t>(j * p->scale.cols + b)] = sb;
                 ct::put_nibble(p->data.data() + j * p->data_cols, i, c);
               } else {
                 p->scale.bytes[static_cast<size_t>(b * K + j)] = sb;
                 p->data[static_cast<size_t>(i * K + j)] = c;
               }
             });
  return q;
}

}  // namespace qtc::ref::detail
