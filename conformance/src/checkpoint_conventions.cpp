/// \file checkpoint_conventions.cpp
/// \brief Model checkpoints in the ModelOpt, compressed-tensors and DeepSeek-V3 conventions: detection, decoding,
///        consistency checks and the optional comparison with high-precision weights (checkpoint_conventions.hpp).
#include "qtc/checkpoint_conventions.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe.hpp"

namespace qtc::conformance {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::array<float, 8> kE2M1 = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
float e2m1(uint8_t nibble) {
  const float v = kE2M1[nibble & 7u];
  return (nibble & 8u) != 0 ? -v : v;
}
float e4m3(uint8_t b) { return kE4M3Table[b]; }
bool e4m3_nan(uint8_t b) { return (b & 0x7Fu) == 0x7Fu; }
float e8m0(uint8_t b) { return b == 0xFF ? NAN : std::ldexp(1.0f, static_cast<int>(b) - 127); }

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

bool is_2d(const io::Tensor& t) { return t.shape.size() == 2; }

// Fused projections that inference engines load into one GEMM with one global (per-tensor) scale.
const std::vector<std::vector<std::string>>& fused_sets() {
  static const std::vector<std::vector<std::string>> k = {
      {"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"}, {"w1", "w3"}};
  return k;
}

/// The decoded weight of one tensor and what the comparison with the reference needs.
struct Decoded {
  bool ok = false;
  std::vector<float> values;       ///< [N, K] decoded
  std::vector<float> block_scale;  ///< per element: the factor its code was multiplied by
  std::vector<float> swapped;      ///< packed formats: the values decoded with the nibbles the other way round
  int kind = 0;                    ///< 4: E2M1 codes, 8: E4M3 codes
  float global_amax = 0.0f;        ///< NVFP4: amax the global scale stands for (for quantize_with_amax)
  std::vector<uint8_t> codes;      ///< data bytes as stored
  std::vector<uint8_t> scale_bytes;  ///< NVFP4 E4M3 scale bytes
  std::vector<float> scale_f32;      ///< FP8 F32 scales (tensor: 1; block: [nb, kb]; channel: [N])
  std::string scale_layout;          ///< "tensor", "channel", "block128"
};

struct Group {
  std::string base;
  std::map<std::string, const io::Tensor*> parts;  ///< suffix ("weight", "weight_scale", ...) -> tensor
  const io::Tensor* get(const std::string& s) const {
    auto it = parts.find(s);
    return it == parts.end() ? nullptr : it->second;
  }
};

const std::vector<std::string>& suffixes() {
  static const std::vector<std::string> k = {"weight_global_scale", "input_global_scale", "weight_scale_inv",
                                             "weight_scale_2", "weight_packed", "weight_scale", "input_scale",
                                             "weight_zero_point", "weight", "scale"};
  return k;
}

struct Checker {
  const CheckpointOptions& opts;
  std::string quant_method, ct_format, config_algo, ct_strategy;
  std::map<std::string, const io::Tensor*> reference;

