/// \file verify.cpp
/// \brief `qtc verify`'s logic: the expected-output table of VECTORS.md, bitwise comparison, failure messages
///        that name the first mismatch with both values decoded and the quantization block's inputs.
#include "qtc/verify.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <variant>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/footprint.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/kind.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/recipe.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/value_equivalence.hpp"

namespace qtc::conformance {

namespace {

/// How the elements of a compared tensor are encoded (verify.hpp).
using Elem = ElementCode;
using Role = TensorRole;

struct Spec {
  std::string name;
  PlaneKind plane = PlaneKind::kRowwise;
  Role role = Role::kData;
  Elem elem = Elem::kF32;
  std::vector<int64_t> shape;  ///< the compact shape (VECTORS.md table)
  /// Where the file's buffer keeps each value (its scale layout: padded / transposed / swizzled / packed scales).
  std::optional<ref::OutputLayout> layout;
  std::vector<int64_t> file_shape;     ///< the shape the file's tensor has
  std::vector<uint8_t> compact_bytes;  ///< the file's values in the compact order (empty: the file's bytes are)
};


std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Elem elem_of(DataElem e) { return e == DataElem::kE2M1 ? Elem::kE2M1 : e == DataElem::kE4M3 ? Elem::kE4M3 : Elem::kE5M2; }
Elem elem_of(ScaleType t) { return t == ScaleType::kF32 ? Elem::kF32 : t == ScaleType::kE8M0 ? Elem::kE8M0 : Elem::kE4M3; }

/// The VECTORS.md table, from the recipe policy's tensor description. Returns nullopt with `why` set when `name`
/// is not an output of this recipe.
std::optional<Spec> spec_for(const std::string& name, const Recipe& r, int64_t M, int64_t K, std::string& why) {
  const std::optional<TensorSpec> t = describe_tensor(r, name, M, K);
  if (!t) {
    why = not_an_output_text(name, r);
    return std::nullopt;
  }
  Spec s;
  s.name = name;
  s.plane = t->plane.plane;
  s.role = t->role;
  s.elem = t->role == Role::kData ? elem_of(t->plane.data_elem) : t->role == Role::kScale ? elem_of(t->plane.scale_type) : Elem::kF32;
  s.shape = t->shape;
  return s;
}

// ---------------------------------------------------------------------------------------------------
// Element access, equality, display

struct Grid {
  const uint8_t* p = nullptr;
  Elem elem = Elem::kF32;
  int64_t rows = 0, cols = 0;  ///< in elements

