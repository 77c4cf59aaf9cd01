/// \file error_bound.cpp
/// \brief The per-element error bound of dequantize(quantize(x)) (error_bound.hpp).
#include "qtc/error_bound.hpp"

#include <algorithm>
#include <cmath>

#include "qtc/error.hpp"
#include "qtc/kind.hpp"

namespace qtc {

ElementFormat element_format(const Recipe& r) {
  if (kind_info(r).e2m1_data) return {1, 0, 6.0};
  return r.fp8_type() == Fp8Type::kE4M3 ? ElementFormat{3, -6, 448.0} : ElementFormat{2, -14, 57344.0};
}

double element_spacing(const ElementFormat& f, double v) {
  if (v < std::ldexp(1.0, f.emin)) return std::ldexp(1.0, f.emin - f.mbits);
  return std::ldexp(1.0, std::ilogb(v) - f.mbits);
}

namespace {
double out_half_ulp(DType t) {
  switch (t) {
    case DType::kBF16: return std::ldexp(1.0, -8);
    case DType::kF16: return std::ldexp(1.0, -11);
    default: return std::ldexp(1.0, -24);
  }
}
}  // namespace

double element_error_bound(const Recipe& r, double x, double s, DType out, double dequantized) {
  const ElementFormat f = element_format(r);
  const double ax = std::fabs(x);
  const double v = s > 0 ? ax / s : 0.0;
  const double step = s * element_spacing(f, std::min(v, f.max));
  const bool stochastic = r.nvfp4_or_null() != nullptr && r.nvfp4().stochastic;
  double b = stochastic ? step : step / 2;
  b += std::max(0.0, ax - f.max * s);
  b += std::ldexp(ax, -20);
  b += out_half_ulp(out) * std::fabs(dequantized);
  return b;
}

PlaneScales::PlaneScales(const QuantizedTensor& q, PlaneKind pk)
    : q_(q), pk_(pk), spec_(describe_plane(q.recipe, pk, q.rows, q.cols)) {
  const Plane& p = q.plane(pk);
  QTC_CHECK(spec_.per_tensor || p.scale.layout == ScaleLayout::kCompact,
            "error bound: the plane's scales must be in the compact layout (convert with ref::convert_layout)");
  if (kind_info(q.recipe).plane_amax) nvfp4_.emplace(q.recipe);
}

double PlaneScales::global_amax(int64_t i, int64_t j) const {
  if (!nvfp4_) return 0.0;
  const Plane& p = q_.plane(pk_);
  const int64_t a = pk_ == PlaneKind::kColumnwise ? j : i;  // plane row
  return p.amax.size() > 1 ? p.amax[static_cast<size_t>(a)] : p.amax.at(0);
}

double PlaneScales::operator()(int64_t i, int64_t j) const {
  if (spec_.per_tensor) return q_.scale_inv;
  const Plane& p = q_.plane(pk_);
  const Index2 e = spec_.scale_entry(i, j);
  if (nvfp4_) return (*nvfp4_)(static_cast<float>(global_amax(i, j)), p.scale.byte(e.row, e.col));
  return spec_.scale_type == ScaleType::kF32 ? static_cast<double>(p.scale.f32(e.row, e.col))
                                             : static_cast<double>(decode_e8m0(p.scale.byte(e.row, e.col)));
}

ErrorBoundResult check_error_bound(const QuantizedTensor& q, PlaneKind pk, const MatrixView& x, const MatrixView& dq) {
  QTC_CHECK(x.rows == q.rows && x.cols == q.cols, "error bound: x has shape [", x.rows, ", ", x.cols,
            "], the quantized tensor [", q.rows, ", ", q.cols, "]");
  QTC_CHECK(dq.rows == x.rows && dq.cols == x.cols, "dequantized has shape [", dq.rows, ", ", dq.cols, "], expected [",
            x.rows, ", ", x.cols, "] (x's orientation)");
  QTC_CHECK(dq.dtype == DType::kF32 || dq.dtype == DType::kBF16 || dq.dtype == DType::kF16,
            "dequantized must be F32, BF16 or F16");
  const Recipe& r = q.recipe;
  const KindInfo& kind = kind_info(r);
  const PlaneScales scale_of(q, pk);
  const double out_max = dtype_max(dq.dtype);
  ErrorBoundResult res;
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t j = 0; j < x.cols; ++j) {
      const double xv = x.at(i, j);
      const double s = scale_of(i, j);
      if (!std::isfinite(xv) || !std::isfinite(s)) continue;  // encodings of NaN/Inf are profile rules
      if (kind.bound_exempt != nullptr) {
        if (std::string why = kind.bound_exempt(r, scale_of.global_amax(i, j)); !why.empty()) {
          if (res.exempt++ == 0) res.exempt_reason = std::move(why);
          continue;
        }
      }
      ++res.checked;
      const double d = dq.at(i, j);
      const double bound = element_error_bound(r, xv, s, dq.dtype, d);
      const double err = std::fabs(d - xv);
      if (std::isfinite(d) && err <= bound) continue;
      // The exact dequantized value may lie beyond the output type's range: Inf of x's sign is its rounding.
      if (std::isinf(d) && std::signbit(d) == std::signbit(xv) && std::fabs(xv) + bound > out_max) continue;
      if (res.outside++ == 0) {
        res.i = i, res.j = j, res.x = xv, res.got = d, res.bound = bound, res.scale = s;
      }
    }
  return res;
}

}  // namespace qtc
