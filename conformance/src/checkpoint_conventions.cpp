/// \file checkpoint_conventions.cpp
/// \brief Model checkpoints in the ModelOpt, compressed-tensors and DeepSeek conventions (checkpoint_conventions.hpp):
///        detection, reading (file, folder, sharded index), the per-tensor dispatch to the convention checks
///        (checkpoint_formats.cpp, checkpoint_compare.cpp) and the report.
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
#include <optional>
#include <set>
#include <sstream>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "checkpoint_internal.hpp"
#include "qtc/recipe.hpp"

namespace qtc::conformance {

namespace fs = std::filesystem;
using namespace ckpt;

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
  if (!detected_by.empty()) out += "taken for a model checkpoint: " + detected_by + "\n";
  out += ::fmt::format("checkpoint {}{}: {} quantized tensors, {} with problems{}\n", path,
                     quant_method.empty() ? "" : " (" + quant_method + ")", tensors.size(), failed(),
                     errors.empty() ? "" : ::fmt::format(", {} errors", errors.size()));
  return out;
}

namespace {

/// The tensor names and `__metadata__` of a .safetensors file, from its header alone (8-byte length, then JSON): a
/// multi-GB shard is not read. nullopt when the file is not a safetensors file (short, a length past the file or
/// above 100 MB, not a JSON object).
std::optional<json> safetensors_header(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size < 8) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  uint8_t len8[8];
  if (!in.read(reinterpret_cast<char*>(len8), 8)) return std::nullopt;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len8[i];
  if (n > size - 8 || n > (uint64_t{100} << 20)) return std::nullopt;
  std::string text(static_cast<size_t>(n), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(n))) return std::nullopt;
  try {
    json j = json::parse(text);
    if (!j.is_object()) return std::nullopt;
    return j;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

/// The first quantized-weight tensor name in a safetensors header (a suffix the conventions write, or DeepSeek-V4's
/// `.scale` beside a `.weight`), or "".
std::string quantized_name(const json& header) {
  for (const auto& [name, v] : header.items()) {
    for (const char* s : {".weight_scale", ".weight_scale_2", ".weight_scale_inv", ".weight_packed", ".weight_global_scale"})
      if (name.size() > std::strlen(s) && name.ends_with(s)) return name;
    if (name.size() > 6 && name.ends_with(".scale") && header.contains(name.substr(0, name.size() - 6) + ".weight")) return name;
  }
  return "";
}

/// A file's text when it is at most `limit` bytes, else nullopt.
std::optional<std::string> small_file(const fs::path& p, uintmax_t limit) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(p, ec);
  if (ec || size > limit) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string checkpoint_rule(const std::filesystem::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "model.safetensors.index.json", ec)) return "the folder has model.safetensors.index.json";
    if (fs::exists(path / "config.json", ec)) {
      if (auto text = small_file(path / "config.json", 16u << 20)) {
        try {
          const json c = json::parse(*text);
          if (c.is_object() && c.contains("quantization_config") && c["quantization_config"].is_object()) {
            const json& q = c["quantization_config"];
            const std::string m = q.contains("quant_method") && q["quant_method"].is_string() ? q["quant_method"].get<std::string>() : "";
            return ::fmt::format("config.json has a quantization_config{}", m.empty() ? "" : " (quant_method " + m + ")");
          }
        } catch (const json::exception&) {  // an unreadable config.json: the tensor names below decide
        }
      }
    }
    if (fs::exists(path / "hf_quant_config.json", ec)) return "the folder has hf_quant_config.json (ModelOpt's export)";
    if (fs::is_regular_file(path / "model.safetensors", ec))
      if (auto h = safetensors_header(path / "model.safetensors"))
        if (const std::string n = quantized_name(*h); !n.empty())
          return "model.safetensors holds quantized-weight tensors (" + n + ")";
    return "";
  }
  if (!fs::is_regular_file(path, ec) || path.extension() != ".safetensors") return "";
  const std::optional<json> h = safetensors_header(path);
  if (!h) return "";
  if (h->contains("__metadata__") && (*h)["__metadata__"].is_object() && (*h)["__metadata__"].contains("recipe")) return "";
  if (const std::string n = quantized_name(*h); !n.empty())
    return "the file holds quantized-weight tensors (" + n + ") and no VECTORS.md recipe";
  return "";
}

bool is_model_checkpoint(const std::filesystem::path& path) {
  try {
    return !checkpoint_rule(path).empty();
  } catch (const std::exception&) {
    return false;
  }
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
  try {
    rep.detected_by = checkpoint_rule(path);
  } catch (const std::exception&) {
  }
  if (rep.tensors.empty() && rep.errors.empty())
    rep.errors.push_back("no quantized tensor found (no weight_scale, weight_scale_2, weight_scale_inv, weight_packed or "
                         "weight_global_scale next to a weight)");
  return rep;
}

}  // namespace qtc::conformance