  uint32_t at(int64_t i) const { return element_at(elem, p, i); }
};

std::string show(Elem e, uint32_t v) { return element_text(e, v); }

/// A rectangle of x: rows [r0, r1), cols [c0, c1).
using Region = XRegion;

std::string range_text(int64_t a, int64_t b) { return b == a + 1 ? std::to_string(a) : ::fmt::format("{}:{}", a, b); }

/// Reads element (i, j) of x as a float: a host matrix (MatrixView::at), or device memory read one shown value at a time.
using XAt = std::function<float(int64_t, int64_t)>;

std::string describe_region(const XAt& at, const Region& g, const std::string& note) {
  constexpr int64_t kMaxValues = 32;
  std::string out = ::fmt::format("x[{}, {}]{} = {{", range_text(g.r0, g.r1), range_text(g.c0, g.c1), note);
  int64_t n = 0;
  const int64_t total = (g.r1 - g.r0) * (g.c1 - g.c0);
  for (int64_t a = g.r0; a < g.r1 && n < kMaxValues; ++a)
    for (int64_t b = g.c0; b < g.c1 && n < kMaxValues; ++b, ++n) out += ::fmt::format("{}{}", n ? ", " : "", at(a, b));
  if (total > n) out += ::fmt::format(", ... {} more", total - n);
  return out + "}";
}

/// x coordinates of the block that element (a, b) of the compared tensor belongs to (the plane description's
/// block geometry).
Region region_of(const Spec& s, const Recipe& r, int64_t a, int64_t b, int64_t M, int64_t K) {
  const PlaneSpec ps = describe_plane(r, s.plane, M, K);
  const bool row = s.plane == PlaneKind::kRowwise;
  int64_t i = 0, j = 0;
  switch (s.role) {
    case Role::kData:
      ps.data_to_x(a, b, i, j);  // [K, M] planes: element (k, m) is x(m, k)
      if (ps.per_tensor) return {i, i + 1, j, j + 1};  // the element itself (the note names the per-tensor scale)
      return ps.block_of(i, j);
    case Role::kScale: return ps.scale_block(a, b);
    case Role::kAmax:
      if (s.shape[0] == 1) return {0, M, 0, K};
      return row ? Region{a, a + 1, 0, K} : Region{0, M, a, a + 1};
    case Role::kScaleInv:
    case Role::kTensorAmax: return {0, M, 0, K};
    case Role::kDequant: return ps.per_tensor ? Region{a, a + 1, b, b + 1} : ps.block_of(a, b);
  }
  return {0, M, 0, K};
}

/// What a block's inputs need said beside them.
std::string region_note(const Spec& s, const Recipe& r) {
  if (r.nvfp4_rht() && s.plane == PlaneKind::kColumnwise && s.role != Role::kAmax) return " (before the RHT)";
  if (kind_info(r).per_tensor_scale && (s.role == Role::kData || s.role == Role::kDequant)) return " (per-tensor scale)";
  return {};
}

/// Compares expected and actual element grids: nullopt on equality, else the mismatch record.
std::optional<TensorMismatch> compare(const Spec& s, const Grid& want, const Grid& got, const Recipe& r, const MatrixView& x) {
  const int64_t n = want.rows * want.cols;
  const Mismatch m = find_mismatch(want.elem, want.p, got.p, n, true);
  if (m.count == 0) return std::nullopt;
  TensorMismatch t;
  t.tensor = s.name;
  t.elem = want.elem;
  t.count = m.count;
  t.total = n;
  t.first = m.first;
  t.want = m.want;
  t.got = m.got;
  const int64_t a = m.first / want.cols, b = m.first % want.cols;
  t.at = s.shape.size() == 1 ? std::vector<int64_t>{m.first} : std::vector<int64_t>{a, b};
  if (s.layout && !s.layout->is_identity()) {  // where the file holds it, besides its compact place
    // E2M1 grids count codes; the layout maps compact bytes (two codes each): the byte that holds code (a, b).
    const int64_t compact_index = want.elem == Elem::kE2M1 ? a * (want.cols / 2) + b / 2 : m.first;
    t.file_at = ref::OutputLayout::coords(s.layout->layout_index(compact_index), s.file_shape);
  }
  t.block_inputs = describe_region([&x](int64_t i, int64_t j) { return x.at(i, j); }, region_of(s, r, a, b, x.rows, x.cols),
                                   region_note(s, r));
  return t;
}

TensorMismatch problem(const std::string& tensor, std::string what) {
  TensorMismatch t;
  t.tensor = tensor;
  t.problem = std::move(what);
  return t;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

/// Drops the " [check `...` failed at file:line]" suffix of QTC_CHECK messages: users need the rule, not our line.
std::string clean(std::string m) {
  const auto at = m.rfind(" [check `");
  if (at != std::string::npos && m.back() == ']') m.erase(at);
  return m;
}

/// What a verification stops at before any comparison: an error or a skip, with its message.
struct Stop {
  Verdict verdict = Verdict::kError;
  std::string message;
};

/// Step 1, read: the recipe, the output layout and the input of a vector.
struct ReadVector {
  Recipe recipe;
  Layout layout = Layout::kCompact;
  DType xd = DType::kF32;
  MatrixView x;
  bool narrowed = false;  ///< the recipe holds the planes the file checks (expected_outputs ran that far)
};

std::variant<ReadVector, Stop> read_vector(const io::File& file) {
  ReadVector v;
  try {  // unknown recipe or parameter values throw, naming the key
    v.recipe = Recipe::from_metadata(file.metadata);
    v.layout = ref::layout_from_metadata(file.metadata);  // VECTORS.md, Native layouts
    ref::check_layout_applies(v.layout, v.recipe);
  } catch (const Error& e) {
    return Stop{Verdict::kError, e.what()};
  }
  const io::Tensor* xt = file.find("x");
  if (xt == nullptr) return Stop{Verdict::kError, "missing required tensor 'x' (the input)"};
  if (xt->shape.size() != 2) return Stop{Verdict::kError, "tensor 'x' has shape " + shape_text(xt->shape) + "; VECTORS.md needs 2-D [M, K]"};
  if (xt->dtype == "F32")
    v.xd = DType::kF32;
  else if (xt->dtype == "BF16")
    v.xd = DType::kBF16;
  else if (xt->dtype == "F16")
    v.xd = DType::kF16;
  else
    return Stop{Verdict::kError, "tensor 'x' has dtype " + xt->dtype + "; VECTORS.md allows F32, BF16 or F16"};
  v.x = MatrixView{xt->bytes.data(), v.xd, xt->shape[0], xt->shape[1]};
  return v;
}

/// Step 2, expect: every tensor other than x is one of the table's outputs for this recipe, in the table's order;
/// the recipe is narrowed to the planes the file checks (a plane a recipe cannot produce for this input is not
/// asked for).
using Expected = std::vector<std::pair<Spec, const io::Tensor*>>;

std::variant<Expected, Stop> expected_outputs(const io::File& file, ReadVector& v) {
  const int64_t M = v.x.rows, K = v.x.cols;
  Expected expected;
  bool need_row = false, need_col = false;
  for (const io::Tensor& t : file.tensors) {
    if (t.name == "x") continue;
    std::string why;
    auto spec = spec_for(t.name, v.recipe, M, K, why);
    if (!spec) return Stop{Verdict::kError, why};
    spec->layout = ref::OutputLayout::find(t.name, v.recipe, M, K, v.layout);
    QTC_CHECK(spec->layout && spec->layout->compact_shape() == spec->shape, "tensor '", t.name,
              "': native_layout.hpp and verify disagree on the compact shape");
    // A combined layout (FBGEMM's MX4 rows) keeps the scales inside the data tensor: no scale tensor of its own.
    if (!spec->layout->carrier().empty()) return Stop{Verdict::kError, spec->layout->carried_error()};
    // A 0-d tensor stands for a [1] one (torch.save of a scalar amax).
    if (!spec->layout->accepts_shape(t.shape)) return Stop{Verdict::kError, spec->layout->shape_error(t.shape)};
    if (std::string problem = dtype_problem(t.name, t.dtype, spec->elem == Elem::kF32); !problem.empty())
      return Stop{Verdict::kError, std::move(problem)};
    (spec->plane == PlaneKind::kRowwise ? need_row : need_col) = true;
    spec->file_shape = t.shape;
    if (!spec->layout->is_identity()) spec->compact_bytes = spec->layout->to_compact(t.bytes);
    const bool combined = spec->layout->combines_scales();
    const std::string plane_name(plane_kind_name(spec->plane));
    expected.emplace_back(std::move(*spec), &t);
    if (combined) {  // the plane's scales, read from the same tensor's exponent bytes
      const std::string sname = plane_name + "_scale_inv";
      auto sspec = spec_for(sname, v.recipe, M, K, why);
      if (!sspec) return Stop{Verdict::kError, why};
      sspec->layout = ref::OutputLayout::find(sname, v.recipe, M, K, v.layout);
      QTC_CHECK(sspec->layout && sspec->layout->carrier() == t.name, "tensor '", t.name, "': native_layout.hpp keeps no ", sname, " in it");
      sspec->file_shape = t.shape;
      sspec->compact_bytes = sspec->layout->to_compact(t.bytes);
      expected.emplace_back(std::move(*sspec), &t);
    }
  }
  if (expected.empty()) return Stop{Verdict::kError, "no expected output (the file holds only the input; VECTORS.md, Tensors)"};
  std::sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) {
    const auto& n = expected_tensor_names();
    return std::find(n.begin(), n.end(), a.first.name) < std::find(n.begin(), n.end(), b.first.name);
  });
  v.recipe.rowwise = need_row;
  v.recipe.columnwise = need_col;
  v.narrowed = true;
  try {
    v.recipe.validate_input(v.xd, M, K);
    // Resources: what the backend will hold for this input (every output of the planes asked for), computed without
    // wrapping by the one footprint every command uses (footprint.hpp: `qtc quantize` checks the same sizes before
    // it writes a vector, so what it writes is read here). An impossible or too large shape is an error (exit 2),
    // never an allocation failure.
    bool want_dequant = false;
    for (const auto& [s, t] : expected) want_dequant = want_dequant || s.role == Role::kDequant;
    check_quantize_resources(v.recipe, v.xd, M, K, want_dequant);
  } catch (const Error& e) {
    return Stop{Verdict::kError, e.what()};
  }
  return expected;
}

/// A backend exception as a verdict: no answer (out of memory, a CUDA error, a refused launch) is an error or a
/// skip, not a wrong answer. `doing`: "quantizing x of shape [M, K]"; `prefix`: put before a backend error's text.
std::optional<Stop> no_answer(const std::exception& ex, const std::string& backend, const std::string& doing, const std::string& prefix) {
  if (dynamic_cast<const std::bad_alloc*>(&ex) != nullptr)
    return Stop{Verdict::kError, "backend " + backend + " ran out of memory " + doing + " (resource limit, not a wrong answer)"};
  if (const auto* be = dynamic_cast<const BackendError*>(&ex))
    return Stop{be->kind == BackendError::Kind::kError ? Verdict::kError : Verdict::kSkipped, prefix + be->what()};
  return std::nullopt;
}

/// Step 3, compare: the backend's outputs against the file's, one record per tensor that differs, and the file's
/// encodings gathered as a quantized tensor (for the value-equivalence tier).
struct Comparison {
  std::vector<TensorMismatch> mismatches;
  std::optional<Stop> stop;         ///< the backend gave no answer for a dequantized output
  QuantizedTensor theirs;           ///< the file's encodings in place of the backend's
  bool encodings_only = true;       ///< every difference is one of encodings (no dequantized output, no FP8 amax)
  std::vector<PlaneKind> differing_planes;
  size_t compared_fails = 0;        ///< mismatches of the comparison itself (not a missing plane or a wrong shape)
};

/// The backend's buffer for expected tensor `s` (its bytes in `owned` when q does not hold them), or a problem.
std::variant<Grid, TensorMismatch> actual_grid(const Spec& s, const Grid& want, const QuantizedTensor& q, QuantizeBackend& backend,
                                               std::map<PlaneKind, HostMatrix>& dequantized, std::vector<uint8_t>& owned,
                                               std::optional<Stop>& stop, int64_t M, int64_t K) {
  const bool row = s.plane == PlaneKind::kRowwise;
  const std::optional<Plane>& plane = row ? q.rowwise : q.columnwise;
  const char* pname = row ? "rowwise" : "columnwise";
  if (!plane) return problem(s.name, ::fmt::format("backend {} produced no {} plane", backend.name(), pname));
  Grid got = want;
  switch (s.role) {
    case Role::kData:
      if (plane->data_rows != s.shape[0] || plane->data_cols != s.shape[1] ||
          plane->data.size() != static_cast<size_t>(s.shape[0] * s.shape[1]))
        return problem(s.name, ::fmt::format("backend produced {} data of shape [{}, {}] ({} bytes), expected {}", pname, plane->data_rows,
                                             plane->data_cols, plane->data.size(), shape_text(s.shape)));
      got.p = plane->data.data();
      return got;
    case Role::kScale: {
      const ScaleMatrix& sm = plane->scale;
      const ScaleType st = s.elem == Elem::kF32 ? ScaleType::kF32 : s.elem == Elem::kE8M0 ? ScaleType::kE8M0 : ScaleType::kE4M3;
      if (sm.layout != ScaleLayout::kCompact || sm.type != st || sm.rows != s.shape[0] || sm.cols != s.shape[1] ||
          sm.bytes.size() != static_cast<size_t>(sm.rows * sm.cols) * sm.elem_size())
        return problem(s.name, ::fmt::format("backend produced {} scales of shape [{}, {}] (layout {}, type {}), expected compact {}", pname,
                                             sm.rows, sm.cols, static_cast<int>(sm.layout), static_cast<int>(sm.type), shape_text(s.shape)));
      got.p = sm.bytes.data();
      return got;
    }
    case Role::kAmax:
    case Role::kTensorAmax:
      if (static_cast<int64_t>(plane->amax.size()) != s.shape[0])
        return problem(s.name, ::fmt::format("backend produced {} amax values, expected {}", plane->amax.size(), s.shape[0]));
      owned = f32_bytes(plane->amax);
      got.p = owned.data();
      return got;
    case Role::kScaleInv:
      owned = f32_bytes({q.scale_inv});
      got.p = owned.data();
      return got;
    case Role::kDequant: {
      auto it = dequantized.find(s.plane);
      if (it == dequantized.end()) {
        try {
          it = dequantized.emplace(s.plane, backend.dequantize(q, s.plane, DType::kF32)).first;
        } catch (const std::exception& e) {
          if ((stop = no_answer(e, backend.name(), "dequantizing " + s.name, s.name + ": "))) return problem(s.name, stop->message);
          return problem(s.name, ::fmt::format("backend {} failed to dequantize: {}", backend.name(), e.what()));
        }
      }
      const HostMatrix& d = it->second;
      if (d.dtype != DType::kF32 || d.rows != M || d.cols != K || d.bytes.size() != static_cast<size_t>(M * K) * 4)
        return problem(s.name, ::fmt::format("backend produced a dequantized matrix of shape [{}, {}], expected [{}, {}] F32", d.rows,
                                             d.cols, M, K));
      got.p = d.bytes.data();
      return got;
    }
  }
  return problem(s.name, "unknown tensor role");
}

Comparison compare_outputs(const Expected& expected, const QuantizedTensor& q, QuantizeBackend& backend, const Recipe& r,
                           const MatrixView& x, const VerifyOptions& opts, std::vector<std::string>& checked) {
  Comparison c;
  c.theirs = q;
  std::map<PlaneKind, HostMatrix> dequantized;
  for (const auto& [s, t] : expected) {
    checked.push_back(s.name);
    if (opts.strict_padding)
      if (const auto pad = s.layout->nonzero_padding(t->bytes, s.file_shape)) {
        uint32_t v = 0;
        std::memcpy(&v, pad->first_bytes.data(), std::min<size_t>(pad->first_bytes.size(), 4));
        c.mismatches.push_back(problem(s.name, ::fmt::format("padding not zero (--strict-padding): {} of {} padding elements non-zero; first at {}: {}",
                                                             pad->nonzero, pad->total, ref::OutputLayout::coords_text(pad->first),
                                                             s.elem == Elem::kF32 ? show(Elem::kF32, v) : ::fmt::format("0x{:02x}", v))));
      }
    Grid want{s.layout->is_identity() ? t->bytes.data() : s.compact_bytes.data(), s.elem, s.shape[0], s.shape.size() > 1 ? s.shape[1] : 1};
    if (s.elem == Elem::kE2M1) want.cols *= 2;
    std::vector<uint8_t> owned;  // the actual values where they are not in q
    auto got = actual_grid(s, want, q, backend, dequantized, owned, c.stop, x.rows, x.cols);
    if (c.stop) return c;
    if (auto* p = std::get_if<TensorMismatch>(&got)) {
      c.mismatches.push_back(std::move(*p));
      continue;
    }
    if (auto m = compare(s, want, std::get<Grid>(got), r, x)) {
      c.mismatches.push_back(std::move(*m));
      // Decoded values are the question: a dequantized output, or FP8 tensor's amax (no part of any decoded value),
      // that differs is a failure whatever the encodings decode to.
      if (s.role == Role::kDequant || s.role == Role::kTensorAmax) c.encodings_only = false;
      if (std::find(c.differing_planes.begin(), c.differing_planes.end(), s.plane) == c.differing_planes.end())
        c.differing_planes.push_back(s.plane);
      ++c.compared_fails;
    }
    // The file's encodings as a quantized tensor (issue 26: value equivalence).
    const std::vector<uint8_t>& fb = s.layout->is_identity() ? t->bytes : s.compact_bytes;
    std::optional<Plane>& tp = s.plane == PlaneKind::kRowwise ? c.theirs.rowwise : c.theirs.columnwise;
    if (tp && s.role == Role::kData && fb.size() == tp->data.size()) tp->data = fb;
    else if (tp && s.role == Role::kScale && fb.size() == tp->scale.bytes.size()) tp->scale.bytes = fb;
    else if (tp && (s.role == Role::kAmax || s.role == Role::kTensorAmax) && fb.size() == tp->amax.size() * 4)
      std::memcpy(tp->amax.data(), fb.data(), fb.size());
    else if (s.role == Role::kScaleInv && fb.size() == 4) std::memcpy(&c.theirs.scale_inv, fb.data(), 4);
  }
  return c;
}

}  // namespace

