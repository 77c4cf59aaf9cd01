/// \file qtc_python.cpp
/// \brief The extension module qtc._qtc (nanobind): the CPU reference, verify/identify and safetensors I/O on
///        raw buffers (CUDA tensors: qtc_python_cuda.cpp). Python (qtc/__init__.py) maps arrays to (buffer, safetensors dtype name) pairs, so every
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
#include "qtc/checkpoint_conventions.hpp"
#include "qtc/stochastic_rounding.hpp"
#include "qtc/error.hpp"
#include "qtc/footprint.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/identify.hpp"
#include "qtc/kind.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/verify.hpp"

#include "qtc_python.hpp"

using namespace nb::literals;

namespace qtcpy {

using Array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
/// A tensor from Python: the buffer and its safetensors dtype name ("F32", "BF16", "U8", ...).
using TensorArg = std::pair<Array, std::string>;

/// Drops the " [check `...` failed at file:line]" suffix: users need the rule, not our source line.
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

/// The recipe and the output layout a metadata map names.
std::pair<qtc::Recipe, qtc::Layout> recipe_and_layout(const Metadata& md) {
  // qtc.schema stays: Recipe::from_metadata refuses a schema other than 1, as `qtc verify` does.
  Metadata rmd = md;
  rmd.erase("source");
  const qtc::Recipe r = qtc::Recipe::from_metadata(rmd);
  const qtc::Layout lo = qtc::ref::layout_from_metadata(md);
  qtc::ref::check_layout_applies(lo, r);
  return {r, lo};
}

std::map<std::string, TensorOut> quantize_hybrid(const TensorArg& x_arg, const Metadata& md);

std::map<std::string, TensorOut> quantize_view(const qtc::MatrixView& x, const Metadata& md);

std::map<std::string, TensorOut> quantize(const TensorArg& x_arg, const Metadata& md) {
  if (qtc::HybridRecipe::is_hybrid(md)) return quantize_hybrid(x_arg, md);
  return quantize_view(view_2d(x_arg), md);
}

std::map<std::string, TensorOut> quantize_view(const qtc::MatrixView& x, const Metadata& md) {
  auto [r, layout] = recipe_and_layout(md);
  r.validate_input(x.dtype, x.rows, x.cols);
  // The sizes and the memory precheck of every command (footprint.hpp): the outputs, and their copies in the
  // requested layout, before anything is allocated.
  qtc::check_quantize_resources(r, x.dtype, x.rows, x.cols, false, 2);
  std::vector<qtc::io::Tensor> outs;
  {
    nb::gil_scoped_release release;
    qtc::QuantizedTensor q = qtc::ref::quantize(x, r);
    auto put = [&](std::string name, const char* dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
      outs.push_back(qtc::io::Tensor{std::move(name), dtype, std::move(shape), std::move(bytes)});
    };
    auto f32 = [](const std::vector<float>& v) {
      std::vector<uint8_t> b(v.size() * 4);
      if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
      return b;
    };
    // Which tensors exist: the recipe policy's table (VECTORS.md, Tensors).
    auto has = [&](const std::string& name) { return qtc::describe_tensor(r, name, x.rows, x.cols).has_value(); };
    if (has("scale_inv")) {
      const float amax = q.rowwise ? q.rowwise->amax.at(0) : q.columnwise->amax.at(0);
      put("amax", "F32", {1}, f32({amax}));
      put("scale_inv", "F32", {1}, f32({q.scale_inv}));
    }
    for (const char* pname : {"rowwise", "columnwise"}) {
      std::optional<qtc::Plane>& p = pname[0] == 'r' ? q.rowwise : q.columnwise;
      if (!p) continue;
      const std::string n(pname);
      put(n + "_data", "U8", {p->data_rows, p->data_cols}, std::move(p->data));
      if (has(n + "_scale_inv"))
        put(n + "_scale_inv", p->scale.type == qtc::ScaleType::kF32 ? "F32" : "U8", {p->scale.rows, p->scale.cols},
            std::move(p->scale.bytes));
      if (has("amax_" + n)) put("amax_" + n, "F32", {static_cast<int64_t>(p->amax.size())}, f32(p->amax));
    }
    // The requested layout (native_layout.hpp), from the compact tensors: a combined one (fbgemm_mx4) packs each
    // plane's scales into its data tensor.
    if (layout != qtc::Layout::kCompact) outs = qtc::ref::outputs_to_layout(outs, r, x.rows, x.cols, layout);
  }
  std::map<std::string, TensorOut> out;
  for (qtc::io::Tensor& t : outs) {
    std::string name = t.name;
    out[name] = tensor_out(std::move(t));
  }
  return out;
}

/// recipe=hybrid (qtc/hybrid.hpp; conformance/README.md "Hybrid planes"): each plane by its own recipe, through
/// quantize() above on its source (x, or the rowwise plane dequantized as ref::quantize_hybrid does), keeping that
/// plane's tensors; FP8 tensor's scale_inv / amax as '<plane>.scale_inv' / '<plane>.amax'; plus columnwise_source.
std::map<std::string, TensorOut> quantize_hybrid(const TensorArg& x_arg, const Metadata& md) {
  const qtc::MatrixView x = view_2d(x_arg);
  Metadata hmd = md;
  hmd.erase("source");
  const qtc::HybridRecipe h = qtc::HybridRecipe::from_metadata(hmd);
  h.validate_input(x.dtype, x.rows, x.cols);
  for (qtc::PlaneKind pk : {qtc::PlaneKind::kRowwise, qtc::PlaneKind::kColumnwise})
    qtc::check_quantize_resources(h.plane_recipe(pk), x.dtype, x.rows, x.cols, false, 2);
  std::optional<qtc::HostMatrix> src;
  if (h.source == qtc::ColumnwiseSource::kRowwiseDequantized) {
    nb::gil_scoped_release release;
    const qtc::QuantizedTensor q = qtc::ref::quantize(x, h.plane_recipe(qtc::PlaneKind::kRowwise));
    src = qtc::ref::dequantize(q, qtc::PlaneKind::kRowwise, h.source_dtype_for(x.dtype));
  }
  std::map<std::string, TensorOut> out;
  for (qtc::PlaneKind pk : {qtc::PlaneKind::kRowwise, qtc::PlaneKind::kColumnwise}) {
    const bool row = pk == qtc::PlaneKind::kRowwise;
    qtc::Recipe r = h.plane_recipe(pk);
    if (!row && qtc::kind_info(r).per_tensor_scale) r.rowwise = true;  // its scale_inv / amax travel with the rowwise plane
    Metadata pmd = r.to_metadata();
    for (const char* k : {"layout", "swizzled"})
      if (auto it = md.find(k); it != md.end()) pmd[k] = it->second;
    const qtc::MatrixView in = !row && src ? src->view() : x;
    for (auto& [name, t] : quantize_view(in, pmd)) {
      const std::string pre = row ? "rowwise" : "columnwise";
      if (name == pre + "_data" || name == pre + "_scale_inv" || name == "amax_" + pre) out[name] = std::move(t);
      else if (name == "scale_inv" || name == "amax") out[pre + "." + name] = std::move(t);
    }
  }
  if (src) {
    const std::string dt = src->dtype == qtc::DType::kF32 ? "F32" : src->dtype == qtc::DType::kBF16 ? "BF16" : "F16";
    out["columnwise_source"] = tensor_out(qtc::io::Tensor{"columnwise_source", dt, {src->rows, src->cols}, std::move(src->bytes)});
  }
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
  QTC_CHECK(!(col && qtc::kind_info(r).per_tensor_scale), "per-tensor FP8 dequantizes its rowwise plane only");
  auto get = [&](const std::string& name, bool f32) -> qtc::io::Tensor {
    std::string why;
    const auto ol = qtc::ref::OutputLayout::find(name, r, M, K, layout, &why);
    QTC_CHECK(ol.has_value(), why);
    // A combined layout (fbgemm_mx4) keeps the scales in the data tensor: read them there, refuse a separate one.
    QTC_CHECK(ol->carrier().empty() || tensors.find(name) == tensors.end(), ol->carried_error());
    const std::string held = ol->carrier().empty() ? name : ol->carrier();
    auto it = tensors.find(held);
    QTC_CHECK(it != tensors.end(), "dequantize ", plane, " needs tensor '", held, "'");
    qtc::io::Tensor t = to_tensor(held, it->second);
    QTC_CHECK(ol->accepts_shape(t.shape), ol->shape_error(t.shape));
    QTC_CHECK(f32 ? t.dtype == "F32" : t.is_byte_tensor(), "tensor '", held, "' has dtype ", t.dtype, ", expected ",
              f32 ? "F32" : "a byte type (U8, F8_E4M3, F8_E5M2, F8_E8M0)");
    t.bytes = ol->to_compact(t.bytes);
    t.shape = ol->compact_shape();
    t.name = name;
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
  const qtc::PlaneSpec spec = qtc::describe_plane(r, col ? qtc::PlaneKind::kColumnwise : qtc::PlaneKind::kRowwise, M, K);
  if (spec.per_tensor) {
    q.scale_inv = get("scale_inv", true).f32(0);
  } else {
    qtc::io::Tensor s = get(plane + "_scale_inv", spec.scale_type == qtc::ScaleType::kF32);
    p.scale.type = spec.scale_type;
    p.scale.layout = qtc::ScaleLayout::kCompact;
    p.scale.rows = s.shape[0];
    p.scale.cols = s.shape[1];
    p.scale.bytes = std::move(s.bytes);
  }
  if (qtc::describe_tensor(r, "amax_" + plane, M, K).has_value()) {
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

/// One mismatch record (verify.hpp's TensorMismatch) as the Python side reads it: fields, not text.
nb::dict mismatch_dict(const qtc::conformance::TensorMismatch& m) {
  nb::dict d;
  d["tensor"] = m.tensor;
  d["problem"] = m.problem;
  d["count"] = m.compared() ? m.count : int64_t{-1};
  d["total"] = m.total;
  d["index"] = m.at;
  d["buffer_index"] = m.file_at;
  d["expected"] = m.compared() ? qtc::conformance::element_text(m.elem, m.want) : std::string();
  d["got"] = m.compared() ? qtc::conformance::element_text(m.elem, m.got) : std::string();
  d["expected_bits"] = m.want;
  d["got_bits"] = m.got;
  d["block"] = m.block_inputs;
  d["line"] = qtc::conformance::mismatch_text(m);
  return d;
}

/// A path handed to the C++ side: a NUL byte would end it early (the file opened would be another one).
void check_path(const std::string& path) {
  QTC_CHECK(path.find('\0') == std::string::npos, "path ", qtc::printable_name(path, 200),
            " holds a NUL byte (rule 'path-nul': a file name cannot hold one)");
}

nb::dict verdict_dict(const qtc::conformance::FileResult& res);

nb::dict verify(const std::map<std::string, TensorArg>& tensors, const Metadata& md, const std::string& source, bool strict_padding) {
  const qtc::io::File f = make_file(tensors, md);
  qtc::conformance::FileResult res;
  {
    nb::gil_scoped_release release;
    auto cpu = qtc::make_cpu_backend();
    qtc::conformance::VerifyOptions opts;
    opts.strict_padding = strict_padding;
    res = qtc::conformance::verify_vector(f, source, *cpu, opts);  // never throws: every problem is a verdict
  }
  return verdict_dict(res);
}

/// verify(path): the file read and checked here exactly as `qtc verify PATH` does (no round trip through NumPy
/// arrays, which cannot hold every shape a file may declare), its metadata updated by `md`. An unreadable file
/// throws (ValueError), which the Python side turns into an error verdict.
nb::dict verify_path(const std::string& path, const Metadata& md, const std::string& source, bool strict_padding) {
  check_path(path);
  qtc::conformance::FileResult res;
  {
    nb::gil_scoped_release release;
    qtc::io::File f = qtc::io::read_file(path);
    for (const auto& [k, v] : md) f.metadata[k] = v;
    auto cpu = qtc::make_cpu_backend();
    qtc::conformance::VerifyOptions opts;
    opts.strict_padding = strict_padding;
    res = qtc::conformance::verify_vector(f, source, *cpu, opts);
  }
  return verdict_dict(res);
}

nb::dict verdict_dict(const qtc::conformance::FileResult& res) {
  nb::dict d;
  d["verdict"] = std::string(qtc::conformance::verdict_name(res.verdict));
  d["message"] = res.message;
  d["line"] = qtc::conformance::result_line(res);
  d["details"] = qtc::conformance::detail_lines(res);
  d["checked"] = res.checked;
  d["recipe"] = res.recipe;
  d["profile"] = res.profile;
  std::map<std::string, int64_t> counts;
  for (const std::string& c : res.checked) counts[c] = 0;
  nb::list records;
  for (const auto& m : res.mismatches) {
    counts[m.tensor] = m.compared() ? m.count : -1;
    records.append(mismatch_dict(m));
  }
  d["mismatches"] = counts;
  d["records"] = records;
  return d;
}

nb::dict identify(const std::map<std::string, TensorArg>& tensors, const Metadata& md, const std::string& source) {
  const qtc::io::File f = make_file(tensors, md);
  qtc::conformance::VectorIdentity id;
  {
    nb::gil_scoped_release release;
    auto cpu = qtc::make_cpu_backend();
    id = qtc::conformance::identify_vector(f, source, *cpu);
  }
  nb::dict d;
  d["verdict"] = std::string(qtc::conformance::identity_tag(id.verdict));
  d["claimed"] = id.claimed;
  d["matches"] = id.matches;
  d["claimed_mismatch"] = id.claimed_mismatch;
  d["closest"] = id.closest;
  d["closest_mismatch"] = id.closest_mismatch;
  d["error"] = rule(id.error);
  d["explaining_profile"] = id.explaining_profile;
  d["explaining_rule"] = id.explaining_rule;
  d["explaining_change"] = id.explaining_change;
  return d;
}

// Issue 26: model checkpoints in their conventions, and admissible stochastic rounding.
nb::dict check_checkpoint(const std::string& path, const std::string& reference, const std::string& profile) {
  qtc::conformance::CheckpointOptions o;
  o.reference = reference;
  if (!profile.empty()) {
    o.profile = profile;
    o.profile_required = true;
  }
  qtc::conformance::CheckpointReport r;
  {
    nb::gil_scoped_release release;
    r = qtc::conformance::check_checkpoint(path, o);  // never throws
  }
  nb::dict d;
  d["path"] = r.path;
  d["quant_method"] = r.quant_method;
  d["detected_by"] = r.detected_by;
  d["errors"] = r.errors;
  d["exit_code"] = r.exit_code();
  d["text"] = r.text(true);
  nb::list tensors;
  for (const auto& t : r.tensors) {
    nb::dict e;
    e["name"] = t.name;
    e["convention"] = t.convention;
    e["format"] = t.format;
    e["shape"] = std::vector<int64_t>{t.rows, t.cols};
    e["problems"] = t.problems;
    e["notes"] = t.notes;
    tensors.append(e);
  }
  d["tensors"] = tensors;
  return d;
}

nb::dict check_stochastic_rounding(const std::map<std::string, TensorArg>& tensors, const Metadata& md, double alpha, int random_bits) {
  const qtc::io::File f = make_file(tensors, md);
  qtc::conformance::SrOptions o;
  o.alpha = alpha;
  o.random_bits = random_bits;
  qtc::conformance::SrResult r;
  {
    nb::gil_scoped_release release;
    r = qtc::conformance::check_stochastic_rounding(f, o);  // never throws
  }
  nb::dict d;
  d["admissible"] = r.admissible;
  d["message"] = r.message;
  d["details"] = r.details;
  d["elements"] = r.elements;
  d["non_neighbour"] = r.non_neighbour;
  d["scale_mismatch"] = r.scale_mismatch;
  d["worst_excess"] = r.worst_excess;
  return d;
}

std::pair<std::map<std::string, TensorOut>, Metadata> load_vector(const std::string& path) {
  check_path(path);
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
  check_path(path);
  const qtc::io::File f = make_file(tensors, md);
  nb::gil_scoped_release release;
  qtc::io::write_file(path, f);
}

}  // namespace qtcpy

using namespace qtcpy;

NB_MODULE(_qtc, m) {
  m.doc() = "qtc: bit-exact CPU reference quantizers (NVFP4, MXFP8, FP8 block, FP8 tensor) and conformance checks";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const qtc::Error& e) {
      PyErr_SetString(PyExc_ValueError, rule(e.what()).c_str());
    }
  });
  m.def("layout_names", [] {  // qtc::kLayoutNames (layout.hpp): the one name table of the scale layouts
    std::vector<std::string> names;
    for (const qtc::LayoutName& n : qtc::kLayoutNames) names.emplace_back(n.name);
    return names;
  });
  m.def("quantize", &quantize, "x"_a, "metadata"_a);
  m.def("dequantize", &dequantize, "tensors"_a, "metadata"_a, "rows"_a, "cols"_a, "plane"_a, "out"_a);
  m.def("verify", &verify, "tensors"_a, "metadata"_a, "source"_a, "strict_padding"_a);
  m.def("verify_path", &verify_path, "path"_a, "metadata"_a, "source"_a, "strict_padding"_a);
  m.def("identify", &identify, "tensors"_a, "metadata"_a, "source"_a);
  m.def("load_vector", &load_vector, "path"_a);
  m.def("check_checkpoint", &check_checkpoint, "path"_a, "reference"_a, "profile"_a);
  m.def("check_stochastic_rounding", &check_stochastic_rounding, "tensors"_a, "metadata"_a, "alpha"_a, "random_bits"_a);
  m.def("save_vector", &save_vector, "path"_a, "tensors"_a, "metadata"_a);
  // CUDA tensors (issue 23 item 3): quantize_cuda / verify_cuda when the kernels library is compiled in.
  m.attr("cuda_built") = register_cuda(m);
}

#ifndef QTC_PY_CUDA
bool qtcpy::register_cuda(nb::module_&) { return false; }  // built without the kernels library: CUDA tensors refused
#endif
