/// \file prop_roundtrip_mx.cpp
/// \brief Issue 26, item 2 for the MXFP8 profiles other than te: quantize(dequantize(q)) against q for torchao (rceil,
///        floor, ceil, even), modelopt, compressed_tensors (pow2_round), torch_cast, ml_dtypes_cast, jax and ocp, E4M3 /
///        E5M2 where the profile has it, dequantized to F32, BF16 and F16; each block's bytes and values predicted exactly from
///        q alone, both ways; where the values stay, compare_values must say EQUIVALENT and name the reason. Runs inside
///        prop_algebra.
///
/// Derivation. A block of q has scale byte e (s = 2^(e-127), 2^-127 for e = 0, as every profile decodes it), codes c_i
/// (m = the largest |c_i|); the decoded values v_i = c_i s are exact in F32 and, for |v| >= 2^-133, in BF16 (c has at
/// most 4 significant bits); a block holding a value the dtype does not hold: below ("dtype_inexact"). The
/// re-quantization sees the block max m s, so its scale byte e' is the profile's rule applied to m s, exactly (every rule
/// is a function of the exponent and leading mantissa bits of m s, or of m s / elem_max whose float rounding cannot
/// cross a rounding boundary: m / elem_max = n / 7 * 2^j is never within 2^-20 of a power of two or of 1.5 * 2^k other
/// than at m = elem_max, 0.75 elem_max, where it is exact):
///  * rceil (te, torchao, modelopt, jax): e' = 127 + ceil(log2(m s / elem_max)). q's own rule put bamax / s in (max/2, max],
///    so m in [max/2, max]: e' = e except m = max/2 (bamax just above max/2 rounded down), where e' = e - 1.
///  * floor (te ocp_floor, ocp, torchao floor) and torchao even (bamax rounded to the element's mantissa bits first: m s
///    has them already): e' = 127 + floor(log2(m s)) - emax_elem: e' = e (m in [2^emax, max]).
///  * torchao ceil: e' = 127 + ceil(log2(m s)) - emax_elem; q has m in [2^(emax-1), 2^emax]: e' = e - 1 iff m = 2^(emax-1).
///  * compressed_tensors pow2_round (E4M3): m s rounded to a power of two, up iff its mantissa >= 1.75, then e' = 127 +
///    floor(log2) - 8; q has m in [224, 448]: e' = e + 1 iff m = 448 (1.75 * 2^8 rounds up).
///  * torch_cast / ml_dtypes_cast: e' = the library's E8M0 cast of m s / elem_max (up iff the mantissa >= 1.5); q put
///    bamax / s in [0.75 max, 1.5 max): e' = e for m in [0.75 max, max]; a code past max is NaN or (E5M2) Inf (the
///    non-saturating cast, bamax / s >= max + half a step); and m below 0.75 max (bamax / s in [0.75 max, 0.75 max + half
///    a step) rounded down: E4M3 320, E5M2 40960) gives e' = e - 1, whose doubled codes pass max: NaN / Inf, lost.
///    Subnormal m s / elem_max (e = 0 blocks): torch rounds up iff above 2^-127, ml_dtypes iff >= 1.5 * 2^-127; where
///    the float32 quotient underflows to 0 (and for a block of zero codes), torch gives 0x00 and ml_dtypes NaN 0xFF,
///    whose codes are all NaN: such ml_dtypes blocks are lost.
/// Every rule clamps e' to [0, 254]. The codes under e' are the cast (RN-even) of v_i / d(e'), where d is the profile's
/// divisor: 2^(e'-127), except torchao rceil at e' = 0 (it multiplies by 1.0: the block's codes become RN(v_i), 0 for the
/// tiny values there), torchao floor / ceil / even (it divides by max(2^(e'-127), 2^-126) while decoding 2^(e'-127): an
/// e' = 0 block's codes halve, its values change) and jax near 2^-120 (below). So: rceil blocks with m = max/2 double their codes one binade lower (values equal; torchao at e = 1: lost),
/// ceil blocks with m = 2^(emax-1) likewise, compressed_tensors' blocks with m = 448 halve their codes one binade higher
/// (values equal iff every code halves exactly), and every other finite block is a fixed point, except torchao's e = 0
/// blocks and compressed_tensors' code 0x80 (a negative value that rounded to zero; its decoded -0.0 plus the zero point
/// is +0.0: 0x00, values equal). Blocks whose codes are all zero, or all NaN, keep their values (decoded zeros and NaNs re-derive zeros and NaNs);
/// their bytes are the profile's rule on the decoded values per element (a NaN code's sign bit is x86's: jax's zero block
/// is 0 * Inf, the negative default NaN, whose decoded NaN comes back positive; tagged "zero_nan_block"). A block holding
/// a NaN or Inf code beside other codes (torch_cast /
/// ml_dtypes_cast: the non-saturating cast of a value past elem_max) decodes a NaN or Inf, whose block amax gives the
/// scale 0xFF (NaN) and every code NaN: bytes and values change (the bytes by the rule on the decoded values, tagged
/// "nan_code_block"). F16 (for the profiles computing in float32: not jax and compressed_tensors, which compute in the
/// input's dtype): as F32 where F16 holds every decoded value of the block; a block holding one F16 does not hold (past
/// 65504, or off the 2^-24 grid) follows the profile's rule on the F16 values, per element (roundtrip_peer_rules.hpp
/// mxfp8_requant: the order's scalar steps), bytes and values both ways (tagged "dtype_inexact"; of 20000 cases every one
/// lossy). jax near 2^-120 (a quarter of its F32 cases): XLA flushes every float32 subnormal operand and result (1 /
/// 2^-127 is Inf at e' = 0, x * Inf and 0 * Inf give Inf and NaN codes in q itself), so every block of those cases
/// follows jax's rule on the decoded values per element, its lane reduction included (tagged "jax_tiny", "jax_e0").
/// jax and compressed_tensors from F16 (they compute in it): the block's F16 values w re-quantized by their own F16
/// arithmetic, evaluated per block from q's decoded values (bytes and values, both ways; tagged "f16_in_dtype"):
///  * jax: e' = round-up E8M0 of RN16(w_max * RN16(1 / max)) (RN16(1/448) = 1/448 (1 - 2^-12): 448 s * it is the F16
///    midpoint below s, which rounds to s: e' = e as from F32); s' = RN16(2^(e'-127)) (e' = 0: 2^-15), codes
///    clip(RN16(w * RN16(1 / s')), +-max): below s' = 2^-16 the reciprocal overflows F16 to Inf and every nonzero code
///    saturates to +-max (a zero one is 0 * Inf = NaN); above, the F16 values of a block F16 holds come back.
///  * compressed_tensors: w_max's F16 bits rounded to a power of two ((bits + 2^8) & 0xFC00: up iff the mantissa >=
///    1.75), e' = 127 + floor(log2) - 8 clamped to [0, 255], s' = RN16(2^(e'-127)) (0 -> 1.0), stored 127 + log2 s';
///    codes clamp(RN16(w / s') + 0, +-448).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "harness.hpp"
#include "roundtrip_peer_rules.hpp"
#include "roundtrip_util.hpp"
#include "qtc/codec.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/value_equivalence.hpp"

