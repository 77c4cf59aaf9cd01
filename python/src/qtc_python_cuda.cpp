/// \file qtc_python_cuda.cpp
/// \brief CUDA tensors in the module (issue 23 item 3): quantize_cuda and verify_cuda take DLPack arrays in device
///        memory (nanobind ndarray, device type cuda) and run the CUDA kernels on them, on the caller's stream and
///        device. quantize_cuda: qtc::cuda::quantize / quantize_hybrid, the outputs copied device to device into
///        arrays Python allocates. verify_cuda: qtc::cuda::verify_on_device (qtc/cuda/verify.hpp), the verdict of
///        `qtc verify --backend cuda` with its checks, order and texts (value-equivalence tier and hybrid vectors
///        included), computed on the device: only counts, first indices and what a message shows reach the host.
///        Compiled only when the module links the kernels library (QTC_PY_CUDA).
#include <cuda_runtime_api.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qtc/cuda/check.hpp"
#include "qtc/cuda/hybrid.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/cuda/verify.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/kind.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc_python.hpp"

using namespace nb::literals;

namespace qtcpy {
namespace {

namespace cv = qtc::conformance;
/// A CUDA tensor from Python (read only) and its safetensors dtype name; an output quantize_cuda writes.
using CudaArg = std::pair<nb::ndarray<nb::ro, nb::c_contig, nb::device::cuda>, std::string>;
using CudaOut = nb::ndarray<nb::c_contig, nb::device::cuda>;

/// x for quantize_cuda, checked as qtc_python.cpp's view_2d checks a host x (the dtype first).
qtc::cuda::DeviceMatrixView x_view(const CudaArg& x) {
  check_itemsize("x", x.first, x.second);
  const std::string& d = x.second;
  QTC_CHECK(d == "F32" || d == "BF16" || d == "F16", "x has dtype ", d, "; the quantizers take F32, BF16 or F16");
  const qtc::DType dt = d == "F32" ? qtc::DType::kF32 : d == "BF16" ? qtc::DType::kBF16 : qtc::DType::kF16;
  QTC_CHECK(x.first.ndim() == 2, "x has shape ", shape_str(shape_of(x.first)), "; VECTORS.md needs 2-D [M, K]");
  return {x.first.data(), dt, static_cast<int64_t>(x.first.shape(0)), static_cast<int64_t>(x.first.shape(1))};
}

cudaStream_t as_stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

/// The output of a device plane's buffer as Python gets it: name, dtype, shape (the requested layout's), bytes.
struct DeviceOut {
  std::string name, dtype;
  std::vector<int64_t> shape;
  const void* src = nullptr;
  size_t bytes = 0;
};

/// The VECTORS.md outputs of a device quantization (its planes, in `layout`): `r` says which tensors exist.
std::vector<DeviceOut> outputs_of(const qtc::cuda::DeviceQuantized& q, const qtc::Recipe& r, qtc::Layout layout) {
  auto has = [&](const std::string& name) { return qtc::describe_tensor(r, name, q.rows, q.cols).has_value(); };
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
      const auto ol = qtc::ref::OutputLayout::find(n + "_scale_inv", r, q.rows, q.cols, layout);
      QTC_CHECK(ol.has_value(), "tensor '", n, "_scale_inv' is not an output of recipe ", r.name());
      outs.push_back({n + "_scale_inv", ol->dtype(), ol->shape(), p->scale.data(), p->scale.bytes()});
    }
    if (has("amax_" + n)) outs.push_back({"amax_" + n, "F32", {p->amax_count}, p->amax.data(), p->amax.bytes()});
  }
  return outs;
}

/// Each output allocated by `alloc(name, dtype, shape)` (a torch tensor on x's device, from Python) and filled device
/// to device on `s`; the stream is synchronized (a CUDA error of this call is reported by this call).
nb::dict copy_out(const std::vector<DeviceOut>& outs, const nb::callable& alloc, cudaStream_t s) {
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
    QTC_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  return out;
}

