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
#include "qtc/error_bound.hpp"
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
    QTC_CHECK(lo->carrier().empty(), "buffer '", tname, "': ", lo->carried_error());  // fbgemm_mx4: inside the data buffer
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
  return qtc::element_error_bound(r, x, s, out, dequantized);
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
    const ErrorBoundResult b = check_error_bound(q, plane, x, dq);  // the one bound (qtc/error_bound.hpp)
    if (b.outside == 0) return ::testing::AssertionSuccess();
    const ElementFormat f = element_format(r);
    const double v = b.scale > 0 ? std::fabs(b.x) / b.scale : 0.0;
    return ::testing::AssertionFailure() << ::fmt::format(
               "dequantized_{} ({}): {} of {} elements outside the error bound; first at [{}, {}]: x = {}, got {}, "
               "|error| = {:g} > bound {:g} (block scale {:g}, |x|/scale = {:g}, element spacing there {:g}{})",
               pname, r.name(), b.outside, x.rows * x.cols, b.i, b.j, static_cast<float>(b.x), static_cast<float>(b.got),
               std::fabs(b.got - b.x), b.bound, b.scale, v, element_spacing(f, std::min(v, f.max)),
               r.nvfp4_or_null() != nullptr && r.nvfp4().stochastic ? ", stochastic rounding" : "");
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "ERROR dequantized_" << pname << " (" << r_in.name() << "): " << rule(e.what());
  }
}

}  // namespace qtc::testing