namespace qtc::prop {

namespace {

/// The first mispredicted code of a block, as the properties report it.
std::string code_mismatch(int64_t i, int64_t j, uint8_t predicted, uint8_t got) {
  std::ostringstream os;
  os << "code at [" << i << ", " << j << "]: predicted 0x" << std::hex << int(predicted) << ", got 0x" << int(got);
  return os.str();
}

struct MxCase {
  const char* profile;
  MxScaleRule rule;
  bool e5m2_too;
};

/// floor(log2 v), ceil(log2 v) of a positive double (exact: frexp).
int floor_log2d(double v) {
  int ex = 0;
  (void)std::frexp(v, &ex);  // v = f * 2^ex, f in [0.5, 1)
  return ex - 1;
}
int ceil_log2d(double v) { return std::ldexp(1.0, floor_log2d(v)) == v ? floor_log2d(v) : floor_log2d(v) + 1; }

/// The scale byte the profile derives from a block max mv (> 0, finite): the rule on the exact value.
int rederive(const std::string& prof, MxScaleRule rule, double mv, double maxv, int emax) {
  int e = 0;
  if (prof == "torch_cast" || prof == "ml_dtypes_cast") {
    const double v = static_cast<float>(mv) / static_cast<float>(maxv);  // float32, as the dump script divides
    if (v == 0.0) return prof == "torch_cast" ? 0 : 255;  // underflowed: PyTorch 0x00, ml_dtypes 0 -> NaN 0xFF
    if (v < 0x1p-126) {
      e = prof == "torch_cast" ? (v > 0x1p-127 ? 1 : 0) : (v >= 1.5 * 0x1p-127 ? 1 : 0);
    } else {
      const int k = floor_log2d(v);
      e = 127 + k + (v / std::ldexp(1.0, k) >= 1.5 ? 1 : 0);
    }
  } else if (rule == MxScaleRule::kRceil) {
    e = 127 + ceil_log2d(mv / maxv);
  } else if (rule == MxScaleRule::kCeil) {
    e = 127 + ceil_log2d(mv) - emax;
  } else if (rule == MxScaleRule::kPow2Round) {
    const int k = floor_log2d(mv);
    e = 127 + k + (mv / std::ldexp(1.0, k) >= 1.75 ? 1 : 0) - emax;
  } else {  // floor, even (m s has the element's mantissa bits: even's rounding keeps it)
    e = 127 + floor_log2d(mv) - emax;
  }
  return std::clamp(e, 0, 254);
}

}  // namespace

TEST(AlgebraProperty, MxFp8PeerRoundTripBytesChangeExactlyWherePredicted) {
  check_property({"torchao", "modelopt", "compressed_tensors", "compressed_tensors_triton", "torch_cast", "ml_dtypes_cast", "jax", "ocp", "f32", "bf16", "f16",
                  "fixed_point", "changed_equivalent", "changed_lossy", "half_range_block", "ct_max_rounds_up",
                  "nan_code_block", "torchao_e0"},
                 [] {
    static const std::vector<MxCase> kCases = {
        {"torchao", MxScaleRule::kRceil, true},       {"torchao", MxScaleRule::kOcpFloor, true},
        {"torchao", MxScaleRule::kCeil, true},        {"torchao", MxScaleRule::kEven, true},
        {"modelopt", MxScaleRule::kRceil, false},     {"compressed_tensors", MxScaleRule::kPow2Round, false},
        {"torch_cast", MxScaleRule::kRceil, true},    {"ml_dtypes_cast", MxScaleRule::kRceil, true},
        {"jax", MxScaleRule::kRceil, true},           {"ocp", MxScaleRule::kOcpFloor, true}};
    const MxCase& mc = kCases[static_cast<size_t>(uniform_index(static_cast<int>(kCases.size())))];
    // compressed-tensors' slot: its CPU path or its CUDA path (compressed_tensors_triton: the same MX arithmetic on finite
    // values; each predicted by the same rule below), so the other profiles keep their shares.
    const std::string prof = mc.profile == std::string("compressed_tensors") && uniform_index(2) == 0 ? "compressed_tensors_triton" : mc.profile;
    const bool ct = prof == "compressed_tensors" || prof == "compressed_tensors_triton";
    const bool e5 = mc.e5m2_too && uniform_index(3) == 0;
    // F16 for the profiles that compute in float32 whatever the input (jax and compressed_tensors compute in it).
    const bool in_dtype16 = prof == "jax" || ct;  // from F16: their own F16 arithmetic (below)
    const int dti = uniform_index(3);
    const DType dt = dti == 0 ? DType::kF32 : dti == 1 ? DType::kBF16 : DType::kF16;
    const Recipe r = Recipe::from_metadata({{"recipe", "mxfp8"}, {"profile", prof}, {"fp8_dtype", e5 ? "e5m2" : "e4m3"},
                                            {"scale_rule", std::string(mx_scale_rule_name(mc.rule))}});
    tag(prof);
    tag(dtype_text(dt));
    const double maxv = e5 ? 57344.0 : 448.0;
    const int emax = e5 ? 15 : 8;
    const int64_t M = *rc::gen::inRange<int64_t>(1, 70), K = *rc::gen::inRange<int64_t>(1, 70);
    // Magnitudes: 2^[-40, 40]; a quarter of the F32 cases (not jax, which flushes subnormals) near 2^-120, where the scale
    // bytes reach 0 and 1.
    const bool tiny = dt == DType::kF32 && uniform_index(4) == 0;
    const int e0 = tiny ? *rc::gen::resize(100, rc::gen::inRange(-128, -108))
                        : *rc::gen::resize(100, dt == DType::kF16 ? rc::gen::inRange(-16, 12) : rc::gen::inRange(-40, 40));
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    HostMatrix x = make_fp8_input(M, K, 32, 32, e0, seed);
    {  // block maxima just above a power of two (ceil: m = 2^(emax-1) after rounding down)
      uint64_t s = seed ^ 0x9E3779B97F4A7C15ull;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < K; j += 32)
          if (xorshift(s) % 4 == 0) {
            float bm = 0.0f;
            for (int64_t k = j; k < std::min(K, j + 32); ++k) bm = std::fmax(bm, std::fabs(x.get(i, k)));
            if (bm > 0.0f && std::isfinite(bm))
              x.set(i, j, std::ldexp(1.0f + static_cast<float>(xorshift(s) % 64) / 1024.0f, floor_log2d(bm) + 1));
          }
    }
    const QuantizedTensor q = ref::quantize(x.view(), r);
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      if (!(pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise)) continue;
      const Recipe rp = plane_only(r, pk);
      const HostMatrix y = ref::dequantize(q, pk, dt);
      const QuantizedTensor back = ref::quantize(y.view(), rp);
      const Plane& a = q.plane(pk);
      const Plane& b = back.plane(pk);
      RC_ASSERT(a.data.size() == b.data.size() && a.scale.bytes.size() == b.scale.bytes.size());
      const bool col = pk == PlaneKind::kColumnwise;
      std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> blocks;  // MXFP8 stores both planes as x
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < K; ++j) blocks[col ? std::make_pair(i / 32, j) : std::make_pair(i, j / 32)].push_back({i, j});
      int64_t lossy = 0, changed_blocks = 0;
      bool scale_moved = false;  // a scale byte differs (compare_values then explains the first scale entry)
      for (const auto& [key, elems] : blocks) {
        const uint8_t ea = col ? a.scale.byte(key.first, key.second) : a.scale.byte(key.first, key.second);
        const uint8_t eb = col ? b.scale.byte(key.first, key.second) : b.scale.byte(key.first, key.second);
        const double s = std::ldexp(1.0, static_cast<int>(ea) - 127);
        double m = 0.0;
        bool any_nan = false, all_nan = true, all_zero_nan = true, inexact = false, changed = ea != eb, values_equal = true;
        for (const auto& [i, j] : elems) {
          const uint8_t ca = a.data[static_cast<size_t>(i * K + j)], cb = b.data[static_cast<size_t>(i * K + j)];
          const double c = decode_fp8(ca, e5);
          changed = changed || ca != cb;
          const float va = static_cast<float>(decode_fp8(ca, e5) * decode_e8m0(ea)), vb = static_cast<float>(decode_fp8(cb, e5) * decode_e8m0(eb));
          values_equal = values_equal && ((va != va && vb != vb) || va == vb);
          all_nan = all_nan && c != c;
          if (!std::isfinite(c)) {  // NaN, or E5M2's Inf (the non-saturating casts)
            any_nan = true;
            all_zero_nan = all_zero_nan && c != c;
            continue;
          }
          m = std::max(m, std::fabs(c));
          all_zero_nan = all_zero_nan && c == 0.0;
          if (ea != 0xFF && y.get(i, j) != static_cast<float>(c * s)) inexact = true;
        }
        bool want_change = false, want_equal = true;
        std::string why;
        const bool jax_lanes = prof == "jax" && dt == DType::kF32 && M * K >= peer::jax::kJaxLaneReduceMinElements;
        // The profile's rule on the block's dtype values, per element (roundtrip_peer_rules.hpp): bytes and values.
        const std::vector<std::pair<int64_t, int64_t>>& block_elems = elems;  // (clang 14: a lambda may not name a structured binding)
        auto by_rule = [&](const char* label) {
          RoundTripElems re;
          for (const auto& [i, j] : block_elems) {
            const size_t at = static_cast<size_t>(i * K + j);
            re.emplace_back(y.get(i, j), a.data[at], b.data[at]);
          }
          const MxBlockRequant pr = ct ? ct_mx_requant(re, dt, true, [&](size_t) { return false; })
                                                                 : mxfp8_requant(r, dt, re, jax_lanes && re.size() == 32);
          want_change = pr.byte != ea;
          for (size_t n = 0; n < re.size(); ++n) {
            const uint8_t ca = std::get<1>(re[n]), cb = std::get<2>(re[n]);
            want_change = want_change || pr.codes[n] != ca;
            const double vw = decode_fp8(pr.codes[n], e5) * decode_e8m0(pr.byte), vq = decode_fp8(ca, e5) * decode_e8m0(ea);
            want_equal = want_equal && ((vw != vw && vq != vq) || vw == vq);
            if (pr.codes[n] != cb && why.empty()) why = code_mismatch(block_elems[n].first, block_elems[n].second, pr.codes[n], cb);
          }
          if (eb != pr.byte && why.empty()) why = "predicted scale byte " + std::to_string(pr.byte) + ", got " + std::to_string(eb);
          if (!want_change) want_equal = true;
          tag(label);
          tag(std::string(label) + (!want_change ? "_fixed" : want_equal ? "_equivalent" : "_lossy"));
        };
        if (prof == "jax" && tiny) {
          // jax near 2^-120: XLA flushes every float32 subnormal operand and result, so its codes and scales there (NaN
          // and Inf codes of 0 * Inf and x * Inf included) follow no closed form above: the rule on the decoded values.
          by_rule("jax_tiny");
          tag_if(eb == 0, "jax_e0");
        } else if (prof == "ml_dtypes_cast" && ea != 0xFF && all_zero_nan && !any_nan) {
          // ml_dtypes: a block of zero codes under a finite scale (a tiny input) decodes to zeros, whose scale is the
          // cast of 0: NaN 0xFF, and every code NaN: lost.
          by_rule("ml_dtypes_zero_block");
          if (eb != 0xFF || !want_change || want_equal) RC_FAIL(r.name() + ": an ml_dtypes zero block not lost to the NaN scale");
        } else if (ea == 0xFF || all_nan || (all_zero_nan && !any_nan)) {
          // Zeros and NaNs decode to zeros and NaNs, which re-derive zeros and NaNs: values stay. The bytes: the rule on
          // the decoded values (a NaN's sign bit is the arithmetic's: x86's default NaN of 0 * Inf is negative, a NaN
          // operand passes its own), per element.
          by_rule("zero_nan_block");
          if (!want_equal) RC_FAIL(r.name() + ": a zero / NaN block whose values the rule says change");
        } else if (any_nan) {
          // A NaN or Inf code beside other codes: the block amax is NaN or Inf, scale 0xFF, every code NaN: lost.
          by_rule("nan_code_block");
          if (!want_change || want_equal) RC_FAIL(r.name() + ": a block with a NaN / Inf code that the rule says keeps its values");
        } else if (dt == DType::kF16 && in_dtype16) {
          tag("f16_in_dtype");
          auto r16 = [](float v) { return f16_to_f32(f32_to_f16(v)); };
          float wmax = 0.0f;
          for (const auto& [i, j] : elems) wmax = std::fmax(wmax, std::fabs(y.get(i, j)));
          int e2 = 0;
          float s2 = 0.0f;  // the scale the profile divides by (jax: multiplies by RN16(1 / s2))
          if (prof == "jax") {
            const float sc = r16(wmax * r16(1.0f / static_cast<float>(maxv)));
            const uint32_t u = f32_bits(sc);
            e2 = static_cast<int>(u >> 23) + ((u & 0x7FFFFFu) != 0 ? 1 : 0);  // sc is 0 or a normal float32
            s2 = r16(e2 == 0 ? 0x1p-15f : std::ldexp(1.0f, e2 - 127));
          } else {
            const float pw = f16_to_f32(static_cast<uint16_t>((f32_to_f16(wmax) + 256u) & 0xFC00u));
            const int e1 = pw == 0.0f ? 0 : std::clamp(127 + std::ilogb(pw) - 8, 0, 255);
            s2 = r16(std::ldexp(1.0f, e1 - 127));
            if (s2 == 0.0f) s2 = 1.0f;
            e2 = 127 + std::ilogb(s2);
          }
          tag_if(prof == "jax" && s2 <= 0x1p-16f, "jax_f16_reciprocal_overflows");
          want_change = e2 != static_cast<int>(ea);
          for (const auto& [i, j] : elems) {
            const uint8_t ca = a.data[static_cast<size_t>(i * K + j)], cb = b.data[static_cast<size_t>(i * K + j)];
            const float w = y.get(i, j);
            float t = prof == "jax" ? r16(w * r16(1.0f / s2)) : r16(w / s2);
            if (ct && t == 0.0f) t = 0.0f;  // + its zero point: -0.0 -> +0.0
            if (t == t) t = std::fmin(std::fmax(t, static_cast<float>(-maxv)), static_cast<float>(maxv));  // a NaN stays
            // 0 * Inf: x86's default NaN (negative); XLA's E4M3 keeps the sign, its F16 -> E5M2 gives 0x7F
            const uint8_t want = t != t ? (e5 ? 0x7F : 0xFF) : e5 ? encode_e5m2(t) : encode_e4m3(t);
            want_change = want_change || want != ca;
            const double vw = decode_fp8(want, e5) * decode_e8m0(static_cast<uint8_t>(e2)), vq = decode_fp8(ca, e5) * decode_e8m0(ea);
            want_equal = want_equal && vw == vq;
            if (want != cb && why.empty()) why = code_mismatch(i, j, want, cb);
          }
          if (eb != e2 && why.empty()) why = "predicted scale byte " + std::to_string(e2) + ", got " + std::to_string(eb);
          if (!want_change) want_equal = true;
        } else if (inexact) {
          by_rule("dtype_inexact");
        } else {
          const int e2 = rederive(prof, mc.rule, m * s, maxv, emax);
          if (e2 == 255) {  // ml_dtypes: m s / elem_max underflowed float32 to 0: scale NaN, every code NaN
            by_rule("ml_dtypes_scale_underflow");
            if (eb != 0xFF || !want_change || want_equal)
              RC_FAIL(r.name() + ": an ml_dtypes block whose m s / elem_max underflows: predicted scale 0xFF, values lost; got scale " +
                      std::to_string(eb));
          } else {
            const bool ao = prof == "torchao", cast = prof == "torch_cast" || prof == "ml_dtypes_cast";
            tag_if(ao && (e2 == 0 || ea == 0), "torchao_e0");
            tag_if((mc.rule == MxScaleRule::kRceil || mc.rule == MxScaleRule::kCeil) && e2 < static_cast<int>(ea), "half_range_block");
            tag_if(mc.rule == MxScaleRule::kPow2Round && e2 > static_cast<int>(ea), "ct_max_rounds_up");
            const double s2 = std::ldexp(1.0, e2 - 127);
            double d = s2;  // what the profile divides by
            if (ao && mc.rule == MxScaleRule::kRceil && e2 == 0) d = 1.0;
            if (ao && mc.rule != MxScaleRule::kRceil) d = std::max(s2, 0x1p-126);
            want_change = e2 != static_cast<int>(ea);
            for (const auto& [i, j] : elems) {
              const uint8_t ca = a.data[static_cast<size_t>(i * K + j)], cb = b.data[static_cast<size_t>(i * K + j)];
              const double v = decode_fp8(ca, e5) * s;
              float t = static_cast<float>(v / d);  // exact: v and d are powers of two times <= 4 significant bits
              if (ct && t == 0.0f) t = 0.0f;  // + its zero point: -0.0 -> +0.0
              const Overflow ov = cast ? Overflow::kNaN : Overflow::kSatFinite;  // the library casts do not saturate
              const uint8_t want = e5 ? encode_e5m2(t, ov) : encode_e4m3(t, ov);
              want_change = want_change || want != ca;
              want_equal = want_equal && decode_fp8(want, e5) * s2 == v;
              if (want != cb && why.empty()) why = code_mismatch(i, j, want, cb);
            }
            if (eb != e2 && why.empty()) why = "predicted scale byte " + std::to_string(e2) + ", got " + std::to_string(eb);
            if (!want_change) want_equal = true;
          }
        }
        if (want_change) ++changed_blocks;
        scale_moved = scale_moved || ea != eb;
        if (want_change && !want_equal) ++lossy;
        tag(!want_change ? "fixed_point" : want_equal ? "changed_equivalent" : "changed_lossy");
        if (changed != want_change || (want_change && values_equal != want_equal) || (!want_change && !values_equal) || !why.empty()) {
          std::ostringstream os;
          os << r.name() << " profile " << prof << ", dequantized " << dtype_text(dt) << ", " << (col ? "columnwise" : "rowwise")
             << " block [" << key.first << ", " << key.second << "]: scale byte " << int(ea) << " -> " << int(eb) << ", largest code "
             << m << (any_nan ? " (a NaN code)" : "") << ": predicted "
             << (want_change ? (want_equal ? "bytes change, values equal" : "bytes and values change") : "a fixed point") << ", got "
             << (changed ? "bytes changed" : "bytes equal") << (values_equal ? ", values equal" : ", values changed")
             << (why.empty() ? "" : " (" + why + ")");
          RC_FAIL(os.str());
        }
      }
      if (changed_blocks > 0 && lossy == 0) {
        const conformance::Equivalence eq = conformance::compare_values(q, back, {pk});
        if (!eq.equal) RC_FAIL("compare_values says not equivalent where every block's values are equal: " + eq.message);
        if (eq.message.find("bytes differ, decoded values equal") == std::string::npos) RC_FAIL("EQUIVALENT message: " + eq.message);
        // (From F16 the first moved scale can be an all-zero block's 2^-127 -> 1.0, which the message explains as such.)
        if (mc.rule == MxScaleRule::kPow2Round && scale_moved && eq.message.find("pow2_round") == std::string::npos &&
            eq.message.find("all-zero block") == std::string::npos)
          RC_FAIL("EQUIVALENT under compressed_tensors does not name pow2_round: " + eq.message);
      }
    }
  });
}

}  // namespace qtc::prop
