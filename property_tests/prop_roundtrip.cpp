/// \file prop_roundtrip.cpp
/// \brief Issue 26: quantize(dequantize(q)) against q for the E2M1 formats (MXFP4, NVFP4's two-level scale), per
///        recipe x profile x dequantized dtype (F32, BF16, F16), with the blocks whose bytes change predicted exactly
///        from q alone (a block's scale byte and its largest |code| c) and checked both ways: every block predicted to
///        change changes, no other does; where the prediction says the decoded values stay, compare_values must say
///        EQUIVALENT for the block. Runs inside prop_algebra (no new executable). Finite inputs. The FP8 formats (MXFP8,
///        FP8 block pow2, FP8 tensor) to F32 / BF16 / F16: Fp8RoundTripBytesChangeExactlyWherePredicted below, with its
///        derivation.
///
/// MXFP4 (E8M0 scale 2^(e-127), E2M1 codes; the decoded values c * 2^(e-127) are exact in F32 and BF16):
///  * te / ocp `rceil`: e = ceil(log2(RN(bamax * RN(1/6)))) puts bamax / 2^(e-127) in (3, 6] (3 - 2^-22 at worst), so c is
///    3, 4 or 6 for e >= 1. Decoded, the block max is c * 2^(e-127); RN(1/6) = 1/6 + 2^-26/3 gives RN(3 * RN(1/6)) = 1/2
///    and RN(6 * RN(1/6)) = 1, so e' = e - 1 when c = 3 and e' = e when c >= 4 (4/6 rounds up to 1). At e = 0 (2^-127,
///    the floor) e' = 0 too. Bytes change iff c <= 3 and e >= 1 (and c > 0); every code doubles (0.5..3 -> 1..6), so the
///    values stay (EQUIVALENT).
///  * te / ocp `ocp_floor`: e - 127 = floor(log2 bamax) - 2 puts bamax / 2^(e-127) in [4, 8), c in {4, 6}; floor(log2(c *
///    2^(e-127))) - 2 = e - 127 again, and the clamp at 2^-127 maps every smaller block to e = 0 both times: a fixed point.
///  * torchao `rceil`: as te (descale = bamax / 6, e = ceil(log2 descale)), except that torchao multiplies by 1.0, not
///    2^127, in a block whose scale byte is 0 (its `rcp`): an e = 1 block with c = 3 re-derives e' = 0 and its codes
///    become RN(x) = 0: bytes change and the values are lost (not equivalent).
///  * torchao `floor` (ocp_floor), `even`: c in {4, 6} (EVEN rounds bamax to a power of two at mantissa 1.75), a fixed
///    point, except at e = 0: torchao divides by max(2^(e-127), 2^-126) = 2^-126 but decodes 2^-127, so the decoded block is
///    half the value it stood for, and quantizing it again halves every code: bytes change iff the block has a nonzero code,
///    and the values change.
///  * torchao `ceil`: e - 127 = ceil(log2 bamax) - 2 puts bamax / 2^(e-127) in (2, 4], c in {2, 3, 4}; c = 2 decodes to a
///    power of two, which re-derives e' = e - 1 (codes double, values stay) except that e' = 0 divides by 2^-126 (values
///    halve): bytes change iff c <= 2 (e >= 1) or (e = 0 and c > 0); values stay iff e >= 2.
///  * F16: a decoded value that F16 does not hold exactly (below 2^-24's grid, or 65536 and above) changes its block: the
///    F16 value is a multiple of 2^-24 at least twice the code's lowest bit, so it re-encodes to another code (or, for the
///    block's 6, to a larger block max and scale). Blocks whose values are exact in F16 behave as in F32. In every dtype a
///    decoded value past FLT_MAX (c * 2^(e-127) >= 2^128: te's rceil gives e = 253 to a block at FLT_MAX) is infinite.
///    Such a block's round trip is the profile's rule (mxfp4_codec.hpp's scale and code of its order; compressed_tensors'
///    in the dtype, roundtrip_peer_rules.hpp) on the dtype's values w, evaluated per element from q: bytes and values both
///    ways (tagged "f16_inexact" / "f32_overflow" with _fixed / _equivalent / _lossy; of 20000 cases every F16 one lossy).
/// NVFP4 te / te_pyref (the round trip carries the global amax A, as TE's NVFP4 tensors do: quantize_with_amax(y, A)),
/// A in [2^-80, 2^100]: block scale sf = E4M3(bamax * S_enc / 6). For a normal sf (>= 2^-6) E4M3's relative spacing 1/8
/// keeps bamax / sf * S_dec in [5.6, 6.4], so c = 6; decoded, bamax' = 6 * sf * S_dec (1 +- a few 2^-24) re-derives sf, and
/// every code comes back (a relative error of 2^-9 in BF16 or 2^-11 in F16 too). c < 6 only under a subnormal sf = k *
/// 2^-9: sf' = E4M3(sf * c / 6): (k=1, c=4) -> 2^-9 = sf (fixed); (k=1, c=3) -> 2^-10 exactly, an E4M3 tie between 0 and
/// 2^-9 that the float rounding of the decoded max decides (te: RN(y_max * RN(S_enc * RN(1/6))) <= 2^-10 -> 0, changed;
/// jax and vllm round their own expressions of the same value); (k >=
/// 2, c <= 4) -> a smaller scale (changed). sf = 0 (the block scale underflowed): codes +-6 decode to zeros and come back
/// as 0 (changed, values equal). F16: a block holding a decoded value c * D outside F16's normal range that F16 does not
/// hold (a subnormal off F16's 2^-24 grid, or |c * D| >= 65520: inf) sees w = RN16(c * D) there, errors that are not
/// relative 2^-11, so the te rule's derivation does not reach it; its round trip is §1.4 on the F16 values under the
/// carried amax, which the property evaluates from q's decoded values alone: sf' = E4M3(min(w_max * (S_enc * RN(1/6)),
/// FLT_MAX)), codes e2m1(w * enc(sf')) (te_pyref: clamped to +-6, -0.0 -> 0x0), bytes and values both ways. An inf makes
/// sf' = 448 and its own code +-6 (checked). te / te_pyref draw A in [2^-20, 2^22] for F16 (both edges reached); a
/// block F16 holds exactly, subnormals included, follows the rule above. The same with SR (te, A as above): the codes
/// are TE's SR emulation of w * enc(sf') with each element's random byte (tagged "nvfp4_f16_sr_formula"); row-scaled
/// (te, A in [2^-2, 2^14]): under the row's A'_i, decoded under A_i and A'_i (tagged "nvfp4_f16_row_scaled_formula").
/// The peers (torchao, modelopt, jax, vllm, compressed_tensors, ml_dtypes_cast): such a block follows the profile's own
/// block rule on the F16 values under the carried amax (roundtrip_peer_rules.hpp nvfp4_peer_requant: each profile's
/// global scale, its float expression of the block scale, its E2M1 rounding, -0.0 and clamps; jax, vllm and
/// compressed_tensors with the global scale in F16), bytes and values both ways (tagged "nvfp4_f16_peer_formula",
/// "nvfp4_f16_peer_<profile>", _fixed / _equivalent / _lossy). The float32 peers (torchao, modelopt, ml_dtypes_cast)
/// draw A as te does (F16 overflow reached); jax, vllm and compressed_tensors, whose input is F16, keep A in [2^-2, 2^14].
/// NVFP4 te_pyref and modelopt: as te, and a block holding code 0x8 changes (values equal): a negative x that rounds to
/// zero is 0x8 (the Py-ref signs a code by x * enc >= 0, modelopt by x < 0), but both map -0.0 itself to 0x0, so the
/// decoded -0.0 comes back as 0x0.
/// NVFP4 jax and vllm: as te_pyref (vllm maps -0.0 to 0x0), the tie decided by their own float expressions. Both
/// compute the global scale in the input's dtype, so their BF16 / F16 round trip starts from an input in that dtype
/// (q of the BF16 / F16 tensor, dequantized to it, re-quantized with the same amax: the same global scale both times);
/// the same rule holds (the decoded values are within 2^-9 / 2^-11 of c * sf * S_dec, inside E2M1's and E4M3's half
/// steps; F16 blocks outside its normal range are counted as below). The tie at 2^-10 (k = 1, c = 3) is decided by each
/// profile's own float expression of the block scale, evaluated on the decoded block max: jax converts the input to
/// float32 and computes max|x * RN(1 / (amax / 2688))| / 6, vllm gs * (bamax * RN(1/6)) with gs = T(T(1 / amax) * 2688)
/// rounded to the input dtype T (with F32's gs a vllm BF16 block was mispredicted; tagged "nvfp4_tie_input_dtype").
/// F16 input with amax < 2688 / 65520: 2688 / amax overflows F16, q is
/// all-zero codes under scale 448 and its round trip changes them (discarded, not a tensor to round-trip).
/// modelopt: a block whose codes are all zero under a scale other than 1.0 (its floor 2^-9 on a tiny block) decodes to
/// zeros, which modelopt gives the scale 1.0: it changes (values equal).
/// NVFP4 compressed_tensors: as te_pyref (its zero point maps -0.0 to 0x0, a negative rounding to zero is 0x8), its
/// global scale T(T(1 / amax) * 2688) in the input dtype T as vllm's (so BF16 / F16 round trips start from T, as above),
/// the tie decided by gs * T(bamax / 6) (float32 product; an E4M3 0 becomes 0.125), and an all-zero-code block under a scale other than 0.125 (0x20, its zero
/// block's) changes (values equal). NVFP4 ml_dtypes_cast: as te (its casts keep -0.0's sign), the tie decided by
/// (bamax / 6) / (amax / 2688) in float32.
/// MXFP4 compressed_tensors (pow2_round): bamax rounded to a power of two (up iff its mantissa >= 1.75) then floor(log2)
/// - 2 puts bamax / s in [3.5, 7), c in {4, 6}; 4 s and 6 s round to the same power of two: a fixed point, except code
/// 0x8 (a negative that rounded to zero), whose decoded -0.0 plus the zero point is 0x0 (values equal). From F16 it
/// computes in F16: an all-zero block's scale 2^-127 underflows to 0 and becomes 1.0 (byte 127: changed, values equal);
/// a block whose F16 max is subnormal: pow2_round on the subnormal's bits gives 2^-14 for a max >= 0.75 * 2^-14 (scale
/// 2^-16, byte 111, codes of w * 2^16) and 0 below (scale 2^-127 -> F16 0 -> 1.0, byte 127, every code 0: lost); evaluated
/// per element (ct_mx_requant), bytes and values (tagged "ct_f16_subnormal", _equivalent / _lossy).
/// NVFP4 te row-scaled (one amax per row, §1.11; rowwise only): no amax can be carried back (quantize_with_amax refuses
/// a row-scaled recipe, tested), so row i comes back under A'_i = max_j |y_ij| (tested: back's amax[i] is that). The
/// row max block has sf = 448 (A_i * S_enc / 6 = 448 up to float rounding), so A'_i ~ A_i and S_enc' / S_enc = 1 +- a
/// few 2^-24, which moves no normal E4M3 scale or E2M1 code off its grid point: the codes and block scales follow the
/// te rule above with the tie at 2^-10 decided under S_enc(A'_i). The decoded values are c * D with D = (sf * amax) *
/// RN(1/2688) (§1.14): they stay where D(A'_i) == D(A_i); where D moved, a block whose bytes stay keeps its values iff
/// RN(c * D) == RN(c * D') for each of its codes (c * D and c * D' can round together for c in {1.5, 3, 6}), evaluated per
/// element (tagged "row_scaled_dequant_factor_moves", "row_scaled_d_moves_values_change" / "_stay"; of 20000 cases one
/// such block kept its values). Rows with an amax outside [2^-80, 2^100] (other than 0) are discarded.
/// NVFP4 te / te_pyref literal round trip (quantize(dequantize(q)) recomputing the global amax; drawn as "te+literal",
/// "te_pyref+literal"): the plane comes back under A' = max |y| (checked), the row-scaled argument with one row: codes
/// and block scales by the te rule under S_enc(A'), values per element RN(c * D) vs RN(c * D') (also for a block that
/// changes only -0 to +0); tagged "nvfp4_literal_amax", "nvfp4_literal_amax_moves".
/// NVFP4 te with RHT (1x16, BF16 input, §1.9): the columnwise plane holds RHT(x^T) quantized, and dequantize leaves it in
/// the Hadamard domain (y^T = decoded RHT(x^T)). Quantizing y with RHT on would transform it a second time (and take
/// the amax of that): a quantization of RHT(RHT(x^T)), not a round trip, and not claimed here. The round trip of that plane is y re-quantized with RHT off under the plane's own amax
/// (amax(RHT(x^T))), the same arithmetic as te's plain columnwise plane: the te rule holds with A = that amax. The
/// rowwise plane of an RHT recipe is the plain one (tagged "nvfp4_rht_columnwise").
/// NVFP4 te with stochastic rounding (1x16, dequantized to F32, BF16 or F16; the round trip re-quantizes with the same
/// recipe, so with the same seed: the same random byte rb at each element, Philox at (index / 16, plane)). Block scales
/// are derived by RN as without SR, so the te rule above decides them. Under an unchanged scale the code of a = |y * enc|
/// is TE's emulation: t = fma(rb / 256, step(a), a), code floor(t / step(t)) * step(t), at most 6 (step 0.5 below 2, 1
/// below 4, else 2). a is |c| times 1 +- a few 2^-24 (F32), 2^-9 (BF16) or 2^-11 (F16), never a whole step away, so the
/// code is |c| or a neighbour: a < |c| gives the lower neighbour iff t < |c| (from F32: only rb = 0), a > |c| the upper
/// one iff t >= |c| + step(|c|) and |c| < 6 (from F32 never: rb / 256 * step < step - (a - |c|); from BF16 / F16 the
/// dtype's rounding can put a far enough above |c| for the largest random bytes: tagged "sr_code_moves_up"), a = |c|
/// keeps |c|. So an otherwise
/// fixed block changes iff one of its nonzero codes moves so (values change); tagged "sr_code_moves". A block whose
/// largest code is below 6 (SR rounded its max down, under any scale) re-derives a smaller scale from c * sf, under which
/// SR acts again (tagged "sr_block_max_below_6"): its scale is §1.4's on the dtype's block max, sf' = E4M3(y_max * (S_enc *
/// RN(1/6))) (about c * sf / 6: 2/3 sf for c = 4), and each element w comes back as TE's SR emulation of |w * enc'| with
/// its own random byte (the same byte: same seed, same index). A code whose c_i * sf / sf' is an E2M1 value and whose
/// scaled value lands on it (from F32; or above it from BF16 / F16) keeps its value; one whose value SR puts a step
/// away changes it. The property evaluates that per element from q alone and checks bytes and values both ways
/// (tagged "sr_below6_equal": bytes change, values equal, e.g. c = 4 with codes 0, 1, 2, 4 under 2/3 sf as 4over6's
/// flips; "sr_below6_lossy"; "sr_below6_fixed").
/// NVFP4 torchao (block scale clamped to [2^-6, 448]): c = 6 above the clamp, and a clamped block re-derives the clamp:
/// every block is a fixed point. NVFP4 modelopt (block scale floored at 2^-9, zero block 1.0): as te, except that k = 1
/// blocks (the floor) and zero blocks stay.
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
#include "qtc/quantize.hpp"
#include "qtc/rng.hpp"
#include "qtc/value_equivalence.hpp"

