/// \file prop_roundtrip_fp8.cpp
/// \brief Issue 26: quantize(dequantize(q)) against q for the FP8 formats (MXFP8, FP8 block pow2, FP8 tensor), per
///        dequantized dtype, the blocks whose bytes change predicted exactly (derivation above the property). The E2M1
///        formats' property is prop_roundtrip.cpp.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "harness.hpp"
#include "roundtrip_peer_rules.hpp"
#include "roundtrip_util.hpp"
#include "qtc/codec.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/rng.hpp"
#include "qtc/value_equivalence.hpp"

namespace qtc::prop {

namespace {

/// The FP8 byte of stored element (a, b) and its block's scale bits (E8M0 byte, F32 scale_inv bits, or 0 for FP8
/// tensor), for a plane stored [R, C] (MXFP8 both planes as x; FP8 block / tensor rowwise x, columnwise x^T).
struct Fp8Elem {
  uint8_t code;
  uint32_t scale_bits;
  double scale;  ///< the decoded scale (MXFP8 2^(e-127), FP8 block scale_inv, FP8 tensor scale_inv)
};
Fp8Elem fp8_elem(const QuantizedTensor& q, PlaneKind p, int64_t a, int64_t b, int64_t C) {
  const Plane& pl = q.plane(p);
  const Recipe& r = q.recipe;
  Fp8Elem e{pl.data[static_cast<size_t>(a * C + b)], 0, 1.0};
  if (r.kind() == RecipeKind::kMXFP8) {
    const uint8_t sb = p == PlaneKind::kColumnwise ? pl.scale.byte(a / 32, b) : pl.scale.byte(a, b / 32);
    e.scale_bits = sb;
    e.scale = decode_e8m0(sb);
  } else if (r.kind() == RecipeKind::kFP8Block) {
    const float f = pl.scale.f32(r.is_2d() ? a / 128 : a, b / 128);
    e.scale_bits = f32_bits(f);
    e.scale = f;
  } else {
    e.scale_bits = f32_bits(q.scale_inv);
    e.scale = q.scale_inv;
  }
  return e;
}

}  // namespace

// Issue 26, item 2 for the FP8 formats: quantize(dequantize(q)) against q for MXFP8 (rceil, ocp_floor; E4M3, E5M2;
// 1x32, 32x32), FP8 block with power-of-two scales (1x128, 128x128, 1x32) and FP8 tensor (pow2 or not; the amax given
// back, as TE's Float8Tensor keeps its scale), dequantized to F32, BF16 and F16, profile te. Derivation (s = the block's
// decoded scale, a power of two except FP8 tensor without pow2, c = a code, m = the block's largest |code|, v = c * s,
// exact in F32 for the magnitudes drawn, which keep s in [2^-60, 2^60]):
//  * v exact in the dtype (F32 always; BF16 always, c has at most 4 significant bits; F16 iff |v| <= 65504 and v is a
//    multiple of 2^-24): as F32. MXFP8 rceil: e' = ceil(log2(m * s / max)) = e iff m > max / 2 (q's own rceil puts
//    bamax / s in (max/2, max], so m >= max/2, and m = max/2 exactly when bamax / s in (max/2, max/2 + half a step),
//    which rounds down), else e - 1 and every code doubles: bytes change iff 0 < m <= max/2, values equal. FP8 block pow2:
//    scale' = 2^-k * pow2floor(max / m): the same iff m > max/2, else doubled (codes double): the same condition. MXFP8
//    ocp_floor: floor(log2(m * s)) = floor(log2 m) + log2 s, a fixed point. FP8 tensor: the given amax re-derives the
//    same scale, and RN(v * scale) = c: a fixed point. Zero blocks: amax 0 both times, a fixed point.
//  * v not exact in F16 and finite there (|v| < 2^-14 with a bit below 2^-24): w = RN16(v) = n * 2^-24 with n <= 16
//    (v has <= 4 significant bits above 2^-24 * 16); w / s is an FP8 value (its unit 2^-24 / s exceeds the code's
//    lowest unit >= the FP8 subnormal step). The scale s' re-derived from the block's largest |w| (rceil
//    2^ceil(log2(wmax / max)), ocp_floor 2^(floor(log2 wmax) - emax), FP8 block 1 / pow2(RN(max / wmax)), FP8 tensor
//    the given s): s' != s changes the scale bytes; under s' = s every code becomes min(|w| / s, max) with w's sign:
//    w / s != c, unless w rounded up past max * s, which saturates back to max (FP8 tensor and ocp_floor: a code +-max
//    whose v F16 rounds up, e.g. 448 * 2^-33 -> 2^-24: a fixed point, tagged "f16_underflow_saturates_back"). The
//    block changes iff s' != s or a code moves; under s' = s the values stay iff nothing moved (the decoded value is
//    w); under s' != s, and in the two cases below, the values (and the bytes again) are te's rule on the dtype's values
//    per element (roundtrip_peer_rules.hpp fp8_te_requant: MXFP8 by its order's steps, FP8 block §3 with F16's max as
//    an Inf amax's stand-in, FP8 tensor §4 under the carried amax), checked both ways (tagged "rule_f16_underflow",
//    "rule_f16_overflow", "rule_fp8_tensor_f16_subnormal", each _fixed / _equivalent / _lossy).
//  * |v| >= 65520 (F16 inf): MXFP8 / FP8 block: the block amax is inf, which gives another scale (te: FP8 block scale
//    1 where q's is <= 448 / 65520; MXFP8 the inf's E8M0): bytes change (values by the rule). FP8 tensor: inf * scale
//    saturates to the largest code: the element changes iff its code is not +-max.
//  * FP8 tensor with a non-power-of-two scale: v = RN32(c * scale_inv); a normal F16 (and BF16) w is within a relative
//    2^-11 (2^-9) of v, far inside FP8's half step (>= 2^-4.9 relative): a fixed point. F16 subnormal (or zero) w of a
//    nonzero v: by the rule (tagged "fp8_tensor_f16_subnormal").
// FP8 block with F32 scales (pow2 off, TE's default), dequantized to F32: s = RN(max / amax), si = RN(1 / s) stored,
// codes RN8(x * s), so the largest |code| of a nonzero block is m = max (amax * RN(max / amax) rounds onto max or
// saturates there). Decoded y = RN(c * si); the round trip re-derives from RN(m * si): si' = RN(1 / RN(max / RN(m * si))),
// and si' != si for some si (the older RequantizeIsIdentity excludes these scales for that reason). The codes come back
// whatever si' (RN(c * si) * s' is c within a few 2^-24). So a block changes iff si' != si (only its scale), and its
// values stay iff RN(c * si') == RN(c * si) for each code. BF16 / F16 with F32 scales: the decoded values are w =
// RN_dtype(RN(c * si)), within a relative 2^-9 / 2^-11 of c * si where the dtype holds them as normals; the scale is
// re-derived from the dtype's block max, si' = RN(1 / RN(max / w_max)) (the peers: their forms on w_max), and w * s' is c
// within 2^-8 relative, inside FP8's half step (>= 2^-4 relative for normal codes, >= 1/14 for subnormal ones): the codes
// come back, the block changes iff si' != si, its values stay iff RN(c * si') == RN(c * si). An F16 block holding a value
// F16 has only as a subnormal (or 0) has w off by more than that: its codes are §3 on the F16 values, RN8(w * RN(max /
// w_max)) (a block of F16 zeros: te's zero-block scale 1, codes 0 with w's sign), checked per element, bytes and values
// (tagged "fp8_block_f32_scale_f16_subnormal"). (te only: the peers below are drawn from F32.) The FP8 block peers (modelopt,
// compressed_tensors, vllm, deepgemm, vllm_triton, sglang_triton; F32 input) store d = amax / max (or amax * RN(1 / max),
// rule fp8.form) and decode c * d: the same argument with d' = RN(RN(m * d) / max) (resp. RN(m * d) * RN(1 / max)), and
// compressed_tensors' zero point turns a code 0x80 into 0x00 (values equal); a block whose largest code is below max sits
// at the profile's amax floor (its decoded max re-derives the floor: a fixed point). A peer's NaN block (modelopt's zero
// block: scale 0, data 0 / 0; deepgemm's with eps 0: 0 * Inf) decodes to NaNs; its round trip has the NaN block amax
// of torch.maximum over the [blocks] tensor (0xFFFFFFFF in the op's vector lanes, block index < blocks / 16 * 16, where
// the profile reduces so; else 0x7FC00000) as its scale and codes 0x7F | sign(w) (tagged "fp8_block_peer_nan_block").
TEST(AlgebraProperty, Fp8RoundTripBytesChangeExactlyWherePredicted) {
  check_property({"mxfp8", "fp8_block", "fp8_tensor", "f32", "bf16", "f16", "fixed_point", "changed_equivalent",
                  "changed_f16_underflow", "changed_f16_overflow", "half_range_block"},
                 [] {
    const int kind = uniform_index(3);
    const DType dt = std::vector<DType>{DType::kF32, DType::kBF16, DType::kF16, DType::kF16}[static_cast<size_t>(uniform_index(4))];
    const char* fp8 = uniform_index(2) == 0 ? "e4m3" : "e5m2";
    std::map<std::string, std::string> md{{"profile", "te"}, {"fp8_dtype", fp8}};
    if (kind == 0) {
      md["recipe"] = "mxfp8";
      md["scale_rule"] = uniform_index(3) == 0 ? "ocp_floor" : "rceil";
      if (uniform_index(3) == 0) md["tile"] = "32x32";
    } else if (kind == 1) {
      md["recipe"] = "fp8_block";
      md["pow2_scales"] = uniform_index(2) == 0 ? "1" : "0";
      md["tile"] = uniform_index(2) == 0 ? "1x128" : "128x128";  // 1x32 is DeepGEMM's, refused under te (rule fp8-block-1x32)
      // The FP8 block peers (their F32 scale forms), from F32 only: from BF16 / F16 those with fp8_input_dtype_arith
      // compute the scale and the scaled values in the input's dtype, another quantization than q's.
      if (md["pow2_scales"] == "0" && dt == DType::kF32 && uniform_index(2) == 0) {
        static const char* kPeers[] = {"modelopt", "compressed_tensors", "vllm", "deepgemm", "vllm_triton", "sglang_triton",
                                       "compressed_tensors_triton"};
        md["profile"] = kPeers[uniform_index(7)];
        md["fp8_dtype"] = "e4m3";
      }
    } else {
      md["recipe"] = "fp8_tensor";
      md["pow2_scales"] = uniform_index(2) == 0 ? "1" : "0";
    }
    Recipe r;
    try {
      r = Recipe::from_metadata(md);
      (void)ref::quantize(HostMatrix(DType::kF32, 1, 128).view(), r);
    } catch (const Error&) {
      RC_DISCARD("a peer profile refuses this recipe variant (its rule names it)");
    }
    const std::string prof = md["profile"];
    tag_if(prof != "te", "fp8_block_peer");
    const bool e5 = r.fp8_type() == Fp8Type::kE5M2;
    const double maxv = e5 ? 57344.0 : 448.0;
    const bool pow2 = kind == 0 || md["pow2_scales"] == "1";
    const int64_t M = *rc::gen::inRange<int64_t>(1, kind == 1 ? 260 : 70), K = *rc::gen::inRange<int64_t>(1, kind == 1 ? 260 : 70);
    const int64_t bt = kind == 0 ? 32 : kind == 1 ? (r.is_2d() ? 128 : 1) : 16, bc = kind == 0 ? 32 : kind == 1 ? 128 : 16;
    const int e0 = *rc::gen::resize(100, dt == DType::kF16 ? rc::gen::inRange(-24, 20) : rc::gen::inRange(-40, 40));
    const HostMatrix x = make_fp8_input(M, K, bt, bc, e0, *rc::gen::arbitrary<uint64_t>());
    tag(recipe_kind_name(r.kind()));
    tag(dtype_text(dt));
    const QuantizedTensor q = ref::quantize(x.view(), r);
    const float A = ref::amax(x.view());
    for (PlaneKind p : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      if (!(p == PlaneKind::kRowwise ? q.rowwise : q.columnwise)) continue;
      const Recipe rp = plane_only(r, p);
      const HostMatrix y = ref::dequantize(q, p, dt);
      const QuantizedTensor back = kind == 2 ? ref::quantize_with_amax(y.view(), rp, A, A) : ref::quantize(y.view(), rp);
      const bool col = p == PlaneKind::kColumnwise;
      const bool stored_t = col && kind != 0;  // FP8 block / tensor store the columnwise plane as x^T
      const int64_t R = stored_t ? K : M, C = stored_t ? M : K;
      RC_ASSERT(back.plane(p).data.size() == q.plane(p).data.size());
      // Blocks in stored coordinates: MXFP8 rowwise (a, b/32), columnwise (a/32, b), 2-D (a/32, b/32); FP8 block
      // (a or a/128, b/bc); FP8 tensor: one block per element (its scale is given).
      std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> blocks;
      for (int64_t a = 0; a < R; ++a)
        for (int64_t b = 0; b < C; ++b) {
          std::pair<int64_t, int64_t> key{a, b};
          if (kind == 0) key = r.is_2d() ? std::make_pair(a / 32, b / 32) : col ? std::make_pair(a / 32, b) : std::make_pair(a, b / 32);
          if (kind == 1) key = {r.is_2d() ? a / 128 : a, b / bc};
          blocks[key].push_back({a, b});
        }
      for (const auto& [key, elems] : blocks) {
        double m = 0.0;
        bool nan_code = false, neg_zero = false, inexact = false, overflow = false, subnormal16 = false, changed = false, values_equal = true, at_max = true;
        std::string first;
        double s = 1.0, wmax = 0.0;
        std::vector<std::pair<double, double>> wc;  // (|w|, |c|): the dtype's value and q's code
        std::vector<std::tuple<float, uint8_t, uint8_t>> wcodes;  // (w, q's code, back's code)
        uint32_t scale_b = 0, scale_a = 0;  // back's and q's scale bits
        for (const auto& [a, b] : elems) {
          const Fp8Elem ea = fp8_elem(q, p, a, b, C), eb = fp8_elem(back, p, a, b, C);
          s = ea.scale;
          const double c = std::fabs(static_cast<double>(decode_fp8(ea.code, e5)));
          m = std::max(m, c);
          at_max = at_max && c == maxv;
          nan_code = nan_code || c != c;
          neg_zero = neg_zero || ea.code == 0x80;
          const int64_t xi = stored_t ? b : a, xj = stored_t ? a : b;
          const float vd = y.get(xi, xj);
          const float v32 = static_cast<float>(decode_fp8(ea.code, e5) * ea.scale);
          wc.push_back({std::fabs(static_cast<double>(vd)), c});
          wcodes.emplace_back(vd, ea.code, eb.code);
          scale_b = eb.scale_bits;
          scale_a = ea.scale_bits;
          wmax = std::max(wmax, std::fabs(static_cast<double>(vd)));
          if (!std::isfinite(vd)) overflow = true;
          else if (pow2 && vd != v32) inexact = true;
          if (dt == DType::kF16 && v32 != 0.0f && std::fabs(vd) < 0x1p-14f) subnormal16 = true;  // F16 subnormal or 0
          const float vb = static_cast<float>(decode_fp8(eb.code, e5) * eb.scale);
          values_equal = values_equal && (v32 == vb);
          if ((ea.code != eb.code || ea.scale_bits != eb.scale_bits) && !changed) {
            changed = true;
            std::ostringstream d;
            d << " (first change at stored [" << a << ", " << b << "]: code 0x" << std::hex << int(ea.code) << " -> 0x" << int(eb.code)
              << ", scale bits 0x" << ea.scale_bits << " -> 0x" << eb.scale_bits << ")";
            first = d.str();
          }
        }
        bool want_change = false, want_equal = true, claim_values = true, rule_only = false;
        if (kind == 1 && !pow2 && nan_code && prof != "te") {
          // A peer's NaN block: a zero block whose scale is 0 (modelopt's rule fp8.zero_scale keep; deepgemm with eps 0)
          // holds the codes of 0 / 0 or 0 * Inf (x86's negative NaN) and decodes to NaNs. Its round trip, for a profile
          // whose amax propagates NaN and whose arithmetic is PyTorch's (rule fp8.nan): the block amax is NaN, which
          // torch.maximum over the [blocks] tensor makes the all-ones NaN in the op's vector lanes (block index <
          // blocks / 16 * 16) and 0x7FC00000 in its tail where the profile reduces so (fp8_block_amax_nan_lanes), else
          // 0x7FC00000; the stored scale amax / 448 keeps it; each code is w / scale or w * (1 / scale) = w's own NaN
          // (x86 returns the first NaN operand), cast with its sign: 0x7F | sign(w). Values: NaN both times.
          const ProfileRules& prr = profile_rules(r.profile);
          if (!prr.nan_amax || !prr.fp8_torch_nan || prr.fp8_clamp_nan != Fp8ClampNaN::kNaN || prr.fp8_form == Fp8Form::kCast)
            RC_FAIL(r.name() + ": a NaN block under profile " + prof + ", whose round trip is not derived (NaN-ignoring amax or clamp)");
          tag("fp8_block_peer_nan_block");
          const int64_t nb = (C + 127) / 128, kbs = (K + 127) / 128;
          const bool t2 = r.is_2d();
          const int64_t idx = t2 && col ? key.second * kbs + key.first : key.first * nb + key.second;
          const int64_t nblocks = t2 ? ((M + 127) / 128) * kbs : R * nb;
          const uint32_t want_s = prr.fp8_block_amax_nan_lanes && idx < nblocks / 16 * 16 ? 0xFFFFFFFFu : 0x7FC00000u;
          bool bytes_ok = scale_b == want_s;
          tag_if(want_s == 0xFFFFFFFFu, "fp8_block_peer_nan_block_lane");
          want_change = scale_a != want_s;
          for (const auto& [w, ca, cb] : wcodes) {
            const uint8_t c2 = static_cast<uint8_t>(0x7Fu | ((f32_bits(w) >> 24) & 0x80u));
            bytes_ok = bytes_ok && w != w && c2 == cb;
            want_change = want_change || c2 != ca;
          }
          want_equal = false;
          if (!bytes_ok)
            RC_FAIL(r.name() + ": " + prof + " NaN block: predicted scale bits " + std::to_string(want_s) + " and codes 0x7F | sign(w), got scale bits " +
                    std::to_string(scale_b) + first);
        } else if (overflow) {
          tag("changed_f16_overflow");
          want_change = kind == 2 ? !at_max : true;
          claim_values = false;
        } else if (kind == 2 && !pow2) {
          // An F16 subnormal (or zero) w of a nonzero v: off by more than a relative 2^-11: by te's rule (below).
          rule_only = tag_if(subnormal16, "fp8_tensor_f16_subnormal");
          want_change = false;
        } else if (inexact) {
          // The re-derived scale s' from the block's F16 maximum, per the rule; under s' = s every code becomes
          // min(|w| / s, max) (w / s is an FP8 value, see above; saturated where it rounded past max).
          double s2 = s;
          if (wmax > 0.0 && kind == 0 && md["scale_rule"] == "rceil") {
            int k = -140;
            while (maxv * std::ldexp(1.0, k) < wmax) ++k;  // 2^ceil(log2(wmax / max))
            s2 = std::ldexp(1.0, k);
          } else if (wmax > 0.0 && kind == 0) {
            int ex = 0;
            (void)std::frexp(wmax, &ex);  // wmax = f * 2^ex, f in [0.5, 1)
            s2 = std::ldexp(1.0, ex - 1 - (e5 ? 15 : 8));
          } else if (wmax > 0.0 && kind == 1) {
            const float sc = static_cast<float>(maxv) / static_cast<float>(wmax);
            s2 = 1.0 / static_cast<double>(bits_f32(f32_bits(sc) & 0xFF800000u));
          }
          bool code_moves = false;
          for (const auto& [w, c] : wc) code_moves = code_moves || std::min(w / s, maxv) != c;
          want_change = s2 != s || code_moves;
          want_equal = !want_change;
          claim_values = s2 == s;
          tag(want_change ? "changed_f16_underflow" : "f16_underflow_saturates_back");
        } else if (kind == 0) {
          const bool half = m > 0.0 && m <= maxv / 2;
          tag_if(half, "half_range_block");
          want_change = md["scale_rule"] == "rceil" && half && s > 0x1p-127;
        } else if (kind == 1 && !pow2) {
          // F32 scales (TE's default): codes come back (RN(c * si) * s' is c within a few 2^-24, far inside E4M3's and
          // E5M2's half steps); the scale is re-derived from the decoded block max RN(m * si): si' = RN(1 / RN(max /
          // RN(m * si))), which is not si for some si. The block changes iff si' != si; its values stay iff
          // RN(c * si') == RN(c * si) for every code.
          tag("fp8_block_f32_scale");
          tag_if(dt != DType::kF32, "fp8_block_f32_scale_16bit");
          if (dt == DType::kF16 && subnormal16) {
            // §3 on the F16 values: s' = RN(max / w_max) (w_max = 0: the zero block's 1), codes RN8(w * s').
            tag("fp8_block_f32_scale_f16_subnormal");
            const float w_max = static_cast<float>(wmax), s2 = w_max > 0.0f ? static_cast<float>(maxv) / w_max : 1.0f;
            const float si2 = 1.0f / s2;
            bool pchange = f32_bits(si2) != f32_bits(static_cast<float>(s)), pequal = true, bytes_ok = f32_bits(si2) == scale_b;
            for (const auto& [w, ca, cb] : wcodes) {
              const uint8_t c2 = encode_fp8(w * s2, e5, Overflow::kSatFinite);
              pchange = pchange || c2 != ca;
              bytes_ok = bytes_ok && c2 == cb;
              pequal = pequal && decode_fp8(c2, e5) * si2 == static_cast<float>(decode_fp8(ca, e5) * s);
            }
            if (!bytes_ok || pchange != changed || (pchange && pequal != values_equal) || (!pchange && !values_equal))
              RC_FAIL(r.name() + ", dequantized f16, a block holding F16 subnormals: predicted " + (pchange ? "changed" : "fixed") +
                      (pequal ? ", values equal" : ", values differ") + ", got " + (changed ? "changed" : "fixed") +
                      (values_equal ? ", values equal" : ", values differ") + (bytes_ok ? "" : " (bytes not §3's on the F16 values)") + first);
            tag(!pchange ? "fixed_point" : pequal ? "changed_equivalent" : "changed_lossy");
            continue;
          }
          // From BF16 / F16 the re-derivation sees the dtype's block max (F32: RN(m * si)).
          const float si = static_cast<float>(s), a2 = dt == DType::kF32 ? static_cast<float>(m) * si : static_cast<float>(wmax);
          const float fmax = static_cast<float>(maxv);
          float si2 = si;  // a block of zero codes re-derives its own zero-block scale (te 1, the peers 0 or eps)
          const Fp8Form form = profile_rules(r.profile).fp8_form;
          // A nonzero block whose largest code is below max sits at the profile's amax floor (vLLM's eps clamp): its
          // decoded max is below the floor too, which re-derives the same scale.
          if (m > 0.0 && m < maxv) tag("fp8_block_amax_floor");
          else if (m > 0.0 && form == Fp8Form::kTE) si2 = 1.0f / (fmax / a2);  // stored 1 / RN(max / amax)
          else if (m > 0.0 && (form == Fp8Form::kInvDiv || form == Fp8Form::kInvMulRcp)) si2 = a2 / fmax;  // amax / max
          else if (m > 0.0) si2 = a2 * (1.0f / fmax);  // amax * RN(1 / max)
          want_change = f32_bits(si2) != f32_bits(si);
          // compressed_tensors adds its zero point (on the CPU and in its Triton kernel on CUDA): a code 0x80 (a
          // negative that rounded to zero) decodes to -0.0, which comes back +0.0 (0x00), values equal.
          if ((prof == "compressed_tensors" || prof == "compressed_tensors_triton") && neg_zero)
            want_change = tag_if(true, "ct_neg_zero");
          for (const auto& [w, c] : wc)
            want_equal = want_equal && static_cast<float>(c) * si2 == static_cast<float>(c) * si;
          tag_if(want_change, want_equal ? "fp8_block_scale_moves_values_equal" : "fp8_block_scale_moves");
        } else if (kind == 1) {
          const bool half = m > 0.0 && m <= maxv / 2;
          tag_if(half, "half_range_block");
          want_change = half;
        }
        if ((overflow || inexact || rule_only) && prof == "te") {
          // Where the closed forms above leave the values open (F16 overflow; F16 underflow under a re-derived scale) or
          // say nothing (FP8 tensor F16 subnormals): te's rule on the dtype's values (roundtrip_peer_rules.hpp), per
          // element, bytes and values both ways; the closed form's byte claim stays checked below.
          const Fp8BlockRequant pr = fp8_te_requant(r, dt, A, wcodes);
          bool pchange = pr.scale_bits != scale_a, pequal = true, bytes_ok = pr.scale_bits == scale_b;
          for (size_t n = 0; n < wcodes.size(); ++n) {
            const uint8_t c2 = pr.codes[n], ca = std::get<1>(wcodes[n]), cb = std::get<2>(wcodes[n]);
            pchange = pchange || c2 != ca;
            bytes_ok = bytes_ok && c2 == cb;
            pequal = pequal && static_cast<float>(decode_fp8(c2, e5) * pr.scale) == static_cast<float>(decode_fp8(ca, e5) * s);
          }
          if (!pchange) pequal = true;
          if (!bytes_ok || pchange != changed || pequal != values_equal)
            RC_FAIL(r.name() + ", dequantized " + dtype_text(dt) + ", a block " + (overflow ? "past F16's range" : rule_only ? "holding F16 subnormals" : "F16 does not hold") +
                    ": te's rule on the dtype's values predicts " + (pchange ? "bytes change" : "a fixed point") + (pequal ? ", values equal" : ", values change") +
                    ", got " + (changed ? "bytes changed" : "bytes equal") + (values_equal ? ", values equal" : ", values changed") +
                    (bytes_ok ? "" : " (scale or codes not te's on the dtype's values)") + first);
          if (rule_only) want_change = pchange;
          want_equal = pequal;
          claim_values = true;
          const std::string cls = overflow ? "rule_f16_overflow" : rule_only ? "rule_fp8_tensor_f16_subnormal" : "rule_f16_underflow";
          tag(cls + (!pchange ? "_fixed" : pequal ? "_equivalent" : "_lossy"));
        }
        if (!want_change) want_equal = true;
        tag(!want_change ? "fixed_point" : !claim_values ? "changed_values_unclaimed" : want_equal ? "changed_equivalent" : "changed_lossy");
        if (changed != want_change || (claim_values && want_change && values_equal != want_equal) || (!want_change && !values_equal)) {
          std::ostringstream os;
          os << r.name() << " profile " << prof << ", dequantized " << dtype_text(dt) << ", " << (col ? "columnwise" : "rowwise") << " block ["
             << key.first << ", " << key.second << "]: scale " << std::hexfloat << s << ", largest code " << std::defaultfloat << m
             << (overflow ? ", a value past F16's range" : inexact ? ", a value F16 does not hold" : "") << ": predicted "
             << (want_change ? (!claim_values ? "bytes change" : want_equal ? "bytes change, values equal" : "bytes and values change") : "a fixed point")
             << ", got " << (changed ? "bytes changed" : "bytes equal") << (values_equal ? ", values equal" : ", values changed") << first;
          RC_FAIL(os.str());
        }
      }
      if (kind == 2) RC_ASSERT(f32_bits(back.scale_inv) == f32_bits(q.scale_inv));
    }
  });
}

}  // namespace qtc::prop
