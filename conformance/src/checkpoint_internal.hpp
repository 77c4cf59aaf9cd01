/// \file checkpoint_internal.hpp
/// \brief What the checkpoint-convention sources share (checkpoint_conventions.hpp): the scalar decoders, a
///        quantized weight's tensors (Group), its decoded values (Decoded) and the per-convention checks (Checker).
///        checkpoint_formats.cpp decodes and checks each convention's tensors, checkpoint_compare.cpp compares them
///        with high-precision weights and checks fused projections, checkpoint_conventions.cpp detects, reads and
///        reports.
#pragma once
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qtc/checkpoint_conventions.hpp"
#include "qtc/codec.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::conformance::ckpt {

using json = nlohmann::json;

inline constexpr std::array<float, 8> kE2M1 = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
inline float e2m1(uint8_t nibble) {
  const float v = kE2M1[nibble & 7u];
  return (nibble & 8u) != 0 ? -v : v;
}
inline float e4m3(uint8_t b) { return kE4M3Table[b]; }
inline bool e4m3_nan(uint8_t b) { return (b & 0x7Fu) == 0x7Fu; }
inline float e8m0(uint8_t b) { return b == 0xFF ? NAN : std::ldexp(1.0f, static_cast<int>(b) - 127); }
inline bool is_2d(const io::Tensor& t) { return t.shape.size() == 2; }

std::string shape_text(const std::vector<int64_t>& s);
std::string g(double v);
/// A scalar or [1] float tensor's value, or nullopt with the reason in *why.
std::optional<float> scalar_f32(const io::Tensor& t, std::string* why);
/// Every element of a float tensor (F32 / BF16 / F16) as float; empty when the dtype is none of those.
std::vector<float> floats(const io::Tensor& t);
/// Fused projections that inference engines load into one GEMM with one global (per-tensor) scale.
const std::vector<std::vector<std::string>>& fused_sets();
/// The tensor-name suffixes a quantized weight's tensors carry, longest match first.
const std::vector<std::string>& suffixes();

/// The decoded weight of one tensor and what the comparison with the reference needs.
struct Decoded {
  bool ok = false;
  std::vector<float> values;       ///< [N, K] decoded
  std::vector<float> block_scale;  ///< per element: the factor its code was multiplied by
  std::vector<float> swapped;      ///< packed formats: the values decoded with the nibbles the other way round
  int kind = 0;                    ///< 4: E2M1 codes, 8: E4M3 codes
  float global_amax = 0.0f;        ///< NVFP4: amax the global scale stands for (for quantize_with_amax)
  std::vector<uint8_t> codes;      ///< data bytes as stored
  std::vector<uint8_t> scale_bytes;  ///< NVFP4 E4M3 scale bytes, MXFP4 E8M0 scale bytes (see mx)
  bool mx = false;                   ///< MXFP4: E8M0 exponents per 32 (scale_bytes), no global scale
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

struct Checker {
  const CheckpointOptions& opts;
  std::string quant_method, ct_format, config_algo, ct_strategy;
  std::map<std::string, const io::Tensor*> reference;

  /// NVFP4-like (ModelOpt and compressed-tensors): packed E2M1, E4M3 per 16, a global scale.
  void nvfp4(const Group& gr, CheckpointTensor& out, Decoded& d, bool ct);
  /// MXFP4 (compressed-tensors; DeepSeek-V4's experts with `v4`): packed E2M1, E8M0 exponent per 32.
  void mxfp4(const Group& gr, CheckpointTensor& out, Decoded& d, bool v4 = false);
  /// FP8 E4M3 weights with F32 scales: per tensor, per channel or per 128x128 block (DeepSeek-V4: E8M0 per tile).
  void fp8(const Group& gr, CheckpointTensor& out, Decoded& d, const std::string& scale_name, const std::string& layout_hint);
  static bool fused_member(const std::string& base);
  /// The decoded weight against the high-precision one: within the rounding bound, nibble order, and the codes and
  /// scales of qtc's quantization in the given profile.
  void compare(const Group& gr, CheckpointTensor& out, const Decoded& d, const std::string& conv);
  void compare_profile(const Group& gr, CheckpointTensor& out, const Decoded& d, const std::string& conv, const std::vector<float>& ref);
};

/// Sibling projections that engines fuse (q/k/v, gate/up) must share the global scale: engines load one.
void check_fused(const std::map<std::string, Group>& groups, CheckpointReport& rep, std::map<std::string, size_t>& index_of);

}  // namespace qtc::conformance::ckpt
