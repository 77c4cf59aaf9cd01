/// \file testing.cpp
/// \brief qtc::testing: the caller's buffers become an in-memory vector (VECTORS.md) that verify_vector checks, so
///        failures read exactly as `qtc verify`'s; the error bound of testing.hpp.
#include "qtc/testing.hpp"
#include "qtc/stochastic_rounding.hpp"
#include "testing_vector.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/kind.hpp"
#include "qtc/quantize.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/verify.hpp"

namespace qtc::testing {

namespace {

/// Drops the " [check `...` failed at file:line]" suffix of QTC_CHECK messages.
std::string rule(std::string m) {
  const auto at = m.rfind(" [check `");
  if (at != std::string::npos && !m.empty() && m.back() == ']') m.erase(at);
  return m;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

const char* input_dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    default: return "U8";
  }
}

/// Element format of a recipe's data: mantissa bits, smallest normal exponent, largest finite value.
struct ElemFormat {
  int mbits;
  int emin;
  double max;
};

ElemFormat elem_format(const Recipe& r) {
  if (kind_info(r).e2m1_data) return {1, 0, 6.0};
  return r.fp8_type() == Fp8Type::kE4M3 ? ElemFormat{3, -6, 448.0} : ElemFormat{2, -14, 57344.0};
}

/// Spacing of the element format's representable values at magnitude v (the binade of v, or the subnormal step).
double spacing(const ElemFormat& f, double v) {
  if (v < std::ldexp(1.0, f.emin)) return std::ldexp(1.0, f.emin - f.mbits);
  return std::ldexp(1.0, std::ilogb(v) - f.mbits);
}

double out_half_ulp(DType t) {
  switch (t) {
    case DType::kBF16: return std::ldexp(1.0, -8);
    case DType::kF16: return std::ldexp(1.0, -11);
    default: return std::ldexp(1.0, -24);
  }
}

}  // namespace

Recipe recipe(const std::map<std::string, std::string>& metadata) { return Recipe::from_metadata(metadata); }

namespace detail {

std::string rule(std::string m) { return ::qtc::testing::rule(std::move(m)); }

GivenVector given_vector(const MatrixView& x, const Recipe& r, const Outputs& out) {
  QTC_CHECK(x.data != nullptr || x.rows * x.cols == 0, "x has no data");
  QTC_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16 || x.dtype == DType::kF16,
            "x has dtype U8; VECTORS.md allows F32, BF16 or F16");
  QTC_CHECK(x.rows >= 0 && x.cols >= 0, "x has a negative dimension");
  GivenVector v;
  v.metadata = r.to_metadata();
  const Layout layout = out.layout;
  QTC_CHECK(!out.strict_padding || layout != Layout::kCompact, "Outputs::strict_padding needs a padded layout (compact buffers have no padding)");
  ref::check_layout_applies(layout, r);
  ref::layout_to_metadata(layout, v.metadata);
  v.tensors.push_back({"x", input_dtype_name(x.dtype), {x.rows, x.cols}, x.data, static_cast<size_t>(x.rows * x.cols) * dtype_size(x.dtype)});
  const std::pair<const char*, const Buffer*> given[] = {
      {"rowwise_data", &out.rowwise_data},       {"rowwise_scale_inv", &out.rowwise_scale_inv},
      {"columnwise_data", &out.columnwise_data}, {"columnwise_scale_inv", &out.columnwise_scale_inv},
      {"amax_rowwise", &out.amax_rowwise},       {"amax_columnwise", &out.amax_columnwise},
      {"scale_inv", &out.scale_inv},             {"amax", &out.amax},
      {"dequantized_rowwise", &out.dequantized_rowwise}, {"dequantized_columnwise", &out.dequantized_columnwise}};
  for (const auto& [tname, buf] : given) {
    if (buf->empty()) continue;
    std::string why;
    const auto lo = ref::OutputLayout::find(tname, r, x.rows, x.cols, layout, &why);
    QTC_CHECK(lo.has_value(), why);
    const size_t want = static_cast<size_t>(lo->elements()) * static_cast<size_t>(lo->elem_bytes());
    QTC_CHECK(buf->size_bytes == want, "buffer '", tname, "' holds ", buf->size_bytes, " bytes, expected ", want, " (",
              lo->dtype(), " ", shape_str(lo->shape()), " for x of shape [", x.rows, ", ", x.cols, "], recipe ", r.name(),
              ", layout ", layout_name(layout), ")");
    v.tensors.push_back({tname, lo->dtype(), lo->shape(), buf->data, want});
  }
  QTC_CHECK(v.tensors.size() > 1, "Outputs holds no buffer to compare");
  return v;
}

