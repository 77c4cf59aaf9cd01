/// \file device_verify.cpp
/// \brief verify_on_device (qtc/cuda/verify.hpp) for a vector of one recipe: verify_vector's steps (read, expect,
///        quantize, compare) on device memory, then its value-equivalence tier: the differing planes dequantized by
///        the kernels from both encodings and compared as values on the device; the host's compare_values only
///        where every value is equal (its verdict and message). Hybrid vectors: device_verify_hybrid.cpp.
#include "qtc/cuda/verify.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "device_verify.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/compare.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/value_equivalence.hpp"

namespace qtc::cuda {

DeviceGuard::DeviceGuard(int device) {
  if (device < 0) {
    int current = 0;
    if (const cudaError_t e = cudaGetDevice(&current); e != cudaSuccess) {
      (void)cudaGetLastError();
      QTC_FAIL("no CUDA device can be used (", cudaGetErrorName(e), ": ", cudaGetErrorString(e), ")");
    }
    return;
  }
  if (cudaGetDevice(&prev_) != cudaSuccess) {
    (void)cudaGetLastError();
    prev_ = -1;
  }
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    (void)cudaGetLastError();
    QTC_FAIL("the tensors are on cuda:", device, ", which this process cannot use (", cudaGetErrorName(e), ": ",
             cudaGetErrorString(e), ")");
  }
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) (void)cudaSetDevice(prev_);
}

namespace detail {

std::string clean_message(std::string m) {
  const auto at = m.rfind(" [check `");
  if (at != std::string::npos && !m.empty() && m.back() == ']') m.erase(at);
  return m;
}

}  // namespace detail

namespace {

namespace cv = qtc::conformance;
using Metadata = std::map<std::string, std::string>;

/// One expected output: the caller's device buffer and where each compact value sits in it.
struct Expected {
  std::string name;
  TensorSpec spec;
  ref::OutputLayout layout;
  std::vector<int64_t> file_shape;
  const void* buf = nullptr;
  cv::ElementCode elem = cv::ElementCode::kU8;

  /// The scale layout's geometry when the buffer is not the compact matrix itself.
  std::optional<ScaleGeometry> geometry(Layout lo) const {
    if (layout.is_scale() && !layout.is_identity()) return spec.plane.geometry(lo);
    return std::nullopt;
  }
  /// Bytes of the compact matrix (E2M1 data: two elements a byte).
  size_t compact_bytes() const {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    return static_cast<size_t>(n * layout.elem_bytes());
  }
};

cv::ElementCode elem_of(const TensorSpec& t) {
  using E = cv::ElementCode;
  if (t.f32) return E::kF32;
  if (t.role == TensorRole::kData)
    return t.plane.data_elem == DataElem::kE2M1 ? E::kE2M1 : t.plane.data_elem == DataElem::kE4M3 ? E::kE4M3 : E::kE5M2;
  return t.plane.scale_type == ScaleType::kE8M0 ? E::kE8M0 : E::kE4M3;
}

DeviceElem device_elem(cv::ElementCode e) {
  switch (e) {
    case cv::ElementCode::kE2M1: return DeviceElem::kE2M1;
    case cv::ElementCode::kF32: return DeviceElem::kF32;
    case cv::ElementCode::kBF16: return DeviceElem::kBF16;
    case cv::ElementCode::kF16: return DeviceElem::kF16;
    default: return DeviceElem::kByte;
  }
}

/// Element i's bits of a device buffer (one small copy: what a message shows).
uint32_t element_bits(cv::ElementCode e, const void* base, int64_t i, cudaStream_t s) {
  const int64_t nb = device_elem_bytes(device_elem(e));
  const int64_t at = e == cv::ElementCode::kE2M1 ? i / 2 : i * nb;
  uint8_t b[4] = {0, 0, 0, 0};
  QTC_CUDA_CHECK(cudaMemcpyAsync(b, static_cast<const uint8_t*>(base) + at, static_cast<size_t>(nb), cudaMemcpyDeviceToHost, s));
  QTC_CUDA_CHECK(cudaStreamSynchronize(s));
  return cv::element_at(e, b, e == cv::ElementCode::kE2M1 ? i % 2 : 0);
}

DeviceBuffer clone(const DeviceBuffer& b, cudaStream_t s) {
  DeviceBuffer c(b.bytes(), s);
  if (b.bytes() > 0) QTC_CUDA_CHECK(cudaMemcpyAsync(c.data(), b.data(), b.bytes(), cudaMemcpyDeviceToDevice, s));
  return c;
}

DevicePlane clone(const DevicePlane& p, cudaStream_t s) {
  DevicePlane c;
  c.data_rows = p.data_rows;
  c.data_cols = p.data_cols;
  c.data = clone(p.data, s);
  c.scale_type = p.scale_type;
  c.scale_layout = p.scale_layout;
  c.scale_rows = p.scale_rows;
  c.scale_cols = p.scale_cols;
  c.scale = clone(p.scale, s);
  c.amax_count = p.amax_count;
  c.amax = clone(p.amax, s);
  return c;
}

struct Stop {
  cv::Verdict verdict;
  std::string message;
};

/// The kernels' buffer for an expected tensor, or the problem (no such plane).
struct Ours {
  const void* p = nullptr;
  std::string problem;
};

class DeviceVerify {
 public:
  DeviceVerify(const std::vector<DeviceTensor>& tensors, const Metadata& md, const cv::VerifyOptions& opts, cudaStream_t s)
      : tensors_(tensors), md_(md), opts_(opts), s_(s) {}

