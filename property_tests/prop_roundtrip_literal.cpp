/// \file prop_roundtrip_literal.cpp
/// \brief Issue 26, item 2: the literal NVFP4 round trip quantize(dequantize(q)) of the peer profiles (every profile
///        defining NVFP4 other than te and te_pyref, whose literal round trip prop_roundtrip.cpp tests), which recomputes
///        the global amax from the dequantized tensor instead of carrying it: dequantized to F32, BF16 and F16, the blocks
///        whose bytes change and whose values change predicted exactly from q and the dequantized tensor's amax, both
///        ways. Runs inside prop_algebra.
///
/// Derivation. q is quantized under A = max |x|; y = dequantize(q) (c_i * D_i rounded to the dtype, D = (A / 2688) * sf
/// for every peer, `ref::Nvfp4BlockDequant`), and the round trip quantizes y under A' = max |y| (checked: the plane's
/// amax is A'). The block holding A has code 6 under scale E4M3(A * G(A) / 6) = 448 up to the profile's float rounding,
/// so A' = 6 * 448 * (A / 2688) (1 +- a few 2^-24), rounded to the dtype: A' / A = 1 +- 2^-23 (F32), 2^-9 (BF16),
/// 2^-11 (F16). Each profile recomputes its global scale from A' by its own rule (torchao, modelopt, ml_dtypes_cast:
/// A' / 2688 in float32; jax: RN(1 / (A' / 2688)); vllm and compressed_tensors(_triton): T(T(1 / A') * 2688) in the
/// input's dtype T, so one BF16 ulp, 2^-8, at most), so the block scale is re-derived from bamax' * G(A') with
/// bamax' = c_max * sf * (A / 2688)(1 +- the dtype's rounding): the ratio to sf * c_max / 6 is 1 +- 2^-7 at worst. That
/// is the argument of prop_roundtrip.cpp's carried-amax rule with a perturbation of 2^-7 instead of 2^-9: a normal sf
/// (E4M3's half step is 2^-4 / 1.875 relative or more) and every E2M1 code (half steps 1/6 relative or more) stay, so
/// the same per-profile rule decides the bytes: a normal block with c = 6 is a fixed point; under a subnormal sf = k *
/// 2^-9, (k = 1, c = 4) stays, (k = 1, c = 3) is E4M3's tie at 2^-10, decided by the profile's float expression of the
/// block scale on the decoded block max under A' (jax: max|x * RN(1 / (A' / 2688))| / 6; vllm: gs' * (bamax * RN(1/6));
/// compressed_tensors(_triton): gs' * T(bamax / 6); ml_dtypes_cast, torchao, modelopt: (bamax / 6) / (A' / 2688)), k >= 2
/// with c <= 4 changes (round(k c / 6 (1 +- 2^-7)) < k); sf = 0 with a nonzero code changes to zero codes; torchao (its
/// clamp to [2^-6, 448]) and modelopt's floor 2^-9 (k = 1) keep the block; modelopt's all-zero code blocks change unless
/// their scale is its zero block's (1.0, 0x38; compressed_tensors' are always at its 0x20); a code 0x8 comes back as 0x0 for
/// the profiles that map -0.0 to +0 (modelopt, vllm, compressed_tensors(_triton)). A block changing otherwise loses
/// values (its scale shrinks: some code leaves E2M1's grid or saturates).
/// Values: every element's decoded value is c * D before and c' * D' after, D' = (A' / 2688) * sf': where A' != A a
/// block whose bytes stay keeps a value iff RN(c * D) == RN(c * D') (c * D and c * D' round together only for some c
/// when D and D' are one ulp apart), evaluated per element (tagged "literal_values_stay" / "literal_values_change").
/// F16: a block with a decoded value outside F16's normal range that F16 does not hold (a subnormal off its 2^-24 grid)
/// carries errors that are not relative 2^-11; it follows the profile's block rule on its F16 values under A'
/// (roundtrip_peer_rules.hpp nvfp4_peer_requant), bytes and values both ways (tagged "literal_f16_peer_formula"); so does
/// every block of an F16 tensor whose amax (A or A') lies below F16's normal range (the whole tensor tiny, A' / A not 1
/// +- 2^-11; A' = 0 where every value underflowed: tagged "literal_f16_tiny_amax", "literal_f16_all_zero").
/// Inputs: make_e2m1_input with A in [2^-80, 2^100] (F16: [2^-2, 2^14]); jax, vllm and compressed_tensors(_triton) from
/// BF16 / F16 quantize an input of that dtype (their global scale is computed in it), as prop_roundtrip.cpp.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "harness.hpp"
#include "roundtrip_peer_rules.hpp"
#include "roundtrip_util.hpp"
#include "qtc/codec.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/value_equivalence.hpp"