  // NVFP4-like (ModelOpt and compressed-tensors): packed E2M1, E4M3 per 16, a global scale.
  void nvfp4(const Group& gr, CheckpointTensor& out, Decoded& d, bool ct) {
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
  void mxfp4(const Group& gr, CheckpointTensor& out, Decoded& d, bool v4 = false) {
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
    d.kind = 4;
    d.ok = true;
  }

  // FP8 E4M3 weights with F32 scales: per tensor, per channel or per 128x128 block.
  void fp8(const Group& gr, CheckpointTensor& out, Decoded& d, const std::string& scale_name, const std::string& layout_hint) {
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
    else if (under != 0 && !fused_member(gr.base))
      out.problems.push_back(::fmt::format("{} of {} scales do not put their block's largest code at 448 (scale = amax / 448 does); "
                                         "first: {} has largest |code| {}, scale {}",
                                         under, sv.size(), scale_index_text(first_under), g(maxcode[first_under]), g(sv[first_under])));
    d.kind = 8;
    d.ok = true;
  }

  static bool fused_member(const std::string& base) {
    const std::string leaf = base.substr(base.rfind('.') + 1);
    for (const auto& set : fused_sets())
      for (const auto& m : set)
        if (leaf == m) return true;
    return false;
  }

  // The decoded weight against the high-precision one: within the rounding bound, nibble order, and the
  // codes and scales of qtc's quantization in the given profile.
  void compare(const Group& gr, CheckpointTensor& out, const Decoded& d, const std::string& conv) {
    auto it = reference.find(gr.base + ".weight");
    if (it == reference.end()) {
      out.notes.push_back("no reference weight of this name");
      return;
    }
    const io::Tensor& rt = *it->second;
    const std::vector<float> ref = floats(rt);
    if (ref.empty() || !is_2d(rt) || rt.shape[0] != out.rows || rt.shape[1] != out.cols) {
      out.problems.push_back(::fmt::format("reference weight is {} {}; this tensor decodes to [{}, {}]", rt.dtype, shape_text(rt.shape),
                                         out.rows, out.cols));
      return;
    }
    // Rounding bound: half the gap between the format's neighbouring values at the element's scaled magnitude, or the
    // excess over the largest value (a scale rounded down saturates the block's largest element).
    auto half_gap = [&](float a) -> float {
      if (d.kind == 4) return a < 2.0f ? 0.25f : a < 4.0f ? 0.5f : 1.0f;
      if (a < 0.015625f) return std::ldexp(1.0f, -10);
      int e;
      std::frexp(a, &e);
      return std::ldexp(1.0f, e - 1 - 4);
    };
    const float maxv = d.kind == 4 ? 6.0f : 448.0f;
    auto violations = [&](const std::vector<float>& vals, int64_t* first) {
      int64_t count = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const float s = d.block_scale[i];
        if (!(s > 0.0f) || !std::isfinite(s)) continue;
        const float a = std::fabs(ref[i]) / s;
        const double bound = ((std::max(half_gap(std::min(a, maxv)), a - maxv) + a * 0x1p-22) * static_cast<double>(s)) * (1 + 1e-6) + 1e-30;
        if (!(std::fabs(static_cast<double>(vals[i]) - ref[i]) <= bound)) {
          if (count++ == 0) *first = static_cast<int64_t>(i);
        }
      }
      return count;
    };
    int64_t first = -1;
    const int64_t bad = violations(d.values, &first);
    // FP8 codes rounded twice, first to BF16 (w / scale computed in a BF16 tensor: a BF16 weight divided by a 0-dim F32
    // scale stays BF16 in PyTorch, as ModelOpt's FP8 export does), then to E4M3: each such code is
    // RN_e4m3(RN_bf16(w / scale)). Those are the tool's rounding, not a corrupt checkpoint: a note, with the count.
    int64_t double_rounded = 0;
    if (bad != 0 && d.kind == 8) {
      int64_t unexplained = 0, f3 = -1;
      for (size_t i = 0; i < ref.size(); ++i) {
        const float s = d.block_scale[i];
        if (!(s > 0.0f) || !std::isfinite(s)) continue;
        const float q = ref[i] / s;
        const float twice = e4m3(static_cast<uint8_t>(encode_e4m3(bf16_to_f32(f32_to_bf16(q)))));
        const float once = e4m3(static_cast<uint8_t>(encode_e4m3(q)));
        const float got = e4m3(d.codes[i]);
        if (got == once) continue;
        if (got == twice) {
          ++double_rounded;
        } else if (unexplained++ == 0) {
          f3 = static_cast<int64_t>(i);
        }
      }
      if (unexplained == 0) {
        out.notes.push_back(::fmt::format("{} of {} codes are rounded twice, to BF16 and then to E4M3 (w / scale held in BF16), "
                                          "not to the nearest E4M3 value; every other code is the nearest",
                                          double_rounded, ref.size()));
        compare_profile(gr, out, d, conv, ref);
        return;
      }
      (void)f3;
    }
    if (bad == 0) {
      out.notes.push_back("every decoded element is within the format's rounding bound of the reference");
    } else {
      std::string msg = ::fmt::format("{} of {} decoded elements are farther from the reference than the format's rounding allows; "
                                    "first at [{}, {}]: decoded {}, reference {}",
                                    bad, ref.size(), first / out.cols, first % out.cols, g(d.values[static_cast<size_t>(first)]),
                                    g(ref[static_cast<size_t>(first)]));
      if (!d.swapped.empty()) {
        int64_t f2 = -1;
        if (violations(d.swapped, &f2) == 0)
          msg += "; with the nibbles the other way round every element is within bounds: the checkpoint holds element 2j in "
                 "the high nibble of byte j, the convention puts it in the low nibble";
      }
      out.problems.push_back(msg);
    }
    compare_profile(gr, out, d, conv, ref);
  }

