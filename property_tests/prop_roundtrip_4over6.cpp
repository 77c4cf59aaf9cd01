/// \file prop_roundtrip_4over6.cpp
/// \brief Issue 26, item 2 for NVFP4 4over6 (TE_FORMATS.md §1.12): quantize(dequantize(q)) against q, the blocks whose
///        bytes change predicted exactly from q alone, both ways; where a block flips to the other candidate with equal
///        values, compare_values must say EQUIVALENT and name 4over6. Runs inside prop_algebra.
///
/// Derivation (profile te, 1x16 and 16x16, E4M3_MAX 256 and 448, MAE and MSE; the round trip dequantizes to F32 and
/// quantizes again with the same recipe under the plane's amax A, as TE's NVFP4 tensors carry it). A block of q has scale
/// byte sf (value S) and codes c_i (largest |c_i| = m). Dequantized, y_i = c_i * D with D = RN(RN(S * A) * RN(1 / (6 *
/// E4M3_MAX))) (§1.14), so the block max is m * S * D and S_enc * D = 1 +- a few 2^-24. The re-quantization forms both
/// candidates (§1.12): base = RN(RN(m S D / 6) * S_enc) = (m S / 6)(1 +- eps), S6' = E4M3(base), S4' = E4M3(min(1.5 base,
/// 448)); eps moves neither off the E4M3 value nearest to m S / 6 (resp. m S / 4) unless that exact value is an E4M3
/// midpoint, where the float value of base decides (the property evaluates §1.12's expression on the decoded block max
/// there; tagged "4over6_e4m3_tie"). Candidate k's codes are e2m1(y_i * enc_k) with
/// y_i * enc_k = (c_i S / S_k')(1 +- eps): candidate k "reproduces" the block (R_k) iff every c_i S / S_k' is an E2M1
/// value (exactly), and then its codes are those values and its decoded values are y_i again. Its error terms are
/// d_i = RN(RN(RN(q_i S_k') A) / (6 E4M3_MAX)) - y_i with q_i S_k' = c_i S exact in F32: the same d_i as for any other
/// reproducing candidate, so two reproducing candidates have bit-identical error sums, a tie, which TE breaks toward
/// map-to-6 (err_4 < err_6 strictly picks map-to-4). A candidate that does not reproduce differs at one element at least
/// by a grid step (>= 2^-5 of the scale) while the reproducing one's d_i are a few 2^-24 of the values, so it loses (MSE:
/// A in [2^-30, 2^30] keeps the squares of both normal). Hence, from q alone:
///  * S = 0, or m = 0 (every code zero): the block decodes to signed zeros, both candidates are 0 and every code becomes
///    0x0 / 0x8 by the sign of its zero (TE's +-6 under a zero scale come back as 0x0 / 0x8): bytes change iff S != 0 or a
///    code is nonzero; values equal.
///  * R_6: the block becomes (S6', c_i S / S6'); R_4 only: (S4', c_i S / S4'); neither: its values change (so do its
///    bytes: equal bytes under the same A decode equally).
/// Consequences: a map-to-6 block (normal S: m = 6) is a fixed point (S6' = S). A map-to-4 block (m = 4) flips to map-to-6
/// with equal values iff S / 1.5 is an E4M3 value (a normal S's mantissa 1.125, 1.5 or 1.875) and every |c_i| is 0, 1, 2
/// or 4 (x 1.5 = 0, 1.5, 3, 6): the original x chose map-to-4 because its own S6 = E4M3(bamax S_enc / 6) was not S / 1.5
/// (bamax 3.2-4.2% under 6 S / 1.5), the decoded block's is. Otherwise a map-to-4 block stays (its S6' grid misses a
/// value). Subnormal scales (S = k 2^-9) follow the same two lines (their ties, e.g. m S / 6 = 2^-10 at k = 1, m = 3, by
/// the float expression).
/// BF16 / F16 dequantized and row-scaled 4over6 (a relative 2^-9 moves m S / 6 by as much as the distance of some E4M3
/// values to their midpoints, and the reproducing candidate's errors are no longer a few 2^-24; row-scaled recomputes
/// each row's amax from y): Nvfp4FourOverSixRoundTripFromBf16F16AndRowScaled below, with its rule.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <map>
#include <sstream>