::testing::AssertionResult assertion_for(const conformance::FileResult& res, bool accept_equal_values) {
  if (res.verdict == conformance::Verdict::kPass) return ::testing::AssertionSuccess();
  if (res.verdict == conformance::Verdict::kEquivalent && accept_equal_values) return ::testing::AssertionSuccess();
  ::testing::AssertionResult fail = ::testing::AssertionFailure();
  fail << conformance::result_line(res);
  const std::vector<std::string> lines = conformance::detail_lines(res);
  for (size_t i = 1; i < lines.size(); ++i) fail << "\n  " << lines[i];
  return fail;
}

}  // namespace detail

::testing::AssertionResult conforms(const MatrixView& x, const Recipe& r, const Outputs& out, const std::string& name) {
  const std::string source = name.empty() ? r.name() : name;
  try {
    const detail::GivenVector v = detail::given_vector(x, r, out);
    io::File f;
    f.metadata = v.metadata;
    for (const detail::GivenTensor& t : v.tensors) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      f.put(io::Tensor{t.name, t.dtype, t.shape, std::vector<uint8_t>(p, p + t.bytes)});
    }
    if (out.stochastic_admissible && r.nvfp4_or_null() != nullptr && r.nvfp4().stochastic) {  // issue 26
      const conformance::SrResult sr = conformance::check_stochastic_rounding(f);
      if (sr.admissible) return ::testing::AssertionSuccess();
      ::testing::AssertionResult fail = ::testing::AssertionFailure();
      fail << "FAIL " << source << " [sr]: " << sr.message;
      for (const auto& d : sr.details) fail << "\n  " << d;
      return fail;
    }
    auto cpu = make_cpu_backend();
    conformance::VerifyOptions opts;
    opts.strict_padding = out.strict_padding;
    return detail::assertion_for(conformance::verify_vector(f, source, *cpu, opts), out.accept_equal_values);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "ERROR " << source << ": " << rule(e.what());
  }
}

double element_error_bound(const Recipe& r, float x, double s, DType out, float dequantized) {
  const ElemFormat f = elem_format(r);
  const double ax = std::fabs(static_cast<double>(x));
  const double v = s > 0 ? ax / s : 0.0;
  const double step = s * spacing(f, std::min(v, f.max));
  const bool stochastic = r.nvfp4_or_null() != nullptr && r.nvfp4().stochastic;
  double b = stochastic ? step : step / 2;
  b += std::max(0.0, ax - f.max * s);
  b += std::ldexp(ax, -20);
  b += out_half_ulp(out) * std::fabs(static_cast<double>(dequantized));
  return b;
}