  void compare_profile(const Group& gr, CheckpointTensor& out, const Decoded& d, const std::string& conv, const std::vector<float>& ref) {
    (void)gr;
    std::map<std::string, std::string> md;
    if (d.kind == 4 && !d.scale_bytes.empty()) {
      md = {{"recipe", "nvfp4"}};
    } else if (d.kind == 8 && d.scale_layout == "tensor") {
      md = {{"recipe", "fp8_tensor"}};
    } else if (d.kind == 8 && d.scale_layout == "block128") {
      md = {{"recipe", "fp8_block"}, {"tile", "128x128"}};
      if (conv == "deepseek-v4 fp8") md["pow2_scales"] = "1";  // E8M0: 2^ceil(log2(amax / 448)) = qtc's pow2 scale_inv
    } else {
      out.notes.push_back(::fmt::format("no qtc recipe reproduces {} here: bit comparison not run", conv));
      return;
    }
    md["profile"] = opts.profile;
    Recipe r;
    try {
      r = Recipe::from_metadata(md);
      r.columnwise = false;
      HostMatrix x(DType::kF32, out.rows, out.cols);
      std::memcpy(x.bytes.data(), ref.data(), ref.size() * 4);
      QuantizedTensor q;
      if (r.is(RecipeKind::kNVFP4)) {
        q = ref::quantize_with_amax(x.view(), r, d.global_amax, d.global_amax);
      } else if (r.is(RecipeKind::kFP8Tensor)) {
        const float amax = d.scale_f32[0] * 448.0f;
        q = ref::quantize_with_amax(x.view(), r, amax, amax);
      } else {
        q = ref::quantize(x.view(), r);
      }
      const Plane& p = *q.rowwise;
      int64_t code_diff = 0, first_code = -1;
      const size_t nbytes = std::min(p.data.size(), d.codes.size());
      for (size_t i = 0; i < nbytes; ++i)
        if (p.data[i] != d.codes[i] && code_diff++ == 0) first_code = static_cast<int64_t>(i);
      int64_t scale_diff = 0, scale_total = 0;
      std::string first_scale;
      if (r.is(RecipeKind::kNVFP4)) {
        scale_total = static_cast<int64_t>(p.scale.bytes.size());
        for (size_t i = 0; i < p.scale.bytes.size() && i < d.scale_bytes.size(); ++i)
          if (p.scale.bytes[i] != d.scale_bytes[i] && scale_diff++ == 0)
            first_scale = ::fmt::format("block [{}, {}]: stored 0x{:02x} ({}), {} gives 0x{:02x} ({})", i / p.scale.cols, i % p.scale.cols,
                                      d.scale_bytes[i], g(e4m3(d.scale_bytes[i])), opts.profile, p.scale.bytes[i], g(e4m3(p.scale.bytes[i])));
      } else if (r.is(RecipeKind::kFP8Block)) {
        scale_total = p.scale.rows * p.scale.cols;
        for (int64_t i = 0; i < scale_total && i < static_cast<int64_t>(d.scale_f32.size()); ++i) {
          const float mine = p.scale.f32(i / p.scale.cols, i % p.scale.cols);
          if (std::bit_cast<uint32_t>(mine) != std::bit_cast<uint32_t>(d.scale_f32[static_cast<size_t>(i)]) && scale_diff++ == 0)
            first_scale = ::fmt::format("block [{}, {}]: stored {}, {} gives {}", i / p.scale.cols, i % p.scale.cols,
                                      g(d.scale_f32[static_cast<size_t>(i)]), opts.profile, g(mine));
        }
      } else {
        scale_total = 1;
        if (std::bit_cast<uint32_t>(q.scale_inv) != std::bit_cast<uint32_t>(d.scale_f32[0])) {
          scale_diff = 1;
          first_scale = ::fmt::format("stored {}, {} gives {}", g(d.scale_f32[0]), opts.profile, g(q.scale_inv));
        }
      }
      if (code_diff == 0 && scale_diff == 0) {
        out.notes.push_back(::fmt::format("codes and scales are bit for bit those of qtc {} profile {}", r.name(), opts.profile));
        return;
      }
      std::string msg = ::fmt::format("not bit for bit qtc {} profile {}: {} of {} data bytes and {} of {} scales differ", r.name(), opts.profile,
                                    code_diff, nbytes, scale_diff, scale_total);
      if (first_code >= 0)
        msg += ::fmt::format("; first data byte {}: stored 0x{:02x}, {} gives 0x{:02x}", first_code, d.codes[static_cast<size_t>(first_code)],
                           opts.profile, p.data[static_cast<size_t>(first_code)]);
      if (!first_scale.empty()) msg += "; first scale " + first_scale;
      (opts.profile_required ? out.problems : out.notes).push_back(msg);
    } catch (const std::exception& e) {
      out.problems.push_back(::fmt::format("comparison with profile '{}' could not run: {}", opts.profile, e.what()));
    }
  }
};

void check_fused(const std::map<std::string, Group>& groups, CheckpointReport& rep, std::map<std::string, size_t>& index_of) {
  // Sibling projections that engines fuse (q/k/v, gate/up) must share the global scale: engines load one.
  for (const auto& [base, gr] : groups) {
    const std::string parent = base.substr(0, base.rfind('.') + 1);
    const std::string leaf = base.substr(base.rfind('.') + 1);
    for (const auto& set : fused_sets()) {
      if (leaf != set[0]) continue;
      for (const char* gname : {"weight_scale_2", "weight_global_scale", "weight_scale"}) {
        std::vector<std::pair<std::string, float>> vals;
        std::vector<const Group*> members;
        for (const auto& m : set) {
          auto it = groups.find(parent + m);
          if (it == groups.end()) continue;
          const io::Tensor* t = it->second.get(gname);
          if (t == nullptr || t->numel() != 1) continue;
          auto ix0 = index_of.find(it->second.base);
          if (ix0 == index_of.end() || (rep.tensors[ix0->second].format.find("per tensor") == std::string::npos &&
                                            rep.tensors[ix0->second].format.find("NVFP4") == std::string::npos))
            continue;  // a block or channel scale of shape [1, 1] is no shared global scale
          std::string why;
          if (auto v = scalar_f32(*t, &why)) {
            vals.emplace_back(m, *v);
            members.push_back(&it->second);
          }
        }
        if (vals.size() < 2) continue;
        bool same = true;
        for (const auto& v : vals) same = same && std::bit_cast<uint32_t>(v.second) == std::bit_cast<uint32_t>(vals[0].second);
        std::string list;
        for (const auto& v : vals) list += ::fmt::format("{}{} {}", list.empty() ? "" : ", ", v.first, g(v.second));
        for (const Group* m : members) {
          auto ix = index_of.find(m->base);
          if (ix == index_of.end()) continue;
          CheckpointTensor& ct = rep.tensors[ix->second];
          if (!same)
            ct.problems.push_back(::fmt::format("fused projections {}{}: {} differ ({}); engines that fuse them into one GEMM "
                                              "load one {} for all",
                                              parent, ::fmt::format("{{{}}}", ::fmt::join(set, ",")), gname, list, gname));
          else
            ct.notes.push_back(::fmt::format("shares {} with its fused siblings ({})", gname, list));
        }
      }
    }
  }
}

}  // namespace