#include "harness.hpp"
#include "roundtrip_util.hpp"
#include "qtc/codec.hpp"
#include "qtc/quantize.hpp"
#include "qtc/value_equivalence.hpp"

namespace qtc::prop {

namespace {

/// The E4M3 value nearest to t / k (t, k > 0 exact doubles; RN-even), or -1 when t / k is exactly a midpoint of two E4M3
/// values (the float arithmetic then decides). Saturates at 448.
double e4m3_nearest(double t, double k) {
  if (t >= 448.0 * k) return 448.0;
  double lo = 0.0;
  for (uint32_t b = 1; b <= 0x7E; ++b) {
    const double v = decode_e4m3(b);
    if (v * k >= t) {
      const double twice_mid = (lo + v) * k;  // t vs 2 * mid * k, exact
      if (2.0 * t == twice_mid) return -1.0;
      return 2.0 * t < twice_mid ? lo : v;
    }
    lo = v;
  }
  return 448.0;
}

bool is_e2m1_value(double r) {
  const double a = std::fabs(r);
  return a == 0.0 || a == 0.5 || a == 1.0 || a == 1.5 || a == 2.0 || a == 3.0 || a == 4.0 || a == 6.0;
}

/// Input in the scaled domain w = x * S_enc, per 16x16 tile: zero; random magnitudes 2^j (j in [-16, 10], scaled domain);
/// "flip" blocks (each row's block: one element 6u(1 - 0.035), the others 0, +-1.5u, +-3u: map-to-4 wins with codes 0, 1,
/// 2, 4 under S4 = 1.5u while S6 = 0.9375u); values exactly on both grids; small blocks (subnormal scales); -0.0. The
/// tensor amax A = 1.5 * 2^p is planted at [0, 0]. With `grid` > 0 (the F16 subnormal step 2^-24 in the scaled domain,
/// 2^-24 * S_enc), half the tiles draw their magnitudes at grid * 2^t (t in [0, 5]): blocks whose decoded values F16
/// holds only on its subnormal grid, a few steps per E2M1 step, where the reproducing candidate carries that rounding
/// and the other one's grid can lie nearer (the "4over6_dtype_other_wins" blocks).
HostMatrix make_4over6_input(int64_t M, int64_t K, double s_enc, float A, uint64_t seed, int e4m3_max, double grid = 0.0) {
  HostMatrix x(DType::kF32, M, K);
  uint64_t s = seed | 1;
  std::map<std::pair<int64_t, int64_t>, std::pair<int, int>> tile;
  const double wmax = 6.0 * e4m3_max * 0.99;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const auto key = std::make_pair(i / 16, j / 16);
      if (!tile.count(key)) {
        int mode = static_cast<int>(xorshift(s) % 6);
        int jj = mode == 1 ? static_cast<int>(xorshift(s) % 27) - 16 : mode == 4 ? static_cast<int>(xorshift(s) % 8) - 14
                                                                                    : static_cast<int>(xorshift(s) % 14) - 6;
        if (grid > 0.0 && (xorshift(s) & 1) != 0) {
          mode = 6;
          jj = std::ilogb(grid) + static_cast<int>(xorshift(s) % 6);
        }
        tile[key] = {mode, jj};
      }
      const auto [mode, jj] = tile[key];
      const uint64_t r = xorshift(s);
      const double u = std::ldexp(1.0, jj), g = static_cast<double>(r >> 11) * 0x1p-53 * 2.0 - 1.0;
      const double sign = (r & 1) ? -1.0 : 1.0;
      double w = 0.0;
      if (mode == 1 || mode == 4 || mode == 6) w = g * u * (1.0 + static_cast<double>((r >> 3) % 5));
      if (mode == 2) {
        const int pick = static_cast<int>((r >> 5) % 8);
        w = (j % 16) == (i % 16) ? sign * 6.0 * u * (1.0 - 0.035) : pick < 2 ? 0.0 : pick < 4 ? sign * 1.5 * u : sign * 3.0 * u;
      }
      if (mode == 3) {
        static const double kDual[] = {0.0, 1.5, 3.0, 6.0, 6.0};
        w = sign * kDual[(r >> 5) % 5] * u;
      }
      if (mode == 5) w = (r % 3) == 0 ? -0.0 : g * u * 4.0;
      w = std::fmax(std::fmin(w, wmax), -wmax);
      x.set(i, j, static_cast<float>(w / s_enc));
    }
  x.set(0, 0, A);
  return x;
}

}  // namespace