namespace qtc::prop {
namespace {

/// Every profile that defines NVFP4, te and te_pyref left out (prop_roundtrip.cpp tests their literal round trip).
std::vector<std::string> nvfp4_peers() {
  std::vector<std::string> v;
  for (const ProfileRules& pr : all_profiles())
    if (pr.nvfp4 && pr.id != Profile::kTE && pr.id != Profile::kTEPyRef) v.emplace_back(pr.name);
  return v;
}

struct LitBlock {
  uint8_t scale = 0, scale_b = 0;
  float cmax = 0.0f, ymax = 0.0f;
  bool neg_zero_code = false, off_grid = false, changed = false, values_equal = true;
  RoundTripElems elems;  ///< (dtype value, code of q, code of back)
  std::string first_diff;
};

/// The profile's float expression of a block scale at E4M3's tie 2^-10 (k = 1, c = 3), on the decoded block max `bmax`
/// under the re-quantization's amax A2 (gt: the dtype the profile computes its global scale in).
float tie_value(const std::string& prof, float bmax, float A2, DType gt) {
  if (prof == "jax") return (bmax * (1.0f / (A2 / 2688.0f))) / 6.0f;
  const float gs = round_to_dtype(round_to_dtype(1.0f / A2, gt) * 2688.0f, gt);
  if (prof == "vllm") return gs * (bmax * (1.0f / 6.0f));
  if (prof == "compressed_tensors" || prof == "compressed_tensors_triton") return gs * round_to_dtype(bmax / 6.0f, gt);
  return (bmax / 6.0f) / (A2 / 2688.0f);  // ml_dtypes_cast (torchao and modelopt never reach the tie: clamp, floor)
}

}  // namespace

TEST(AlgebraProperty, Nvfp4PeerLiteralRoundTripPredicted) {
  static const std::vector<std::string> kPeers = nvfp4_peers();
  std::vector<std::string> required = {"f32", "bf16", "f16", "literal_amax_moves", "fixed_point", "literal_values_change", "changed_equivalent", "changed_lossy", "nvfp4_subnormal_scale",
                                       "literal_f16_peer_formula", "peer_bf16_input", "peer_f16_input"};
  for (const std::string& p : kPeers)
    for (const char* d : {"f32", "bf16", "f16"}) required.push_back("profile_" + p + "_" + d);  // each profile x dtype
  check_property(required, [] {
    const std::string prof = kPeers[static_cast<size_t>(uniform_index(static_cast<int>(kPeers.size())))];
    const DType dt = std::vector<DType>{DType::kF32, DType::kBF16, DType::kF16}[static_cast<size_t>(uniform_index(3))];
    Recipe r = Recipe::from_metadata({{"recipe", "nvfp4"}, {"profile", prof}});
    if (r.profile == Profile::kTorchAO) r.columnwise = false;  // torchao's nvfp4_quantize: rowwise only
    const bool in_dtype =
        (prof == "vllm" || prof == "jax" || prof == "compressed_tensors" || prof == "compressed_tensors_triton") && dt != DType::kF32;
    const DType gt = in_dtype ? dt : DType::kF32;  // the dtype the profile computes its global scale in
    tag_if(in_dtype, dt == DType::kF16 ? "peer_f16_input" : "peer_bf16_input");
    const int64_t M = 16 * *rc::gen::inRange<int64_t>(1, 5), K = 16 * *rc::gen::inRange<int64_t>(1, 7);
    const int e0 = dt == DType::kF16 ? *rc::gen::inRange(-2, 12) : *rc::gen::inRange(-78, 98);
    HostMatrix x = make_e2m1_input(M, K, e0, *rc::gen::arbitrary<uint64_t>(), dt == DType::kF16 ? 0x1p14f : 0x1p100f);
    if (in_dtype) {
      HostMatrix xd(dt, M, K);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < K; ++j) xd.set(i, j, x.get(i, j));
      x = xd;
    }
    const float A = ref::amax(x.view());
    if (!(A >= 0x1p-80f && A <= 0x1p100f)) RC_DISCARD("NVFP4 tensor amax outside [2^-80, 2^100]");
    if (in_dtype && dt == DType::kF16 && !(2688.0f / A < 65520.0f)) RC_DISCARD("F16: global scale 2688/amax overflows F16");
    tag(dtype_text(dt));
    tag("profile_" + prof + "_" + dtype_text(dt));
    const QuantizedTensor q = ref::quantize(x.view(), r);
    const ref::Nvfp4BlockDequant dq(r);
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      if (!(pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise)) continue;
      const Recipe rp = plane_only(r, pk);
      const HostMatrix y = ref::dequantize(q, pk, dt);
      float A2 = 0.0f;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < K; ++j) A2 = std::fmax(A2, std::fabs(y.get(i, j)));
      if (in_dtype && dt == DType::kF16 && !(2688.0f / A2 < 65520.0f)) RC_DISCARD("F16: global scale 2688/amax' overflows F16");
      const QuantizedTensor back = ref::quantize(y.view(), rp);  // the literal round trip: no amax carried
      const Plane& a = q.plane(pk);
      const Plane& b = back.plane(pk);
      const float A1 = a.amax[0];
      RC_ASSERT(f32_bits(A1) == f32_bits(A));
      if (f32_bits(b.amax[0]) != f32_bits(A2)) RC_FAIL(prof + " literal round trip: the plane's amax is not max |y|");
      tag_if(A2 != A1, "literal_amax_moves");
      // F16 with the amax outside F16's normal range (the whole tensor is tiny; A' = 0 when every value underflows): A' /
      // A is not 1 +- 2^-11, so every block follows the profile's block rule on its F16 values under A'.
      const bool f16_tiny = dt == DType::kF16 && !(A1 >= 0x1p-14f && A2 >= 0x1p-14f);
      tag_if(f16_tiny, A2 == 0.0f ? "literal_f16_all_zero" : "literal_f16_tiny_amax");
      RC_ASSERT(a.data.size() == b.data.size() && a.scale.bytes.size() == b.scale.bytes.size());
      const HostMatrix ya = ref::dequantize(q, pk, DType::kF32), yb = ref::dequantize(back, pk, DType::kF32);
      const bool col = pk == PlaneKind::kColumnwise;
      const int64_t rows = a.data_rows, len = col ? M : K;
      std::map<std::pair<int64_t, int64_t>, LitBlock> blocks;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < len; ++j) {
          LitBlock& bl = blocks[{i, j / 16}];
          const size_t byte = static_cast<size_t>(i * a.data_cols + j / 2);
          const uint8_t ca = static_cast<uint8_t>((a.data[byte] >> (4 * (j & 1))) & 0xF);
          const uint8_t cb = static_cast<uint8_t>((b.data[byte] >> (4 * (j & 1))) & 0xF);
          const int64_t xi = col ? j : i, xj = col ? i : j;
          const float w = y.get(xi, xj), va = ya.get(xi, xj);
          bl.scale = a.scale.byte(i, j / 16);
          bl.scale_b = b.scale.byte(i, j / 16);
          bl.cmax = std::max(bl.cmax, e2m1_mag(ca));
          bl.ymax = std::max(bl.ymax, std::fabs(w));
          bl.neg_zero_code = bl.neg_zero_code || ca == 0x8;
          bl.off_grid = bl.off_grid || (dt == DType::kF16 && w != va && !(std::fabs(va) >= 0x1p-14f && std::fabs(va) <= 65504.0f));
          if ((ca != cb || bl.scale != bl.scale_b) && bl.first_diff.empty()) {
            std::ostringstream d;
            d << " (first difference at plane element [" << i << ", " << j << "]: code 0x" << std::hex << int(ca) << " -> 0x" << int(cb)
              << ", scale 0x" << int(bl.scale) << " -> 0x" << int(bl.scale_b) << ")";
            bl.first_diff = d.str();
          }
          bl.changed = bl.changed || ca != cb || bl.scale != bl.scale_b;
          bl.values_equal = bl.values_equal && va == yb.get(xi, xj);
          bl.elems.emplace_back(w, ca, cb);
        }
      bool any_change = false, any_lossy = false;
      for (const auto& [key, bl] : blocks) {
        const int e = bl.scale;
        const float c = bl.cmax;
        bool want_change = false, want_equal = true, bytes_ok = true;
        std::string rule;
        if (bl.off_grid || f16_tiny) {
          // The block's F16 values re-quantized by the profile's block rule under A' (roundtrip_peer_rules.hpp).
          std::vector<float> ws;
          for (const auto& el : bl.elems) ws.push_back(std::get<0>(el));
          const Nvfp4BlockRequant pr = nvfp4_peer_requant(prof, r, ws, A2, gt);
          want_change = pr.sf != e;
          bytes_ok = pr.sf == bl.scale_b;
          for (size_t n = 0; n < bl.elems.size(); ++n) {
            const uint8_t ca = std::get<1>(bl.elems[n]), cb = std::get<2>(bl.elems[n]);
            want_change = want_change || pr.codes[n] != ca;
            want_equal = want_equal && decode_e2m1(pr.codes[n]) * dq(A2, pr.sf) == decode_e2m1(ca) * dq(A1, static_cast<uint8_t>(e));
            bytes_ok = bytes_ok && pr.codes[n] == cb;
          }
          rule = "the profile's block rule on the F16 values under A'";
          tag("literal_f16_peer_formula");
          tag(!want_change ? "literal_f16_peer_fixed" : want_equal ? "literal_f16_peer_equivalent" : "literal_f16_peer_lossy");
        } else {
          bool lossy = false;  // bytes change and values are lost
          if (prof == "torchao") {
            rule = "torchao: a fixed point (clamp)";
          } else if (e == 0) {
            want_change = tag_if(c > 0.0f, "nvfp4_zero_scale");
            rule = "zero scale";
          } else if (c == 0.0f) {
            // modelopt's floor 2^-9 on a tiny block, decoded to zeros, whose scale modelopt sets to 1.0 (0x38). (compressed_tensors:
            // such a block always has its zero block's scale 0x20, as a scale of 2^-9 or more gives the block max a code of 4
            // or 6; a block of its that did not would fail here.)
            want_change = prof == "modelopt" && e != 0x38;
            tag_if(want_change, "zero_code_block_rescaled");
            rule = "all-zero codes";
          } else if (c < 6.0f) {
            tag("nvfp4_subnormal_scale");
            const int k = e;  // subnormal E4M3 bytes 1..7 are k * 2^-9
            if ((prof == "modelopt" && k == 1) || (k == 1 && c == 4.0f)) {
              want_change = false;
            } else if (k == 1 && c == 3.0f) {
              want_change = lossy = !(tie_value(prof, bl.ymax, A2, gt) > 0x1p-10f);  // down to 0 (compressed_tensors: 0x20)
              tag("nvfp4_tie");
            } else {
              want_change = lossy = true;
            }
            rule = "subnormal scale";
          } else {
            rule = "normal scale, code 6: a fixed point";
          }
          if ((prof == "modelopt" || prof == "vllm" || prof == "compressed_tensors" || prof == "compressed_tensors_triton") &&
              bl.neg_zero_code && !want_change) {
            want_change = true;
            tag("neg_zero_to_pos");
          }
          // Values: lost where the scale shrinks; elsewhere every code's value RN(c * D) against RN(c * D') (D' with A').
          if (lossy) {
            want_equal = false;
          } else {
            bool moved = false;
            for (const auto& el : bl.elems) {
              const float cv = decode_e2m1(std::get<1>(el));
              const float v1 = cv * dq(A1, static_cast<uint8_t>(e)), v2 = cv * dq(A2, static_cast<uint8_t>(e));
              want_equal = want_equal && v1 == v2;
              moved = moved || dq(A1, static_cast<uint8_t>(e)) != dq(A2, static_cast<uint8_t>(e));
            }
            tag_if(moved && c > 0.0f, want_equal ? "literal_values_stay" : "literal_values_change");
          }
        }
        tag(!want_change ? (want_equal ? "fixed_point" : "bytes_fixed_values_change") : want_equal ? "changed_equivalent" : "changed_lossy");
        any_change = any_change || bl.changed;
        any_lossy = any_lossy || !bl.values_equal;
        if (!bytes_ok || bl.changed != want_change || bl.values_equal != want_equal) {
          std::ostringstream os;
          os << r.name() << " profile " << prof << ", literal round trip (amax " << std::hexfloat << A1 << " -> " << A2 << std::defaultfloat
             << "), dequantized " << dtype_text(dt) << ", " << (col ? "columnwise" : "rowwise") << " block [" << key.first << ", "
             << key.second << "], " << rule << ": scale byte 0x" << std::hex << e << std::dec << ", largest code " << c << ": predicted "
             << (want_change ? "bytes change" : "bytes equal") << (want_equal ? ", values equal" : ", values change") << ", got "
             << (bl.changed ? "bytes changed" : "bytes equal") << (bl.values_equal ? ", values equal" : ", values changed")
             << (bytes_ok ? "" : ", bytes not the predicted ones") << bl.first_diff;
          RC_FAIL(os.str());
        }
      }
      // The verdict on the whole plane agrees with the blocks.
      if (any_change && !any_lossy) {
        const conformance::Equivalence eq = conformance::compare_values(q, back, {pk});
        if (!eq.equal) RC_FAIL("compare_values says not equivalent where every block's values are equal: " + eq.message);
        tag("verdict_equivalent");
      } else if (any_lossy) {
        const conformance::Equivalence eq = conformance::compare_values(q, back, {pk});
        if (eq.equal) RC_FAIL("compare_values says equivalent where a value changed: " + eq.message);
      }
    }
  });
}

}  // namespace qtc::prop
