/// \file checkpoint_conventions.hpp
/// \brief Model checkpoints as the quantization tools write them (issue 26): each quantized tensor's convention
///        detected from its names, dtypes and the config.json quantization_config, decoded and checked for
///        consistency in the convention's own words; optionally compared with the high-precision weights.
///
/// Conventions (what each tool's export code writes; the facts come from the tools' code):
///  * ModelOpt NVFP4 (modelopt/torch/export, quant_utils.py + nvfp4_tensor.py): `weight` U8 [N, K/2] packed E2M1,
///    element 2j in the low nibble of byte j; `weight_scale` F8_E4M3 [N, K/16] = block amax / (6 * weight_scale_2)
///    clamped to [2^-9, 448] (an all-zero block gets 1.0: never a zero scale); `weight_scale_2` F32 scalar =
///    amax / (6 * 448); `input_scale` F32 scalar. Fused projections (q/k/v, gate/up) share one amax
///    (preprocess_linear_fusion), so their weight_scale_2 are equal and the largest block scale of the group is 448.
///  * ModelOpt FP8: `weight` F8_E4M3 [N, K], `weight_scale` F32 scalar = amax / 448, `input_scale`.
///  * compressed-tensors NVFP4 (nvfp4-pack-quantized): `weight_packed` U8 [N, K/2] (low nibble first),
///    `weight_scale` F8_E4M3 [N, K/16] = RN_e4m3(block amax / 6 * gs) (zero replaced by E4M3's eps 0.125),
///    `weight_global_scale` F32 [1] gs = 448 * 6 / amax (the reciprocal of ModelOpt's weight_scale_2); decoded
///    value = code * weight_scale / gs.
///  * compressed-tensors MXFP4 (mxfp4-pack-quantized): `weight_packed` U8 [N, K/2], `weight_scale` U8 [N, K/32]
///    E8M0 exponents (2^(e - 127)), no global scale; the exponent is round_to_power_2(block amax) - 2, the block amax
///    rounded to a power of two at E2M1's one mantissa bit (generate_mx_scales): torchao's EVEN rule, so the bit
///    comparison runs qtc mxfp4 scale_rule even (a profile that defines it: torchao).
///  * compressed-tensors FP8 (float-quantized): `weight` F8_E4M3 [N, K], `weight_scale` [1] (tensor), [N, 1]
///    (channel) or [ceil(N/128), ceil(K/128)] (FP8_BLOCK) = amax / 448.
///  * DeepSeek-V3 FP8 (inference/fp8_cast_bf16.py, kernel.py): `weight` F8_E4M3 [N, K], `weight_scale_inv` F32
///    [ceil(N/128), ceil(K/128)] = block amax / 448, decoded value = code * weight_scale_inv.
///  * DeepSeek-V4: attention `weight` F8_E4M3 with a `.scale` F8_E8M0 per 128x128 tile; routed experts
///    `ffn.experts.E.w{1,2,3}.weight` E2M1 packed in I8 (low nibble first) with `.scale` F8_E8M0 per 32 elements
///    (2^ceil(log2(amax / 6)): the bit comparison runs qtc mxfp4 scale_rule rceil).
/// A checkpoint is one .safetensors file or a folder with config.json and either model.safetensors or the shards
/// that model.safetensors.index.json names.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "qtc/safetensors.hpp"

namespace qtc::conformance {

/// One quantized weight (its tensors share the base name, e.g. model.layers.0.mlp.up_proj).
struct CheckpointTensor {
  std::string name;        ///< base name
  std::string convention;  ///< "modelopt nvfp4", "compressed-tensors fp8 block", "deepseek-v3 fp8", "unknown"
  std::string format;      ///< what the bytes are, in words
  int64_t rows = 0, cols = 0;           ///< logical [N, K] (0 when the shapes did not allow decoding)
  std::vector<std::string> problems;    ///< what is wrong, in the convention's words (any makes the verdict "fail")
  std::vector<std::string> notes;       ///< what was checked or compared, for the record
  bool ok() const { return problems.empty(); }
};

/// The verdict on a checkpoint.
struct CheckpointReport {
  std::string path;
  std::string quant_method;            ///< config.json quantization_config.quant_method ("" without config)
  std::vector<CheckpointTensor> tensors;
  std::vector<std::string> errors;     ///< unreadable file, malformed index, missing shard or index entry
  std::string detected_by;             ///< the rule that took the path for a checkpoint (checkpoint_rule), "" when none
  int failed() const;
  /// 2 when any error, else 1 when any tensor has a problem, else 0 (as `qtc verify`).
  int exit_code() const;
  /// The report as `qtc verify` prints it (one line per tensor that has a problem, or every tensor when verbose).
  std::string text(bool verbose) const;
};

struct CheckpointOptions {
  /// High-precision weights (a checkpoint of the same model: same base names, `weight` F32/BF16/F16): each decoded
  /// weight must lie within the format's rounding bound of it, and is compared bit for bit with qtc's quantization
  /// in `profile`.
  std::string reference;
  /// The qtc profile the reference comparison quantizes with (te, te_pyref, torchao, or one added later). With
  /// `profile_required`, codes or scales that differ from that profile's are a problem; otherwise a note.
  std::string profile = "te";
  bool profile_required = false;
};

/// Why `path` is a model checkpoint, or "" when it is not (then `qtc verify` takes it for vectors). A folder is one
/// when it has model.safetensors.index.json, a config.json with a quantization_config, ModelOpt's
/// hf_quant_config.json, or a model.safetensors holding quantized-weight tensors (names ending in weight_scale,
/// weight_scale_2, weight_scale_inv, weight_packed, weight_global_scale); a config.json alone (a high-precision
/// model) is not. A .safetensors file is one when it holds such tensors and no VECTORS.md `recipe` metadata. Only
/// the safetensors header is read (8-byte length and JSON), never the tensor data.
std::string checkpoint_rule(const std::filesystem::path& path);
/// !checkpoint_rule(path).empty(). Never throws.
bool is_model_checkpoint(const std::filesystem::path& path);

/// Reads and checks a checkpoint. Never throws: every problem is in the report.
CheckpointReport check_checkpoint(const std::filesystem::path& path, const CheckpointOptions& opts = {});

/// Checks tensors held in memory; `config_json` is config.json's text (may be empty). `reference` may be empty.
CheckpointReport check_checkpoint_tensors(const std::vector<io::Tensor>& tensors, const std::string& config_json,
                                          const std::vector<io::Tensor>& reference, const CheckpointOptions& opts,
                                          const std::string& source);

/// Every tensor of a checkpoint (file, or folder with an index or model.safetensors), and config.json's text.
/// Throws qtc::Error naming the file and the rule broken (missing shard, index entry the shard lacks, tensor in
/// two shards, unreadable JSON).
std::vector<io::Tensor> read_checkpoint_tensors(const std::filesystem::path& path, std::string* config_json);

}  // namespace qtc::conformance
