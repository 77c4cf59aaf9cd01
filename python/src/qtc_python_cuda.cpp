/// \file qtc_python_cuda.cpp
/// \brief CUDA tensors in the module (issue 23 item 3): quantize_cuda and verify_cuda take DLPack arrays in device
///        memory (nanobind ndarray, device type cuda) and run the CUDA kernels on them, on the caller's stream and
///        device. Nothing of the data travels to the host: the comparison runs on the device
///        (qtc/cuda/compare.hpp) and returns counts and the first differing index; only what the message shows is
///        copied (the two differing elements, at most 32 inputs of its block). The verdict has the fields, the
///        order of checks and the text of `qtc verify` (conformance/src/verify.cpp) with backend "cuda"; what the
///        device path does not do: the value-equivalence tier (bytes differ, decoded values equal is a failure
///        here) and recipe=hybrid (refused, naming the CPU path). Compiled only when the module links the kernels
///        library (QTC_PY_CUDA).
#include <cuda_runtime_api.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qtc/cuda/check.hpp"
#include "qtc/cuda/compare.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/untrusted.hpp"
#include "qtc_python.hpp"

using namespace nb::literals;

namespace qtcpy {
namespace {

namespace cv = qtc::conformance;
/// A CUDA tensor from Python (read only) and its safetensors dtype name; an output quantize_cuda writes.
using CudaArg = std::pair<nb::ndarray<nb::ro, nb::c_contig, nb::device::cuda>, std::string>;
using CudaOut = nb::ndarray<nb::c_contig, nb::device::cuda>;

/// Makes `dev` the current device for the call, and restores the caller's afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    if (const cudaError_t e = cudaSetDevice(dev); e != cudaSuccess) {
      (void)cudaGetLastError();
      QTC_FAIL("the tensors are on cuda:", dev, ", which this process cannot use (", cudaGetErrorName(e), ": ",
               cudaGetErrorString(e), ")");
    }
  }
  ~DeviceGuard() {
    if (prev_ >= 0) (void)cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

/// Which call reads x: its messages are those of the host path's same call (quantize's or verify's).
enum class XFor { kQuantize, kVerify };

qtc::DType input_dtype(const std::string& d, XFor f) {
  if (d == "F32") return qtc::DType::kF32;
  if (d == "BF16") return qtc::DType::kBF16;
  if (d == "F16") return qtc::DType::kF16;
  if (f == XFor::kQuantize) QTC_FAIL("x has dtype ", d, "; the quantizers take F32, BF16 or F16");
  QTC_FAIL("tensor 'x' has dtype ", d, "; VECTORS.md allows F32, BF16 or F16");
}

qtc::cuda::DeviceMatrixView x_view(const CudaArg& x, XFor f) {
  check_itemsize("x", x.first, x.second);
  const std::string shape = shape_str(shape_of(x.first));
  if (f == XFor::kQuantize) {  // qtc_python.cpp's view_2d: the dtype first
    const qtc::DType dt = input_dtype(x.second, f);
    QTC_CHECK(x.first.ndim() == 2, "x has shape ", shape, "; VECTORS.md needs 2-D [M, K]");
    return {x.first.data(), dt, static_cast<int64_t>(x.first.shape(0)), static_cast<int64_t>(x.first.shape(1))};
  }
  QTC_CHECK(x.first.ndim() == 2, "tensor 'x' has shape ", shape, "; VECTORS.md needs 2-D [M, K]");  // verify.cpp's order
  return {x.first.data(), input_dtype(x.second, f), static_cast<int64_t>(x.first.shape(0)), static_cast<int64_t>(x.first.shape(1))};
}

cudaStream_t as_stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

/// The output of a device plane's buffer as Python gets it: name, dtype, shape (the requested layout's), bytes.
struct DeviceOut {
  std::string name, dtype;
  std::vector<int64_t> shape;
  const void* src = nullptr;
  size_t bytes = 0;
};

/// quantize(x) for a CUDA x: the kernels quantize into device buffers in the requested layout; `alloc(name, dtype,
/// shape)` makes each output (a torch tensor on x's device, from Python) and the bytes are copied device to device
/// on `stream`. Returns name -> the allocated array.
nb::dict quantize_cuda(const CudaArg& x_arg, const Metadata& md, uintptr_t stream, const nb::callable& alloc) {
  QTC_CHECK(!qtc::HybridRecipe::is_hybrid(md),
            "recipe=hybrid: CUDA tensors are not quantized as hybrid planes by this module (pass x.cpu() for the CPU "
            "reference)");
  const qtc::cuda::DeviceMatrixView x = x_view(x_arg, XFor::kQuantize);
  auto [r, layout] = recipe_and_layout(md);
  r.validate_input(x.dtype, x.rows, x.cols);
  const DeviceGuard guard(x_arg.first.device_id());  // x's device: the capability the gating table reads, the buffers
  if (const std::string why = qtc::cuda::unsupported_reason(r, x.dtype, x.rows, x.cols); !why.empty())
    QTC_FAIL("the CUDA kernels do not quantize recipe ", r.name(), " here: ", why, " (pass x.cpu() for the CPU reference)");
  const cudaStream_t s = as_stream(stream);
  qtc::cuda::DeviceQuantized q;
  {
    nb::gil_scoped_release release;
    q = qtc::cuda::quantize(x, r, s, layout);
  }
  auto has = [&](const std::string& name) { return qtc::describe_tensor(r, name, x.rows, x.cols).has_value(); };
  std::vector<DeviceOut> outs;
  if (has("scale_inv")) {
    const qtc::cuda::DevicePlane& p = q.rowwise ? *q.rowwise : *q.columnwise;
    outs.push_back({"amax", "F32", {1}, p.amax.data(), sizeof(float)});
    outs.push_back({"scale_inv", "F32", {1}, q.scale_inv.data(), sizeof(float)});
  }
  for (const char* pname : {"rowwise", "columnwise"}) {
    const std::optional<qtc::cuda::DevicePlane>& p = pname[0] == 'r' ? q.rowwise : q.columnwise;
    if (!p) continue;
    const std::string n(pname);
    outs.push_back({n + "_data", "U8", {p->data_rows, p->data_cols}, p->data.data(), p->data.bytes()});
    if (has(n + "_scale_inv")) {
      const auto ol = qtc::ref::OutputLayout::find(n + "_scale_inv", r, x.rows, x.cols, layout);
      QTC_CHECK(ol.has_value(), "tensor '", n, "_scale_inv' is not an output of recipe ", r.name());
      outs.push_back({n + "_scale_inv", ol->dtype(), ol->shape(), p->scale.data(), p->scale.bytes()});
    }
    if (has("amax_" + n)) outs.push_back({"amax_" + n, "F32", {p->amax_count}, p->amax.data(), p->amax.bytes()});
  }
  nb::dict out;
  for (const DeviceOut& o : outs) {
    nb::object t = alloc(o.name, o.dtype, o.shape);
    const CudaOut a = nb::cast<CudaOut>(t);
    QTC_CHECK(a.nbytes() == o.bytes, "tensor '", o.name, "': the allocated array has ", a.nbytes(), " bytes, the kernels wrote ",
              o.bytes);
    if (o.bytes > 0) QTC_CUDA_CHECK(cudaMemcpyAsync(a.data(), o.src, o.bytes, cudaMemcpyDeviceToDevice, s));
    out[o.name.c_str()] = t;
  }
  {
    nb::gil_scoped_release release;
    QTC_CUDA_CHECK(cudaStreamSynchronize(s));  // a CUDA error of this call is reported by this call
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// verify_cuda: verify.cpp's steps (read, expect, quantize, compare) on device memory.

/// One expected output: the caller's device buffer and where each compact value sits in it.
struct Expected {
  std::string name;
  qtc::TensorSpec spec;
  qtc::ref::OutputLayout layout;
  std::vector<int64_t> file_shape;
  const void* buf = nullptr;
  cv::ElementCode elem = cv::ElementCode::kU8;
};

cv::ElementCode elem_of(const qtc::TensorSpec& t) {
  using E = cv::ElementCode;
  if (t.f32) return E::kF32;
  if (t.role == qtc::TensorRole::kData)
    return t.plane.data_elem == qtc::DataElem::kE2M1 ? E::kE2M1 : t.plane.data_elem == qtc::DataElem::kE4M3 ? E::kE4M3 : E::kE5M2;
  return t.plane.scale_type == qtc::ScaleType::kE8M0 ? E::kE8M0 : E::kE4M3;
}

qtc::cuda::DeviceElem device_elem(cv::ElementCode e) {
  switch (e) {
    case cv::ElementCode::kE2M1: return qtc::cuda::DeviceElem::kE2M1;
    case cv::ElementCode::kF32: return qtc::cuda::DeviceElem::kF32;
    case cv::ElementCode::kBF16: return qtc::cuda::DeviceElem::kBF16;
    case cv::ElementCode::kF16: return qtc::cuda::DeviceElem::kF16;
    default: return qtc::cuda::DeviceElem::kByte;
  }
}

/// Element i's bits of a device buffer (one small copy: what a message shows).
uint32_t element_bits(cv::ElementCode e, const void* base, int64_t i, cudaStream_t s) {
  const qtc::cuda::DeviceElem de = device_elem(e);
  const int64_t nb = qtc::cuda::device_elem_bytes(de);
  const int64_t at = e == cv::ElementCode::kE2M1 ? i / 2 : i * nb;
  uint8_t b[4] = {0, 0, 0, 0};
  QTC_CUDA_CHECK(cudaMemcpyAsync(b, static_cast<const uint8_t*>(base) + at, static_cast<size_t>(nb), cudaMemcpyDeviceToHost, s));
  QTC_CUDA_CHECK(cudaStreamSynchronize(s));
  return cv::element_at(e, b, e == cv::ElementCode::kE2M1 ? i % 2 : 0);
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
  DeviceVerify(const std::map<std::string, CudaArg>& tensors, const Metadata& md, bool strict_padding, cudaStream_t s)
      : tensors_(tensors), md_(md), strict_(strict_padding), s_(s) {}

  /// Read and expect: the recipe, layout, x and the expected outputs (GIL held: reads the arrays' fields).
  std::optional<Stop> prepare(cv::FileResult& res) {
    try {
      r_ = qtc::Recipe::from_metadata(md_);
      layout_ = qtc::ref::layout_from_metadata(md_);
      qtc::ref::check_layout_applies(layout_, r_);
    } catch (const qtc::Error& e) {
      return Stop{cv::Verdict::kError, e.what()};
    }
    auto xi = tensors_.find("x");
    if (xi == tensors_.end()) return Stop{cv::Verdict::kError, "missing required tensor 'x' (the input)"};
    try {
      x_ = x_view(xi->second, XFor::kVerify);
    } catch (const qtc::Error& e) {
      return Stop{cv::Verdict::kError, e.what()};
    }
    res.profile = std::string(qtc::profile_name(r_.profile));
    const int64_t M = x_.rows, K = x_.cols;
    bool need_row = false, need_col = false;
    for (const auto& [name, arg] : tensors_) {
      if (name == "x") continue;
      const auto spec = qtc::describe_tensor(r_, name, M, K);
      if (!spec)
        return Stop{cv::Verdict::kError, cv::not_an_output_text(name, r_)};
      auto ol = qtc::ref::OutputLayout::find(name, r_, M, K, layout_);
      QTC_CHECK(ol.has_value(), "tensor '", name, "': no layout for an output of the recipe");
      const std::vector<int64_t> shape = shape_of(arg.first);
      if (!ol->accepts_shape(shape)) return Stop{cv::Verdict::kError, ol->shape_error(shape)};
      if (std::string problem = cv::dtype_problem(name, arg.second, spec->f32); !problem.empty())
        return Stop{cv::Verdict::kError, std::move(problem)};
      const auto es = qtc::io::dtype_size(arg.second);
      QTC_CHECK(es && static_cast<int64_t>(arg.first.nbytes()) == ol->elements() * ol->elem_bytes(), "tensor '", name, "': ",
                arg.first.nbytes(), " bytes, expected ", ol->elements() * ol->elem_bytes());
      (spec->plane.plane == qtc::PlaneKind::kRowwise ? need_row : need_col) = true;
      expected_.push_back(Expected{name, *spec, std::move(*ol), shape, arg.first.data(), elem_of(*spec)});
    }
    if (expected_.empty())
      return Stop{cv::Verdict::kError, "no expected output (the file holds only the input; VECTORS.md, Tensors)"};
    const auto& order = cv::expected_tensor_names();
    std::sort(expected_.begin(), expected_.end(), [&](const Expected& a, const Expected& b) {
      return std::find(order.begin(), order.end(), a.name) < std::find(order.begin(), order.end(), b.name);
    });
    r_.rowwise = need_row;
    r_.columnwise = need_col;
    res.recipe = r_.name();
    try {
      r_.validate_input(x_.dtype, M, K);
    } catch (const qtc::Error& e) {
      return Stop{cv::Verdict::kError, e.what()};
    }
    return std::nullopt;
  }

  /// A recipe the kernels do not run on the current device (the tensors' one): skipped with the reason.
  std::optional<Stop> unsupported() const {
    if (const std::string why = qtc::cuda::unsupported_reason(r_, x_.dtype, x_.rows, x_.cols); !why.empty())
      return Stop{cv::Verdict::kSkipped, why + " (pass CPU tensors for the CPU reference)"};
    return std::nullopt;
  }

  /// Quantize and compare, on the device (no Python object touched: runs without the GIL).
  std::optional<Stop> run(cv::FileResult& res) {
    try {
      q_ = qtc::cuda::quantize(x_, r_, s_, qtc::Layout::kCompact);
    } catch (const qtc::Error& e) {
      return Stop{cv::Verdict::kError, std::string("cuda backend: quantizing: ") + e.what()};
    }
    for (const Expected& e : expected_) {
      res.checked.push_back(e.name);
      if (strict_ && e.layout.is_scale() && !e.layout.is_identity()) padding(e, res);
      const Ours ours = ours_for(e);
      if (!ours.problem.empty()) {
        cv::TensorMismatch t;
        t.tensor = e.name;
        t.problem = ours.problem;
        res.mismatches.push_back(std::move(t));
        continue;
      }
      compare(e, ours.p, res);
    }
    return std::nullopt;
  }

 private:
  Ours ours_for(const Expected& e) {
    const bool row = e.spec.plane.plane == qtc::PlaneKind::kRowwise;
    const std::optional<qtc::cuda::DevicePlane>& pl = row ? q_.rowwise : q_.columnwise;
    if (!pl) return {nullptr, std::string("backend cuda produced no ") + (row ? "rowwise" : "columnwise") + " plane"};
    switch (e.spec.role) {
      case qtc::TensorRole::kData: return {pl->data.data(), {}};
      case qtc::TensorRole::kScale: return {pl->scale.data(), {}};
      case qtc::TensorRole::kAmax:
      case qtc::TensorRole::kTensorAmax:
        if (pl->amax_count != e.spec.shape[0])
          return {nullptr, "backend produced " + std::to_string(pl->amax_count) + " amax values, expected " +
                               std::to_string(e.spec.shape[0])};
        return {pl->amax.data(), {}};
      case qtc::TensorRole::kScaleInv: return {q_.scale_inv.data(), {}};
      case qtc::TensorRole::kDequant: {
        auto it = dequantized_.find(e.spec.plane.plane);
        if (it == dequantized_.end()) {
          qtc::cuda::DeviceBuffer y(static_cast<size_t>(x_.rows * x_.cols) * 4, s_);
          try {
            qtc::cuda::dequantize(q_, e.spec.plane.plane, qtc::DType::kF32, y.data(), s_);
          } catch (const qtc::Error& ex) {
            return {nullptr, std::string("backend cuda failed to dequantize: ") + rule(ex.what())};
          }
          it = dequantized_.emplace(e.spec.plane.plane, std::move(y)).first;
        }
        return {it->second.data(), {}};
      }
    }
    return {nullptr, "unknown tensor role"};
  }

  void compare(const Expected& e, const void* ours, cv::FileResult& res) {
    const std::vector<int64_t>& shp = e.spec.shape;
    const int64_t rows = shp[0], cols = (shp.size() > 1 ? shp[1] : 1) * (e.elem == cv::ElementCode::kE2M1 ? 2 : 1);
    std::optional<qtc::ScaleGeometry> geom;
    if (e.layout.is_scale() && !e.layout.is_identity()) geom = e.spec.plane.geometry(layout_);
    const qtc::cuda::DeviceMismatch m =
        qtc::cuda::compare_on_device(device_elem(e.elem), ours, e.buf, rows, cols, geom ? &*geom : nullptr, true, s_);
    if (m.count == 0) return;
    cv::TensorMismatch t;
    t.tensor = e.name;
    t.elem = e.elem;
    t.count = m.count;
    t.total = rows * cols;
    t.first = m.first;
    const int64_t a = m.first / cols, b = m.first % cols;
    t.at = shp.size() == 1 ? std::vector<int64_t>{m.first} : std::vector<int64_t>{a, b};
    const int64_t file_index = e.layout.is_identity() ? m.first : e.layout.layout_index(m.first);
    if (!e.layout.is_identity()) t.file_at = qtc::ref::OutputLayout::coords(file_index, e.file_shape);
    t.want = element_bits(e.elem, e.buf, file_index, s_);  // the caller's value, as `qtc verify` shows a file's
    t.got = element_bits(e.elem, ours, m.first, s_);       // the kernels'
    const qtc::DType xd = x_.dtype;
    const int64_t xs = static_cast<int64_t>(qtc::dtype_size(xd)), K = x_.cols;
    const auto* xp = static_cast<const uint8_t*>(x_.data);
    t.block_inputs = cv::block_inputs_text(r_, e.name, a, b, x_.rows, x_.cols, [&](int64_t i, int64_t j) {
      uint8_t v[4] = {0, 0, 0, 0};
      QTC_CUDA_CHECK(cudaMemcpyAsync(v, xp + (i * K + j) * xs, static_cast<size_t>(xs), cudaMemcpyDeviceToHost, s_));
      QTC_CUDA_CHECK(cudaStreamSynchronize(s_));
      return qtc::MatrixView{v, xd, 1, 1}.at(0, 0);
    });
    res.mismatches.push_back(std::move(t));
  }

  /// --strict-padding on the device: verify.cpp's problem text for non-zero padding.
  void padding(const Expected& e, cv::FileResult& res) {
    const qtc::ScaleGeometry g = e.spec.plane.geometry(layout_);
    const int eb = e.layout.elem_bytes();
    const qtc::cuda::DevicePadding p = qtc::cuda::nonzero_padding_on_device(e.buf, eb, g, s_);
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
                qtc::ref::OutputLayout::coords_text(qtc::ref::OutputLayout::coords(p.first, e.file_shape)) + ": " +
                (eb == 4 ? cv::element_text(cv::ElementCode::kF32, bits) : std::string(hex));
    res.mismatches.push_back(std::move(t));
  }

  const std::map<std::string, CudaArg>& tensors_;
  Metadata md_;
  bool strict_;
  cudaStream_t s_;
  qtc::Recipe r_;
  qtc::Layout layout_ = qtc::Layout::kCompact;
  qtc::cuda::DeviceMatrixView x_;
  std::vector<Expected> expected_;
  qtc::cuda::DeviceQuantized q_;
  std::map<qtc::PlaneKind, qtc::cuda::DeviceBuffer> dequantized_;
};

/// verify(tensors) for CUDA tensors: the verdict of `qtc verify --backend cuda` on the same buffers, computed on
/// their device. Never throws for a bad vector: every problem is a verdict.
nb::dict verify_cuda(const std::map<std::string, CudaArg>& tensors, const Metadata& md, const std::string& source,
                     bool strict_padding, uintptr_t stream) {
  cv::FileResult res;
  res.path = source;
  res.backend = "cuda";
  auto stop = [&](const Stop& s) {
    res.verdict = s.verdict;
    res.message = rule(s.message);
    return verdict_dict(res);
  };
  if (qtc::HybridRecipe::is_hybrid(md))
    return stop({cv::Verdict::kError, "recipe=hybrid: CUDA tensors are not verified as hybrid planes by this module (pass "
                                      "CPU tensors for the CPU reference)"});
  int dev = -1;
  for (const auto& [name, arg] : tensors) {
    if (dev >= 0 && arg.first.device_id() != dev)
      return stop({cv::Verdict::kError, "tensor '" + name + "' is on cuda:" + std::to_string(arg.first.device_id()) +
                                            ", the others on cuda:" + std::to_string(dev) + ": pass every tensor on one device"});
    dev = arg.first.device_id();
  }
  try {
    // Read and expect first: every error of the arguments is found on the host, before any CUDA call (CI checks them
    // without a GPU: python/tests/test_cuda_args.py).
    std::optional<DeviceGuard> guard;  // declared first: the device buffers of `v` are freed on the tensors' device
    DeviceVerify v(tensors, md, strict_padding, as_stream(stream));
    if (auto s = v.prepare(res)) return stop(*s);
    try {
      guard.emplace(dev < 0 ? 0 : dev);
    } catch (const qtc::Error& e) {
      return stop({cv::Verdict::kError, e.what()});
    }
    if (auto s = v.unsupported()) return stop(*s);
    std::optional<Stop> s;
    {
      nb::gil_scoped_release release;
      s = v.run(res);
    }
    if (s) return stop(*s);
  } catch (const std::exception& e) {
    return stop({cv::Verdict::kError, std::string("internal error: ") + e.what()});
  }
  if (res.mismatches.empty()) {
    res.verdict = cv::Verdict::kPass;
    return verdict_dict(res);
  }
  res.verdict = cv::Verdict::kFail;
  res.message = cv::mismatch_text(res.mismatches.front());
  if (res.mismatches.size() > 1) {
    std::string also;
    for (size_t i = 1; i < res.mismatches.size(); ++i) also += (i > 1 ? ", " : "") + res.mismatches[i].tensor;
    res.message += " (also differ: " + also + ")";
  }
  return verdict_dict(res);
}

}  // namespace

bool register_cuda(nb::module_& m) {
  m.def("quantize_cuda", &quantize_cuda, "x"_a, "metadata"_a, "stream"_a, "alloc"_a);
  m.def("verify_cuda", &verify_cuda, "tensors"_a, "metadata"_a, "source"_a, "strict_padding"_a, "stream"_a);
  m.def("cuda_device_count", [] { return qtc::cuda::device_count(); });
  return true;
}

}  // namespace qtcpy
