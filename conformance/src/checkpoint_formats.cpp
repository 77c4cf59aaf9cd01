/// \file checkpoint_formats.cpp
/// \brief Each checkpoint convention's tensors decoded and checked for consistency in the convention's words
///        (checkpoint_conventions.hpp lists what each tool writes): NVFP4 (ModelOpt, compressed-tensors), MXFP4
///        (compressed-tensors, DeepSeek-V4 experts), FP8 with F32 or E8M0 scales.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "checkpoint_internal.hpp"
#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe.hpp"

namespace qtc::conformance::ckpt {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}
std::string g(double v) { return ::fmt::format("{:.9g}", v); }

/// A scalar or [1] float tensor's value, or nullopt with the reason in *why.
std::optional<float> scalar_f32(const io::Tensor& t, std::string* why) {
  if (t.numel() != 1) {
    *why = ::fmt::format("shape {} (the convention writes one value)", shape_text(t.shape));
    return std::nullopt;
  }
  if (t.dtype == "F32") {
    float v;
    std::memcpy(&v, t.bytes.data(), 4);
    return v;
  }
  if (t.dtype == "BF16" || t.dtype == "F16") {
    uint16_t h;
    std::memcpy(&h, t.bytes.data(), 2);
    return t.dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
  }
  *why = ::fmt::format("dtype {} (the convention writes F32)", t.dtype);
  return std::nullopt;
}

/// Every element of a float tensor (F32 / BF16 / F16) as float; empty when the dtype is none of those.
std::vector<float> floats(const io::Tensor& t) {
  std::vector<float> out;
  const int64_t n = t.numel();
  if (t.dtype == "F32") {
    out.resize(static_cast<size_t>(n));
    std::memcpy(out.data(), t.bytes.data(), static_cast<size_t>(n) * 4);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    out.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, 2);
      out[static_cast<size_t>(i)] = t.dtype == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return out;
}


// Fused projections that inference engines load into one GEMM with one global (per-tensor) scale.
const std::vector<std::vector<std::string>>& fused_sets() {
  static const std::vector<std::vector<std::string>> k = {
      {"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"}, {"w1", "w3"}};
  return k;
}

const std::vector<std::string>& suffixes() {
  static const std::vector<std::string> k = {"weight_global_scale", "input_global_scale", "weight_scale_inv",
                                             "weight_scale_2", "weight_packed", "weight_scale", "input_scale",
                                             "weight_zero_point", "weight", "scale"};
  return k;
}