  /// Read and expect (verify.cpp's steps 1 and 2), on the host: the recipe, the layout, x and the expected outputs.
  std::optional<Stop> prepare(cv::FileResult& res) {
    try {
      r_ = Recipe::from_metadata(md_);
      layout_ = ref::layout_from_metadata(md_);
      ref::check_layout_applies(layout_, r_);
    } catch (const Error& e) {
      return Stop{cv::Verdict::kError, e.what()};
    }
    // A combined layout (FBGEMM's MX4 rows: codes and exponent bytes in one tensor) is unpacked on the host only
    // (native_layout.hpp); the device comparison reads data and scale buffers apart.
    if (layout_is_combined(layout_))
      return Stop{cv::Verdict::kError, "layout=" + std::string(layout_name(layout_)) + " (rule 'layout-" + std::string(layout_name(layout_)) +
                                           "'): verifying device tensors needs separate data and scale tensors; verify these from "
                                           "host memory (qtc.verify, qtc verify) or convert them to compact"};
    const auto xi = std::find_if(tensors_.begin(), tensors_.end(), [](const DeviceTensor& t) { return t.name == "x"; });
    if (xi == tensors_.end()) return Stop{cv::Verdict::kError, "missing required tensor 'x' (the input)"};
    if (xi->shape.size() != 2)
      return Stop{cv::Verdict::kError, "tensor 'x' has shape " + ref::OutputLayout::coords_text(xi->shape) + "; VECTORS.md needs 2-D [M, K]"};
    if (xi->dtype != "F32" && xi->dtype != "BF16" && xi->dtype != "F16")
      return Stop{cv::Verdict::kError, "tensor 'x' has dtype " + xi->dtype + "; VECTORS.md allows F32, BF16 or F16"};
    x_ = {xi->data, xi->dtype == "F32" ? DType::kF32 : xi->dtype == "BF16" ? DType::kBF16 : DType::kF16, xi->shape[0], xi->shape[1]};
    QTC_CHECK(xi->nbytes == static_cast<size_t>(x_.rows * x_.cols) * dtype_size(x_.dtype), "tensor 'x': ", xi->nbytes,
              " bytes for shape [", x_.rows, ", ", x_.cols, "]");
    res.profile = std::string(profile_name(r_.profile));
    const int64_t M = x_.rows, K = x_.cols;
    bool need_row = false, need_col = false;
    for (const DeviceTensor& t : tensors_) {
      if (t.name == "x") continue;
      const auto spec = describe_tensor(r_, t.name, M, K);
      if (!spec) return Stop{cv::Verdict::kError, cv::not_an_output_text(t.name, r_)};
      auto ol = ref::OutputLayout::find(t.name, r_, M, K, layout_);
      QTC_CHECK(ol.has_value(), "tensor '", t.name, "': no layout for an output of the recipe");
      if (!ol->accepts_shape(t.shape)) return Stop{cv::Verdict::kError, ol->shape_error(t.shape)};
      if (std::string problem = cv::dtype_problem(t.name, t.dtype, spec->f32); !problem.empty())
        return Stop{cv::Verdict::kError, std::move(problem)};
      QTC_CHECK(static_cast<int64_t>(t.nbytes) == ol->elements() * ol->elem_bytes(), "tensor '", t.name, "': ", t.nbytes,
                " bytes, expected ", ol->elements() * ol->elem_bytes());
      (spec->plane.plane == PlaneKind::kRowwise ? need_row : need_col) = true;
      expected_.push_back(Expected{t.name, *spec, std::move(*ol), t.shape, t.data, elem_of(*spec)});
    }
    if (expected_.empty()) return Stop{cv::Verdict::kError, "no expected output (the file holds only the input; VECTORS.md, Tensors)"};
    const auto& order = cv::expected_tensor_names();
    std::sort(expected_.begin(), expected_.end(), [&](const Expected& a, const Expected& b) {
      return std::find(order.begin(), order.end(), a.name) < std::find(order.begin(), order.end(), b.name);
    });
    r_.rowwise = need_row;
    r_.columnwise = need_col;
    res.recipe = r_.name();
    try {
      r_.validate_input(x_.dtype, M, K);
    } catch (const Error& e) {
      return Stop{cv::Verdict::kError, e.what()};
    }
    return std::nullopt;
  }

