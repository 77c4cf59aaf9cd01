/// \file qtc_python.cpp
/// \brief The extension module qtc._qtc (nanobind): the CPU reference, verify/identify and safetensors I/O on
///        raw buffers. Python (qtc/__init__.py) maps arrays to (buffer, safetensors dtype name) pairs, so every
///        array type arrives here as a C-contiguous CPU buffer without a copy (DLPack or the buffer protocol), and
///        every qtc::Error leaves as ValueError with the rule's message. The GIL is released while the reference
///        runs.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "qtc/backend.hpp"
#include "qtc/error.hpp"
#include "qtc/identify.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/vector_layout.hpp"
#include "qtc/verify.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using Array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using Metadata = std::map<std::string, std::string>;
/// A tensor from Python: the buffer and its safetensors dtype name ("F32", "BF16", "U8", ...).
using TensorArg = std::pair<Array, std::string>;

/// Drops the " [check `...` failed at file:line]" suffix: users need the rule, not our source line.
std::string rule(std::string m) {
  const auto at = m.rfind(" [check `");
  if (at != std::string::npos && !m.empty() && m.back() == ']') m.erase(at);
  return m;
}

std::vector<int64_t> shape_of(const Array& a) {
  std::vector<int64_t> s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = static_cast<int64_t>(a.shape(i));
  return s;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Checks that the buffer's element size is the dtype's.
void check_itemsize(const std::string& name, const Array& a, const std::string& dtype) {
  const auto sz = qtc::io::dtype_size(dtype);
  QTC_CHECK(sz.has_value(), "tensor '", name, "': unknown or unsupported dtype ", dtype);
  QTC_CHECK(a.itemsize() == *sz, "tensor '", name, "': dtype ", dtype, " has ", *sz, "-byte elements, the array ", a.itemsize(),
            "-byte ones");
}

qtc::io::Tensor to_tensor(const std::string& name, const TensorArg& t) {
  check_itemsize(name, t.first, t.second);
  qtc::io::Tensor out{name, t.second, shape_of(t.first), {}};
  const auto* p = static_cast<const uint8_t*>(t.first.data());
  out.bytes.assign(p, p + t.first.nbytes());
  return out;
}

/// A NumPy uint8 array that owns `bytes` (Python views it as the dtype).
nb::object owned_bytes(std::vector<uint8_t>&& bytes) {
  auto* v = new std::vector<uint8_t>(std::move(bytes));
  nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  const size_t n = v->size();
  return nb::cast(nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(v->data(), {n}, owner));
}

/// name -> (bytes, dtype, shape), what Python turns into typed arrays.
using TensorOut = std::tuple<nb::object, std::string, std::vector<int64_t>>;

TensorOut tensor_out(qtc::io::Tensor&& t) { return {owned_bytes(std::move(t.bytes)), t.dtype, t.shape}; }

qtc::DType input_dtype(const std::string& d) {
  if (d == "F32") return qtc::DType::kF32;
  if (d == "BF16") return qtc::DType::kBF16;
  if (d == "F16") return qtc::DType::kF16;
  QTC_FAIL("x has dtype ", d, "; the quantizers take F32, BF16 or F16");
}

qtc::MatrixView view_2d(const TensorArg& x) {
  check_itemsize("x", x.first, x.second);
  const qtc::DType dt = input_dtype(x.second);
  QTC_CHECK(x.first.ndim() == 2, "x has shape ", shape_str(shape_of(x.first)), "; VECTORS.md needs 2-D [M, K]");
  return qtc::MatrixView{x.first.data(), dt, static_cast<int64_t>(x.first.shape(0)), static_cast<int64_t>(x.first.shape(1))};
}

/// Splits metadata into the recipe's keys and the layout's.
std::pair<qtc::Recipe, qtc::conformance::VectorLayout> recipe_and_layout(const Metadata& md) {
  Metadata rmd = md;
  rmd.erase("layout");
  rmd.erase("swizzled");
  rmd.erase("qtc.schema");
  rmd.erase("source");
  const qtc::Recipe r = qtc::Recipe::from_metadata(rmd);
  return {r, qtc::conformance::VectorLayout::from_metadata(md, r)};
}

qtc::io::Tensor scale_tensor(const std::string& name, qtc::ScaleMatrix&& s) {
  const bool f32 = s.type == qtc::ScaleType::kF32;
  qtc::io::Tensor t{name, f32 ? "F32" : "U8", {s.rows, s.cols}, std::move(s.bytes)};
  return t;
}

std::map<std::string, TensorOut> quantize(const TensorArg& x_arg, const Metadata& md) {
  const qtc::MatrixView x = view_2d(x_arg);
  auto [r, layout] = recipe_and_layout(md);
  qtc::QuantizedTensor q;
  {
    nb::gil_scoped_release release;
    q = qtc::ref::quantize(x, r);
    if (layout.te && r.kind != qtc::RecipeKind::kFP8Tensor)
      qtc::ref::convert_layout(q, layout.swizzled ? qtc::ScaleLayout::kSwizzled : qtc::ScaleLayout::kPadded);
  }
  std::map<std::string, TensorOut> out;
  auto put_plane = [&](const char* pname, std::optional<qtc::Plane>& p) {
    if (!p) return;
    const std::string n(pname);
    out[n + "_data"] = tensor_out(qtc::io::Tensor{n + "_data", "U8", {p->data_rows, p->data_cols}, std::move(p->data)});
    if (r.kind != qtc::RecipeKind::kFP8Tensor) out[n + "_scale_inv"] = tensor_out(scale_tensor(n + "_scale_inv", std::move(p->scale)));
    if (r.kind == qtc::RecipeKind::kNVFP4) {
      const int64_t n_amax = static_cast<int64_t>(p->amax.size());
      std::vector<uint8_t> b(p->amax.size() * 4);
      if (!b.empty()) std::memcpy(b.data(), p->amax.data(), b.size());
      out["amax_" + n] = tensor_out(qtc::io::Tensor{"amax_" + n, "F32", {n_amax}, std::move(b)});
    }
  };
  if (r.kind == qtc::RecipeKind::kFP8Tensor) {
    const float amax = q.rowwise ? q.rowwise->amax.at(0) : q.columnwise->amax.at(0);
    std::vector<uint8_t> a(4), s(4);
    std::memcpy(a.data(), &amax, 4);
    std::memcpy(s.data(), &q.scale_inv, 4);
    out["amax"] = tensor_out(qtc::io::Tensor{"amax", "F32", {1}, std::move(a)});
    out["scale_inv"] = tensor_out(qtc::io::Tensor{"scale_inv", "F32", {1}, std::move(s)});
  }
  put_plane("rowwise", q.rowwise);
  put_plane("columnwise", q.columnwise);
  return out;
}

/// Builds the plane of `q` from caller tensors, every shape and dtype checked against the layout's.
TensorOut dequantize(const std::map<std::string, TensorArg>& tensors, const Metadata& md, int64_t M, int64_t K,
                     const std::string& plane, const std::string& out_dtype) {
  auto [r, layout] = recipe_and_layout(md);
  QTC_CHECK(plane == "rowwise" || plane == "columnwise", "plane must be 'rowwise' or 'columnwise', got '", plane, "'");
  QTC_CHECK(M >= 0 && K >= 0, "shape must be non-negative, got [", M, ", ", K, "]");
  QTC_CHECK(out_dtype == "F32" || out_dtype == "BF16" || out_dtype == "F16", "out must be float32, bfloat16 or float16, got ",
            out_dtype);
  const qtc::DType od = out_dtype == "F32" ? qtc::DType::kF32 : out_dtype == "BF16" ? qtc::DType::kBF16 : qtc::DType::kF16;
  const bool col = plane == "columnwise";
  const qtc::PlaneKind pk = col ? qtc::PlaneKind::kColumnwise : qtc::PlaneKind::kRowwise;
  r.rowwise = !col;
  r.columnwise = col;
  QTC_CHECK(!(col && r.kind == qtc::RecipeKind::kFP8Tensor), "per-tensor FP8 dequantizes its rowwise plane only");
  auto get = [&](const std::string& name, bool f32) -> qtc::io::Tensor {
    auto it = tensors.find(name);
    QTC_CHECK(it != tensors.end(), "dequantize ", plane, " needs tensor '", name, "'");
    qtc::io::Tensor t = to_tensor(name, it->second);
    const std::vector<int64_t> want = qtc::conformance::output_shape(name, r, M, K, layout);
    QTC_CHECK(t.shape == want || (t.shape.empty() && want == std::vector<int64_t>{1}), "tensor '", name, "' has shape ",
              shape_str(t.shape), ", expected ", shape_str(want), " for shape [", M, ", ", K, "] in layout ", layout.name());
    QTC_CHECK(f32 ? t.dtype == "F32" : t.is_byte_tensor(), "tensor '", name, "' has dtype ", t.dtype, ", expected ",
              f32 ? "F32" : "a byte type (U8, F8_E4M3, F8_E5M2, F8_E8M0)");
    return t;
  };
  qtc::QuantizedTensor q;
  q.recipe = r;
  q.rows = M;
  q.cols = K;
  q.input_dtype = qtc::DType::kF32;
  qtc::Plane p;
  qtc::io::Tensor d = get(plane + "_data", false);
  p.data_rows = d.shape[0];
  p.data_cols = d.shape[1];
  p.data = std::move(d.bytes);
  if (r.kind == qtc::RecipeKind::kFP8Tensor) {
    q.scale_inv = get("scale_inv", true).f32(0);
  } else {
    qtc::io::Tensor s = get(plane + "_scale_inv", r.kind == qtc::RecipeKind::kFP8Block);
    p.scale.type = r.kind == qtc::RecipeKind::kNVFP4 ? qtc::ScaleType::kE4M3
                   : r.kind == qtc::RecipeKind::kMXFP8 ? qtc::ScaleType::kE8M0 : qtc::ScaleType::kF32;
    p.scale.layout = layout.swizzled ? qtc::ScaleLayout::kSwizzled : layout.te ? qtc::ScaleLayout::kPadded : qtc::ScaleLayout::kCompact;
    p.scale.rows = s.shape[0];
    p.scale.cols = s.shape[1];
    p.scale.bytes = std::move(s.bytes);
    if (layout.te) p.scale = qtc::ref::convert_layout(p.scale, qtc::ScaleLayout::kCompact, r, pk, M, K);
  }
  if (r.kind == qtc::RecipeKind::kNVFP4) {
    const qtc::io::Tensor a = get("amax_" + plane, true);
    p.amax.resize(static_cast<size_t>(a.numel()));
    std::memcpy(p.amax.data(), a.bytes.data(), a.bytes.size());
  }
  (col ? q.columnwise : q.rowwise) = std::move(p);
  qtc::HostMatrix y;
  {
    nb::gil_scoped_release release;
    y = qtc::ref::dequantize(q, pk, od);
  }
  return tensor_out(qtc::io::Tensor{"dequantized_" + plane, std::string(qtc::dtype_name(od)), {M, K}, std::move(y.bytes)});
}

qtc::io::File make_file(const std::map<std::string, TensorArg>& tensors, const Metadata& md) {
  qtc::io::File f;
  f.metadata = md;
  for (const auto& [name, t] : tensors) f.put(to_tensor(name, t));
  return f;
}

/// Parses "name: N of T elements differ" (the first words of verify's per-tensor line); -1 when the line is another
/// kind of failure (a missing plane, a backend error).
std::pair<std::string, int64_t> mismatch_count(const std::string& line) {
  const auto colon = line.find(": ");
  if (colon == std::string::npos) return {line, -1};
  const std::string name = line.substr(0, colon);
  const char* p = line.c_str() + colon + 2;
  char* end = nullptr;
  const long long n = std::strtoll(p, &end, 10);
  if (end == p || std::strncmp(end, " of ", 4) != 0) return {name, -1};
  return {name, n};
}

nb::dict verify(const std::map<std::string, TensorArg>& tensors, const Metadata& md, const std::string& source) {
  qtc::io::File f = make_file(tensors, md);
  qtc::conformance::FileResult res;
  {
    nb::gil_scoped_release release;
    auto cpu = qtc::make_cpu_backend();
    try {
      qtc::conformance::convert_to_compact(f);
      res = qtc::conformance::verify_vector(f, source, *cpu);
    } catch (const qtc::Error& e) {
      res.path = source;
      res.backend = "cpu";
      res.verdict = qtc::conformance::Verdict::kError;
      res.message = rule(e.what());
    }
  }
  nb::dict d;
  d["verdict"] = std::string(qtc::conformance::verdict_name(res.verdict));
  d["message"] = res.message;
  d["line"] = qtc::conformance::result_line(res);
  d["details"] = res.details;
  d["checked"] = res.checked;
  d["recipe"] = res.recipe;
  d["profile"] = res.profile;
  std::map<std::string, int64_t> counts;
  for (const std::string& c : res.checked) counts[c] = 0;
  for (const std::string& line : res.details) {
    auto [name, n] = mismatch_count(line);
    counts[name] = n;
  }
  d["mismatches"] = counts;
  return d;
}

nb::dict identify(const std::map<std::string, TensorArg>& tensors, const Metadata& md, const std::string& source) {
  qtc::io::File f = make_file(tensors, md);
  qtc::conformance::VectorIdentity id;
  {
    nb::gil_scoped_release release;
    auto cpu = qtc::make_cpu_backend();
    try {
      qtc::conformance::convert_to_compact(f);
      id = qtc::conformance::identify_vector(f, source, *cpu);
    } catch (const qtc::Error& e) {
      id.path = source;
      id.error = e.what();
    }
  }
  nb::dict d;
  d["verdict"] = std::string(qtc::conformance::identity_tag(id.verdict));
  d["claimed"] = id.claimed;
  d["matches"] = id.matches;
  d["claimed_mismatch"] = id.claimed_mismatch;
  d["closest"] = id.closest;
  d["closest_mismatch"] = id.closest_mismatch;
  d["error"] = rule(id.error);
  return d;
}

std::pair<std::map<std::string, TensorOut>, Metadata> load_vector(const std::string& path) {
  qtc::io::File f;
  {
    nb::gil_scoped_release release;
    f = qtc::io::read_file(path);
  }
  std::map<std::string, TensorOut> out;
  for (qtc::io::Tensor& t : f.tensors) {
    std::string name = t.name;
    out[name] = tensor_out(std::move(t));
  }
  return {std::move(out), f.metadata};
}

void save_vector(const std::string& path, const std::map<std::string, TensorArg>& tensors, const Metadata& md) {
  const qtc::io::File f = make_file(tensors, md);
  nb::gil_scoped_release release;
  qtc::io::write_file(path, f);
}

}  // namespace

NB_MODULE(_qtc, m) {
  m.doc() = "qtc: bit-exact CPU reference quantizers (NVFP4, MXFP8, FP8 block, FP8 tensor) and conformance checks";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const qtc::Error& e) {
      PyErr_SetString(PyExc_ValueError, rule(e.what()).c_str());
    }
  });
  m.def("quantize", &quantize, "x"_a, "metadata"_a);
  m.def("dequantize", &dequantize, "tensors"_a, "metadata"_a, "rows"_a, "cols"_a, "plane"_a, "out"_a);
  m.def("verify", &verify, "tensors"_a, "metadata"_a, "source"_a);
  m.def("identify", &identify, "tensors"_a, "metadata"_a, "source"_a);
  m.def("load_vector", &load_vector, "path"_a);
  m.def("save_vector", &save_vector, "path"_a, "tensors"_a, "metadata"_a);
}