// NVFP4-like (ModelOpt and compressed-tensors): packed E2M1, E4M3 per 16, a global scale.
void Checker::nvfp4(const Group& gr, CheckpointTensor& out, Decoded& d, bool ct) {
  const char* data_name = ct ? "weight_packed" : "weight";
  const char* global_name = ct ? "weight_global_scale" : "weight_scale_2";
  const io::Tensor* w = gr.get(data_name);
  const io::Tensor* s = gr.get("weight_scale");
  const io::Tensor* gs = gr.get(global_name);
  out.format = "NVFP4: E2M1 codes packed two per byte, E4M3 scale per 16, F32 global scale";
  if (w == nullptr) return out.problems.push_back(::fmt::format("{} is missing", data_name));
  if (!is_2d(*w) || !w->is_byte_tensor())
    return out.problems.push_back(::fmt::format("{} is {} {}; the convention writes U8 [N, K/2] (two E2M1 codes per byte)",
                                              data_name, w->dtype, shape_text(w->shape)));
  const int64_t n = w->shape[0], k = w->shape[1] * 2;
  out.rows = n;
  out.cols = k;
  if (s == nullptr) return out.problems.push_back("weight_scale (the E4M3 block scales) is missing");
  const int64_t kb = (k + 15) / 16;
  if (s->dtype != "F8_E4M3")
    out.problems.push_back(::fmt::format(
        "weight_scale is {}; the convention writes F8_E4M3 (a loader that takes these bytes as E4M3 decodes other values)",
        s->dtype));
  if (!is_2d(*s) || s->shape[0] != n || s->shape[1] != kb)
    return out.problems.push_back(::fmt::format("weight_scale has shape {}; {} {} needs [{}, {}] (one scale per 16 elements)",
                                              shape_text(s->shape), data_name, shape_text(w->shape), n, kb));
  std::vector<uint8_t> sb;
  if (s->dtype == "F8_E4M3" || s->dtype == "U8") {
    sb = s->bytes;
  } else {
    const std::vector<float> f = floats(*s);
    if (f.empty()) return out.problems.push_back(::fmt::format("weight_scale dtype {} cannot hold block scales", s->dtype));
    int64_t bad = 0, first = -1;
    sb.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) {
      sb[i] = static_cast<uint8_t>(encode_e4m3(f[i]));
      if (!(e4m3(sb[i]) == f[i])) {
        if (first < 0) first = static_cast<int64_t>(i);
        ++bad;
      }
    }
    if (bad != 0)
      out.problems.push_back(::fmt::format("{} of {} block scales are not E4M3 values (out of E4M3's range or between its "
                                         "values); first [{}, {}] = {}",
                                         bad, f.size(), first / kb, first % kb, g(f[static_cast<size_t>(first)])));
  }
  float gval = NAN;
  if (gs == nullptr) {
    out.problems.push_back(::fmt::format("{} (the per-tensor {}) is missing: the block scales cannot be decoded", global_name,
                                       ct ? "global scale, 448 * 6 / amax" : "scale, amax / (6 * 448)"));
  } else {
    std::string why;
    if (auto v = scalar_f32(*gs, &why)) {
      gval = *v;
      if (gs->dtype != "F32") out.problems.push_back(::fmt::format("{} is {}; the convention writes F32", global_name, gs->dtype));
      if (ct && gs->shape != std::vector<int64_t>{1})
        out.problems.push_back(::fmt::format("weight_global_scale has shape {}; compressed-tensors writes [1]", shape_text(gs->shape)));
    } else {
      out.problems.push_back(::fmt::format("{} has {}", global_name, why));
    }
    if (gs->numel() == 1 && (gs->dtype == "F32" || gs->dtype == "BF16" || gs->dtype == "F16") &&
        (!std::isfinite(gval) || gval <= 0.0f)) {
      out.problems.push_back(::fmt::format("{} is {}: not a positive finite scale", global_name, g(gval)));
      gval = NAN;
    }
  }
  // Plausibility of the global scale's direction: ModelOpt's weight_scale_2 = amax / 2688, compressed-tensors'
  // weight_global_scale = 2688 / amax. Either read the other way makes every weight wrong by amax^2 / 2688^2.
  if (std::isfinite(gval)) {
    const float amax = ct ? 2688.0f / gval : gval * 2688.0f;
    d.global_amax = amax;
    out.notes.push_back(::fmt::format("{} = {}: global amax {}", global_name, g(gval), g(amax)));
    if (ct && gval < 1.0f)
      out.problems.push_back(::fmt::format("weight_global_scale {} decodes to a weight amax of {} (2688 / weight_global_scale); "
                                         "a value below 1 looks like ModelOpt's weight_scale_2 (amax / 2688), not the "
                                         "reciprocal compressed-tensors stores",
                                         g(gval), g(amax)));
    if (!ct && gval > 1.0f)
      out.problems.push_back(::fmt::format("weight_scale_2 {} decodes to a weight amax of {} (2688 * weight_scale_2); a value "
                                         "above 1 looks like a reciprocal (compressed-tensors' 2688 / amax), not ModelOpt's "
                                         "amax / 2688",
                                         g(gval), g(amax)));
  }
  // Block scales: NaN, negative, zero.
  int64_t nan_count = 0, neg = 0, zero = 0, first_nan = -1, first_neg = -1, first_zero = -1;
  for (size_t i = 0; i < sb.size(); ++i) {
    const uint8_t b = sb[i];
    if (e4m3_nan(b)) {
      if (nan_count++ == 0) first_nan = static_cast<int64_t>(i);
    } else if ((b & 0x80u) != 0 && b != 0x80u) {
      if (neg++ == 0) first_neg = static_cast<int64_t>(i);
    } else if ((b & 0x7Fu) == 0) {
      if (zero++ == 0) first_zero = static_cast<int64_t>(i);
    }
  }
  if (nan_count != 0)
    out.problems.push_back(::fmt::format("{} of {} block scales are NaN (E4M3 0x7F/0xFF); first at block [{}, {}]", nan_count,
                                       sb.size(), first_nan / kb, first_nan % kb));
  if (neg != 0)
    out.problems.push_back(::fmt::format("{} block scales are negative (sign bit set); first at block [{}, {}] = 0x{:02x}", neg,
                                       first_neg / kb, first_neg % kb, sb[static_cast<size_t>(first_neg)]));
  if (zero != 0) {
    // A zero scale zeroes its block whatever its codes hold; neither tool writes one.
    int64_t nonzero_codes = 0;
    for (int64_t i = 0; i < n * kb; ++i) {
      if ((sb[static_cast<size_t>(i)] & 0x7Fu) != 0) continue;
      const int64_t r = i / kb, c0 = (i % kb) * 16;
      for (int64_t c = c0; c < std::min(c0 + 16, k); ++c)
        if (((w->bytes[static_cast<size_t>(r * (k / 2) + c / 2)] >> (4 * (c & 1))) & 7u) != 0) ++nonzero_codes;
    }
    out.problems.push_back(::fmt::format(
        "{} block scales are zero (first at block [{}, {}]; {} nonzero codes under them decode to 0); {}", zero,
        first_zero / kb, first_zero % kb, nonzero_codes,
        ct ? "compressed-tensors replaces a zero scale by E4M3's eps (0.125)"
           : "ModelOpt clamps block scales to at least 2^-9 and gives an all-zero block the scale 1.0"));
  }
  // The largest block scale: amax / (6 * global decode scale) = 448 for the block holding the (group) amax.
  uint8_t maxb = 0;
  for (uint8_t b : sb)
    if (!e4m3_nan(b) && (b & 0x80u) == 0) maxb = std::max(maxb, b);
  d.scale_bytes = sb;
  out.notes.push_back(::fmt::format("largest block scale {} (0x{:02x})", g(e4m3(maxb)), maxb));
  if (!std::isfinite(gval)) return;
  // Decode.
  const float dec = ct ? 1.0f / gval : gval;
  d.values.assign(static_cast<size_t>(n * k), 0.0f);
  d.swapped.assign(static_cast<size_t>(n * k), 0.0f);
  d.block_scale.assign(static_cast<size_t>(n * k), 0.0f);
  d.codes = w->bytes;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t byte = w->bytes[static_cast<size_t>(r * (k / 2) + c / 2)];
      const uint8_t sbyte = sb[static_cast<size_t>(r * kb + c / 16)];
      const float f = ct ? e4m3(sbyte) / gval : e4m3(sbyte) * dec;
      const size_t i = static_cast<size_t>(r * k + c);
      d.block_scale[i] = f;
      d.values[i] = e2m1(static_cast<uint8_t>(byte >> (4 * (c & 1)))) * f;
      d.swapped[i] = e2m1(static_cast<uint8_t>(byte >> (4 * (1 - (c & 1))))) * f;
    }
  d.kind = 4;
  d.ok = true;
}

