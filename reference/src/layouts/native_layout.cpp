/// \file native_layout.cpp
/// \brief Output tensors in the compact and TE layouts (VECTORS.md "Native layouts", TE_FORMATS.md §5, §6).
#include "qtc/native_layout.hpp"

#include <algorithm>
#include <cstring>

#include "qtc/error.hpp"
#include "qtc/footprint.hpp"
#include "qtc/layouts.hpp"
#include "qtc/untrusted.hpp"

namespace qtc::ref {

namespace {


int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

Layout layout_from_metadata(const std::map<std::string, std::string>& md) {
  Layout l = Layout::kCompact;
  if (auto it = md.find("layout"); it != md.end()) {
    const std::optional<Layout> named = layout_from_name(it->second);
    if (!named)
      QTC_FAIL("metadata key 'layout': unknown value ", printable_name(it->second), " (expected one of: ", kLayoutNameList,
               "; VECTORS.md, Native layouts; conformance/README.md, Scale layouts)");
    l = *named;
  }
  if (auto it = md.find("swizzled"); it != md.end()) {
    // Exactly the documented values (VECTORS.md): "1" or "0"; "true", "yes", "01" are refused, not guessed.
    if (it->second != "0" && it->second != "1") QTC_FAIL("metadata key 'swizzled': expected 0 or 1, got ", printable_name(it->second));
    if (it->second == "1") {
      if (l != Layout::kPadded && l != Layout::kSwizzled)
        QTC_FAIL("metadata key 'swizzled': swizzled=1 needs layout=te (the cuBLAS 128x4 swizzle tiles TE's padded scale "
                 "buffers; VECTORS.md, Native layouts), got layout=", layout_name(l));
      l = Layout::kSwizzled;
    }
  }
  return l;
}

void layout_to_metadata(Layout l, std::map<std::string, std::string>& md) {
  if (l == Layout::kSwizzled) {  // the form of every committed vector and of TransformerEngine's dumps
    md["layout"] = "te";
    md["swizzled"] = "1";
    return;
  }
  md["layout"] = std::string(layout_name(l));
  md.erase("swizzled");
}

void check_layout_applies(Layout l, const Recipe& r) {
  for (PlaneKind p : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const PlaneSpec s = describe_plane(r, p, 0, 0);
    if (s.per_tensor && (l == Layout::kCompact || l == Layout::kPadded)) continue;
    const std::string why = s.file_layout_refusal(l);
    QTC_CHECK(why.empty(), "metadata key 'layout': ", why, "; recipe ", r.name());
  }
}

const std::vector<std::string>& output_tensor_names() {
  static const std::vector<std::string> kNames(tensor_names().begin(), tensor_names().end());
  return kNames;
}

std::optional<OutputLayout> OutputLayout::find(std::string_view name, const Recipe& r, int64_t M, int64_t K,
                                               Layout o, std::string* why) {
  check_layout_applies(o, r);
  const std::optional<TensorSpec> t = describe_tensor(r, name, M, K);  // the recipe policy's table
  if (!t) {
    if (why != nullptr)
      *why = "tensor '" + std::string(name) + "' is not an output of recipe " + std::string(recipe_kind_name(r.kind())) +
             " (VECTORS.md, Tensors)";
    return std::nullopt;
  }
  OutputLayout L;
  L.name_ = std::string(name);
  L.recipe_ = r;
  L.layout_ = o;
  L.M_ = M;
  L.K_ = K;
  L.plane_ = t->plane.plane;
  L.spec_ = t->plane;
  const PlaneSpec& spec = L.spec_;
  L.compact_ = t->shape;
  L.scale_ = t->role == TensorRole::kScale;
  L.elem_bytes_ = t->elem_bytes;
  L.shape_ = L.compact_;
  if (layout_is_combined(o) && (L.scale_ || t->role == TensorRole::kData)) {
    // FBGEMM's MX4 rows (layout.hpp): [data rows, groups * 17]; the scale entries sit in the data tensor.
    // check_layout_applies passed, so the plane is one whose data rows are groups of 32 codes with one byte each.
    QTC_CHECK(spec.compact.rows == spec.data_rows && spec.compact.cols == (spec.data_row_elems + kMx4GroupElems - 1) / kMx4GroupElems &&
                  spec.scale_elem_bytes == 1 && spec.data_elem == DataElem::kE2M1,
              "layout ", layout_name(o), ": recipe ", r.name(), " has no rows of 32-element groups with one byte scale each");
    L.geom_ = make_scale_geometry(o, spec.compact.rows, spec.compact.cols, 0, 0, false);
    L.shape_ = {L.geom_.buf_rows, L.geom_.buf_cols};
    L.identity_ = false;
    L.elem_bytes_ = 1;
    if (L.scale_) L.carrier_ = std::string(plane_kind_name(L.plane_)) + "_data";
    else L.combines_ = true;
  } else if (L.scale_ && o != Layout::kCompact) {
    L.geom_ = spec.geometry(o);
    L.shape_ = {L.geom_.buf_rows, L.geom_.buf_cols};
    L.identity_ = false;
    // Swizzled MXFP8 columnwise scales tile the transposed matrix (row = K index): that 2-D view is accepted too.
    if (o == Layout::kSwizzled && spec.tiles_transposed) L.alt_shape_ = {L.geom_.buf_cols, L.geom_.buf_rows};
  }
  return L;
}

bool OutputLayout::accepts_shape(const std::vector<int64_t>& got) const {
  if (got == shape_) return true;
  if (got.empty() && shape_ == std::vector<int64_t>{1}) return true;  // torch.save of a scalar
  return !alt_shape_.empty() && got == alt_shape_;
}

std::string OutputLayout::shape_error(const std::vector<int64_t>& got) const {
  std::string msg = "tensor '" + name_ + "' has shape " + shape_text(got) + ", expected " + shape_text(shape_);
  if (!alt_shape_.empty()) msg += " (or " + shape_text(alt_shape_) + ")";
  if (!identity_) {
    switch (layout_) {
      case Layout::kFbgemmMx4:
        msg += " (layout=fbgemm_mx4: FBGEMM's MX4 rows [R, G*17], per group of 32 elements 16 code bytes then its E8M0 "
               "byte, of the compact data [R, ceil(L/2)] and scales [R, G] = [" + std::to_string(geom_.rows) + ", " +
               std::to_string(geom_.cols) + "])";
        break;
      case Layout::kDeepGemmPackedUe8m0:
        msg += " (layout=deepgemm_packed_ue8m0: [ceil(C/4), roundup(R,4)*4] bytes of the compact [R, C] = " + shape_text(compact_) + ")";
        break;
      case Layout::kSwizzled8x4:
        msg += " (layout=swizzled_8x4: [roundup(R,8), roundup(C,4)] of the compact [R, C] = " + shape_text(compact_) +
               (spec_.tiles_transposed ? ", transposed)" : ")");
        break;
      default:
        msg += " (layout=" + std::string(layout_name(layout_)) + " expects TE's padded shape, TE_FORMATS.md §5; compact is " +
               shape_text(compact_) + ")";
    }
  } else if (scale_ && !spec_.per_tensor) {
    // A compact file holding a TE buffer: say what to declare.
    const ScaleShape ps = spec_.padded;
    const std::vector<int64_t> te{ps.rows, ps.cols};
    if (got == te)
      msg += " (layout=compact; this is TE's padded shape: declare metadata layout=te" +
             std::string(spec_.has_layout(Layout::kSwizzled) ? ", and swizzled=1 if the scales are swizzled)" : ")");
    else
      msg += " (layout=compact; under layout=te it would be " + shape_text(te) + ")";
  }
  return msg + " for x of shape [" + std::to_string(M_) + ", " + std::to_string(K_) + "] (recipe " +
         std::string(recipe_kind_name(recipe_.kind())) + ")";
}

int64_t OutputLayout::compact_elements() const { return product(compact_); }
int64_t OutputLayout::elements() const { return product(shape_); }

int64_t OutputLayout::layout_index(int64_t c) const {
  if (identity_) return c;
  const int64_t cc = compact_[1];
  if (combines_) return fbgemm_mx4_data_offset(c / cc, c % cc, geom_.cols);  // a data byte of FBGEMM's MX4 rows
  return geom_.offset(c / cc, c % cc);
}

std::string OutputLayout::carried_error() const {
  return "tensor '" + name_ + "' is not a tensor of layout=" + std::string(layout_name(layout_)) + " (rule 'layout-" +
         std::string(layout_name(layout_)) + "'): its entries are the exponent bytes inside '" + carrier_ +
         "' (16 code bytes, then the group's E8M0 byte, per 32 elements); drop it, or declare layout=compact";
}

std::vector<int64_t> OutputLayout::coords(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t n = std::max<int64_t>(shape[d], 1);
    c[d] = i % n;
    i /= n;
  }
  if (c.empty()) c.push_back(i);
  return c;
}

std::string OutputLayout::coords_text(const std::vector<int64_t>& c) { return shape_text(c); }

std::vector<uint8_t> OutputLayout::to_compact(std::span<const uint8_t> bytes) const {
  const size_t es = static_cast<size_t>(elem_bytes_);
  QTC_CHECK(bytes.size() == static_cast<size_t>(elements()) * es, "tensor '", name_, "': ", bytes.size(), " bytes, expected ",
            elements() * static_cast<int64_t>(es), " (shape ", shape_text(shape_), " under layout=", layout_name(layout_), ")");
  if (identity_) return {bytes.begin(), bytes.end()};
  const int64_t n = compact_elements();
  std::vector<uint8_t> out(static_cast<size_t>(n) * es);
  for (int64_t c = 0; c < n; ++c) std::memcpy(out.data() + c * es, bytes.data() + layout_index(c) * es, es);
  return out;
}

std::vector<uint8_t> OutputLayout::from_compact(std::span<const uint8_t> compact, uint8_t pad) const {
  QTC_CHECK(carrier_.empty(), "tensor '", name_, "' has no buffer of its own under layout=", layout_name(layout_),
            ": it is written into '", carrier_, "' (write_into, outputs_to_layout)");
  const size_t es = static_cast<size_t>(elem_bytes_);
  QTC_CHECK(compact.size() == static_cast<size_t>(compact_elements()) * es, "tensor '", name_, "': ", compact.size(),
            " bytes, expected ", compact_elements() * static_cast<int64_t>(es), " (compact shape ", shape_text(compact_), ")");
  if (identity_) return {compact.begin(), compact.end()};
  std::vector<uint8_t> out(static_cast<size_t>(elements()) * es, pad);
  const int64_t n = compact_elements();
  for (int64_t c = 0; c < n; ++c) std::memcpy(out.data() + layout_index(c) * es, compact.data() + c * es, es);
  return out;
}

void OutputLayout::write_into(std::span<uint8_t> buffer, std::span<const uint8_t> compact) const {
  const size_t es = static_cast<size_t>(elem_bytes_);
  QTC_CHECK(compact.size() == static_cast<size_t>(compact_elements()) * es, "tensor '", name_, "': ", compact.size(),
            " bytes, expected ", compact_elements() * static_cast<int64_t>(es), " (compact shape ", shape_text(compact_), ")");
  QTC_CHECK(buffer.size() == static_cast<size_t>(elements()) * es, "tensor '", carrier_.empty() ? name_ : carrier_, "': ",
            buffer.size(), " bytes, expected ", elements() * static_cast<int64_t>(es), " (shape ", shape_text(shape_),
            " under layout=", layout_name(layout_), ")");
  const int64_t n = compact_elements();
  for (int64_t c = 0; c < n; ++c) std::memcpy(buffer.data() + layout_index(c) * es, compact.data() + c * es, es);
}

std::vector<bool> OutputLayout::padding_mask() const {
  // A carried scale tensor has no padding of its own: its carrier's mask counts the bytes that hold nothing.
  std::vector<bool> pad(static_cast<size_t>(elements()), !identity_ && carrier_.empty());
  if (identity_ || !carrier_.empty()) return pad;
  const int64_t n = compact_elements();
  for (int64_t c = 0; c < n; ++c) pad[static_cast<size_t>(layout_index(c))] = false;
  if (combines_)  // the exponent bytes hold the plane's scales
    for (int64_t r = 0; r < geom_.rows; ++r)
      for (int64_t g = 0; g < geom_.cols; ++g) pad[static_cast<size_t>(geom_.offset(r, g))] = false;
  return pad;
}

std::optional<PaddingProblem> OutputLayout::nonzero_padding(std::span<const uint8_t> bytes, const std::vector<int64_t>& file_shape) const {
  if (identity_) return std::nullopt;
  const size_t es = static_cast<size_t>(elem_bytes_);
  QTC_CHECK(bytes.size() == static_cast<size_t>(elements()) * es, "tensor '", name_, "': ", bytes.size(), " bytes, expected ",
            elements() * static_cast<int64_t>(es));
  const std::vector<bool> pad = padding_mask();
  PaddingProblem p;
  for (int64_t i = 0; i < elements(); ++i) {
    if (!pad[static_cast<size_t>(i)]) continue;
    ++p.total;
    const uint8_t* e = bytes.data() + i * es;
    if (std::all_of(e, e + es, [](uint8_t b) { return b == 0; })) continue;
    if (p.nonzero++ == 0) {
      p.first = coords(i, file_shape.empty() ? shape_ : file_shape);
      p.first_bytes.assign(e, e + es);
    }
  }
  if (p.nonzero == 0) return std::nullopt;
  return p;
}

std::vector<io::Tensor> outputs_to_compact(const std::vector<io::Tensor>& in, const Recipe& r, int64_t M, int64_t K, Layout from) {
  std::vector<io::Tensor> out;
  for (const io::Tensor& t : in) {
    std::string why;
    const auto src = OutputLayout::find(t.name, r, M, K, from, &why);
    QTC_CHECK(src.has_value(), why);
    QTC_CHECK(src->carrier().empty(), src->carried_error());
    QTC_CHECK(src->accepts_shape(t.shape), src->shape_error(t.shape));
    io::Tensor n = t;
    n.shape = src->compact_shape();
    if (t.shape.empty()) n.shape = {};  // keep a scalar a scalar
    n.bytes = src->to_compact(t.bytes);
    out.push_back(std::move(n));
    if (src->combines_scales()) {  // the plane's scales, from the same bytes
      const std::string sname = std::string(plane_kind_name(src->plane())) + "_scale_inv";
      const auto sc = OutputLayout::find(sname, r, M, K, from);
      QTC_CHECK(sc.has_value() && sc->carrier() == t.name, "layout ", layout_name(from), ": no ", sname, " inside ", t.name);
      out.push_back(io::Tensor{sname, sc->dtype(), sc->compact_shape(), sc->to_compact(t.bytes)});
    }
  }
  return out;
}

std::vector<io::Tensor> outputs_to_layout(const std::vector<io::Tensor>& compact, const Recipe& r, int64_t M, int64_t K, Layout to,
                                          uint8_t pad) {
  auto find_in = [&compact](const std::string& name) -> const io::Tensor* {
    for (const io::Tensor& t : compact)
      if (t.name == name) return &t;
    return nullptr;
  };
  std::vector<io::Tensor> out;
  for (const io::Tensor& t : compact) {
    std::string why;
    const auto dst = OutputLayout::find(t.name, r, M, K, to, &why);
    QTC_CHECK(dst.has_value(), why);
    if (!dst->carrier().empty()) {  // written into its data tensor below
      QTC_CHECK(find_in(dst->carrier()) != nullptr, "layout ", layout_name(to), " keeps '", t.name, "' inside '", dst->carrier(),
                "' (rule 'layout-", layout_name(to), "'), which this set of tensors lacks");
      continue;
    }
    io::Tensor n = t;
    n.shape = dst->shape();
    if (t.shape.empty()) n.shape = {};  // keep a scalar a scalar
    n.bytes = dst->from_compact(t.bytes, pad);
    if (dst->combines_scales()) {
      const std::string sname = std::string(plane_kind_name(dst->plane())) + "_scale_inv";
      const io::Tensor* st = find_in(sname);
      QTC_CHECK(st != nullptr, "layout ", layout_name(to), " packs '", sname, "' into '", t.name, "' (rule 'layout-",
                layout_name(to), "'), but this set of tensors lacks '", sname, "'");
      const auto sc = OutputLayout::find(sname, r, M, K, to);
      sc->write_into(n.bytes, st->bytes);
      n.dtype = "U8";
    }
    out.push_back(std::move(n));
  }
  return out;
}

io::File convert_vector_layout(const io::File& f, Layout to, uint8_t pad) {
  const Recipe r = Recipe::from_metadata(f.metadata);
  const Layout from = layout_from_metadata(f.metadata);
  check_layout_applies(from, r);
  check_layout_applies(to, r);
  const io::Tensor& x = f.at("x");
  QTC_CHECK(x.shape.size() == 2, "tensor 'x' has shape ", shape_text(x.shape), "; VECTORS.md needs 2-D [M, K]");
  const int64_t M = x.shape[0], K = x.shape[1];
  // The sizes of the rewritten tensors (TE's padded shapes may be larger than the compact ones), checked without
  // wrapping and against the memory precheck of every command (footprint.hpp) before any is made.
  {
    const std::string what = "layout conversion of recipe " + r.name() + " for x of shape " + shape_text(x.shape);
    int64_t need = 0;
    for (const io::Tensor& t : f.tensors) {
      const auto dst = t.name == "x" ? std::nullopt : OutputLayout::find(t.name, r, M, K, to);
      if (!dst) continue;  // x is kept as it is; a tensor that is no output is reported below
      const std::vector<int64_t> shape = dst->shape();
      if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) continue;
      int64_t bytes = static_cast<int64_t>(io::dtype_size(t.dtype).value_or(4));
      for (int64_t d : shape) bytes = checked_size({bytes, d}, what + ": tensor " + printable_name(t.name));
      need = checked_add(need, bytes, what);
    }
    check_memory(need, 2, what);
  }
  io::File out;
  out.metadata = f.metadata;
  layout_to_metadata(to, out.metadata);
  std::vector<io::Tensor> outputs;
  for (const io::Tensor& t : f.tensors)
    if (t.name == "x") out.put(t);
    else outputs.push_back(t);
  for (io::Tensor& t : outputs_to_layout(outputs_to_compact(outputs, r, M, K, from), r, M, K, to, pad)) out.put(std::move(t));
  return out;
}

}  // namespace qtc::ref