namespace qtc::prop {
namespace {

struct Block {
  uint8_t scale = 0;
  float cmax = 0.0f;          ///< largest |code value|
  bool f16_inexact = false;   ///< MXFP4: a decoded value the dtype does not hold exactly (F16), or past FLT_MAX
  bool f16_off_grid = false;  ///< NVFP4: a decoded value outside F16's normal range that F16 does not hold (or inf)
  uint8_t scale_b = 0;        ///< the round trip's scale byte
  RoundTripElems f16_elems;  ///< MXFP4, NVFP4 to F16 or SR: (dtype value, code of q, code of back)
  std::vector<uint8_t> rbytes;  ///< NVFP4 SR: each element's random byte (the order of f16_elems)
  std::vector<int64_t> pidx;    ///< MXFP4: each element's index in its plane (row * len + j; the order of f16_elems)
  float ymax = 0.0f;          ///< largest |decoded value| in the dequantized dtype
  bool changed = false;
  bool values_equal = true;
  bool neg_zero_code = false;  ///< a code 0x8 (-0)
  bool sr_moves = false;       ///< SR: a nonzero code that the re-quantization's stochastic rounding moves (see above)
  std::string first_diff;      ///< the first element whose code changed
};

}  // namespace

TEST(AlgebraProperty, E2M1RoundTripBytesChangeExactlyWherePredicted) {
  check_property({"mxfp4", "nvfp4", "f32", "bf16", "f16", "changed_equivalent", "changed_lossy", "fixed_point", "mxfp4_c3",
                  "nvfp4_subnormal_scale", "nvfp4_zero_scale", "f16_inexact", "nvfp4_row_scaled", "nvfp4_sr", "nvfp4_sr_16bit", "nvfp4_rht_columnwise",
                  "nvfp4_f16_overflow", "nvfp4_f16_subnormal"},
                 [] {
    const bool mx = uniform_index(2) == 0;
    DType dt = std::vector<DType>{DType::kF32, DType::kBF16, DType::kF16}[static_cast<size_t>(uniform_index(3))];
    std::map<std::string, std::string> md;
    bool literal = false;  // NVFP4 te / te_pyref: quantize(dequantize(q)) recomputing the global amax (no amax carried)
    if (mx) {
      static const std::vector<std::pair<std::string, std::string>> kRules = {
          {"te", "rceil"}, {"te", "ocp_floor"}, {"ocp", "ocp_floor"}, {"torchao", "rceil"},
          {"torchao", "ocp_floor"}, {"torchao", "ceil"}, {"torchao", "even"}, {"compressed_tensors", "pow2_round"}};
      const auto& pr = kRules[static_cast<size_t>(uniform_index(static_cast<int>(kRules.size())))];
      md = {{"recipe", "mxfp4"}, {"profile", pr.first}, {"scale_rule", pr.second}};
    } else {
      static const std::vector<std::string> kProfiles = {"te", "te_pyref", "torchao", "modelopt", "jax", "vllm", "compressed_tensors", "ml_dtypes_cast",
                                                         "te+row_scaled", "te+sr", "te+rht", "te+literal", "te_pyref+literal"};
      const std::string prof = kProfiles[static_cast<size_t>(uniform_index(static_cast<int>(kProfiles.size())))];
      md = {{"recipe", "nvfp4"}, {"profile", prof}};
      if ((prof == "te" || prof == "te_pyref") && uniform_index(3) == 0) md["tile"] = "16x16";
      if (prof == "te+rht") {
        md["profile"] = "te";
        md["rht"] = "1";  // the columnwise plane quantizes RHT(x^T) (§1.9)
      }
      if (prof == "te+sr") {
        md["profile"] = "te";
        md["stochastic_rounding"] = "1";
        md["seed"] = std::to_string(*rc::gen::inRange<uint64_t>(0, 1u << 30));
      }
      if (prof == "te+literal" || prof == "te_pyref+literal") {  // the round trip recomputes the amax (below)
        md["profile"] = prof.substr(0, prof.find('+'));
        literal = true;
      }
      if (prof == "te+row_scaled") {
        md["profile"] = "te";
        md["row_scaled"] = "1";  // one amax per row; rowwise (its columnwise plane needs BF16 input, §1.11)
        md["columnwise"] = "0";
      }
    }
    // vllm and jax compute NVFP4's global scale in the input's dtype: from BF16 / F16 the input itself is in that dtype
    // (q and its round trip compute the same global scale; F16: 2688 / amax overflows for amax < 0.041, discarded below).
    const bool in_dtype =
        !mx && (md["profile"] == "vllm" || md["profile"] == "jax" || md["profile"] == "compressed_tensors") && dt != DType::kF32;
    tag_if(in_dtype, dt == DType::kF16 ? "nvfp4_peer_f16_input" : "nvfp4_peer_bf16_input");
    tag_if(md.count("stochastic_rounding") && dt != DType::kF32, "nvfp4_sr_16bit");
    Recipe r = Recipe::from_metadata(md);
    const bool torchao_nv = !mx && r.profile == Profile::kTorchAO;
    if (torchao_nv) r.columnwise = false;  // torchao's nvfp4_quantize: rowwise only
    const int64_t M = mx ? *rc::gen::inRange<int64_t>(1, 70) : 16 * *rc::gen::inRange<int64_t>(1, 5);
    const int64_t K = mx ? *rc::gen::inRange<int64_t>(1, 100) : 16 * *rc::gen::inRange<int64_t>(1, 7);
    // Magnitudes: MXFP4 anywhere in float's range (F16 then sees underflow and overflow); NVFP4 with A in [2^-80, 2^100]
    // (F16: [2^-2, 2^14]).
    // NVFP4 te / te_pyref to F16 (SR too; not row-scaled): A in [2^-20, 2^22], past F16's range both ways (predicted by
    // §1.4 on the F16 values, below).
    // The peers computing in float32 (torchao, modelopt, ml_dtypes_cast) likewise (their block rules on the F16 values).
    const bool f16_wide = !mx && dt == DType::kF16 && !md.count("row_scaled") && !literal &&
                          (md["profile"] == "te" || md["profile"] == "te_pyref" || md["profile"] == "torchao" ||
                           md["profile"] == "modelopt" || md["profile"] == "ml_dtypes_cast");
    const int e0 = mx ? *rc::gen::inRange(-150, 125)
                      : (dt == DType::kF16 ? (f16_wide ? std::vector<int>{*rc::gen::inRange(-22, -12), *rc::gen::inRange(-2, 12),
                                                                          *rc::gen::inRange(14, 20)}[static_cast<size_t>(uniform_index(3))]
                                                       : *rc::gen::inRange(-2, 12))
                                           : *rc::gen::inRange(-78, 98));
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    const float clamp_abs = mx ? FLT_MAX : (dt == DType::kF16 ? (f16_wide ? 0x1p22f : 0x1p14f) : 0x1p100f);
    HostMatrix x = make_e2m1_input(M, K, e0, seed, clamp_abs);
    if (in_dtype || (!mx && r.nvfp4().rht)) {  // RHT is defined for BF16 input only (rule nvfp4-input-rht-bf16)
      HostMatrix xb(in_dtype ? dt : DType::kBF16, M, K);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < K; ++j) xb.set(i, j, x.get(i, j));
      x = xb;
    }
    tag(mx ? "mxfp4" : "nvfp4");
    tag(dtype_text(dt));
    const QuantizedTensor q = ref::quantize(x.view(), r);
    const float A = ref::amax(x.view());
    if (!mx && !(A >= 0x1p-80f && A <= 0x1p100f)) RC_DISCARD("NVFP4 tensor amax outside [2^-80, 2^100]");
    // F16 input: 2688 / amax computed in F16 overflows to inf for amax < 2688 / 65520 (q is then all-zero codes under
    // scale 448: no tensor to round-trip).
    if (in_dtype && dt == DType::kF16 && !(2688.0f / A < 65520.0f)) RC_DISCARD("vllm/jax/compressed_tensors F16: global scale 2688/amax overflows F16");
    const std::string prof(profile_name(r.profile));
    const bool row_scaled = !mx && r.nvfp4_row_scaled();
    const bool sr = !mx && r.nvfp4().stochastic;
    tag_if(sr, "nvfp4_sr");
    if (row_scaled) {
      check_row_scaled_requantize(q, x.view(), r, A, "row-scaled NVFP4: a row amax outside [2^-80, 2^100]");
      tag("nvfp4_row_scaled");
    }
    const MxScaleRule rule = mx ? r.mxfp4().scale_rule : MxScaleRule::kRceil;
    // NVFP4 te / te_pyref to F16: blocks F16 cannot hold are predicted by §1.4 on the F16 values (below).
    // (SR: SR's codes; row-scaled: under the row's A'_i, decoded under A_i and A'_i.)
    const bool f16_formula = !mx && dt == DType::kF16 && (prof == "te" || prof == "te_pyref");
    for (PlaneKind p : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      if (!(p == PlaneKind::kRowwise ? q.rowwise : q.columnwise)) continue;
      Recipe rp = plane_only(r, p);
      const HostMatrix y = ref::dequantize(q, p, dt);
      // RHT: dequantize leaves the columnwise plane in the Hadamard domain (y^T = the decoded RHT(x^T)); quantizing y with
      // RHT again would apply the transform twice, so the round trip of that plane re-quantizes y without RHT under the
      // plane's own amax (amax(RHT(x^T))): the same arithmetic as te's plain columnwise plane, so the te rule holds with
      // A = that amax.
      const float Ap = (mx || row_scaled) ? A : q.plane(p).amax[0];
      if (!mx && !row_scaled && !(Ap >= 0x1p-80f && Ap <= 0x1p100f)) RC_DISCARD("NVFP4 plane amax outside [2^-80, 2^100]");
      if (!mx && r.nvfp4().rht) {  // (the rowwise plane of an RHT recipe is the plain one: RHT off for both)
        rp.nvfp4().rht = false;
        tag_if(p == PlaneKind::kColumnwise, "nvfp4_rht_columnwise");
      }
      const QuantizedTensor back = (mx || row_scaled || literal) ? ref::quantize(y.view(), rp) : ref::quantize_with_amax(y.view(), rp, Ap, Ap);
      // Row-scaled: row i comes back under A'_i = max_j |y_ij| (the rule: checked), i.e. S_enc' = S_enc(A'_i).
      std::vector<float> row_a2;
      float a2_literal = Ap;  // literal: the plane comes back under A' = max |y| (checked)
      if (literal) {
        a2_literal = 0.0f;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < K; ++j) a2_literal = std::fmax(a2_literal, std::fabs(y.get(i, j)));
        RC_ASSERT(f32_bits(back.plane(p).amax[0]) == f32_bits(a2_literal));
        tag("nvfp4_literal_amax");
        tag_if(a2_literal != Ap, "nvfp4_literal_amax_moves");
        tag_if(ref::nvfp4_global_encode_scale(a2_literal, 448, r.profile) != ref::nvfp4_global_encode_scale(Ap, 448, r.profile),
               "nvfp4_literal_senc_moves");
      }
      // The amax a block was quantized under (q) and comes back under: row-scaled the row's, literal the plane's max |y|.
      auto amax_q = [&](size_t ri) { return row_scaled ? q.plane(p).amax[ri] : Ap; };
      auto amax_back = [&](size_t ri) { return row_scaled ? row_a2[ri] : a2_literal; };
      if (row_scaled) {
        for (int64_t i = 0; i < M; ++i) {
          float m2 = 0.0f;
          for (int64_t j = 0; j < K; ++j) m2 = std::fmax(m2, std::fabs(y.get(i, j)));
          row_a2.push_back(m2);
          RC_ASSERT(f32_bits(back.plane(p).amax[static_cast<size_t>(i)]) == f32_bits(m2));
          if (ref::nvfp4_global_encode_scale(m2, 448, r.profile) != ref::nvfp4_global_encode_scale(q.plane(p).amax[static_cast<size_t>(i)], 448, r.profile))
            tag("row_scaled_senc_moves");
        }
      }
      const Plane& a = q.plane(p);
      const Plane& b = back.plane(p);
      RC_ASSERT(a.data.size() == b.data.size());
      RC_ASSERT(a.scale.bytes.size() == b.scale.bytes.size());
      const HostMatrix ya = ref::dequantize(q, p, DType::kF32), yb = ref::dequantize(back, p, DType::kF32);
      const bool col = p == PlaneKind::kColumnwise;
      const int64_t rows = a.data_rows, len = col ? M : K;
      const int64_t bs = mx ? 32 : 16, tr = (!mx && r.is_2d()) ? 16 : 1;
      std::map<std::pair<int64_t, int64_t>, Block> blocks;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < len; ++j) {
          Block& bl = blocks[{i / tr, j / bs}];
          bl.scale = a.scale.byte(i, j / bs);
          const size_t byte = static_cast<size_t>(i * a.data_cols + j / 2);
          const uint8_t ca = static_cast<uint8_t>((a.data[byte] >> (4 * (j & 1))) & 0xF);
          const uint8_t cb = static_cast<uint8_t>((b.data[byte] >> (4 * (j & 1))) & 0xF);
          bl.cmax = std::max(bl.cmax, e2m1_mag(ca));
          bl.neg_zero_code = bl.neg_zero_code || ca == 0x8;
          if (sr && (ca & 7u) != 0) {
            // The quantizer's scaled value under the block's (unchanged) scale, and the element's random byte.
            const float s_dec = 1.0f / ref::nvfp4_global_encode_scale(Ap, 448, r.profile);
            const float av = std::fabs(y.get(col ? j : i, col ? i : j) * nvfp4_encode_factor(a.scale.byte(i, j / bs), s_dec));
            const uint8_t rb = sr_random_byte(r.nvfp4().seed, col ? 1u : 0u, static_cast<uint64_t>(i * len + j));
            // TE's emulation: t = fma(rb / 256, step(a), a), the code floor(t / step(t)) * step(t) (at most 6). a
            // below |c|: the lower neighbour iff t < |c|; above: the upper one iff t reaches it (|c| < 6).
            const float c = e2m1_mag(ca), u = static_cast<float>(rb) * (1.0f / 256.0f);
            auto step = [](float v) { return v >= 4.0f ? 2.0f : v >= 2.0f ? 1.0f : 0.5f; };
            const bool down = av < c && std::fmaf(u, step(av), av) < c;
            const bool up = av > c && c < 6.0f && std::fmaf(u, step(c), av) >= c + step(c);
            tag_if(up, "sr_code_moves_up");
            bl.sr_moves = bl.sr_moves || down || up;
          }
          if (ca != cb && bl.first_diff.empty()) {
            std::ostringstream d;
            d << " (first code change at plane element [" << i << ", " << j << "]: 0x" << std::hex << int(ca) << " -> 0x" << int(cb) << ")";
            bl.first_diff = d.str();
          }
          bl.changed = bl.changed || ca != cb || a.scale.byte(i, j / bs) != b.scale.byte(i, j / bs);
          const int64_t xi = col ? j : i, xj = col ? i : j;
          const float va = ya.get(xi, xj), vb = yb.get(xi, xj);
          bl.values_equal = bl.values_equal && va == vb;
          bl.ymax = std::max(bl.ymax, std::fabs(y.get(xi, xj)));
          if (mx && (!std::isfinite(va) || !exact_in(va, dt))) bl.f16_inexact = true;
          if (!mx && dt == DType::kF16 && y.get(xi, xj) != va && !(std::fabs(va) >= 0x1p-14f && std::fabs(va) <= 65504.0f))
            bl.f16_off_grid = true;
          bl.scale_b = b.scale.byte(i, j / bs);
          if (mx || dt == DType::kF16 || sr || row_scaled || literal) bl.f16_elems.emplace_back(y.get(xi, xj), ca, cb);
          if (mx) bl.pidx.push_back(i * len + j);
          if (sr) bl.rbytes.push_back(sr_random_byte(r.nvfp4().seed, col ? 1u : 0u, static_cast<uint64_t>(i * len + j)));
        }
      for (const auto& [key, bl] : blocks) {
        bool want_change = false, want_equal = true;
        const int e = bl.scale;
        const float c = bl.cmax;
        if (mx) {
          const bool ct_sub16 = prof == "compressed_tensors" && dt == DType::kF16 && bl.ymax != 0.0f && bl.ymax < 0x1p-14f;
          if (bl.f16_inexact || ct_sub16) {
            // A block holding a value the dtype does not hold (F16: off its 2^-24 grid or past 65504; any dtype: past
            // FLT_MAX), or (compressed_tensors, F16) a block whose max F16 holds only as a subnormal: the profile's rule
            // on the dtype's values, per element (roundtrip_peer_rules.hpp), bytes and values both ways.
            const int64_t lanes = rows * len / 32 * 32;  // compressed_tensors BF16: a NaN's sign bit by vector lane
            const std::vector<int64_t>& pidx = bl.pidx;  // (clang 14: a lambda may not name the structured binding `bl`)
            auto nan_neg = [&](size_t k) { return dt == DType::kBF16 && pidx[k] < lanes; };
            const MxBlockRequant pr = prof == "compressed_tensors" ? ct_mx_requant(bl.f16_elems, dt, false, nan_neg) : mxfp4_requant(r, bl.f16_elems);
            const MxVerdict v = mx_verdict(static_cast<uint8_t>(e), bl.scale_b, pr, bl.f16_elems);
            if (!v.bytes_ok || bl.changed != v.change || bl.values_equal != v.equal) {
              std::ostringstream os;
              os << r.name() << " profile " << prof << ", dequantized " << dtype_text(dt) << ", " << (col ? "columnwise" : "rowwise")
                 << " block [" << key.first << ", " << key.second << "], " << (ct_sub16 ? "its max an F16 subnormal" : "a value the dtype does not hold")
                 << " (largest decoded " << std::hexfloat << bl.ymax << std::defaultfloat << "): scale byte " << e << " -> " << int(bl.scale_b)
                 << ", predicted " << int(pr.byte) << (v.bytes_ok ? "" : ", codes or scale not the profile's rule on the dtype's values")
                 << (bl.changed != v.change ? ", change mispredicted" : "") << (bl.values_equal != v.equal ? ", values mispredicted" : "")
                 << bl.first_diff;
              RC_FAIL(os.str());
            }
            const std::string cls = ct_sub16 ? "ct_f16_subnormal" : dt == DType::kF16 ? "f16_inexact" : "f32_overflow";
            tag(cls);
            tag(cls + (!v.change ? "_fixed" : v.equal ? "_equivalent" : "_lossy"));
            tag(!v.change ? "fixed_point" : v.equal ? "changed_equivalent" : "changed_lossy");
            continue;
          } else if (prof == "compressed_tensors" && dt == DType::kF16 && bl.ymax == 0.0f) {
            // An all-zero block: its scale 2^-127 computed in F16 underflows to 0, which becomes 1.0 (byte 127).
            want_change = e != 127;
            tag("ct_f16_zero_block");
          } else if (prof != "torchao") {
            want_change = rule == MxScaleRule::kRceil && c > 0.0f && c <= 3.0f && e >= 1;
          } else if (rule == MxScaleRule::kRceil) {
            want_change = c > 0.0f && c <= 3.0f && e >= 1;
            want_equal = !(want_change && e == 1);
          } else if (rule == MxScaleRule::kCeil) {
            want_change = c > 0.0f && (c <= 2.0f || e == 0);
            want_equal = !(want_change && e <= 1);
          } else {  // floor, even
            want_change = c > 0.0f && e == 0;
            want_equal = !want_change;
          }
          tag_if(c == 3.0f && e >= 1, "mxfp4_c3");
          // compressed_tensors: a negative x that rounds to zero is 0x8; its decoded -0.0 plus the zero point is 0x0.
          if (prof == "compressed_tensors" && bl.neg_zero_code && !want_change) {
            want_change = true;
            want_equal = true;
            tag("ct_neg_zero");
          }
        } else {
          const float sf = decode_e4m3(static_cast<uint8_t>(e));
          if (bl.f16_off_grid) {
            // The block's F16 values w re-quantized by the profile's block rule under the carried amax (the te rule's
            // derivation does not hold: F16's rounding below 2^-14 and its overflow are not relative errors of 2^-11):
            // te / te_pyref §1.4 here, the peers' rules in roundtrip_peer_rules.hpp.
            const size_t ri = static_cast<size_t>(key.first);  // row-scaled: the block's row (1x16)
            const float A1 = amax_q(ri), A2 = amax_back(ri);
            const float s_enc = ref::nvfp4_global_encode_scale(A2, 448, r.profile);
            const ref::Nvfp4BlockDequant dq(r);  // the decoded value's factor of a block: what dequantize applies
            Nvfp4BlockRequant peer;
            if (!f16_formula) {
              std::vector<float> ws;
              for (const auto& el : bl.f16_elems) ws.push_back(std::get<0>(el));
              peer = nvfp4_peer_requant(prof, r, ws, A2, in_dtype ? dt : DType::kF32);
              tag("nvfp4_f16_peer_formula");
              tag("nvfp4_f16_peer_" + prof);
            }
            const uint8_t sf2 = f16_formula ? nvfp4_block_scale(bl.ymax, s_enc, false) : peer.sf;
            const float enc = nvfp4_encode_factor(sf2, 1.0f / s_enc);
            const float d1 = dq(A1, static_cast<uint8_t>(e)), d2 = dq(A2, sf2);
            bool pchange = sf2 != e, pequal = true, bytes_ok = sf2 == bl.scale_b;
            tag_if(sr, "nvfp4_f16_sr_formula");
            tag_if(row_scaled || literal, "nvfp4_f16_row_scaled_formula");
            for (size_t n = 0; n < bl.f16_elems.size(); ++n) {
              const auto& [w, ca, cb] = bl.f16_elems[n];
              const float v = w * enc;
              const float rbyte = sr ? static_cast<float>(bl.rbytes[n]) : 0.0f;  // a lambda may not name `bl` (clang)
              auto sr_code = [&] {  // TE's SR emulation (above) with the element's random byte
                const float av = std::fabs(v), t = std::fmaf(rbyte * (1.0f / 256.0f), sr_step(av), av);
                return encode_e2m1(std::copysign(std::fmin(std::floor(t / sr_step(t)) * sr_step(t), 6.0f), v));
              };
              const uint8_t c2 = !f16_formula ? peer.codes[n]
                                 : sr ? sr_code()
                                 : prof == "te_pyref" ? encode_e2m1(std::fmin(std::fmax(v, -6.0f), 6.0f), NegZero::kPositiveZero)
                                                      : encode_e2m1(v);
              pchange = pchange || c2 != ca;
              pequal = pequal && decode_e2m1(c2) * d2 == decode_e2m1(ca) * d1;
              bytes_ok = bytes_ok && c2 == cb;
              tag_if(std::isinf(w), "nvfp4_f16_overflow");
              tag_if(w != 0.0f && std::fabs(w) < 0x1p-14f, "nvfp4_f16_subnormal");
              // An infinite F16 value makes the block amax inf: scale 448 (E4M3 of FLT_MAX), the element's code +-6.
              if (f16_formula && std::isinf(w) && (sf2 != 0x7E || (c2 & 7u) != 7u)) RC_FAIL("F16 overflow: block scale or code not 448 / 6");
            }
            if (!bytes_ok || bl.changed != pchange || bl.values_equal != pequal) {
              std::ostringstream os;
              os << r.name() << " profile " << prof << ", dequantized f16, block [" << key.first << ", " << key.second
                 << "] outside F16's normal range: scale 0x" << std::hex << e << " -> 0x" << int(bl.scale_b) << ", predicted 0x"
                 << int(sf2) << std::dec << (bytes_ok ? "" : ", codes or scale not as predicted by the profile's block rule on the F16 values")
                 << (bl.changed != pchange ? ", change mispredicted" : "") << (bl.values_equal != pequal ? ", values mispredicted" : "")
                 << bl.first_diff;
              RC_FAIL(os.str());
            }
            tag(!pchange ? "fixed_point" : pequal ? "changed_equivalent" : "changed_lossy");
            tag_if(!f16_formula, !pchange ? "nvfp4_f16_peer_fixed" : pequal ? "nvfp4_f16_peer_equivalent" : "nvfp4_f16_peer_lossy");
            continue;
          }
          if (prof == "torchao") {
            want_change = false;
          } else if (e == 0) {
            want_change = tag_if(c > 0.0f, "nvfp4_zero_scale");
          } else if (c == 0.0f) {
            // Every code zero under a nonzero scale: decoded, an all-zero block, whose scale modelopt sets to 1.0 (0x38);
            // torchao's clamp 2^-6 holds both times (te never writes this).
            want_change = (prof == "modelopt" && e != 0x38) || (prof == "compressed_tensors" && e != 0x20);
            tag_if(want_change, "modelopt_zero_block");
          } else if (c < 6.0f && sr) {
            // SR can round a block's max down (a in (4, 6) -> 4 with probability (6 - a) / 2), so c < 6 under a normal
            // scale too: sf' = §1.4 on the decoded max, each code TE's SR emulation of |w * enc'| with its random byte.
            tag("sr_block_max_below_6");
            const float s_enc = ref::nvfp4_global_encode_scale(Ap, 448, r.profile);
            const uint8_t sf2 = encode_e4m3(std::fmin(bl.ymax * (s_enc * (1.0f / 6.0f)), FLT_MAX));
            const float enc = std::fmin(1.0f / (decode_e4m3(sf2) * (1.0f / s_enc)), FLT_MAX);
            const float d1 = (sf * Ap) * (1.0f / 2688.0f), d2 = (decode_e4m3(sf2) * Ap) * (1.0f / 2688.0f);
            bool pchange = sf2 != e, pequal = true, bytes_ok = sf2 == bl.scale_b;
            for (size_t n = 0; n < bl.f16_elems.size(); ++n) {
              const auto& [w, ca, cb] = bl.f16_elems[n];
              const float v = w * enc, av = std::fabs(v), t = std::fmaf(static_cast<float>(bl.rbytes[n]) * (1.0f / 256.0f), sr_step(av), av);
              const uint8_t c2 = encode_e2m1(std::copysign(std::fmin(std::floor(t / sr_step(t)) * sr_step(t), 6.0f), v));
              pchange = pchange || c2 != ca;
              pequal = pequal && decode_e2m1(c2) * d2 == decode_e2m1(ca) * d1;
              bytes_ok = bytes_ok && c2 == cb;
            }
            if (!bytes_ok || bl.changed != pchange || bl.values_equal != pequal) {
              std::ostringstream os;
              os << r.name() << " SR, dequantized " << dtype_text(dt) << ", block [" << key.first << ", " << key.second << "], largest code "
                 << c << " < 6: scale 0x" << std::hex << e << " -> 0x" << int(bl.scale_b) << ", predicted 0x" << int(sf2) << std::dec
                 << (bytes_ok ? "" : ", codes or scale not SR's under §1.4's scale") << (bl.changed != pchange ? ", change mispredicted" : "")
                 << (bl.values_equal != pequal ? ", values mispredicted" : "") << bl.first_diff;
              RC_FAIL(os.str());
            }
            tag(!pchange ? "sr_below6_fixed" : pequal ? "sr_below6_equal" : "sr_below6_lossy");
            tag(!pchange ? "fixed_point" : pequal ? "changed_equivalent" : "changed_lossy");
            continue;
          } else if (c < 6.0f) {
            tag("nvfp4_subnormal_scale");
            const int k = e;  // subnormal E4M3 bytes 1..7 are k * 2^-9
            if (prof == "modelopt" && k == 1) {
              want_change = false;
            } else if (k == 1 && c == 4.0f) {
              want_change = false;
            } else if (k == 1 && c == 3.0f) {
              // The E4M3 tie at 2^-10: sf' = 0 unless the float value the profile rounds to E4M3 lands above it.
              // Each profile's own float expression of the block scale decides it; vllm's global scale is computed in
              // the input's dtype (Tensor.__rtruediv__: T(T(1 / amax) * 2688)), jax converts the input to float32 first.
              tag_if(in_dtype, "nvfp4_tie_input_dtype");
              float v = 0.0f;
              if (prof == "jax") {
                v = (bl.ymax * (1.0f / (A / 2688.0f))) / 6.0f;  // max|x * RN(1 / (amax / 2688))| / 6
              } else if (prof == "vllm") {
                const DType gt = in_dtype ? dt : DType::kF32;
                const float gs = round_to_dtype(round_to_dtype(1.0f / A, gt) * 2688.0f, gt);
                v = gs * (bl.ymax * (1.0f / 6.0f));  // gs * (bamax * RN(1/6))
              } else if (prof == "compressed_tensors") {
                const DType gt = in_dtype ? dt : DType::kF32;  // every step in the input's dtype
                const float gs = round_to_dtype(round_to_dtype(1.0f / A, gt) * 2688.0f, gt);
                v = gs * round_to_dtype(bl.ymax / 6.0f, gt);  // gs * T(bamax / 6), the product in float32
              } else if (prof == "ml_dtypes_cast") {
                v = (bl.ymax / 6.0f) / (A / 2688.0f);  // (bamax / 6) / S, float32
              } else {
                const float Aq = amax_back(static_cast<size_t>(key.first));  // the re-quantization's amax
                v = bl.ymax * (ref::nvfp4_global_encode_scale(Aq, 448, r.profile) * (1.0f / 6.0f));  // bamax * (S_enc * RN(1/6))
              }
              want_change = !(v > 0x1p-10f);
              tag("nvfp4_tie");
            } else {
              want_change = true;
            }
            want_equal = !want_change;
            (void)sf;
          }
          if (e == 0) want_equal = true;
          // te_pyref / modelopt: a negative x that rounds to zero gets code 0x8, its decoded -0.0 then gets 0x0 (values
          // equal).
          if ((prof == "te_pyref" || prof == "modelopt" || prof == "vllm" || prof == "compressed_tensors") && bl.neg_zero_code &&
              !want_change) {
            want_change = true;
            want_equal = true;
            tag("pyref_neg_zero");
          }
        }
        if (sr && !want_change && bl.sr_moves) {
          want_change = true;
          want_equal = false;
          tag("sr_code_moves");
        }
        bool fixed_values_equal = true;  // a fixed point's decoded values stay (row-scaled: unless D moved, below)
        if (row_scaled || literal) {
          // Codes and block scales follow the te rule under S_enc' (S_enc' / S_enc = 1 +- a few 2^-24 moves no E4M3 or E2M1
          // rounding off its grid point). The decoded value is c * D with D = (sf * amax) * RN(1/2688) (§1.14), D from
          // A_i before and A'_i after: where D moved, a block whose bytes stay keeps its values iff RN(c * D) ==
          // RN(c * D') for each of its codes c (c * D and c * D' round together for some c in {1.5, 3, 6}), evaluated per
          // element.
          const size_t ri = static_cast<size_t>(key.first);
          const float sfv = decode_e4m3(static_cast<uint8_t>(e));
          const float d1 = (sfv * amax_q(ri)) * (1.0f / 2688.0f), d2 = (sfv * amax_back(ri)) * (1.0f / 2688.0f);
          if (d1 != d2 && c > 0.0f && (!want_change || want_equal)) {
            // (A changed block whose codes keep their values, te_pyref's -0 -> +0, keeps them under D' likewise.)
            bool stay = true;
            for (const auto& el : bl.f16_elems) {
              const float cv = decode_e2m1(std::get<1>(el));
              stay = stay && cv * d1 == cv * d2;
            }
            (want_change ? want_equal : fixed_values_equal) = stay;
            tag("row_scaled_dequant_factor_moves");
            tag(stay ? "row_scaled_d_moves_values_stay" : "row_scaled_d_moves_values_change");
          }
        }
        tag(!want_change ? (fixed_values_equal ? "fixed_point" : "bytes_fixed_values_change")
                         : want_equal ? "changed_equivalent" : "changed_lossy");
        if (bl.changed != want_change || (want_change && bl.values_equal != want_equal) ||
            (!want_change && bl.values_equal != fixed_values_equal)) {
          std::ostringstream os;
          os << r.name() << " profile " << prof << ", dequantized " << dtype_text(dt) << ", " << (col ? "columnwise" : "rowwise")
             << " block [" << key.first << ", " << key.second << "]: scale byte 0x" << std::hex << e << std::dec << ", largest code "
             << c << ", largest decoded " << std::hexfloat << bl.ymax << std::defaultfloat << ": predicted "
             << (want_change ? (want_equal ? "bytes change, values equal" : "bytes and values change")
                             : fixed_values_equal ? "a fixed point" : "bytes equal, values change (the row's dequantization factor moved)")
             << ", got " << (bl.changed ? "bytes changed" : "bytes equal") << (bl.values_equal ? ", values equal" : ", values changed") << bl.first_diff;
          RC_FAIL(os.str());
        }
      }
      // The verdict on the whole plane agrees with the blocks.
      bool any_lossy = false, any_change = false;
      for (const auto& kv : blocks) {
        any_lossy = any_lossy || !kv.second.values_equal;
        any_change = any_change || kv.second.changed;
      }
      if (any_change && !any_lossy) {
        const conformance::Equivalence eq = conformance::compare_values(q, back, {p});
        if (!eq.equal) RC_FAIL("compare_values says not equivalent where every block's values are equal: " + eq.message);
        if (eq.message.find("bytes differ, decoded values equal") == std::string::npos) RC_FAIL("EQUIVALENT message: " + eq.message);
      }
    }
  });
}

}  // namespace qtc::prop