TEST(AlgebraProperty, Nvfp4FourOverSixRoundTripFlipsExactlyWherePredicted) {
  check_property({"1x16", "16x16", "mae", "mse", "e4m3_max_256", "e4m3_max_448", "fixed_point", "flip_to_map6_equal",
                  "zero_scale_signs", "verdict_names_4over6", "flip_values_rounded_apart", "verdict_names_rounding"},
                 [] {
    const bool tile2d = uniform_index(3) == 0, mse = uniform_index(2) == 0;
    const int e4m3_max = uniform_index(3) == 0 ? 448 : 256;
    std::map<std::string, std::string> md{{"recipe", "nvfp4"}, {"profile", "te"}, {"fourover6", "1"},
                                          {"fourover6_err", mse ? "mse" : "mae"}, {"e4m3_max", std::to_string(e4m3_max)}};
    if (tile2d) md["tile"] = "16x16";
    const Recipe r = Recipe::from_metadata(md);
    tag(tile2d ? "16x16" : "1x16");
    tag(mse ? "mse" : "mae");
    tag(e4m3_max == 256 ? "e4m3_max_256" : "e4m3_max_448");
    const int64_t M = 16 * *rc::gen::inRange<int64_t>(1, 5), K = 16 * *rc::gen::inRange<int64_t>(1, 7);
    const int p = *rc::gen::resize(100, rc::gen::inRange(-30, 29));
    const float A = std::ldexp(1.5f, p);
    const double s_enc = 6.0 * e4m3_max / static_cast<double>(A);
    const HostMatrix x = make_4over6_input(M, K, s_enc, A, *rc::gen::arbitrary<uint64_t>(), e4m3_max);
    const QuantizedTensor q = ref::quantize(x.view(), r);
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      if (!(pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise)) continue;
      const Recipe rp = plane_only(r, pk);
      const float Ap = q.plane(pk).amax[0];
      RC_ASSERT(Ap == A);
      const HostMatrix y = ref::dequantize(q, pk, DType::kF32);
      const QuantizedTensor back = ref::quantize_with_amax(y.view(), rp, Ap, Ap);
      const Plane& a = q.plane(pk);
      const Plane& b = back.plane(pk);
      RC_ASSERT(a.data.size() == b.data.size() && a.scale.bytes.size() == b.scale.bytes.size());
      const bool col = pk == PlaneKind::kColumnwise;
      const int64_t rows = a.data_rows, len = col ? M : K, tr = tile2d ? 16 : 1;
      struct Elem {
        int64_t i, j;
        uint8_t ca, cb;
      };
      std::map<std::pair<int64_t, int64_t>, std::vector<Elem>> blocks;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < len; ++j) {
          const size_t byte = static_cast<size_t>(i * a.data_cols + j / 2);
          blocks[{i / tr, j / 16}].push_back({i, j, static_cast<uint8_t>((a.data[byte] >> (4 * (j & 1))) & 0xF),
                                              static_cast<uint8_t>((b.data[byte] >> (4 * (j & 1))) & 0xF)});
        }
      const HostMatrix ya = ref::dequantize(q, pk, DType::kF32), yb = ref::dequantize(back, pk, DType::kF32);
      int64_t lossy = 0, ulp_blocks = 0, changed_blocks = 0;
      // §1.14: y = RN(c * RN(RN(sf * A) * RN(1 / (6 * E4M3_MAX)))).
      const float k6 = 1.0f / (6.0f * static_cast<float>(e4m3_max));
      auto decoded = [&](uint8_t code, double sfv) { return decode_e2m1(code) * ((static_cast<float>(sfv) * Ap) * k6); };
      for (const auto& kv : blocks) {
        const auto& key = kv.first;
        const std::vector<Elem>& elems = kv.second;  // (not a structured binding: the lambdas below capture it)
        const int64_t i0 = elems.front().i, j0 = elems.front().j;
        const uint8_t sa = a.scale.byte(i0, j0 / 16), sb = b.scale.byte(i0, j0 / 16);
        const double S = decode_e4m3(sa);
        double m = 0.0;
        bool changed = sa != sb, values_equal = true;
        for (const Elem& e : elems) {
          m = std::max(m, std::fabs(static_cast<double>(decode_e2m1(e.ca))));
          changed = changed || e.ca != e.cb;
          const int64_t xi = col ? e.j : e.i, xj = col ? e.i : e.j;
          values_equal = values_equal && ya.get(xi, xj) == yb.get(xi, xj);
        }
        // The predicted block: scale value and codes, or "values change" (bytes then change too).
        bool predicted_lossy = false;
        double S2 = 0.0;
        if (S != 0.0 && m != 0.0) {
          const double T = m * S;
          double s6 = e4m3_nearest(T, 6.0), s4 = e4m3_nearest(T, 4.0);
          if (s6 < 0.0 || s4 < 0.0) {
            // m S / 6 (or / 4) is an E4M3 midpoint: §1.12's float arithmetic on the decoded block max decides it, base =
            // RN(RN(y_max / 6) * S_enc), S6' = E4M3(min(base, 448)), S4' = E4M3(min(RN(base * 1.5), 448)).
            tag("4over6_e4m3_tie");
            float ymax = 0.0f;
            for (const Elem& e : elems) ymax = std::fmax(ymax, std::fabs(col ? y.get(e.j, e.i) : y.get(e.i, e.j)));
            const float base = ymax / 6.0f * ref::nvfp4_global_encode_scale(Ap, e4m3_max, r.profile);
            s6 = decode_e4m3(encode_e4m3(std::fmin(base, 448.0f)));
            s4 = decode_e4m3(encode_e4m3(std::fmin(base * 1.5f, 448.0f)));
          }
          auto reproduces = [&](double sk) {
            if (sk == 0.0) return false;
            for (const Elem& e : elems) {
              const double cv = decode_e2m1(e.ca), rr = cv * S / sk;
              if (!is_e2m1_value(rr) || rr * sk != cv * S) return false;
            }
            return true;
          };
          if (reproduces(s6)) S2 = s6;
          else if (reproduces(s4)) S2 = s4;
          else predicted_lossy = true;
        }
        bool want_change = predicted_lossy, want_equal = !predicted_lossy;
        std::string why = predicted_lossy ? "neither candidate holds the decoded values" : "";
        if (!predicted_lossy) {
          if (S2 != S) want_change = true;
          for (const Elem& e : elems) {
            const double cv = decode_e2m1(e.ca);
            const double rr = S2 == 0.0 ? std::copysign(0.0, cv) : cv * S / S2;
            const uint8_t want = encode_e2m1(static_cast<float>(rr));
            if (want != e.cb) {
              std::ostringstream os;
              os << "predicted code 0x" << std::hex << int(want) << " at plane [" << std::dec << e.i << ", " << e.j << "], got 0x"
                 << std::hex << int(e.cb);
              why = os.str();
            }
            want_change = want_change || want != e.ca;
            want_equal = want_equal && decoded(want, S2) == decoded(e.ca, S);
          }
          if (sb != encode_e4m3(static_cast<float>(S2)) && why.empty()) why = "predicted scale " + std::to_string(S2);
        }
        if (want_change) ++changed_blocks;
        if (!predicted_lossy && !want_equal) ++ulp_blocks;
        if (!want_change) tag("fixed_point");
        else if (predicted_lossy) tag("changed_lossy");
        else if (!want_equal) tag("flip_values_rounded_apart");
        else if (S == 0.0 || m == 0.0) tag("zero_scale_signs");
        else if (S2 * 1.5 == S) tag("flip_to_map6_equal");
        else tag("changed_equivalent_other");
        if (predicted_lossy) ++lossy;
        if (changed != want_change || values_equal != want_equal || (!predicted_lossy && !why.empty())) {
          std::ostringstream os;
          os << r.name() << ", " << (col ? "columnwise" : "rowwise") << " block [" << key.first << ", " << key.second << "]: scale "
             << S << " (0x" << std::hex << int(sa) << " -> 0x" << int(sb) << std::dec << "), largest code " << m << ": predicted "
             << (predicted_lossy ? "values change" : !want_change ? "a fixed point" : want_equal ? "bytes change, values equal" : "bytes change, values rounded apart") << ", got "
             << (changed ? "bytes changed" : "bytes equal") << (values_equal ? ", values equal" : ", values changed")
             << (why.empty() ? "" : " (" + why + ")");
          RC_FAIL(os.str());
        }
      }
      // The verdict: every changed block kept its values -> EQUIVALENT, naming 4over6 where the first scale that differs
      // is a flip.
      if (changed_blocks > 0 && lossy == 0 && ulp_blocks > 0) {
        // Every changed block holds the same values in exact arithmetic, but §1.14's rounding of sf * amax puts some of
        // them apart: FAIL, saying so.
        const conformance::Equivalence eq = conformance::compare_values(q, back, {pk});
        if (eq.equal) RC_FAIL("compare_values says equivalent where decoded values differ: " + eq.message);
        tag("verdict_names_rounding");
        if (eq.message.find("rounds sf * amax first") == std::string::npos) RC_FAIL("4over6 values rounded apart, message: " + eq.message);
      }
      if (changed_blocks > 0 && lossy == 0 && ulp_blocks == 0) {
        const conformance::Equivalence eq = conformance::compare_values(q, back, {pk});
        if (!eq.equal) RC_FAIL("compare_values says not equivalent where every block's values are equal: " + eq.message);
        if (eq.message.find("bytes differ, decoded values equal") == std::string::npos) RC_FAIL("EQUIVALENT message: " + eq.message);
        // compare_values explains the first scale entry that differs (compact order) when there is one.
        for (size_t k = 0; k < a.scale.bytes.size(); ++k) {
          if (a.scale.bytes[k] == b.scale.bytes[k]) continue;
          const double s1 = decode_e4m3(a.scale.bytes[k]), s2 = decode_e4m3(b.scale.bytes[k]);
          const bool flip = s1 == 1.5 * s2 || s2 == 1.5 * s1;
          tag_if(flip, "verdict_names_4over6");
          if (flip && eq.message.find("map-to-4 and map-to-6 candidates") == std::string::npos)
            RC_FAIL("EQUIVALENT at a 4over6 flip does not name the two candidates: " + eq.message);
          break;
        }
      }
    }
  });
}

