/// \file checkpoint_compare.cpp
/// \brief A checkpoint's decoded weights against the high-precision ones (rounding bound, nibble order, bit equality
///        with a qtc profile), and the fused projections' shared global scale (checkpoint_conventions.hpp).
#include <fmt/ranges.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "checkpoint_internal.hpp"
#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/kind.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe.hpp"

namespace qtc::conformance::ckpt {

// The decoded weight against the high-precision one: within the rounding bound, nibble order, and the
// codes and scales of qtc's quantization in the given profile.
void Checker::compare(const Group& gr, CheckpointTensor& out, const Decoded& d, const std::string& conv) {
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

void Checker::compare_profile(const Group& gr, CheckpointTensor& out, const Decoded& d, const std::string& conv, const std::vector<float>& ref) {
  (void)gr;
  std::map<std::string, std::string> md;
  // MXFP4's scale rule is the convention's: compressed-tensors' generate_mx_scales rounds the block amax to a power of
  // two at E2M1's mantissa (round_to_power_2: + 2^21 in float32's bits, exponent kept), minus 2: torchao's EVEN;
  // DeepSeek-V4's experts take 2^ceil(log2(amax / 6)) (DeepGEMM's ue8m0 rounding): rceil.
  if (d.mx) {
    const std::string mx_rule = conv == "compressed-tensors mxfp4" ? "even" : "rceil";
    md = {{"recipe", "mxfp4"}, {"scale_rule", mx_rule}};
    try {
      const ProfileRules& pr = profile_rules(profile_from_name(opts.profile));
      bool defined = false;
      std::string rules;
      for (MxScaleRule x : pr.mxfp4_scale_rules) {
        defined = defined || mx_scale_rule_name(x) == mx_rule;
        rules += (rules.empty() ? "" : ", ") + std::string(mx_scale_rule_name(x));
      }
      if (!defined) {
        (opts.profile_required ? out.problems : out.notes)
            .push_back(::fmt::format("{} takes MXFP4 scale_rule {}; profile {} defines {}: bit comparison not run (profile "
                                     "torchao defines every MXFP4 rule)",
                                     conv, mx_rule, opts.profile, rules.empty() ? std::string("no MXFP4 rule") : rules));
        return;
      }
    } catch (const std::exception&) {  // an unknown profile: Recipe::from_metadata below names it
    }
  } else if (d.kind == 4 && !d.scale_bytes.empty()) {
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
    const KindInfo& kind = kind_info(r);
    if (kind.plane_amax) {  // NVFP4: the checkpoint's global amax
      q = ref::quantize_with_amax(x.view(), r, d.global_amax, d.global_amax);
    } else if (kind.per_tensor_scale) {
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
    if (kind.e2m1_data) {  // one byte per block scale: E4M3 (NVFP4) or E8M0 (MXFP4)
      const bool mx = kind.e8m0_scales;
      auto value = [&](uint8_t b) { return mx ? e8m0(b) : e4m3(b); };
      scale_total = static_cast<int64_t>(p.scale.bytes.size());
      for (size_t i = 0; i < p.scale.bytes.size() && i < d.scale_bytes.size(); ++i)
        if (p.scale.bytes[i] != d.scale_bytes[i] && scale_diff++ == 0)
          first_scale = ::fmt::format("block [{}, {}]: stored 0x{:02x} ({}), {} gives 0x{:02x} ({})", i / p.scale.cols, i % p.scale.cols,
                                    d.scale_bytes[i], g(value(d.scale_bytes[i])), opts.profile, p.scale.bytes[i], g(value(p.scale.bytes[i])));
    } else if (!kind.per_tensor_scale) {  // FP8 block: F32 scales
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

}  // namespace qtc::conformance::ckpt
