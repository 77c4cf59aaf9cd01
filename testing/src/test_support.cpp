/// \file test_support.cpp
/// \brief First-mismatch assertions (through conformance::mismatch_line, the formatter of `qtc verify`) and the
///        GPU gate of test_support.hpp.
#include "qtc/test_support.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "qtc/codec.hpp"
#include "qtc/kind.hpp"

namespace qtc::testing {

namespace {

std::string coord_text(int64_t i, int64_t rows, int64_t cols) {
  if (rows == 1 || cols <= 0) return ::fmt::format("[{}]", i);
  return ::fmt::format("[{}, {}]", i / cols, i % cols);
}

/// The mismatch line of two buffers, or "" when equal.
std::string buffer_diff(std::string_view name, ElementCode code, const Buffer& want, const Buffer& got, int64_t rows,
                        int64_t cols, NanRule nan, const std::function<std::string(int64_t, int64_t)>& block) {
  const int64_t n = rows * cols;
  const int64_t need = conformance::element_bytes(code, n);
  if (want.size_bytes != got.size_bytes || static_cast<int64_t>(want.size_bytes) != need)
    return ::fmt::format("{}: {} bytes, expected {} ({} elements [{}, {}]; the expected buffer holds {})", name, got.size_bytes,
                         need, n, rows, cols, want.size_bytes);
  if (n == 0) return {};
  const conformance::Mismatch m = conformance::find_mismatch(code, static_cast<const uint8_t*>(want.data),
                                                             static_cast<const uint8_t*>(got.data), n,
                                                             nan == NanRule::kAnyNanEqual);
  if (m.count == 0) return {};
  const int64_t a = cols > 0 ? m.first / cols : 0, b = cols > 0 ? m.first % cols : m.first;
  return conformance::mismatch_line(name, code, m, n, coord_text(m.first, rows, cols), block ? block(a, b) : std::string());
}

ElementCode scale_code(ScaleType t) {
  switch (t) {
    case ScaleType::kE4M3: return ElementCode::kE4M3;
    case ScaleType::kE8M0: return ElementCode::kE8M0;
    case ScaleType::kF32: return ElementCode::kF32;
  }
  return ElementCode::kF32;
}

ElementCode data_code(const Recipe& r) {
  if (kind_info(r).e2m1_data) return ElementCode::kE2M1;
  return r.fp8_type() == Fp8Type::kE4M3 ? ElementCode::kE4M3 : ElementCode::kE5M2;
}

const char* layout_text(Layout l) { return layout_name(l).data(); }

const char* scale_type_text(ScaleType t) {
  switch (t) {
    case ScaleType::kE4M3: return "E4M3";
    case ScaleType::kE8M0: return "E8M0";
    case ScaleType::kF32: return "F32";
  }
  return "?";
}

std::string scales_diff(std::string_view name, const ScaleMatrix& w, const ScaleMatrix& g, NanRule nan,
                        const std::function<std::string(int64_t, int64_t)>& block) {
  if (w.type != g.type || w.layout != g.layout || w.rows != g.rows || w.cols != g.cols)
    return ::fmt::format("{}: {} {} scales of shape [{}, {}], expected {} {} [{}, {}]", name, layout_text(g.layout),
                         scale_type_text(g.type), g.rows, g.cols, layout_text(w.layout), scale_type_text(w.type), w.rows, w.cols);
  // Padded / tiled buffers: coordinates in the stored matrix, no block (the order is not x's).
  const bool compact = w.layout == ScaleLayout::kCompact;
  return buffer_diff(name, scale_code(w.type), Buffer(w.bytes), Buffer(g.bytes), w.rows, w.cols, nan, compact ? block : nullptr);
}

Buffer f32_buffer(const std::vector<float>& v) { return Buffer(v.data(), v.size() * 4); }

std::vector<std::string> plane_diffs(const Recipe& r, PlaneKind kind, const Plane& w, const Plane& g, const MatrixView* x, NanRule nan) {
  std::vector<std::string> out;
  const std::string p = kind == PlaneKind::kRowwise ? "rowwise" : "columnwise";
  const bool ten = kind_info(r).per_tensor_scale;
  auto block_of = [&](const std::string& tensor) -> std::function<std::string(int64_t, int64_t)> {
    if (x == nullptr) return {};
    return [&r, x, tensor](int64_t a, int64_t b) { return conformance::block_inputs_text(r, tensor, a, b, *x); };
  };
  const std::string dname = p + "_data";
  if (w.data_rows != g.data_rows || w.data_cols != g.data_cols || w.data.size() != g.data.size()) {
    out.push_back(::fmt::format("{}: shape [{}, {}] ({} bytes), expected [{}, {}] ({} bytes)", dname, g.data_rows, g.data_cols,
                                g.data.size(), w.data_rows, w.data_cols, w.data.size()));
  } else {
    const ElementCode dc = data_code(r);
    const int64_t cols = dc == ElementCode::kE2M1 ? 2 * w.data_cols : w.data_cols;
    if (std::string d = buffer_diff(dname, dc, Buffer(w.data), Buffer(g.data), w.data_rows, cols, nan, block_of(dname)); !d.empty())
      out.push_back(std::move(d));
  }
  const std::string sname = p + "_scale_inv";
  if (std::string d = scales_diff(sname, w.scale, g.scale, nan, ten ? nullptr : block_of(sname)); !d.empty()) out.push_back(std::move(d));
  const bool plane_amax = kind_info(r).plane_amax;
  const std::string aname = plane_amax ? "amax_" + p : ten ? (kind == PlaneKind::kRowwise ? "amax" : "columnwise amax") : p + " amax";
  const int64_t na = static_cast<int64_t>(w.amax.size());
  if (std::string d = buffer_diff(aname, ElementCode::kF32, f32_buffer(w.amax), f32_buffer(g.amax), 1, na, nan,
                                  plane_amax || (ten && kind == PlaneKind::kRowwise) ? block_of(aname) : nullptr);
      !d.empty())
    out.push_back(std::move(d));
  return out;
}

::testing::AssertionResult verdict(const std::vector<std::string>& diffs) {
  if (diffs.empty()) return ::testing::AssertionSuccess();
  ::testing::AssertionResult f = ::testing::AssertionFailure();
  f << diffs.front();
  for (size_t i = 1; i < diffs.size(); ++i) f << "\n  " << diffs[i];
  return f;
}

}  // namespace

::testing::AssertionResult buffers_equal(std::string_view name, ElementCode code, Buffer want, Buffer got, int64_t rows, int64_t cols,
                                         NanRule nan, const std::function<std::string(int64_t, int64_t)>& block) {
  const std::string d = buffer_diff(name, code, want, got, rows, cols, nan, block);
  return d.empty() ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << d;
}

::testing::AssertionResult f32_equal(std::string_view name, const std::vector<float>& want, const std::vector<float>& got, int64_t rows,
                                     int64_t cols, NanRule nan) {
  return buffers_equal(name, ElementCode::kF32, f32_buffer(want), f32_buffer(got), rows, cols, nan);
}

::testing::AssertionResult matrices_equal(std::string_view name, const HostMatrix& want, const HostMatrix& got, NanRule nan) {
  if (want.dtype != got.dtype || want.rows != got.rows || want.cols != got.cols)
    return ::testing::AssertionFailure() << ::fmt::format("{}: {} [{}, {}], expected {} [{}, {}]", name, dtype_name(got.dtype), got.rows,
                                                          got.cols, dtype_name(want.dtype), want.rows, want.cols);
  ElementCode code = ElementCode::kF32;
  switch (want.dtype) {
    case DType::kF32: code = ElementCode::kF32; break;
    case DType::kBF16: code = ElementCode::kBF16; break;
    case DType::kF16: code = ElementCode::kF16; break;
    default: code = ElementCode::kU8; break;
  }
  return buffers_equal(name, code, Buffer(want.bytes), Buffer(got.bytes), want.rows, want.cols, nan);
}

::testing::AssertionResult scales_equal(std::string_view name, const ScaleMatrix& want, const ScaleMatrix& got, NanRule nan) {
  const std::string d = scales_diff(name, want, got, nan, nullptr);
  return d.empty() ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << d;
}

::testing::AssertionResult planes_equal(const Recipe& r, PlaneKind kind, const Plane& want, const Plane& got, const MatrixView* x,
                                        NanRule nan) {
  return verdict(plane_diffs(r, kind, want, got, x, nan));
}

namespace {

void output_diffs(const QuantizedTensor& want, const QuantizedTensor& got, const MatrixView* x, NanRule nan,
                  std::vector<std::string>& diffs) {
  if (x != nullptr && (x->rows != want.rows || x->cols != want.cols)) x = nullptr;  // not this tensor's input: no blocks
  for (PlaneKind k : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const std::optional<Plane>& w = k == PlaneKind::kRowwise ? want.rowwise : want.columnwise;
    const std::optional<Plane>& g = k == PlaneKind::kRowwise ? got.rowwise : got.columnwise;
    const char* p = k == PlaneKind::kRowwise ? "rowwise" : "columnwise";
    if (w.has_value() != g.has_value()) {
      diffs.push_back(::fmt::format("{} plane: {}, expected {}", p, g ? "present" : "absent", w ? "present" : "absent"));
      continue;
    }
    if (!w) continue;
    for (std::string& d : plane_diffs(want.recipe, k, *w, *g, x, nan)) diffs.push_back(std::move(d));
  }
  const uint32_t a = f32_bits(want.scale_inv), b = f32_bits(got.scale_inv);
  const bool nan_same = nan == NanRule::kAnyNanEqual && std::isnan(want.scale_inv) && std::isnan(got.scale_inv);
  if (a != b && !nan_same) {
    conformance::Mismatch m;
    m.count = 1, m.first = 0, m.want = a, m.got = b;
    std::string block;
    if (x != nullptr && kind_info(want.recipe).per_tensor_scale) block = conformance::block_inputs_text(want.recipe, "scale_inv", 0, 0, *x);
    diffs.push_back(conformance::mismatch_line("scale_inv", ElementCode::kF32, m, 1, "[0]", block));
  }
}

}  // namespace

::testing::AssertionResult outputs_equal(const QuantizedTensor& want, const QuantizedTensor& got, const MatrixView* x, NanRule nan) {
  std::vector<std::string> diffs;
  output_diffs(want, got, x, nan, diffs);
  return verdict(diffs);
}

::testing::AssertionResult quantized_equal(const QuantizedTensor& want, const QuantizedTensor& got, const MatrixView* x, NanRule nan) {
  std::vector<std::string> diffs;
  if (want.recipe.to_metadata() != got.recipe.to_metadata())
    diffs.push_back("recipe: " + got.recipe.name() + ", expected " + want.recipe.name());
  if (want.input_dtype != got.input_dtype)
    diffs.push_back(::fmt::format("input dtype: {}, expected {}", dtype_name(got.input_dtype), dtype_name(want.input_dtype)));
  if (want.rows != got.rows || want.cols != got.cols)
    diffs.push_back(::fmt::format("shape: [{}, {}], expected [{}, {}]", got.rows, got.cols, want.rows, want.cols));
  output_diffs(want, got, x, nan, diffs);
  return verdict(diffs);
}

bool gpu_required() {
  const char* v = std::getenv("QTC_REQUIRE_GPU");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

GateDecision gpu_gate(const std::string& device_reason, const std::function<gating::Support()>& feature) {
  if (!device_reason.empty()) {
    if (gpu_required()) return {GateDecision::kFail, "QTC_REQUIRE_GPU=1 but " + device_reason};
    return {GateDecision::kSkip, device_reason};
  }
  if (feature) {
    const gating::Support s = feature();
    if (!s.supported) return {GateDecision::kSkip, "gating table: " + s.reason};
  }
  return {};
}

}  // namespace qtc::testing
