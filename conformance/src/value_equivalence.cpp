/// \file value_equivalence.cpp
/// \brief "Bytes differ, decoded values equal" (value_equivalence.hpp).
#include "qtc/value_equivalence.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <algorithm>
#include <cstring>

#include "qtc/codec.hpp"
#include "qtc/kind.hpp"
#include "qtc/quantize.hpp"

namespace qtc::conformance {

namespace {

const char* plane_text(PlaneKind p) { return p == PlaneKind::kRowwise ? "rowwise" : "columnwise"; }

float scale_value(const ScaleMatrix& s, size_t i) {
  switch (s.type) {
    case ScaleType::kE4M3: return kE4M3Table[s.bytes[i]];
    case ScaleType::kE8M0: return s.bytes[i] == 0xFF ? NAN : std::ldexp(1.0f, static_cast<int>(s.bytes[i]) - 127);
    case ScaleType::kF32: {
      float v;
      std::memcpy(&v, s.bytes.data() + 4 * i, 4);
      return v;
    }
  }
  return NAN;
}

/// E2M1 data (NVFP4, MXFP4): two 4-bit codes per byte, element 2j in the low nibble.
bool e2m1_data(const Recipe& r) { return kind_info(r).e2m1_data; }

/// The value of data element i of a plane (E2M1 nibble or FP8 byte), without the scale.
float code_value(const QuantizedTensor& q, const Plane& p, int64_t i) {
  if (e2m1_data(q.recipe)) {
    static constexpr float k[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const uint8_t nib = static_cast<uint8_t>(p.data[static_cast<size_t>(i / 2)] >> (4 * (i & 1))) & 0xFu;
    return (nib & 8u) ? -k[nib & 7u] : k[nib & 7u];
  }
  const uint8_t b = p.data[static_cast<size_t>(i)];
  return q.recipe.fp8_type() == Fp8Type::kE4M3 ? kE4M3Table[b] : kE5M2Table[b];
}
uint32_t code_bits(const QuantizedTensor& q, const Plane& p, int64_t i) {
  if (e2m1_data(q.recipe)) return (p.data[static_cast<size_t>(i / 2)] >> (4 * (i & 1))) & 0xFu;
  return p.data[static_cast<size_t>(i)];
}

/// The largest |code value| of the 1-D block behind compact scale entry (r, c) of a plane whose data rows are the
/// scale rows (NVFP4 1x16 and MXFP4 both planes, MXFP8 rowwise), or -1 where the block is not laid out that way.
float block_max_code(const QuantizedTensor& q, const Plane& p, PlaneKind pk, int64_t r, int64_t c) {
  const Recipe& rc = q.recipe;
  // Byte-scaled kinds (not FP8 block / tensor) with 1-D blocks along the plane's data rows (the columnwise plane of
  // MXFP8 keeps x's orientation: its blocks run down the data's columns).
  const KindInfo& kind = kind_info(rc);
  const bool along_data_rows = kind.columnwise_transposed || pk == PlaneKind::kRowwise;
  if (kind.fp8_scaling_options || rc.is_2d() || !along_data_rows) return -1.0f;
  const int64_t bs = rc.block_cols();
  const int64_t len = e2m1_data(rc) ? p.data_cols * 2 : p.data_cols;
  const int64_t logical = pk == PlaneKind::kRowwise ? q.cols : q.rows;
  float m = 0.0f;
  for (int64_t j = c * bs; j < std::min({(c + 1) * bs, len, logical}); ++j) {
    const float v = std::fabs(code_value(q, p, r * len + j));
    if (!std::isnan(v)) m = std::max(m, v);
  }
  return m;
}

/// The element type's largest finite value (6 for E2M1).
float elem_max(const Recipe& r) {
  if (e2m1_data(r)) return 6.0f;
  return r.fp8_type() == Fp8Type::kE4M3 ? 448.0f : 57344.0f;
}

/// Equal as values: any NaN equals any NaN, -0.0 equals +0.0 (what a consumer of the decoded tensor sees).
/// 2-D tiles (NVFP4 16x16, MXFP8 32x32) keep one copy of the tile's scale per row (rowwise) or per column (MXFP8
/// columnwise) of the compact matrix: the index of the first copy that differs from its tile's first, or -1.
int64_t inconsistent_tile_copy(const Recipe& r, PlaneKind pk, const ScaleMatrix& s) {
  const int64_t t = r.block_cols();  // the tile's side (NVFP4 16, MXFP8 32)
  const bool along_rows = kind_info(r).columnwise_transposed || pk == PlaneKind::kRowwise;  // MXFP8 columnwise: columns
  for (int64_t i = 0; i < s.rows; ++i)
    for (int64_t j = 0; j < s.cols; ++j) {
      const int64_t i0 = along_rows ? (i / t) * t : i, j0 = along_rows ? j : (j / t) * t;
      if (std::memcmp(s.bytes.data() + (i * s.cols + j) * static_cast<int64_t>(s.elem_size()),
                      s.bytes.data() + (i0 * s.cols + j0) * static_cast<int64_t>(s.elem_size()), s.elem_size()) != 0)
        return i * s.cols + j;
    }
  return -1;
}

bool same_value(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

/// NVFP4: where code * block scale is the same exact product under both encodings (4over6's map-to-4 and map-to-6
/// candidates of one block, or any scale pair the codes compensate), the decoded floats can still differ: §1.14 rounds
/// sf * amax and its product with 1 / (6 * E4M3_MAX) before the code multiplies. Empty elsewhere.
std::string nvfp4_rounding_note(const QuantizedTensor& want, const QuantizedTensor& got, const Plane& pw, const Plane& pg, PlaneKind pk,
                                int64_t xi, int64_t xj) {
  if (want.recipe.nvfp4_or_null() == nullptr || pw.scale.type != ScaleType::kE4M3) return "";
  const int64_t r = pk == PlaneKind::kRowwise ? xi : xj, c = pk == PlaneKind::kRowwise ? xj : xi;
  const int64_t len = pw.data_cols * 2, si = r * pw.scale.cols + c / 16;
  if (c >= len || si < 0 || static_cast<size_t>(si) >= pw.scale.bytes.size()) return "";
  const float pa = code_value(want, pw, r * len + c) * scale_value(pw.scale, static_cast<size_t>(si));
  const float pb = code_value(got, pg, r * len + c) * scale_value(pg.scale, static_cast<size_t>(si));
  if (pa != pb || pw.scale.bytes[static_cast<size_t>(si)] == pg.scale.bytes[static_cast<size_t>(si)]) return "";
  return ::fmt::format(" (code x block scale is {} under both encodings{}, but the dequantization rounds sf * amax first "
                       "(TE_FORMATS.md 1.14), so the two decoded floats differ by rounding)",
                       pa, want.recipe.nvfp4().fourover6 ? ": the block's 4over6 map-to-4 and map-to-6 candidates" : "");
}

}  // namespace

Equivalence compare_values(const QuantizedTensor& want, const QuantizedTensor& got, const std::vector<PlaneKind>& planes) {
  Equivalence e;
  e.equal = true;
  std::string value_diff;
  for (PlaneKind pk : planes) {
    const std::optional<Plane>& pw = pk == PlaneKind::kRowwise ? want.rowwise : want.columnwise;
    const std::optional<Plane>& pg = pk == PlaneKind::kRowwise ? got.rowwise : got.columnwise;
    if (!pw || !pg || pw->data.size() != pg->data.size() || pw->scale.bytes.size() != pg->scale.bytes.size()) {
      e.equal = false;
      e.message = ::fmt::format("{} plane: not comparable (shapes differ)", plane_text(pk));
      return e;
    }
    const int64_t nelem = pw->data_rows * (e2m1_data(want.recipe) ? pw->data_cols * 2 : pw->data_cols);
    int64_t first_code = -1, first_scale = -1, first_amax = -1;
    for (int64_t i = 0; i < nelem; ++i)
      if (code_bits(want, *pw, i) != code_bits(got, *pg, i)) {
        if (first_code < 0) first_code = i;
        ++e.differing_bytes;
      }
    const size_t nscale = pw->scale.bytes.size() / pw->scale.elem_size();
    for (size_t i = 0; i < nscale; ++i)
      if (std::memcmp(pw->scale.bytes.data() + i * pw->scale.elem_size(), pg->scale.bytes.data() + i * pg->scale.elem_size(),
                      pw->scale.elem_size()) != 0) {
        if (first_scale < 0) first_scale = static_cast<int64_t>(i);
        ++e.differing_bytes;
      }
    for (size_t i = 0; i < pw->amax.size() && i < pg->amax.size(); ++i)
      if (!same_value(pw->amax[i], pg->amax[i])) {
        if (first_amax < 0) first_amax = static_cast<int64_t>(i);
        ++e.differing_bytes;
      }
    if (pk == PlaneKind::kRowwise && !same_value(want.scale_inv, got.scale_inv)) ++e.differing_bytes;
    // NVFP4 16x16 and MXFP8 32x32 tiles keep one scale copy per row of the tile (compact [rows, blocks]); dequantization
    // reads one of them, a GEMM reads each row's. A copy that differs is an inconsistent tile, never an equivalent encoding.
    if (first_scale >= 0 && want.recipe.is_2d() && want.recipe.fp8_block_or_null() == nullptr) {
      for (const Plane* pl : {&*pw, &*pg}) {
        const int64_t bad = inconsistent_tile_copy(want.recipe, pk, pl->scale);
        if (bad < 0) continue;
        e.equal = false;
        e.message = ::fmt::format("{} scale [{}, {}] of the {} tensor: a 2-D tile's scale copies differ (consumers read each "
                                  "copy; dequantization reads one)",
                                  plane_text(pk), bad / pl->scale.cols, bad % pl->scale.cols, pl == &*pw ? "first" : "second");
        return e;
      }
    }
    // Decoded values.
    const HostMatrix dw = ref::dequantize(want, pk, DType::kF32), dg = ref::dequantize(got, pk, DType::kF32);
    for (int64_t i = 0; i < dw.numel() && value_diff.empty(); ++i)
      if (!same_value(dw.as<float>()[i], dg.as<float>()[i]))
        value_diff = ::fmt::format("{} plane: decoded values differ at [{}, {}]: {} vs {}{}", plane_text(pk), i / dw.cols, i % dw.cols,
                                   dw.as<float>()[i], dg.as<float>()[i], nvfp4_rounding_note(want, got, *pw, *pg, pk, i / dw.cols, i % dw.cols));
    if (!e.first.empty() || (first_code < 0 && first_scale < 0 && first_amax < 0)) continue;
    // Why two encodings exist at the first difference.
    if (first_scale >= 0) {
      const ScaleMatrix& sw = pw->scale;
      const float a = scale_value(sw, static_cast<size_t>(first_scale)), b = scale_value(pg->scale, static_cast<size_t>(first_scale));
      const int64_t r = first_scale / sw.cols, c = first_scale % sw.cols;
      std::string why;
      // Codes under this scale entry in the same plane: rowwise 1-D blocks along the row; otherwise the data differences
      // in general.
      if (a == 0.0f || b == 0.0f) {
        why = want.recipe.nvfp4_or_null() != nullptr
                  ? "one E4M3 block scale is 0 (the block scale underflowed E4M3, or the block is all zero): every code under it "
                    "decodes to 0, whatever it holds (TE writes +-6 there), so any codes equal the zeros of the other"
                  : "one scale is zero: the block decodes to zeros under both (an all-zero block has no canonical scale)";
      } else if (std::isfinite(a) && std::isfinite(b)) {
        int ea = 0, eb = 0;
        const float ma = std::frexp(a, &ea), mb = std::frexp(b, &eb);
        // The block's largest code under the larger scale: at most half the element maximum means the scale one binade
        // lower holds the same values with every code doubled (E2M1 0.5..3 -> 1..6 and FP8 codes are exact when doubled).
        const bool a_big = a > b;
        const float cbig = block_max_code(a_big ? want : got, a_big ? *pw : *pg, pk, r, c);
        const float csmall = block_max_code(a_big ? got : want, a_big ? *pg : *pw, pk, r, c);
        const float emax = elem_max(want.recipe);
        const Mxfp8Options* mx8 = want.recipe.mxfp8_or_null();
        const Mxfp4Options* mx4 = want.recipe.mxfp4_or_null();
        const bool pow2_round = (mx8 != nullptr && mx8->scale_rule == MxScaleRule::kPow2Round) ||
                                (mx4 != nullptr && mx4->scale_rule == MxScaleRule::kPow2Round);
        if (pow2_round && ma == mb && cbig != 0.0f)
          why = ::fmt::format("the scales are 2^{} apart and the codes compensate: compressed-tensors' pow2_round rounds a "
                              "block max whose mantissa is 1.75 or more up to the next power of two, so a block whose largest "
                              "code is the element maximum {} (1.75 * 2^{}) derives the scale one binade higher from its "
                              "decoded values, under which every code halves exactly",
                              ea - eb, emax, std::ilogb(emax));
        else if (cbig == 0.0f && csmall == 0.0f)
          why = "every code of the block is zero under both scales: an all-zero block has no canonical scale (TE writes 0, "
                "torchao 2^-6, modelopt 1.0; a tiny block whose codes all round to zero decodes to such a block)";
        else if (ma == mb && cbig >= 0.0f && cbig <= emax / 2 && cbig > 0.0f)
          why = ::fmt::format("the scales are 2^{} apart and the codes compensate: the block's largest code under the larger "
                              "scale is {}, at most half the element maximum {}, so the scale one binade lower holds the same "
                              "values with every code doubled ({})",
                              ea - eb, cbig, emax,
                              want.recipe.nvfp4_or_null() != nullptr
                                  ? "NVFP4: an E4M3 block scale and its half; quantize(dequantize(q)) derives the half where "
                                    "the largest code is 3"
                                  : "a block max that rounds onto elem_max/2 * 2^k: the rceil / CEIL rules derive the larger "
                                    "scale from the input, the smaller one from its decoded values");
        else if (ma == mb)
          why = ::fmt::format("the scales are 2^{} apart and the codes compensate: every value of the block lies on both "
                              "scales' grids (its largest magnitude rounds onto a power-of-two boundary, or the block is all "
                              "zero)",
                              ea - eb);
        else if (want.recipe.nvfp4_or_null() != nullptr && want.recipe.nvfp4().fourover6 && (a * 2.0f == b * 3.0f || b * 2.0f == a * 3.0f))
          why = ::fmt::format("4over6 (TE_FORMATS.md 1.12): {} and {} are a block's map-to-4 and map-to-6 candidates (the "
                              "larger is 1.5 times the smaller) and every code under the larger is 0, 1, 2 or 4 in magnitude, "
                              "which the smaller holds as 0, 1.5, 3, 6: both candidates decode to the same values, their "
                              "quantization errors tie, and TE breaks the tie toward map-to-6 (so quantizing the decoded "
                              "block again picks map-to-6)",
                              std::max(a, b), std::min(a, b));
        else
          why = ::fmt::format("the scales differ by the factor {} and every decoded value of the block is the same under "
                              "both (each code times its scale rounds to the same float: codes that compensate the factor, or "
                              "F32 scales a few ulps apart, as FP8 block's re-derived RN(1 / RN(max / RN(max * scale_inv))))",
                              std::max(a, b) / std::min(a, b));
      } else {
        why = "two NaN encodings of the scale";
      }
      e.first = ::fmt::format("{} scale [{}, {}]: {} vs {}: {}", plane_text(pk), r, c, a, b, why);
    } else if (first_code >= 0) {
      const float a = code_value(want, *pw, first_code), b = code_value(got, *pg, first_code);
      const uint32_t ca = code_bits(want, *pw, first_code), cb = code_bits(got, *pg, first_code);
      const int64_t cols = e2m1_data(want.recipe) ? pw->data_cols * 2 : pw->data_cols;
      const bool rowwise_zero = pk == PlaneKind::kRowwise && want.recipe.fp8_block_or_null() == nullptr && first_code < dw.numel() &&
                                dw.as<float>()[first_code] == 0.0f && (a != 0.0f || b != 0.0f);
      const char* why = rowwise_zero ? (want.recipe.nvfp4_or_null() != nullptr
                                            ? "the block's scale is zero (an all-zero block, or an E4M3 block scale that "
                                              "underflowed: TE writes +-6 there): every code decodes to 0"
                                            : "the block's scale is zero (an all-zero block): every code decodes to 0")
                        : (a == 0.0f && b == 0.0f) ? "-0.0 and +0.0 decode to the same zero"
                        : (std::isnan(a) && std::isnan(b)) ? "two NaN encodings"
                                                           : "the codes differ and the block scale makes them decode equal";
      e.first = ::fmt::format("{} data [{}, {}]: code 0x{:x} vs 0x{:x}: {}", plane_text(pk), first_code / cols, first_code % cols, ca, cb, why);
    } else {
      e.first = ::fmt::format("{} amax [{}]: {} vs {}: the amax differs without changing a decoded value", plane_text(pk), first_amax,
                              pw->amax[static_cast<size_t>(first_amax)], pg->amax[static_cast<size_t>(first_amax)]);
    }
  }
  if (!value_diff.empty()) {
    e.equal = false;
    e.message = value_diff;
    return e;
  }
  e.message = ::fmt::format("bytes differ, decoded values equal: {} elements differ; first at {}", e.differing_bytes,
                            e.first.empty() ? std::string("(none)") : e.first);
  return e;
}

}  // namespace qtc::conformance