  /// A recipe the kernels do not run on the current device: skipped with the reason.
  std::optional<Stop> unsupported() const {
    if (const std::string why = unsupported_reason(r_, x_.dtype, x_.rows, x_.cols); !why.empty())
      return Stop{cv::Verdict::kSkipped, why};
    return std::nullopt;
  }

  /// Quantize and compare (verify.cpp's step 3), on the device.
  std::optional<Stop> run(cv::FileResult& res) {
    try {
      q_ = quantize(x_, r_, s_, Layout::kCompact);
    } catch (const Error& e) {
      return Stop{cv::Verdict::kError, std::string("cuda backend: quantizing: ") + e.what()};
    }
    for (const Expected& e : expected_) {
      res.checked.push_back(e.name);
      if (opts_.strict_padding && e.layout.is_scale() && !e.layout.is_identity()) padding(e, res);
      const Ours ours = ours_for(e);
      if (!ours.problem.empty()) {
        cv::TensorMismatch t;
        t.tensor = e.name;
        t.problem = ours.problem;
        res.mismatches.push_back(std::move(t));
        continue;
      }
      if (!compare(e, ours.p, res)) continue;
      // As verify.cpp: a dequantized output or FP8 tensor's amax that differs fails whatever the encodings decode to.
      if (e.spec.role == TensorRole::kDequant || e.spec.role == TensorRole::kTensorAmax) encodings_only_ = false;
      if (std::find(differing_planes_.begin(), differing_planes_.end(), e.spec.plane.plane) == differing_planes_.end())
        differing_planes_.push_back(e.spec.plane.plane);
      ++compared_fails_;
    }
    return std::nullopt;
  }

  /// Whether the failure may be one of encodings only (verify_vector's condition for asking compare_values).
  bool equivalence_candidate(const cv::FileResult& res) const {
    return compared_fails_ == res.mismatches.size() && encodings_only_ && !differing_planes_.empty();
  }

  /// The value-equivalence tier: compare_values' message when the caller's encodings decode to the kernels' values,
  /// else nullopt (the failure stands). Only a candidate whose values are all equal on the device reaches the host.
  std::optional<std::string> equivalent() {
    try {
      const DeviceQuantized theirs = their_encodings();
      const int64_t n = x_.rows * x_.cols;
      if (n > 0) {
        DeviceBuffer a(static_cast<size_t>(n) * 4, s_), b(static_cast<size_t>(n) * 4, s_);
        for (PlaneKind pk : differing_planes_) {
          dequantize(q_, pk, DType::kF32, a.data(), s_);
          dequantize(theirs, pk, DType::kF32, b.data(), s_);
          if (compare_on_device(DeviceElem::kF32Value, a.data(), b.data(), x_.rows, x_.cols, nullptr, true, s_).count != 0)
            return std::nullopt;
        }
      }
      const cv::Equivalence eq = cv::compare_values(to_host(q_, s_), to_host(theirs, s_), differing_planes_);
      if (eq.equal) return eq.message;
    } catch (const std::exception&) {  // not decodable: the failure stands (as verify_vector)
    }
    return std::nullopt;
  }

