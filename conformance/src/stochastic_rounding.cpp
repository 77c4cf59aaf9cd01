/// \file stochastic_rounding.cpp
/// \brief Admissible stochastic rounding (stochastic_rounding.hpp).
#include "qtc/stochastic_rounding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "qtc/codec.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe.hpp"

namespace qtc::conformance {

namespace {

float e2m1_value(uint8_t nib) { return decode_e2m1(nib & 0xFu); }

/// E2M1 neighbours of |v| (saturating at 6).
void neighbours(float a, float& lo, float& hi) {
  static constexpr float g[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  if (a >= 6.0f) {
    lo = hi = 6.0f;
    return;
  }
  int i = 0;
  while (i < 7 && g[i + 1] <= a) ++i;
  lo = g[i];
  hi = g[i] == a ? a : g[i + 1];
}

struct Bin {
  int64_t n = 0;
  double s_lo = 0.0, s_hi = 0.0;  ///< sum(U - (p - eps)), sum(U - (p + eps))
};

}  // namespace

SrResult check_stochastic_rounding(const io::File& file, const SrOptions& opts) {
  SrResult res;
  try {
    Recipe r = Recipe::from_metadata(file.metadata);
    if (r.nvfp4_or_null() == nullptr || r.nvfp4().row_scaled || r.nvfp4().fourover6) {
      res.message = "admissible stochastic rounding is judged for NVFP4 (1x16 or 16x16, with or without RHT), the stochastic "
                    "rounding qtc has (row-scaled and 4over6 NVFP4 have none: rules nvfp4-row-scaled-no-sr, nvfp4-4over6-no-sr); "
                    "recipe " + r.name();
      return res;
    }
    if (file.metadata.count("layout") != 0 && file.metadata.at("layout") != "compact") {
      res.message = "admissible stochastic rounding reads compact layouts only (convert with qtc convert --layout compact)";
      return res;
    }
    const io::Tensor* xt = file.find("x");
    if (xt == nullptr || xt->shape.size() != 2) {
      res.message = "missing required tensor 'x' (2-D input)";
      return res;
    }
    const HostMatrix x = io::to_matrix(*xt);
    const int64_t M = x.rows, K = x.cols;
    r.nvfp4().stochastic = true;
    r.rowwise = file.find("rowwise_data") != nullptr;
    r.columnwise = file.find("columnwise_data") != nullptr;
    if (!r.rowwise && !r.columnwise) {
      res.message = "no rowwise_data or columnwise_data to judge";
      return res;
    }
    const QuantizedTensor q = ref::quantize(x.view(), r);
    // RHT (§1.9): the columnwise plane quantizes RHT(x^T) ([K, M], BF16), whose elements are the ones scaled.
    const HostMatrix xr = r.nvfp4().rht && r.columnwise ? ref::rht_transform(x.view(), r.nvfp4().rht_sign_mask) : HostMatrix();
    const double eps = std::ldexp(1.0, -opts.random_bits);
    const double log_term = std::log(2.0 * opts.bins / opts.alpha);
    bool ok = true;
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
      const bool row = pk == PlaneKind::kRowwise;
      const char* pn = row ? "rowwise" : "columnwise";
      const io::Tensor* dt = file.find(row ? "rowwise_data" : "columnwise_data");
      if (dt == nullptr) continue;
      const Plane& p = q.plane(pk);
      const int64_t rows = row ? M : K, len = row ? K : M, nb = (len + 15) / 16;
      if (dt->bytes.size() != p.data.size()) {
        res.message = ::fmt::format("{}_data has {} bytes; [{}, {}] packed needs {}", pn, dt->bytes.size(), rows, (len + 1) / 2, p.data.size());
        return res;
      }
      // 1. scales and amax exact.
      if (const io::Tensor* st = file.find(row ? "rowwise_scale_inv" : "columnwise_scale_inv")) {
        if (st->bytes.size() != p.scale.bytes.size()) {
          res.message = ::fmt::format("{}_scale_inv has {} bytes, expected compact {}", pn, st->bytes.size(), p.scale.bytes.size());
          return res;
        }
        for (size_t i = 0; i < st->bytes.size(); ++i)
          if (st->bytes[i] != p.scale.bytes[i] && res.scale_mismatch++ == 0)
            res.details.push_back(::fmt::format("{}_scale_inv [{}, {}]: expected 0x{:02x}, got 0x{:02x}: scales must be exact under SR", pn,
                                                i / static_cast<size_t>(nb), i % static_cast<size_t>(nb), p.scale.bytes[i], st->bytes[i]));
      }
      float amax = p.amax.empty() ? 0.0f : p.amax[0];
      if (const io::Tensor* at = file.find(row ? "amax_rowwise" : "amax_columnwise")) {
        if (at->dtype != "F32" || at->bytes.size() != 4 || std::memcmp(at->bytes.data(), &amax, 4) != 0) {
          ++res.scale_mismatch;
          res.details.push_back(::fmt::format("amax_{}: not the reference's {} (amax must be exact under SR)", pn, amax));
        }
      }
      // 2. neighbours, 3. statistics. The scales used are the reference's (equal to the file's when rule 1 holds).
      const float s_dec = 1.0f / ref::nvfp4_global_encode_scale(amax, r.nvfp4().e4m3_max, r.profile);
      std::vector<Bin> bins(static_cast<size_t>(opts.bins));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < len; ++j) {
          const float xv = row ? x.get(i, j) : (r.nvfp4().rht ? xr.get(i, j) : x.get(j, i));
          const float enc = nvfp4_encode_factor(p.scale.bytes[static_cast<size_t>(i * nb + j / 16)], s_dec);
          const float v = xv * enc;
          const size_t byte = static_cast<size_t>(i * ((len + 1) / 2) + j / 2);
          const uint8_t code = static_cast<uint8_t>(dt->bytes[byte] >> (4 * (j & 1))) & 0xFu;
          ++res.elements;
          if (std::isnan(v)) continue;
          float lo, hi;
          neighbours(std::fabs(v), lo, hi);
          const float got = e2m1_value(code);
          const bool neg_ok = std::signbit(v) ? (got <= 0.0f) : (got >= 0.0f);
          const float mag = std::fabs(got);
          if (!(neg_ok || mag == 0.0f) || (mag != lo && mag != hi)) {
            if (res.non_neighbour++ == 0)
              res.details.push_back(::fmt::format("{} [{}, {}]: code 0x{:x} ({}) is not a neighbour of the scaled value {} (x = {}): "
                                                  "SR gives {} or {}",
                                                  pn, i, j, code, got, v, xv, std::signbit(v) ? -lo : lo, std::signbit(v) ? -hi : hi));
            continue;
          }
          if (lo == hi) {
            ++res.on_grid;
            continue;
          }
          const double pr = (std::fabs(v) - lo) / (hi - lo);
          const double u = mag == hi ? 1.0 : 0.0;
          Bin& b = bins[std::min(static_cast<size_t>(pr * opts.bins), bins.size() - 1)];
          ++b.n;
          b.s_lo += u - std::max(0.0, pr - eps);
          b.s_hi += u - std::min(1.0, pr + eps);
        }
      for (size_t k = 0; k < bins.size(); ++k) {
        const Bin& b = bins[k];
        if (b.n == 0) continue;
        const double t = std::sqrt(static_cast<double>(b.n) * log_term / 2.0);
        const double excess = std::max(-b.s_lo, b.s_hi) / t;
        res.worst_excess = std::max(res.worst_excess, excess);
        const bool rej = b.s_lo < -t || b.s_hi > t;
        ok = ok && !rej;
        res.details.push_back(::fmt::format("{} p in [{:.3f}, {:.3f}): {} elements, sum(U - p) in [{:.1f}, {:.1f}], threshold {:.1f}{}", pn,
                                            static_cast<double>(k) / opts.bins, static_cast<double>(k + 1) / opts.bins, b.n, b.s_hi, b.s_lo, t,
                                            rej ? (b.s_lo < -t ? ": rounds away from zero too rarely" : ": rounds away from zero too often") : ""));
      }
    }
    res.admissible = ok && res.non_neighbour == 0 && res.scale_mismatch == 0;
    res.message = ::fmt::format(
        "{}: {} elements, {} codes not a neighbour of the scaled value, {} scales/amax not exact, unbiasedness {} (worst bin at {:.2f} of "
        "its threshold; false-alarm rate <= {:g})",
        res.admissible ? "admissible stochastic rounding" : "not admissible stochastic rounding", res.elements, res.non_neighbour,
        res.scale_mismatch, ok ? "holds" : "rejected", res.worst_excess, opts.alpha);
  } catch (const std::exception& e) {
    res.admissible = false;
    res.message = std::string("cannot judge: ") + e.what();
  }
  return res;
}

}  // namespace qtc::conformance