::testing::AssertionResult within_error_bound(const MatrixView& x, const Recipe& r_in, const MatrixView& dq, PlaneKind plane) {
  const bool col = plane == PlaneKind::kColumnwise;
  const char* pname = col ? "columnwise" : "rowwise";
  try {
    QTC_CHECK(dq.rows == x.rows && dq.cols == x.cols, "dequantized has shape [", dq.rows, ", ", dq.cols, "], expected [", x.rows,
              ", ", x.cols, "] (x's orientation)");
    QTC_CHECK(dq.dtype != DType::kU8, "dequantized must be F32, BF16 or F16");
    QTC_CHECK(!(col && r_in.nvfp4_rht()), "the RHT columnwise plane is the quantization of RHT(x^T), not of x: no error bound in x's "
              "coordinates (check it bit for bit with conforms)");
    QTC_CHECK(!(col && kind_info(r_in).per_tensor_scale), "per-tensor FP8 has one dequantized output (rowwise)");
    Recipe r = r_in;
    r.rowwise = !col || r.nvfp4_row_scaled();  // row-scaled NVFP4's columnwise plane needs the rowwise one (§1.11)
    r.columnwise = col;
    const QuantizedTensor q = ref::quantize(x, r);
    const Plane& p = q.plane(plane);
    const int64_t M = x.rows, K = x.cols;
    // The effective scale of x(i, j)'s block, as ref::dequantize applies it: the compact scale entry of x(i, j) in the
    // plane's description, decoded by its type; NVFP4's block scale with its plane's amax (one, or one per plane row).
    const PlaneSpec spec = describe_plane(r, plane, M, K);
    const std::optional<ref::Nvfp4BlockDequant> nvfp4_scale =
        kind_info(r).plane_amax ? std::optional<ref::Nvfp4BlockDequant>(ref::Nvfp4BlockDequant(r)) : std::nullopt;
    auto scale_of = [&](int64_t i, int64_t j) -> double {
      if (spec.per_tensor) return q.scale_inv;
      const Index2 e = spec.scale_entry(i, j);
      if (nvfp4_scale) {
        const int64_t a = col ? j : i;  // plane row
        const float am = p.amax.size() > 1 ? p.amax[static_cast<size_t>(a)] : p.amax.at(0);
        return (*nvfp4_scale)(am, p.scale.byte(e.row, e.col));
      }
      return spec.scale_type == ScaleType::kF32 ? static_cast<double>(p.scale.f32(e.row, e.col))
                                                : static_cast<double>(decode_e8m0(p.scale.byte(e.row, e.col)));
    };
    int64_t bad = 0, first_i = -1, first_j = -1;
    double first_bound = 0, first_scale = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < K; ++j) {
        const float xv = x.at(i, j);
        const double s = scale_of(i, j);
        if (!std::isfinite(xv) || !std::isfinite(s)) continue;  // encodings of NaN/Inf are profile rules: conforms()
        const float d = dq.at(i, j);
        const double bound = element_error_bound(r, xv, s, dq.dtype, d);
        const double err = std::fabs(static_cast<double>(d) - static_cast<double>(xv));
        if (std::isfinite(d) && err <= bound) continue;
        if (bad++ == 0) first_i = i, first_j = j, first_bound = bound, first_scale = s;
      }
    if (bad == 0) return ::testing::AssertionSuccess();
    const float xv = x.at(first_i, first_j), d = dq.at(first_i, first_j);
    const ElemFormat f = elem_format(r);
    const double v = first_scale > 0 ? std::fabs(static_cast<double>(xv)) / first_scale : 0.0;
    return ::testing::AssertionFailure() << ::fmt::format(
               "dequantized_{} ({}): {} of {} elements outside the error bound; first at [{}, {}]: x = {}, got {}, "
               "|error| = {:g} > bound {:g} (block scale {:g}, |x|/scale = {:g}, element spacing there {:g}{})",
               pname, r.name(), bad, M * K, first_i, first_j, xv, d, std::fabs(static_cast<double>(d) - xv), first_bound,
               first_scale, v, spacing(f, std::min(v, f.max)),
               r.nvfp4_or_null() != nullptr && r.nvfp4().stochastic ? ", stochastic rounding" : "");
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "ERROR dequantized_" << pname << " (" << r_in.name() << "): " << rule(e.what());
  }
}

}  // namespace qtc::testing