int CheckpointReport::failed() const {
  int n = 0;
  for (const auto& t : tensors) n += t.ok() ? 0 : 1;
  return n;
}

int CheckpointReport::exit_code() const { return !errors.empty() ? 2 : failed() != 0 ? 1 : 0; }

std::string CheckpointReport::text(bool verbose) const {
  std::string out;
  for (const auto& e : errors) out += ::fmt::format("ERROR {}: {}\n", path, e);
  for (const auto& t : tensors) {
    if (t.ok() && !verbose) continue;
    out += ::fmt::format("{} {}: {} ({}{})\n", t.ok() ? "OK  " : "FAIL", t.name, t.convention, t.format,
                       t.rows > 0 ? ::fmt::format(", [{}, {}]", t.rows, t.cols) : std::string());
    for (const auto& p : t.problems) out += "    problem: " + p + "\n";
    if (verbose)
      for (const auto& n : t.notes) out += "    " + n + "\n";
  }
  out += ::fmt::format("checkpoint {}{}: {} quantized tensors, {} with problems{}\n", path,
                     quant_method.empty() ? "" : " (" + quant_method + ")", tensors.size(), failed(),
                     errors.empty() ? "" : ::fmt::format(", {} errors", errors.size()));
  return out;
}

bool is_model_checkpoint(const std::filesystem::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return fs::exists(path / "config.json", ec) || fs::exists(path / "model.safetensors.index.json", ec);
  if (!fs::is_regular_file(path, ec) || path.extension() != ".safetensors") return false;
  try {
    const io::File f = io::read_file(path);
    if (f.metadata.count("recipe") != 0) return false;
    for (const auto& t : f.tensors)
      for (const char* s : {".weight_scale", ".weight_scale_2", ".weight_scale_inv", ".weight_packed", ".weight_global_scale"})
        if (t.name.size() > std::strlen(s) && t.name.ends_with(s)) return true;
  } catch (const std::exception&) {
  }
  return false;
}