// MXFP4 (compressed-tensors): packed E2M1, E8M0 exponent per 32.
void Checker::mxfp4(const Group& gr, CheckpointTensor& out, Decoded& d, bool v4) {
  const std::string data_name = v4 ? "weight" : "weight_packed", scale_name = v4 ? "scale" : "weight_scale";
  const io::Tensor* w = gr.get(data_name);
  const io::Tensor* s = gr.get(scale_name);
  out.format = "MXFP4: E2M1 codes packed two per byte, E8M0 scale per 32";
  if (w == nullptr) return out.problems.push_back(data_name + " is missing");
  if (!is_2d(*w) || !(w->is_byte_tensor() || w->dtype == "I8"))
    return out.problems.push_back(::fmt::format("{} is {} {}; the convention writes {} [N, K/2]", data_name, w->dtype,
                                                shape_text(w->shape), v4 ? "I8" : "U8"));
  if (v4 && s != nullptr && !s->is_byte_tensor()) {
    std::string hint;
    const std::vector<float> f = floats(*s);
    if (!f.empty() && std::all_of(f.begin(), f.end(), [](float v) { return v >= 0 && v <= 255 && v == std::floor(v); }))
      hint = " (these values are whole numbers in [0, 255]: E8M0 exponent bytes stored as numbers, e.g. 120 for 2^-7, "
             "vLLM #51946's 1e40 misreading)";
    return out.problems.push_back(::fmt::format("scale is {}; DeepSeek-V4 writes F8_E8M0 (value 2^(byte - 127)){}", s->dtype, hint));
  }
  const int64_t n = w->shape[0], k = w->shape[1] * 2, kb = (k + 31) / 32;
  out.rows = n;
  out.cols = k;
  if (s == nullptr) return out.problems.push_back(scale_name + " (the E8M0 block exponents) is missing");
  if (!s->is_byte_tensor())
    return out.problems.push_back(::fmt::format("weight_scale is {}; compressed-tensors writes U8 E8M0 exponents (2^(e - 127))", s->dtype));
  if (!is_2d(*s) || s->shape[0] != n || s->shape[1] != kb)
    return out.problems.push_back(::fmt::format("{} has shape {}; {} {} needs [{}, {}] (one exponent per 32)", scale_name,
                                              shape_text(s->shape), data_name, shape_text(w->shape), n, kb));
  int64_t nan_count = 0, first = -1;
  for (size_t i = 0; i < s->bytes.size(); ++i)
    if (s->bytes[i] == 0xFF && nan_count++ == 0) first = static_cast<int64_t>(i);
  if (nan_count != 0)
    out.problems.push_back(::fmt::format("{} block exponents are 0xFF (E8M0 NaN); first at block [{}, {}]", nan_count, first / kb, first % kb));
  d.values.assign(static_cast<size_t>(n * k), 0.0f);
  d.swapped.assign(static_cast<size_t>(n * k), 0.0f);
  d.block_scale.assign(static_cast<size_t>(n * k), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t byte = w->bytes[static_cast<size_t>(r * (k / 2) + c / 2)];
      const float f = e8m0(s->bytes[static_cast<size_t>(r * kb + c / 32)]);
      const size_t i = static_cast<size_t>(r * k + c);
      d.block_scale[i] = f;
      d.values[i] = e2m1(static_cast<uint8_t>(byte >> (4 * (c & 1)))) * f;
      d.swapped[i] = e2m1(static_cast<uint8_t>(byte >> (4 * (1 - (c & 1))))) * f;
    }
  d.codes = w->bytes;
  d.scale_bytes = s->bytes;
  d.mx = true;
  d.kind = 4;
  d.ok = true;
}