const std::vector<std::string>& expected_tensor_names() {
  static const std::vector<std::string> kNames(tensor_names().begin(), tensor_names().end());  // the policy's table
  return kNames;
}

FileResult verify_vector(const io::File& file, const std::string& source, QuantizeBackend& backend, const VerifyOptions& opts) {
  if (HybridRecipe::is_hybrid(file.metadata)) return verify_hybrid_vector(file, source, backend, opts);  // verify_hybrid.cpp
  FileResult res;
  res.path = source;
  res.backend = backend.name();
  auto stop = [&](const Stop& s) {
    res.verdict = s.verdict;
    res.message = clean(s.message);
    return res;
  };
  try {
    auto read = read_vector(file);
    if (auto* s = std::get_if<Stop>(&read)) return stop(*s);
    ReadVector& v = std::get<ReadVector>(read);
    res.profile = std::string(profile_name(v.recipe.profile));
    auto exp = expected_outputs(file, v);
    if (auto* s = std::get_if<Stop>(&exp)) {
      if (v.narrowed) res.recipe = v.recipe.name();
      return stop(*s);
    }
    const Expected& expected = std::get<Expected>(exp);
    const Recipe& r = v.recipe;
    res.recipe = r.name();
    const int64_t M = v.x.rows, K = v.x.cols;
    if (const std::string why = backend.unavailable_reason(); !why.empty()) return stop({Verdict::kSkipped, why});
    if (const std::string why = backend.unsupported_reason(r, v.xd, M, K); !why.empty()) return stop({Verdict::kSkipped, why});

    QuantizedTensor q;
    try {
      q = backend.quantize(v.x, r);
    } catch (const std::exception& e) {
      if (auto s = no_answer(e, backend.name(), "quantizing x of shape " + shape_text({M, K}), "")) return stop(*s);
      return stop({Verdict::kFail, std::string("backend ") + backend.name() + " failed to quantize: " + clean(e.what())});
    }

    Comparison c = compare_outputs(expected, q, backend, r, v.x, opts, res.checked);
    if (c.stop) return stop(*c.stop);
    res.mismatches = std::move(c.mismatches);
    if (res.mismatches.empty()) {
      res.verdict = Verdict::kPass;
      return res;
    }
    if (c.compared_fails == res.mismatches.size() && c.encodings_only && !c.differing_planes.empty()) {
      try {  // bytes differ: do the values? (value_equivalence.hpp)
        const Equivalence eq = compare_values(q, c.theirs, c.differing_planes);
        if (eq.equal) {
          res.verdict = Verdict::kEquivalent;
          res.message = clean(eq.message);
          return res;
        }
      } catch (const std::exception&) {  // not decodable: the failure stands
      }
    }
    res.verdict = Verdict::kFail;
    res.message = mismatch_text(res.mismatches.front());
    if (res.mismatches.size() > 1) {
      std::string also;
      for (size_t i = 1; i < res.mismatches.size(); ++i) also += (i > 1 ? ", " : "") + res.mismatches[i].tensor;
      res.message += " (also differ: " + also + ")";
    }
    return res;
  } catch (const std::exception& e) {
    return stop({Verdict::kError, std::string("internal error: ") + e.what()});
  }
}