/// recipe=hybrid for a CUDA x: qtc::cuda::quantize_hybrid, the outputs named as qtc_python.cpp's quantize_hybrid
/// names the host's (each plane's tensors; an FP8 tensor plane's scale_inv / amax as '<plane>.scale_inv' /
/// '<plane>.amax'; the dequantized rowwise plane as columnwise_source).
nb::dict quantize_hybrid_cuda(const qtc::cuda::DeviceMatrixView& x, int device, const Metadata& md, cudaStream_t s,
                              const nb::callable& alloc) {
  Metadata hmd = md;
  hmd.erase("source");
  const qtc::HybridRecipe h = qtc::HybridRecipe::from_metadata(hmd);
  h.validate_input(x.dtype, x.rows, x.cols);
  const qtc::Layout layout = qtc::ref::layout_from_metadata(md);
  for (qtc::PlaneKind pk : {qtc::PlaneKind::kRowwise, qtc::PlaneKind::kColumnwise})
    qtc::ref::check_layout_applies(layout, h.plane_recipe(pk));
  const qtc::cuda::DeviceGuard guard(device);
  if (const std::string why = qtc::cuda::unsupported_reason(h, x.dtype, x.rows, x.cols); !why.empty())
    QTC_FAIL("the CUDA kernels do not quantize recipe ", h.name(), " here: ", why, " (pass x.cpu() for the CPU reference)");
  qtc::cuda::DeviceHybrid d;
  {
    nb::gil_scoped_release release;
    d = qtc::cuda::quantize_hybrid(x, h, s, layout);
  }
  std::vector<DeviceOut> outs;
  for (qtc::PlaneKind pk : {qtc::PlaneKind::kRowwise, qtc::PlaneKind::kColumnwise}) {
    const bool row = pk == qtc::PlaneKind::kRowwise;
    qtc::Recipe r = h.plane_recipe(pk);
    if (!row && qtc::kind_info(r).per_tensor_scale) r.rowwise = true;  // its scale_inv / amax travel with the rowwise plane
    const std::string pre = row ? "rowwise" : "columnwise";
    for (DeviceOut& o : outputs_of(row ? d.rowwise : d.columnwise, r, layout)) {
      if (o.name == pre + "_data" || o.name == pre + "_scale_inv" || o.name == "amax_" + pre) {
        outs.push_back(std::move(o));
      } else if (o.name == "scale_inv" || o.name == "amax") {
        o.name = pre + "." + o.name;
        outs.push_back(std::move(o));
      }
    }
  }
  if (d.source.data() != nullptr)
    outs.push_back({"columnwise_source", std::string(qtc::dtype_name(d.source_dtype)), {x.rows, x.cols}, d.source.data(),
                    d.source.bytes()});
  return copy_out(outs, alloc, s);
}

/// quantize(x) for a CUDA x: the kernels quantize into device buffers in the requested layout, which are copied
/// device to device into the arrays `alloc` makes. Returns name -> the allocated array.
nb::dict quantize_cuda(const CudaArg& x_arg, const Metadata& md, uintptr_t stream, const nb::callable& alloc) {
  const qtc::cuda::DeviceMatrixView x = x_view(x_arg);
  const int device = x_arg.first.device_id();  // x's device: the capability the gating table reads, the buffers
  if (qtc::HybridRecipe::is_hybrid(md)) return quantize_hybrid_cuda(x, device, md, as_stream(stream), alloc);
  auto [r, layout] = recipe_and_layout(md);
  r.validate_input(x.dtype, x.rows, x.cols);
  const qtc::cuda::DeviceGuard guard(device);
  if (const std::string why = qtc::cuda::unsupported_reason(r, x.dtype, x.rows, x.cols); !why.empty())
    QTC_FAIL("the CUDA kernels do not quantize recipe ", r.name(), " here: ", why, " (pass x.cpu() for the CPU reference)");
  const cudaStream_t s = as_stream(stream);
  qtc::cuda::DeviceQuantized q;
  {
    nb::gil_scoped_release release;
    q = qtc::cuda::quantize(x, r, s, layout);
  }
  return copy_out(outputs_of(q, r, layout), alloc, s);
}

// ---------------------------------------------------------------------------------------------------
// verify_cuda: verify_on_device (qtc/cuda/verify.hpp) on the arrays' device memory.

/// verify(tensors) for CUDA tensors: the verdict of `qtc verify --backend cuda` on the same buffers, computed on
/// their device (value equivalence and hybrid vectors included). Never throws for a bad vector: every problem is a
/// verdict.
nb::dict verify_cuda(const std::map<std::string, CudaArg>& tensors, const Metadata& md, const std::string& source,
                     bool strict_padding, uintptr_t stream) {
  cv::FileResult res;
  res.path = source;
  res.backend = "cuda";
  auto stop = [&](const std::string& message) {
    res.verdict = cv::Verdict::kError;
    res.message = rule(message);
    return verdict_dict(res);
  };
  int dev = -1;
  std::vector<qtc::cuda::DeviceTensor> dts;
  for (const auto& [name, arg] : tensors) {
    if (dev >= 0 && arg.first.device_id() != dev)
      return stop("tensor '" + name + "' is on cuda:" + std::to_string(arg.first.device_id()) + ", the others on cuda:" +
                  std::to_string(dev) + ": pass every tensor on one device");
    dev = arg.first.device_id();
    try {
      check_itemsize(name, arg.first, arg.second);
    } catch (const qtc::Error& e) {
      return stop(e.what());
    }
    dts.push_back({name, arg.second, shape_of(arg.first), arg.first.data(), arg.first.nbytes()});
  }
  cv::VerifyOptions opts;
  opts.strict_padding = strict_padding;
  {
    nb::gil_scoped_release release;  // no Python object is touched from here on
    res = qtc::cuda::verify_on_device(dts, md, source, opts, as_stream(stream), dev < 0 ? 0 : dev);
  }
  if (res.verdict == cv::Verdict::kSkipped) res.message += " (pass CPU tensors for the CPU reference)";
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