/// BF16 / F16 dequantized, and row-scaled (1x16 rowwise, one amax per row, §1.11) from F32, BF16 or F16. The round trip
/// quantizes the dtype's values w_i = RN_dtype(c_i * D) under A' (the plane's amax carried back; row-scaled: A'_i =
/// max_j |w_ij|, no amax can be carried, tested). Candidate k reproduces the block (R_k) iff its codes, §1.12's
/// e2m1(w_i * enc_k) with sf_k = §1.12's float expression on w's block max under S_enc(A'), satisfy fp4(code) * S_k' = c_i
/// * S exactly. Then (from q alone, with §1.12's float expressions on the dtype's values):
///  * R_4 and R_6: both candidates' dequantized values are RN(RN(RN(c_i S) A') / (6 E4M3_MAX)), so err_4 == err_6 bit
///    for bit (checked) and the tie goes to map-to-6: the block becomes (S6', c_i S / S6').
///  * exactly one R_k: §1.12's error sums on w decide. From F32 (row-scaled, A'_i = A_i (1 +- few 2^-24)) the
///    reproducing candidate always wins (checked, as the F32 derivation above); from BF16 / F16 the reproducing candidate
///    carries w's own rounding (2^-9 / 2^-11 relative per element) and the other one's grid miss can be smaller: a
///    non-reproducing winner is counted (tagged "4over6_dtype_other_wins") and its values change.
///  * neither: the block's values change (so do its bytes).
/// Values: a reproducing winner's decoded values equal iff RN(c' RN(RN(S' A') k)) == RN(c RN(RN(S A) k)) per element
/// (k = RN(1 / (6 E4M3_MAX)), §1.14; row-scaled A' != A may move them: tagged "4over6_row_dequant_factor_moves").
/// F16: A in [2^-12, 1.5 * 2^14] (no inf; below F16's normal range w_i is subnormal or 0 and the block's R_k decide).
TEST(AlgebraProperty, Nvfp4FourOverSixRoundTripFromBf16F16AndRowScaled) {
  check_property({"bf16", "f16", "f32_row_scaled", "row_scaled", "16x16", "both_reproduce_tie", "one_reproduces",
                  "neither_reproduces", "4over6_dtype_other_wins", "flip_to_map6_equal", "fixed_point", "f16_subnormal_grid_tiles"},
                 [] {
    const bool row_scaled = uniform_index(3) == 0;
    const int dsel = uniform_index(row_scaled ? 3 : 2);
    const DType dt = row_scaled && dsel == 2 ? DType::kF32 : dsel == 0 ? DType::kBF16 : DType::kF16;
    const bool tile2d = !row_scaled && uniform_index(3) == 0, mse = uniform_index(2) == 0;
    const int e4m3_max = uniform_index(3) == 0 ? 448 : 256;
    std::map<std::string, std::string> md{{"recipe", "nvfp4"}, {"profile", "te"}, {"fourover6", "1"},
                                          {"fourover6_err", mse ? "mse" : "mae"}, {"e4m3_max", std::to_string(e4m3_max)}};
    if (tile2d) md["tile"] = "16x16";
    if (row_scaled) {
      md["row_scaled"] = "1";
      md["columnwise"] = "0";
    }
    const Recipe r = Recipe::from_metadata(md);
    tag(dtype_text(dt));
    tag_if(row_scaled, "row_scaled");
    tag_if(row_scaled && dt == DType::kF32, "f32_row_scaled");
    tag_if(tile2d, "16x16");
    const int64_t M = 16 * *rc::gen::inRange<int64_t>(1, 5), K = 16 * *rc::gen::inRange<int64_t>(1, 7);
    // F16, half the cases: a small amax (p in [-12, -6]) and tiles on F16's subnormal grid (make_4over6_input's `grid`),
    // where the reproducing candidate can lose (without them "4over6_dtype_other_wins" came in about 1 % of cases and
    // some seeds missed it at 200).
    const bool f16_grid = dt == DType::kF16 && uniform_index(2) == 0;
    tag_if(f16_grid, "f16_subnormal_grid_tiles");
    const int p = f16_grid ? *rc::gen::resize(100, rc::gen::inRange(-12, -5))
                  : dt == DType::kF16 ? *rc::gen::resize(100, rc::gen::inRange(-12, 15)) : *rc::gen::resize(100, rc::gen::inRange(-30, 29));
    const float A = std::ldexp(1.5f, p);
    const double s_enc = 6.0 * e4m3_max / static_cast<double>(A);
    const HostMatrix x = make_4over6_input(M, K, s_enc, A, *rc::gen::arbitrary<uint64_t>(), e4m3_max, f16_grid ? 0x1p-24 * s_enc : 0.0);
    const QuantizedTensor q = ref::quantize(x.view(), r);
    if (row_scaled) {
      check_row_scaled_requantize(q, x.view(), r, A, "row amax outside [2^-80, 2^100]");
    }
    const float k6 = 1.0f / (6.0f * static_cast<float>(e4m3_max)), k6max = 6.0f * static_cast<float>(e4m3_max);
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      if (!(pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise)) continue;
      const Recipe rp = plane_only(r, pk);
      const Plane& a = q.plane(pk);
      const HostMatrix y = ref::dequantize(q, pk, dt);
      const QuantizedTensor back =
          row_scaled ? ref::quantize(y.view(), rp) : ref::quantize_with_amax(y.view(), rp, a.amax[0], a.amax[0]);
      const Plane& b = back.plane(pk);
      RC_ASSERT(a.data.size() == b.data.size() && a.scale.bytes.size() == b.scale.bytes.size());
      const bool col = pk == PlaneKind::kColumnwise;
      const int64_t rows = a.data_rows, len = col ? M : K, tr = tile2d ? 16 : 1;
      auto amax_a = [&](int64_t i) { return row_scaled ? a.amax[static_cast<size_t>(i)] : a.amax[0]; };
      auto amax_b = [&](int64_t i) { return row_scaled ? b.amax[static_cast<size_t>(i)] : b.amax[0]; };
      if (row_scaled)
        for (int64_t i = 0; i < rows; ++i) {
          float m2 = 0.0f;
          for (int64_t j = 0; j < len; ++j) m2 = std::fmax(m2, std::fabs(y.get(i, j)));
          RC_ASSERT(f32_bits(amax_b(i)) == f32_bits(m2));
        }
      struct Elem {
        int64_t i, j, xi, xj;
        uint8_t ca, cb;
        float w;
      };
      std::map<std::pair<int64_t, int64_t>, std::vector<Elem>> blocks;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < len; ++j) {
          const size_t byte = static_cast<size_t>(i * a.data_cols + j / 2);
          const int64_t xi = col ? j : i, xj = col ? i : j;
          blocks[{i / tr, j / 16}].push_back({i, j, xi, xj, static_cast<uint8_t>((a.data[byte] >> (4 * (j & 1))) & 0xF),
                                              static_cast<uint8_t>((b.data[byte] >> (4 * (j & 1))) & 0xF), y.get(xi, xj)});
        }
      const HostMatrix ya = ref::dequantize(q, pk, DType::kF32), yb = ref::dequantize(back, pk, DType::kF32);
      int64_t changed_blocks = 0, lossy = 0, apart = 0;
      for (const auto& kv : blocks) {
        const std::vector<Elem>& elems = kv.second;
        const int64_t i0 = elems.front().i, j0 = elems.front().j;
        const uint8_t sa = a.scale.byte(i0, j0 / 16), sb = b.scale.byte(i0, j0 / 16);
        const double S = decode_e4m3(sa);
        const float Aa = amax_a(i0), Ab = amax_b(i0);
        // §1.12 on the dtype's values under S_enc(A'): both candidates, their codes and error sums.
        const float senc = ref::nvfp4_global_encode_scale(Ab, e4m3_max, r.profile), sdec = 1.0f / senc;
        float wmax = 0.0f;
        for (const Elem& e : elems) wmax = std::fmax(wmax, std::fabs(e.w));
        const float base = wmax / 6.0f * senc;
        const uint8_t sfk[2] = {encode_e4m3(std::fmin(base * 1.5f, 448.0f)), encode_e4m3(std::fmin(base, 448.0f))};
        std::vector<uint8_t> codes[2];
        bool repro[2] = {true, true};
        float err[2] = {0.0f, 0.0f};
        for (int k = 0; k < 2; ++k) {
          const float sv = decode_e4m3(sfk[k]);
          const float enc = std::fmin(1.0f / (sv * sdec), FLT_MAX);
          std::map<int64_t, float> row_err;  // 16x16: per x row, in x column order, then the pairwise tree
          for (const Elem& e : elems) {
            const uint8_t c = encode_e2m1(e.w * enc);
            codes[k].push_back(c);
            repro[k] = repro[k] && static_cast<double>(decode_e2m1(c)) * sv == static_cast<double>(decode_e2m1(e.ca)) * S;
            const float d = ((decode_e2m1(c) * sv) * Ab) / k6max - e.w;
            const float t = mse ? d * d : std::fabs(d);
            if (tile2d) row_err[e.xi] = row_err[e.xi] + t;  // plane order visits each x row in x column order (both planes)
            else err[k] = err[k] + t;
          }
          if (tile2d) {
            std::vector<float> v;
            for (const auto& re : row_err) v.push_back(re.second);
            for (size_t w = 8; w >= 1; w /= 2)
              for (size_t rr = 0; rr < w; ++rr) v[rr] = v[rr] + v[rr + w];
            err[k] = v[0];
          }
        }
        const int win = err[0] < err[1] ? 0 : 1;  // 0: map-to-4
        if (repro[0] && repro[1]) {
          tag("both_reproduce_tie");
          if (f32_bits(err[0]) != f32_bits(err[1])) RC_FAIL("4over6: both candidates reproduce the block but their error sums differ");
        } else if (repro[0] || repro[1]) {
          tag("one_reproduces");
          if (!repro[win]) {
            tag("4over6_dtype_other_wins");
            if (dt == DType::kF32) RC_FAIL("4over6 row-scaled from F32: the candidate that does not reproduce the block won");
          }
        } else {
          tag("neither_reproduces");
        }
        const bool predicted_lossy = !repro[win];
        const double S2 = decode_e4m3(sfk[win]);
        bool changed = sa != sb, want_change = sa != sfk[win], values_equal = true, want_equal = !predicted_lossy, bytes_ok = sb == sfk[win];
        for (size_t n = 0; n < elems.size(); ++n) {
          const Elem& e = elems[n];
          changed = changed || e.ca != e.cb;
          want_change = want_change || e.ca != codes[win][n];
          bytes_ok = bytes_ok && e.cb == codes[win][n];
          values_equal = values_equal && ya.get(e.xi, e.xj) == yb.get(e.xi, e.xj);
          // §1.14: RN(c * RN(RN(sf * A) * k)).
          if (!predicted_lossy)
            want_equal = want_equal && decode_e2m1(codes[win][n]) * ((static_cast<float>(S2) * Ab) * k6) ==
                                           decode_e2m1(e.ca) * ((static_cast<float>(S) * Aa) * k6);
        }
        if (predicted_lossy) want_change = true;
        if (want_change) ++changed_blocks;
        if (predicted_lossy) ++lossy;
        else if (!want_equal) ++apart;
        if (!want_change) tag("fixed_point");
        else if (!predicted_lossy && want_equal && S2 * 1.5 == S) tag("flip_to_map6_equal");
        tag_if(row_scaled && !predicted_lossy && !want_equal, "4over6_row_dequant_factor_moves");
        if (changed != want_change || values_equal != want_equal || !bytes_ok) {
          std::ostringstream os;
          os << r.name() << " from " << dtype_text(dt) << ", " << (col ? "columnwise" : "rowwise") << " block [" << kv.first.first << ", "
             << kv.first.second << "]: scale " << S << " (0x" << std::hex << int(sa) << " -> 0x" << int(sb) << ", predicted 0x"
             << int(sfk[win]) << std::dec << "), candidates reproduce " << repro[0] << repro[1] << ", errors " << err[0] << " / "
             << err[1] << ": predicted " << (want_change ? "changed" : "fixed") << (want_equal ? ", values equal" : ", values differ")
             << ", got " << (changed ? "changed" : "fixed") << (values_equal ? ", values equal" : ", values differ")
             << (bytes_ok ? "" : " (bytes not the predicted candidate's)");
          RC_FAIL(os.str());
        }
      }
      if (changed_blocks > 0 && lossy == 0 && apart == 0) {
        const conformance::Equivalence eq = conformance::compare_values(q, back, {pk});
        if (!eq.equal) RC_FAIL("compare_values says not equivalent where every block's values are equal: " + eq.message);
        tag(row_scaled ? "verdict_equivalent_row_scaled" : "verdict_equivalent");
      } else if (lossy + apart > 0) {
        const conformance::Equivalence eq = conformance::compare_values(q, back, {pk});
        if (eq.equal) RC_FAIL("compare_values says equivalent where a block's values change: " + eq.message);
        tag("verdict_not_equivalent");
      }
    }
  });
}

}  // namespace qtc::prop