FileResult verify_file(const std::filesystem::path& path, QuantizeBackend& backend, const VerifyOptions& opts) {
  QuantizeBackend* b = &backend;
  return verify_file(path, std::vector<QuantizeBackend*>{b}, opts).front();
}

std::vector<FileResult> verify_file(const std::filesystem::path& path, const std::vector<QuantizeBackend*>& backends,
                                    const VerifyOptions& opts) {
  io::File f;
  try {
    f = io::read_file(path);
  } catch (const std::exception& e) {
    FileResult r;
    r.path = path.string();
    r.verdict = Verdict::kError;
    r.message = clean(e.what());
    // The message of qtc::io already starts with the path; don't repeat it.
    const std::string prefix = r.path + ": ";
    if (r.message.rfind(prefix, 0) == 0) r.message = r.message.substr(prefix.size());
    return {r};
  }
  std::vector<FileResult> out;
  for (QuantizeBackend* b : backends) out.push_back(verify_vector(f, path.string(), *b, opts));
  return out;
}

std::string block_inputs_text(const Recipe& r, std::string_view tensor, int64_t a, int64_t b, const MatrixView& x) {
  std::string why;
  const auto s = spec_for(std::string(tensor), r, x.rows, x.cols, why);
  if (!s) return {};
  return describe_region([&x](int64_t i, int64_t j) { return x.at(i, j); }, region_of(*s, r, a, b, x.rows, x.cols),
                         region_note(*s, r));
}

std::string block_inputs_text(const Recipe& r, std::string_view tensor, int64_t a, int64_t b, int64_t M, int64_t K,
                              const std::function<float(int64_t, int64_t)>& at) {
  std::string why;
  const auto s = spec_for(std::string(tensor), r, M, K, why);
  if (!s) return {};
  return describe_region(at, region_of(*s, r, a, b, M, K), region_note(*s, r));
}

std::string not_an_output_text(std::string_view name, const Recipe& r) {
  return "tensor " + printable_name(std::string(name)) + " is not an output of recipe " + std::string(recipe_kind_name(r.kind())) +
         " (VECTORS.md, Tensors)";
}

std::string dtype_problem(std::string_view name, std::string_view dtype, bool want_f32) {
  if (want_f32 ? dtype == "F32" : io::is_byte_dtype(dtype)) return {};
  return ::fmt::format("tensor {} has dtype {}, expected {}", printable_name(std::string(name)), dtype,
                       want_f32 ? "F32" : "a byte type (U8, F8_E4M3, F8_E5M2, F8_E8M0)");
}

}  // namespace qtc::conformance