 private:
  /// The kernels' quantization with the caller's encodings in place of its own (verify.cpp's Comparison::theirs):
  /// compact copies on the device.
  DeviceQuantized their_encodings() const {
    DeviceQuantized t;
    t.recipe = q_.recipe;
    t.input_dtype = q_.input_dtype;
    t.rows = q_.rows;
    t.cols = q_.cols;
    if (q_.rowwise) t.rowwise = clone(*q_.rowwise, s_);
    if (q_.columnwise) t.columnwise = clone(*q_.columnwise, s_);
    t.scale_inv = clone(q_.scale_inv, s_);
    for (const Expected& e : expected_) {
      std::optional<DevicePlane>& tp = e.spec.plane.plane == PlaneKind::kRowwise ? t.rowwise : t.columnwise;
      DeviceBuffer* dst = nullptr;
      switch (e.spec.role) {
        case TensorRole::kData: dst = tp ? &tp->data : nullptr; break;
        case TensorRole::kScale: dst = tp ? &tp->scale : nullptr; break;
        case TensorRole::kAmax:
        case TensorRole::kTensorAmax: dst = tp ? &tp->amax : nullptr; break;
        case TensorRole::kScaleInv: dst = &t.scale_inv; break;
        case TensorRole::kDequant: break;
      }
      if (dst == nullptr || dst->bytes() != e.compact_bytes() || dst->bytes() == 0) continue;
      if (const auto g = e.geometry(layout_))
        to_compact_on_device(e.buf, e.layout.elem_bytes(), *g, dst->data(), s_);
      else
        QTC_CUDA_CHECK(cudaMemcpyAsync(dst->data(), e.buf, dst->bytes(), cudaMemcpyDeviceToDevice, s_));
    }
    return t;
  }

  Ours ours_for(const Expected& e) {
    const bool row = e.spec.plane.plane == PlaneKind::kRowwise;
    const std::optional<DevicePlane>& pl = row ? q_.rowwise : q_.columnwise;
    if (!pl) return {nullptr, std::string("backend cuda produced no ") + (row ? "rowwise" : "columnwise") + " plane"};
    switch (e.spec.role) {
      case TensorRole::kData: return {pl->data.data(), {}};
      case TensorRole::kScale: return {pl->scale.data(), {}};
      case TensorRole::kAmax:
      case TensorRole::kTensorAmax:
        if (pl->amax_count != e.spec.shape[0])
          return {nullptr, "backend produced " + std::to_string(pl->amax_count) + " amax values, expected " +
                               std::to_string(e.spec.shape[0])};
        return {pl->amax.data(), {}};
      case TensorRole::kScaleInv: return {q_.scale_inv.data(), {}};
      case TensorRole::kDequant: {
        auto it = dequantized_.find(e.spec.plane.plane);
        if (it == dequantized_.end()) {
          DeviceBuffer y(static_cast<size_t>(x_.rows * x_.cols) * 4, s_);
          try {
            dequantize(q_, e.spec.plane.plane, DType::kF32, y.data(), s_);
          } catch (const Error& ex) {
            return {nullptr, std::string("backend cuda failed to dequantize: ") + detail::clean_message(ex.what())};
          }
          it = dequantized_.emplace(e.spec.plane.plane, std::move(y)).first;
        }
        return {it->second.data(), {}};
      }
    }
    return {nullptr, "unknown tensor role"};
  }

  /// Compares one expected tensor with the kernels' compact result; true when they differ (the record is added).
  bool compare(const Expected& e, const void* ours, cv::FileResult& res) {
    const std::vector<int64_t>& shp = e.spec.shape;
    const int64_t rows = shp[0], cols = (shp.size() > 1 ? shp[1] : 1) * (e.elem == cv::ElementCode::kE2M1 ? 2 : 1);
    const std::optional<ScaleGeometry> geom = e.geometry(layout_);
    const DeviceMismatch m = compare_on_device(device_elem(e.elem), ours, e.buf, rows, cols, geom ? &*geom : nullptr, true, s_);
    if (m.count == 0) return false;
    cv::TensorMismatch t;
    t.tensor = e.name;
    t.elem = e.elem;
    t.count = m.count;
    t.total = rows * cols;
    t.first = m.first;
    const int64_t a = m.first / cols, b = m.first % cols;
    t.at = shp.size() == 1 ? std::vector<int64_t>{m.first} : std::vector<int64_t>{a, b};
    const int64_t file_index = e.layout.is_identity() ? m.first : e.layout.layout_index(m.first);
    if (!e.layout.is_identity()) t.file_at = ref::OutputLayout::coords(file_index, e.file_shape);
    t.want = element_bits(e.elem, e.buf, file_index, s_);  // the caller's value, as `qtc verify` shows a file's
    t.got = element_bits(e.elem, ours, m.first, s_);       // the kernels'
    const DType xd = x_.dtype;
    const int64_t xs = static_cast<int64_t>(dtype_size(xd)), K = x_.cols;
    const auto* xp = static_cast<const uint8_t*>(x_.data);
    t.block_inputs = cv::block_inputs_text(r_, e.name, a, b, x_.rows, x_.cols, [&](int64_t i, int64_t j) {
      uint8_t v[4] = {0, 0, 0, 0};
      QTC_CUDA_CHECK(cudaMemcpyAsync(v, xp + (i * K + j) * xs, static_cast<size_t>(xs), cudaMemcpyDeviceToHost, s_));
      QTC_CUDA_CHECK(cudaStreamSynchronize(s_));
      return MatrixView{v, xd, 1, 1}.at(0, 0);
    });
    res.mismatches.push_back(std::move(t));
    return true;
  }