std::vector<io::Tensor> read_checkpoint_tensors(const std::filesystem::path& path, std::string* config_json) {
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    QTC_CHECK(in.good(), "cannot open ", p.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  std::error_code ec;
  if (config_json != nullptr) config_json->clear();
  if (!fs::is_directory(path, ec)) return io::read_file(path).tensors;
  if (config_json != nullptr && fs::exists(path / "config.json", ec)) *config_json = slurp(path / "config.json");
  const fs::path index = path / "model.safetensors.index.json";
  if (!fs::exists(index, ec)) {
    QTC_CHECK(fs::exists(path / "model.safetensors", ec), path.string(),
              ": a checkpoint folder holds model.safetensors or model.safetensors.index.json; it has neither");
    return io::read_file(path / "model.safetensors").tensors;
  }
  json j;
  try {
    j = json::parse(slurp(index));
  } catch (const json::exception& e) {
    throw Error(::fmt::format("{}: not valid JSON: {}", index.string(), e.what()));
  }
  QTC_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), index.string(),
            ": the index needs an object 'weight_map' (tensor name -> shard file)");
  std::map<std::string, std::set<std::string>> wanted;  // shard -> names
  for (const auto& [name, shard] : j["weight_map"].items()) {
    QTC_CHECK(shard.is_string(), index.string(), ": weight_map['", name, "'] is not a file name");
    const std::string s = shard.get<std::string>();
    QTC_CHECK(!s.empty() && s.find('/') == std::string::npos && s.find('\\') == std::string::npos && s != "." && s != "..",
              index.string(), ": weight_map['", name, "'] = '", s, "' is not a file name in the checkpoint folder");
    wanted[s].insert(name);
  }
  std::vector<io::Tensor> out;
  std::set<std::string> seen;
  for (const auto& [shard, names] : wanted) {
    const fs::path sp = path / shard;
    QTC_CHECK(fs::exists(sp, ec), index.string(), " names shard ", shard, ", which does not exist (", names.size(), " tensors)");
    io::File f = io::read_file(sp);
    for (const auto& name : names)
      QTC_CHECK(f.find(name) != nullptr, index.string(), " lists '", name, "' in ", shard, ", which does not hold it");
    for (auto& t : f.tensors) {
      if (names.count(t.name) == 0) continue;  // a tensor the index does not list is not part of the model
      QTC_CHECK(seen.insert(t.name).second, "tensor '", t.name, "' is in two shards");
      out.push_back(std::move(t));
    }
  }
  return out;
}