// FP8 E4M3 weights with F32 scales: per tensor, per channel or per 128x128 block.
void Checker::fp8(const Group& gr, CheckpointTensor& out, Decoded& d, const std::string& scale_name, const std::string& layout_hint) {
  const io::Tensor* w = gr.get("weight");
  const io::Tensor* s = gr.get(scale_name);
  if (w == nullptr) return out.problems.push_back("weight is missing");
  if (!is_2d(*w) || !w->is_byte_tensor())
    return out.problems.push_back(::fmt::format("weight is {} {}; the convention writes F8_E4M3 [N, K]", w->dtype, shape_text(w->shape)));
  if (w->dtype != "F8_E4M3") out.problems.push_back(::fmt::format("weight is {}; the convention writes F8_E4M3", w->dtype));
  const int64_t n = w->shape[0], k = w->shape[1];
  out.rows = n;
  out.cols = k;
  if (s == nullptr) return out.problems.push_back(::fmt::format("{} is missing: the FP8 codes cannot be decoded", scale_name));
  const bool e8m0_scales = scale_name == "scale";  // DeepSeek-V4: F8_E8M0 per 128x128 tile
  std::vector<float> sv;
  if (e8m0_scales && s->is_byte_tensor()) {
    for (uint8_t b : s->bytes) sv.push_back(e8m0(b));
  } else {
    sv = floats(*s);
    if (e8m0_scales) {
      std::string hint;
      if (!sv.empty() && std::all_of(sv.begin(), sv.end(), [](float v) { return v >= 0 && v <= 255 && v == std::floor(v); }))
        hint = " (these values are whole numbers in [0, 255]: E8M0 exponent bytes stored as numbers, e.g. 120 for 2^-7, "
               "vLLM #51946's 1e40 misreading)";
      out.problems.push_back(::fmt::format("scale is {}; DeepSeek-V4 writes F8_E8M0 (value 2^(byte - 127)){}", s->dtype, hint));
      if (sv.empty()) return;
    }
  }
  if (sv.empty()) return out.problems.push_back(::fmt::format("{} is {}; the convention writes F32", scale_name, s->dtype));
  if (s->dtype != "F32" && scale_name != "weight_scale" && !e8m0_scales)
    out.problems.push_back(::fmt::format("{} is {}; the convention writes F32", scale_name, s->dtype));
  const int64_t nb = (n + 127) / 128, kb = (k + 127) / 128;
  std::string layout;
  if (s->numel() == 1 && layout_hint != "block128") {
    layout = "tensor";
  } else if (is_2d(*s) && s->shape[0] == nb && s->shape[1] == kb && layout_hint != "channel") {
    layout = "block128";
  } else if (s->numel() == n && (s->shape.size() == 1 || (is_2d(*s) && s->shape[1] == 1)) && layout_hint != "block128") {
    layout = "channel";
  } else {
    return out.problems.push_back(::fmt::format("{} has shape {}; weight {} needs {}", scale_name, shape_text(s->shape),
                                              shape_text(w->shape),
                                              layout_hint == "block128" ? ::fmt::format("[{}, {}] (one scale per 128x128 block)", nb, kb)
                                                                        : std::string("[1] (tensor), [N, 1] (channel) or [ceil(N/128), ceil(K/128)] (block)")));
  }
  if (layout_hint == "channel" && layout != "channel")  // compressed-tensors' strategy channel: weight_scale [N, 1]
    out.problems.push_back(::fmt::format("{} has shape {} (one scale per {}); the quantization_config's strategy channel writes "
                                         "[{}, 1], one scale per output row",
                                         scale_name, shape_text(s->shape), layout == "tensor" ? "tensor" : "128x128 block", n));
  d.scale_layout = layout;
  d.scale_f32 = sv;
  out.format = ::fmt::format("FP8 E4M3 codes, F32 scale per {}", layout == "block128" ? "128x128 block" : layout);
  auto scale_at = [&](int64_t r, int64_t c) -> float {
    if (layout == "tensor") return sv[0];
    if (layout == "channel") return sv[static_cast<size_t>(r)];
    return sv[static_cast<size_t>((r / 128) * kb + c / 128)];
  };
  auto scale_index_text = [&](size_t i) {
    if (layout == "tensor") return std::string("the tensor scale");
    if (layout == "channel") return ::fmt::format("channel {}", i);
    return ::fmt::format("block [{}, {}]", i / static_cast<size_t>(kb), i % static_cast<size_t>(kb));
  };
  int64_t bad = 0;
  size_t first = 0;
  int64_t zero = 0;
  size_t first_zero = 0;
  for (size_t i = 0; i < sv.size(); ++i) {
    if (!std::isfinite(sv[i]) || sv[i] < 0.0f) {
      if (bad++ == 0) first = i;
    } else if (sv[i] == 0.0f) {
      if (zero++ == 0) first_zero = i;
    }
  }
  if (bad != 0)
    out.problems.push_back(::fmt::format("{} of {} {} values are NaN, infinite or negative; first: {} = {}", bad, sv.size(),
                                       scale_name, scale_index_text(first), g(sv[first])));
  if (zero != 0)
    out.problems.push_back(::fmt::format("{} {} values are zero (first: {}): every code under them decodes to 0", zero, scale_name,
                                       scale_index_text(first_zero)));
  // Codes: NaN bytes, and the largest |code| under each scale (amax / 448 puts the block's amax at 448).
  std::vector<float> maxcode(sv.size(), 0.0f);
  int64_t nan_codes = 0, first_nan = -1;
  d.values.assign(static_cast<size_t>(n * k), 0.0f);
  d.block_scale.assign(static_cast<size_t>(n * k), 0.0f);
  d.codes = w->bytes;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const size_t i = static_cast<size_t>(r * k + c);
      const uint8_t b = w->bytes[i];
      if (e4m3_nan(b)) {
        if (nan_codes++ == 0) first_nan = static_cast<int64_t>(i);
        continue;
      }
      const size_t si = layout == "tensor" ? 0 : layout == "channel" ? static_cast<size_t>(r)
                                                                      : static_cast<size_t>((r / 128) * kb + c / 128);
      maxcode[si] = std::max(maxcode[si], std::fabs(e4m3(b)));
      d.block_scale[i] = scale_at(r, c);
      d.values[i] = e4m3(b) * scale_at(r, c);
    }
  if (nan_codes != 0)
    out.problems.push_back(::fmt::format("{} weight codes are E4M3 NaN (0x7F/0xFF); first at [{}, {}]", nan_codes, first_nan / k, first_nan % k));
  int64_t under = 0;
  size_t first_under = 0;
  for (size_t i = 0; i < sv.size(); ++i)
    if (sv[i] > 0.0f && std::isfinite(sv[i]) && maxcode[i] != 0.0f &&
        (e8m0_scales ? maxcode[i] < 224.0f : maxcode[i] != 448.0f))
      if (under++ == 0) first_under = i;
  if (under != 0 && e8m0_scales)
    out.problems.push_back(::fmt::format("{} of {} E8M0 scales are more than amax / 448 rounded up to a power of two (their "
                                         "block's largest |code| is below 224); first: {} has largest |code| {}, scale {}",
                                         under, sv.size(), scale_index_text(first_under), g(maxcode[first_under]), g(sv[first_under])));
  else if (under != 0 && (layout != "tensor" || !fused_member(gr.base)))  // fused projections share a tensor scale only
    out.problems.push_back(::fmt::format("{} of {} scales do not put their block's largest code at 448 (scale = amax / 448 does); "
                                       "first: {} has largest |code| {}, scale {}",
                                       under, sv.size(), scale_index_text(first_under), g(maxcode[first_under]), g(sv[first_under])));
  d.kind = 8;
  d.ok = true;
}

bool Checker::fused_member(const std::string& base) {
  const std::string leaf = base.substr(base.rfind('.') + 1);
  for (const auto& set : fused_sets())
    for (const auto& m : set)
      if (leaf == m) return true;
  return false;
}

}  // namespace qtc::conformance::ckpt