  /// --strict-padding on the device: verify.cpp's problem text for non-zero padding.
  void padding(const Expected& e, cv::FileResult& res) {
    const ScaleGeometry g = e.spec.plane.geometry(layout_);
    const int eb = e.layout.elem_bytes();
    const DevicePadding p = nonzero_padding_on_device(e.buf, eb, g, s_);
    if (p.nonzero == 0) return;
    uint8_t v[4] = {0, 0, 0, 0};
    QTC_CUDA_CHECK(cudaMemcpyAsync(v, static_cast<const uint8_t*>(e.buf) + p.first * eb, static_cast<size_t>(eb),
                                   cudaMemcpyDeviceToHost, s_));
    QTC_CUDA_CHECK(cudaStreamSynchronize(s_));
    uint32_t bits = 0;
    std::memcpy(&bits, v, 4);
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(bits & 0xFFu));
    cv::TensorMismatch t;
    t.tensor = e.name;
    t.problem = "padding not zero (--strict-padding): " + std::to_string(p.nonzero) + " of " + std::to_string(p.total) +
                " padding elements non-zero; first at " +
                ref::OutputLayout::coords_text(ref::OutputLayout::coords(p.first, e.file_shape)) + ": " +
                (eb == 4 ? cv::element_text(cv::ElementCode::kF32, bits) : std::string(hex));
    res.mismatches.push_back(std::move(t));
  }

  const std::vector<DeviceTensor>& tensors_;
  const Metadata& md_;
  cv::VerifyOptions opts_;
  cudaStream_t s_;
  Recipe r_;
  Layout layout_ = Layout::kCompact;
  DeviceMatrixView x_;
  std::vector<Expected> expected_;
  DeviceQuantized q_;
  std::map<PlaneKind, DeviceBuffer> dequantized_;
  std::vector<PlaneKind> differing_planes_;
  size_t compared_fails_ = 0;
  bool encodings_only_ = true;
};

}  // namespace

namespace detail {

cv::FileResult verify_plain_on_device(const std::vector<DeviceTensor>& tensors, const Metadata& md, const std::string& source,
                                      const cv::VerifyOptions& opts, cudaStream_t stream, int device) {
  cv::FileResult res;
  res.path = source;
  res.backend = "cuda";
  auto stop = [&](const Stop& s) {
    res.verdict = s.verdict;
    res.message = clean_message(s.message);
    return res;
  };
  try {
    // Read and expect first: every error of the arguments is found on the host, before any CUDA call.
    std::optional<DeviceGuard> guard;  // declared first: the device buffers of `v` are freed on the tensors' device
    DeviceVerify v(tensors, md, opts, stream);
    if (auto s = v.prepare(res)) return stop(*s);
    try {
      guard.emplace(device);
    } catch (const Error& e) {
      return stop({cv::Verdict::kError, e.what()});
    }
    if (auto s = v.unsupported()) return stop(*s);
    if (auto s = v.run(res)) return stop(*s);
    if (res.mismatches.empty()) {
      res.verdict = cv::Verdict::kPass;
      return res;
    }
    if (v.equivalence_candidate(res))
      if (std::optional<std::string> m = v.equivalent()) return stop({cv::Verdict::kEquivalent, std::move(*m)});
  } catch (const std::exception& e) {
    return stop({cv::Verdict::kError, std::string("internal error: ") + e.what()});
  }
  res.verdict = cv::Verdict::kFail;
  res.message = cv::mismatch_text(res.mismatches.front());
  if (res.mismatches.size() > 1) {
    std::string also;
    for (size_t i = 1; i < res.mismatches.size(); ++i) also += (i > 1 ? ", " : "") + res.mismatches[i].tensor;
    res.message += " (also differ: " + also + ")";
  }
  return res;
}

}  // namespace detail

cv::FileResult verify_on_device(const std::vector<DeviceTensor>& tensors, const Metadata& md, const std::string& source,
                                const cv::VerifyOptions& opts, cudaStream_t stream, int device) {
  if (HybridRecipe::is_hybrid(md)) return detail::verify_hybrid_on_device(tensors, md, source, opts, stream, device);
  return detail::verify_plain_on_device(tensors, md, source, opts, stream, device);
}

}  // namespace qtc::cuda