CheckpointReport check_checkpoint_tensors(const std::vector<io::Tensor>& tensors, const std::string& config_json,
                                          const std::vector<io::Tensor>& reference, const CheckpointOptions& opts,
                                          const std::string& source) {
  CheckpointReport rep;
  rep.path = source;
  Checker ck{opts, "", "", "", "", {}};
  if (!config_json.empty()) {
    try {
      const json c = json::parse(config_json);
      if (c.is_object() && c.contains("quantization_config") && c["quantization_config"].is_object()) {
        const json& q = c["quantization_config"];
        if (q.contains("quant_method") && q["quant_method"].is_string()) ck.quant_method = q["quant_method"].get<std::string>();
        if (q.contains("format") && q["format"].is_string()) ck.ct_format = q["format"].get<std::string>();
        if (q.contains("quant_algo") && q["quant_algo"].is_string()) ck.config_algo = q["quant_algo"].get<std::string>();
        if (q.contains("config_groups") && q["config_groups"].is_object())
          for (const auto& [gname, grp] : q["config_groups"].items())
            if (grp.is_object() && grp.contains("weights") && grp["weights"].is_object() && grp["weights"].contains("strategy") &&
                grp["weights"]["strategy"].is_string())
              ck.ct_strategy = grp["weights"]["strategy"].get<std::string>();
      }
    } catch (const json::exception& e) {
      rep.errors.push_back(::fmt::format("config.json is not valid JSON: {}", e.what()));
    }
  }
  rep.quant_method = ck.quant_method;
  for (const auto& t : reference) ck.reference[t.name] = &t;

  // Tensors held in memory did not pass the safetensors reader: their bytes must match dtype and shape.
  for (const auto& t : tensors) {
    const auto es = io::dtype_size(t.dtype);
    int64_t n = 1;
    bool fits = es.has_value();
    for (int64_t d : t.shape) {
      if (d < 0 || (d > 0 && n > (int64_t{1} << 50) / d)) fits = false;
      else n *= d;
    }
    if (!fits || static_cast<uint64_t>(n) * *es != t.bytes.size()) {
      rep.errors.push_back(::fmt::format("tensor '{}': {} bytes do not hold dtype {} shape {}", t.name, t.bytes.size(), t.dtype,
                                         shape_text(t.shape)));
      return rep;
    }
  }
  std::map<std::string, Group> groups;
  for (const auto& t : tensors) {
    for (const auto& s : suffixes()) {
      if (t.name.size() > s.size() + 1 && t.name.ends_with("." + s)) {
        const std::string base = t.name.substr(0, t.name.size() - s.size() - 1);
        groups[base].base = base;
        groups[base].parts[s] = &t;
        break;
      }
    }
  }
  std::map<std::string, size_t> index_of;
  for (const auto& [base, gr] : groups) {
    const io::Tensor* w = gr.get("weight");
    const bool quantized = gr.get("weight_packed") != nullptr || gr.get("weight_scale") != nullptr ||
                           gr.get("weight_scale_inv") != nullptr || gr.get("weight_scale_2") != nullptr ||
                           gr.get("weight_global_scale") != nullptr || (gr.get("scale") != nullptr && w != nullptr) ||
                           (w != nullptr && (w->dtype == "F8_E4M3" || (w->dtype == "U8" && ck.quant_method == "modelopt")));
    if (!quantized) continue;
    CheckpointTensor out;
    out.name = base;
    Decoded d;
    const io::Tensor* ws = gr.get("weight_scale");
    const bool packed_u8 = w != nullptr && w->dtype == "U8";
    try {
      if (gr.get("weight_packed") != nullptr) {
        const bool mx = ck.ct_format == "mxfp4-pack-quantized" ||
                        (gr.get("weight_global_scale") == nullptr && ws != nullptr && ws->dtype == "U8" && ck.ct_format != "nvfp4-pack-quantized");
        out.convention = mx ? "compressed-tensors mxfp4" : "compressed-tensors nvfp4";
        if (mx) ck.mxfp4(gr, out, d); else ck.nvfp4(gr, out, d, true);
      } else if (gr.get("scale") != nullptr && w != nullptr) {
        // DeepSeek-V4: `.scale` siblings; F8_E4M3 weights per 128x128 tile, routed experts packed E2M1 per 32.
        if (w->dtype == "F8_E4M3") {
          out.convention = "deepseek-v4 fp8";
          ck.fp8(gr, out, d, "scale", "block128");
          out.format = "FP8 E4M3 codes, E8M0 scale per 128x128 block";
        } else {
          out.convention = "deepseek-v4 mxfp4 expert";
          ck.mxfp4(gr, out, d, true);
        }
      } else if (gr.get("weight_scale_inv") != nullptr) {
        out.convention = "deepseek-v3 fp8";
        ck.fp8(gr, out, d, "weight_scale_inv", "block128");
      } else if (gr.get("weight_scale_2") != nullptr || (packed_u8 && ck.quant_method == "modelopt") ||
                 (packed_u8 && ws != nullptr && ws->dtype == "F8_E4M3")) {
        out.convention = "modelopt nvfp4";
        ck.nvfp4(gr, out, d, false);
      } else if (w != nullptr && gr.get("weight_global_scale") != nullptr) {
        out.convention = "compressed-tensors nvfp4";
        out.problems.push_back("weight_global_scale next to an unpacked 'weight': compressed-tensors writes the codes as weight_packed");
      } else {
        const bool ct = ck.quant_method == "compressed-tensors";
        out.convention = ct ? "compressed-tensors fp8" : ck.quant_method == "modelopt" ? "modelopt fp8"
                                                     : ck.quant_method == "fp8"       ? "fp8 (quant_method fp8)"
                                                                                      : "fp8 (modelopt or compressed-tensors)";
        const std::string hint = ck.quant_method == "modelopt" ? "tensor"
                                 : ck.ct_strategy == "block"      ? "block128"
                                 : ck.ct_strategy == "channel"    ? "channel"
                                 : ck.ct_strategy == "tensor"     ? "tensor"
                                                                  : "";
        if (ck.ct_strategy == "block") out.convention = "compressed-tensors fp8 block";
        ck.fp8(gr, out, d, "weight_scale", hint);
        if (ck.quant_method == "modelopt" && ws != nullptr && ws->numel() != 1)
          out.problems.push_back(::fmt::format("weight_scale has shape {}; ModelOpt FP8 writes one F32 scale (amax / 448)", shape_text(ws->shape)));
      }
      if (ck.quant_method == "modelopt" && out.convention.starts_with("modelopt") && gr.get("input_scale") != nullptr) {
        std::string why;
        const auto v = scalar_f32(*gr.get("input_scale"), &why);
        if (!v) out.problems.push_back("input_scale has " + why);
        else if (!std::isfinite(*v) || *v <= 0.0f) out.problems.push_back(::fmt::format("input_scale is {}: not a positive finite scale", g(*v)));
      }
      if (d.ok && !reference.empty()) ck.compare(gr, out, d, out.convention);
    } catch (const std::exception& e) {
      out.problems.push_back(::fmt::format("could not be checked: {}", e.what()));
    }
    index_of[base] = rep.tensors.size();
    rep.tensors.push_back(std::move(out));
  }
  check_fused(groups, rep, index_of);
  // The group amax: the largest block scale of a tensor (NVFP4) or of its fused group must be 448 (or within one E4M3
  // step of it: the block scale is amax / 6 / global scale rounded to E4M3).
  for (auto& t : rep.tensors) {
    if (!t.convention.ends_with("nvfp4")) continue;
    const io::Tensor* s = groups[t.name].get("weight_scale");
    if (s == nullptr || !s->is_byte_tensor()) continue;
    std::string leaf = t.name.substr(t.name.rfind('.') + 1), parent = t.name.substr(0, t.name.rfind('.') + 1);
    std::vector<std::string> members{t.name};
    for (const auto& set : fused_sets())
      if (std::find(set.begin(), set.end(), leaf) != set.end()) {
        members.clear();
        for (const auto& m : set)
          if (groups.count(parent + m) != 0) members.push_back(parent + m);
      }
    uint8_t maxb = 0;
    for (const auto& m : members)
      if (const io::Tensor* ms = groups[m].get("weight_scale"); ms != nullptr && ms->is_byte_tensor())
        for (uint8_t b : ms->bytes)
          if (!e4m3_nan(b) && (b & 0x80u) == 0) maxb = std::max(maxb, b);
    if (maxb != 0x7E && maxb != 0x7D && maxb != 0) {
      t.problems.push_back(::fmt::format("the largest block scale of {} is {} (0x{:02x}), not 448: the global scale is not the "
                                       "{} of these weights' amax",
                                       members.size() > 1 ? "its fused group" : "the tensor", g(e4m3(maxb)), maxb,
                                       t.convention.starts_with("modelopt") ? "amax / 2688 (weight_scale_2)" : "2688 / amax (weight_global_scale)"));
    }
  }
  return rep;
}

CheckpointReport check_checkpoint(const std::filesystem::path& path, const CheckpointOptions& opts) {
  CheckpointReport rep;
  rep.path = path.string();
  std::vector<io::Tensor> tensors, ref;
  std::string config;
  try {
    tensors = read_checkpoint_tensors(path, &config);
  } catch (const std::exception& e) {
    rep.errors.push_back(e.what());
    return rep;
  }
  if (!opts.reference.empty()) {
    try {
      ref = read_checkpoint_tensors(opts.reference, nullptr);
    } catch (const std::exception& e) {
      rep.errors.push_back(::fmt::format("reference {}: {}", opts.reference, e.what()));
      return rep;
    }
  }
  rep = check_checkpoint_tensors(tensors, config, ref, opts, path.string());
  if (rep.tensors.empty() && rep.errors.empty())
    rep.errors.push_back("no quantized tensor found (no weight_scale, weight_scale_2, weight_scale_inv, weight_packed or "
                         "weight_global_scale next to a weight)");
  return rep;
}

}  // namespace qtc::conformance
