/// \file verify.cpp
/// \brief `qtc verify`'s logic: the expected-output table of VECTORS.md, bitwise comparison, failure messages
///        that name the first mismatch with both values decoded and the quantization block's inputs.
#include "qtc/verify.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/footprint.hpp"
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
    why = "tensor " + printable_name(name) + " is not an output of recipe " + std::string(recipe_kind_name(r.kind())) +
          " (VECTORS.md, Tensors)";
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

std::string describe_region(const MatrixView& x, const Region& g, const std::string& note) {
  constexpr int64_t kMaxValues = 32;
  std::string out = ::fmt::format("x[{}, {}]{} = {{", range_text(g.r0, g.r1), range_text(g.c0, g.c1), note);
  int64_t n = 0;
  const int64_t total = (g.r1 - g.r0) * (g.c1 - g.c0);
  for (int64_t a = g.r0; a < g.r1 && n < kMaxValues; ++a)
    for (int64_t b = g.c0; b < g.c1 && n < kMaxValues; ++b, ++n) out += ::fmt::format("{}{}", n ? ", " : "", x.at(a, b));
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

/// Compares expected and actual element grids; returns an empty string on equality, else the failure line.
std::string compare(const Spec& s, const Grid& want, const Grid& got, const Recipe& r, const MatrixView& x) {
  const int64_t n = want.rows * want.cols;
  const Mismatch m = find_mismatch(want.elem, want.p, got.p, n, true);
  if (m.count == 0) return {};
  const int64_t first = m.first;
  const int64_t a = first / want.cols, b = first % want.cols;
  std::string coord = s.shape.size() == 1 ? ::fmt::format("[{}]", first) : ::fmt::format("[{}, {}]", a, b);
  if (s.layout && !s.layout->is_identity()) {  // name the element where the file holds it, then its compact place
    const int64_t li = s.layout->layout_index(first);
    coord = ref::OutputLayout::coords_text(ref::OutputLayout::coords(li, s.file_shape)) + " (compact " + coord + ")";
  }
  std::string note;
  if (r.nvfp4_rht() && s.plane == PlaneKind::kColumnwise && s.role != Role::kAmax) note = " (before the RHT)";
  if (r.kind() == RecipeKind::kFP8Tensor && (s.role == Role::kData || s.role == Role::kDequant)) note = " (per-tensor scale)";
  const Region g = region_of(s, r, a, b, x.rows, x.cols);
  return mismatch_line(s.name, want.elem, m, n, coord, describe_region(x, g, note));
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

}  // namespace

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kFail: return "fail";
    case Verdict::kError: return "error";
    case Verdict::kSkipped: return "skipped";
    case Verdict::kEquivalent: return "equivalent";
  }
  return "?";
}

const std::vector<std::string>& expected_tensor_names() {
  static const std::vector<std::string> kNames(tensor_names().begin(), tensor_names().end());  // the policy's table
  return kNames;
}

FileResult verify_vector(const io::File& file, const std::string& source, QuantizeBackend& backend, const VerifyOptions& opts) {
  FileResult res;
  res.path = source;
  res.backend = backend.name();
  auto error = [&](const std::string& msg) {
    res.verdict = Verdict::kError;
    res.message = clean(msg);
    return res;
  };
  try {
    // Recipe: unknown recipe or parameter values throw, naming the key.
    Recipe r;
    try {
      r = Recipe::from_metadata(file.metadata);
    } catch (const Error& e) {
      return error(e.what());
    }
    res.profile = std::string(profile_name(r.profile));
    // Layout of the output buffers (VECTORS.md, Native layouts).
    Layout lo = Layout::kCompact;
    try {
      lo = ref::layout_from_metadata(file.metadata);
      ref::check_layout_applies(lo, r);
    } catch (const Error& e) {
      return error(e.what());
    }

    // Input.
    const io::Tensor* xt = file.find("x");
    if (xt == nullptr) return error("missing required tensor 'x' (the input)");
    if (xt->shape.size() != 2) return error("tensor 'x' has shape " + shape_text(xt->shape) + "; VECTORS.md needs 2-D [M, K]");
    DType xd;
    if (xt->dtype == "F32")
      xd = DType::kF32;
    else if (xt->dtype == "BF16")
      xd = DType::kBF16;
    else if (xt->dtype == "F16")
      xd = DType::kF16;
    else
      return error("tensor 'x' has dtype " + xt->dtype + "; VECTORS.md allows F32, BF16 or F16");
    const int64_t M = xt->shape[0], K = xt->shape[1];
    const MatrixView x{xt->bytes.data(), xd, M, K};

    // Expected outputs: every tensor other than x must be one of the table's outputs for this recipe.
    std::vector<std::pair<Spec, const io::Tensor*>> expected;
    bool need_row = false, need_col = false;
    for (const io::Tensor& t : file.tensors) {
      if (t.name == "x") continue;
      std::string why;
      auto spec = spec_for(t.name, r, M, K, why);
      if (!spec) return error(why);
      spec->layout = ref::OutputLayout::find(t.name, r, M, K, lo);
      QTC_CHECK(spec->layout && spec->layout->compact_shape() == spec->shape, "tensor '", t.name,
                "': native_layout.hpp and verify disagree on the compact shape");
      // A 0-d tensor stands for a [1] one (torch.save of a scalar amax).
      if (!spec->layout->accepts_shape(t.shape)) return error(spec->layout->shape_error(t.shape));
      const bool want_f32 = spec->elem == Elem::kF32;
      if (want_f32 ? t.dtype != "F32" : !t.is_byte_tensor())
        return error(::fmt::format("tensor {} has dtype {}, expected {}", printable_name(t.name), t.dtype,
                                 want_f32 ? "F32" : "a byte type (U8, F8_E4M3, F8_E5M2, F8_E8M0)"));
      (spec->plane == PlaneKind::kRowwise ? need_row : need_col) = true;
      spec->file_shape = t.shape;
      if (!spec->layout->is_identity()) spec->compact_bytes = spec->layout->to_compact(t.bytes);
      expected.emplace_back(std::move(*spec), &t);
    }
    if (expected.empty()) return error("no expected output (the file holds only the input; VECTORS.md, Tensors)");
    std::sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) {
      const auto& n = expected_tensor_names();
      return std::find(n.begin(), n.end(), a.first.name) < std::find(n.begin(), n.end(), b.first.name);
    });

    // Quantize only the planes the file checks (a plane a recipe cannot produce for this input is not asked for).
    r.rowwise = need_row;
    r.columnwise = need_col;
    res.recipe = r.name();
    try {
      r.validate_input(xd, M, K);
    } catch (const Error& e) {
      return error(e.what());
    }
    // Resources: what the backend will hold for this input (every output of the planes asked for), computed
    // without wrapping by the one footprint every command uses (footprint.hpp: `qtc quantize` checks the same
    // sizes before it writes a vector, so what it writes is read here). An impossible or too large shape is an
    // error (exit 2), never an allocation failure.
    try {
      bool want_dequant = false;
      for (const auto& [s, t] : expected) want_dequant = want_dequant || s.role == Role::kDequant;
      check_quantize_resources(r, xd, M, K, want_dequant);
    } catch (const Error& e) {
      return error(e.what());
    }
    if (const std::string why = backend.unavailable_reason(); !why.empty()) {
      res.verdict = Verdict::kSkipped;
      res.message = clean(why);
      return res;
    }
    if (const std::string why = backend.unsupported_reason(r, xd, M, K); !why.empty()) {
      res.verdict = Verdict::kSkipped;
      res.message = clean(why);
      return res;
    }

    QuantizedTensor q;
    try {
      q = backend.quantize(x, r);
    } catch (const std::bad_alloc&) {
      return error("backend " + backend.name() + " ran out of memory quantizing x of shape " + shape_text({M, K}) +
                   " (resource limit, not a wrong answer)");
    } catch (const BackendError& e) {  // no answer (a CUDA error, a refused launch): not a wrong one
      if (e.kind == BackendError::Kind::kError) return error(e.what());
      res.verdict = Verdict::kSkipped;
      res.message = clean(e.what());
      return res;
    } catch (const std::exception& e) {
      res.verdict = Verdict::kFail;
      res.message = std::string("backend ") + backend.name() + " failed to quantize: " + clean(e.what());
      return res;
    }

    std::vector<std::string> fails;
    std::map<PlaneKind, HostMatrix> dequantized;
    // Value equivalence (issue 26): the file's encodings as a quantized tensor, and whether every failure is one of
    // bytes (data, scales, amax, scale_inv) that could still decode to the same values.
    QuantizedTensor theirs = q;
    bool encodings_only = true;
    size_t compared_fails = 0;  // failures of the comparison itself (not a missing plane or a wrong shape)
    std::vector<PlaneKind> differing_planes;
    for (const auto& [s, t] : expected) {
      res.checked.push_back(s.name);
      const bool row = s.plane == PlaneKind::kRowwise;
      const std::optional<Plane>& plane = row ? q.rowwise : q.columnwise;
      const char* pname = row ? "rowwise" : "columnwise";
      if (!plane) {
        fails.push_back(::fmt::format("{}: backend {} produced no {} plane", s.name, backend.name(), pname));
        continue;
      }
      if (opts.strict_padding)
        if (const auto pad = s.layout->nonzero_padding(t->bytes, s.file_shape)) {
          uint32_t v = 0;
          std::memcpy(&v, pad->first_bytes.data(), std::min<size_t>(pad->first_bytes.size(), 4));
          fails.push_back(::fmt::format("{}: padding not zero (--strict-padding): {} of {} padding elements non-zero; first at {}: {}",
                                        s.name, pad->nonzero, pad->total, ref::OutputLayout::coords_text(pad->first),
                                        s.elem == Elem::kF32 ? show(Elem::kF32, v) : ::fmt::format("0x{:02x}", v)));
        }
      Grid want{s.layout->is_identity() ? t->bytes.data() : s.compact_bytes.data(), s.elem, s.shape[0], s.shape.size() > 1 ? s.shape[1] : 1};
      if (s.elem == Elem::kE2M1) want.cols *= 2;
      std::vector<uint8_t> got_bytes;  // owns the actual values where they are not in q
      Grid got = want;
      switch (s.role) {
        case Role::kData: {
          const int64_t per_byte = s.elem == Elem::kE2M1 ? 2 : 1;
          if (plane->data_rows != s.shape[0] || plane->data_cols != s.shape[1] ||
              plane->data.size() != static_cast<size_t>(s.shape[0] * s.shape[1])) {
            fails.push_back(::fmt::format("{}: backend produced {} data of shape [{}, {}] ({} bytes), expected {}", s.name,
                                        pname, plane->data_rows, plane->data_cols, plane->data.size(), shape_text(s.shape)));
            continue;
          }
          (void)per_byte;
          got.p = plane->data.data();
          break;
        }
        case Role::kScale: {
          const ScaleMatrix& sm = plane->scale;
          const ScaleType st = s.elem == Elem::kF32 ? ScaleType::kF32 : s.elem == Elem::kE8M0 ? ScaleType::kE8M0 : ScaleType::kE4M3;
          if (sm.layout != ScaleLayout::kCompact || sm.type != st || sm.rows != s.shape[0] || sm.cols != s.shape[1] ||
              sm.bytes.size() != static_cast<size_t>(sm.rows * sm.cols) * sm.elem_size()) {
            fails.push_back(::fmt::format("{}: backend produced {} scales of shape [{}, {}] (layout {}, type {}), expected compact {}",
                                        s.name, pname, sm.rows, sm.cols, static_cast<int>(sm.layout), static_cast<int>(sm.type),
                                        shape_text(s.shape)));
            continue;
          }
          got.p = sm.bytes.data();
          break;
        }
        case Role::kAmax:
        case Role::kTensorAmax:
          if (static_cast<int64_t>(plane->amax.size()) != s.shape[0]) {
            fails.push_back(::fmt::format("{}: backend produced {} amax values, expected {}", s.name, plane->amax.size(), s.shape[0]));
            continue;
          }
          got_bytes = f32_bytes(plane->amax);
          got.p = got_bytes.data();
          break;
        case Role::kScaleInv:
          got_bytes = f32_bytes({q.scale_inv});
          got.p = got_bytes.data();
          break;
        case Role::kDequant: {
          auto it = dequantized.find(s.plane);
          if (it == dequantized.end()) {
            try {
              it = dequantized.emplace(s.plane, backend.dequantize(q, s.plane, DType::kF32)).first;
            } catch (const std::bad_alloc&) {
              return error("backend " + backend.name() + " ran out of memory dequantizing " + s.name + " (resource limit)");
            } catch (const BackendError& e) {  // no answer: error or skipped, not a failure
              if (e.kind == BackendError::Kind::kError) return error(s.name + ": " + e.what());
              res.verdict = Verdict::kSkipped;
              res.message = clean(s.name + ": " + e.what());
              return res;
            } catch (const std::exception& e) {
              fails.push_back(::fmt::format("{}: backend {} failed to dequantize: {}", s.name, backend.name(), e.what()));
              continue;
            }
          }
          const HostMatrix& d = it->second;
          if (d.dtype != DType::kF32 || d.rows != M || d.cols != K || d.bytes.size() != static_cast<size_t>(M * K) * 4) {
            fails.push_back(::fmt::format("{}: backend produced a dequantized matrix of shape [{}, {}], expected [{}, {}] F32",
                                        s.name, d.rows, d.cols, M, K));
            continue;
          }
          got.p = d.bytes.data();
          break;
        }
      }
      if (std::string f = compare(s, want, got, r, x); !f.empty()) {
        fails.push_back(std::move(f));
        // Decoded values are the question: a dequantized output, or FP8 tensor's amax (no part of any decoded
        // value), that differs is a failure whatever the encodings decode to.
        if (s.role == Role::kDequant || s.role == Role::kTensorAmax) encodings_only = false;
        if (std::find(differing_planes.begin(), differing_planes.end(), s.plane) == differing_planes.end())
          differing_planes.push_back(s.plane);
        ++compared_fails;
      }
      {
        const std::vector<uint8_t>& fb = s.layout->is_identity() ? t->bytes : s.compact_bytes;
        std::optional<Plane>& tp = row ? theirs.rowwise : theirs.columnwise;
        if (tp && s.role == Role::kData && fb.size() == tp->data.size()) tp->data = fb;
        else if (tp && s.role == Role::kScale && fb.size() == tp->scale.bytes.size()) tp->scale.bytes = fb;
        else if (tp && (s.role == Role::kAmax || s.role == Role::kTensorAmax) && fb.size() == tp->amax.size() * 4)
          std::memcpy(tp->amax.data(), fb.data(), fb.size());
        else if (s.role == Role::kScaleInv && fb.size() == 4) std::memcpy(&theirs.scale_inv, fb.data(), 4);
      }
    }
    if (fails.size() != 0 && compared_fails == fails.size() && encodings_only && !differing_planes.empty()) {
      try {
        const Equivalence eq = compare_values(q, theirs, differing_planes);
        if (eq.equal) {
          res.verdict = Verdict::kEquivalent;
          res.message = clean(eq.message);
          res.details = std::move(fails);
          return res;
        }
      } catch (const std::exception&) {  // not decodable: the failure stands
      }
    }
    if (fails.empty()) {
      res.verdict = Verdict::kPass;
      return res;
    }
    res.verdict = Verdict::kFail;
    res.message = fails.front();
    if (fails.size() > 1) {
      std::string also;
      for (size_t i = 1; i < fails.size(); ++i) also += (i > 1 ? ", " : "") + fails[i].substr(0, fails[i].find(':'));
      res.message += " (also differ: " + also + ")";
    }
    res.details = std::move(fails);
    return res;
  } catch (const std::exception& e) {
    return error(std::string("internal error: ") + e.what());
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

namespace {

/// Why `p` cannot be followed (a symlink loop, a dangling symlink), or "" when its target exists.
std::string unreachable_reason(const std::filesystem::path& p, const std::error_code& ec) {
  namespace fs = std::filesystem;
  if (ec.value() == ELOOP) return "symlink loop (" + ec.message() + ")";
  std::error_code e2;
  if (fs::is_symlink(fs::symlink_status(p, e2))) {
    std::error_code e3;
    const fs::path target = fs::read_symlink(p, e3);
    return "dangling symlink" + (e3 ? std::string() : " to " + target.string());
  }
  return ec && ec.value() != ENOENT ? ec.message() : "no such file or directory";
}

/// Collects the *.safetensors files under `dir` (following directory symlinks once each); every entry that
/// cannot be read or followed is a problem naming its path, never a silent skip.
void scan_directory(const std::filesystem::path& dir, std::vector<std::filesystem::path>& found, std::vector<FileResult>& problems,
                    std::vector<std::pair<uint64_t, uint64_t>>& visited) {
  namespace fs = std::filesystem;
  auto problem = [&](const fs::path& p, const std::string& msg) {
    problems.push_back(FileResult{p.string(), "", Verdict::kError, msg, {}, {}, {}, {}});
  };
  // `visited` holds the directories being scanned (this one's ancestors): meeting one again is a loop.
  struct stat sb {};
  const size_t depth = visited.size();
  struct Pop {
    std::vector<std::pair<uint64_t, uint64_t>>& v;
    size_t n;
    ~Pop() { v.resize(n); }
  } pop{visited, depth};
  if (::stat(dir.c_str(), &sb) == 0) {
    const std::pair<uint64_t, uint64_t> id{static_cast<uint64_t>(sb.st_dev), static_cast<uint64_t>(sb.st_ino)};
    if (std::find(visited.begin(), visited.end(), id) != visited.end()) {
      problem(dir, "symlink loop (a directory symlink leads back to a directory being scanned)");
      return;
    }
    visited.push_back(id);
  }
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) {
    problem(dir, "cannot list directory: " + ec.message());
    return;
  }
  std::vector<fs::path> entries;
  for (; it != end; it.increment(ec)) {
    entries.push_back(it->path());
  }
  if (ec) problem(dir, "cannot list directory: " + ec.message());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& e : entries) {
    std::error_code sec;
    const fs::file_status st = fs::status(e, sec);
    const bool vector_name = e.extension() == ".safetensors";
    if (sec || !fs::exists(st)) {
      // A symlink loop is an error whatever its name; a dangling link only when it names a vector.
      if (sec.value() == ELOOP || vector_name) problem(e, unreachable_reason(e, sec));
      continue;
    }
    if (fs::is_directory(st)) {
      scan_directory(e, found, problems, visited);
    } else if (vector_name) {
      if (fs::is_regular_file(st))
        found.push_back(e);
      else
        problem(e, "not a regular file");
    }
  }
}

}  // namespace

std::vector<std::filesystem::path> collect_vector_files(const std::vector<std::string>& paths, std::vector<FileResult>& problems) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      problems.push_back(FileResult{p, "", Verdict::kError, unreachable_reason(p, ec), {}, {}, {}, {}});
      continue;
    }
    if (!fs::is_directory(st)) {
      out.emplace_back(p);
      continue;
    }
    std::vector<fs::path> found;
    std::vector<std::pair<uint64_t, uint64_t>> visited;
    const size_t before = problems.size();
    scan_directory(p, found, problems, visited);
    if (found.empty() && problems.size() == before) {
      problems.push_back(FileResult{p, "", Verdict::kError, "directory holds no *.safetensors file", {}, {}, {}, {}});
      continue;
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

void Summary::add(Verdict v) {
  switch (v) {
    case Verdict::kPass: ++passed; break;
    case Verdict::kFail: ++failed; break;
    case Verdict::kError: ++errors; break;
    case Verdict::kSkipped: ++skipped; break;
    case Verdict::kEquivalent: ++equivalent; break;
  }
}

std::string Summary::closing_line() const {
  std::string s = ::fmt::format("{} passed, {} failed", passed, failed);
  if (skipped) s += ::fmt::format(", {} skipped", skipped);
  if (errors) s += ::fmt::format(", {} errors", errors);
  if (equivalent) s += ::fmt::format(", {} equivalent (bytes differ, values equal)", equivalent);
  return s;
}

int Summary::exit_code() const { return errors ? 2 : failed ? 1 : equivalent ? 3 : 0; }

std::string result_line(const FileResult& r) {
  std::string verdict(verdict_name(r.verdict));
  std::transform(verdict.begin(), verdict.end(), verdict.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  std::string line = verdict + " " + r.path;
  if (!r.backend.empty()) line += " [" + r.backend + "]";
  if (!r.message.empty()) line += ": " + r.message;
  // One line per file: messages from elsewhere must not break it, and nothing from a file (a name, a metadata
  // key or value quoted in a message) reaches the terminal as a control character (escape sequences, CR, BEL).
  std::replace(line.begin(), line.end(), '\n', ' ');
  return printable_text(line);
}

std::string element_text(ElementCode e, uint32_t v) {
  switch (e) {
    case Elem::kE2M1: return ::fmt::format("0x{:x} (e2m1 {})", v, decode_e2m1(static_cast<uint8_t>(v)));
    case Elem::kE4M3: return ::fmt::format("0x{:02x} (e4m3 {})", v, decode_e4m3(static_cast<uint8_t>(v)));
    case Elem::kE5M2: return ::fmt::format("0x{:02x} (e5m2 {})", v, decode_e5m2(static_cast<uint8_t>(v)));
    case Elem::kE8M0:
      return v == 0xFF ? std::string("0xff (e8m0 NaN)")
                       : ::fmt::format("0x{:02x} (e8m0 2^{} = {})", v, static_cast<int>(v) - 127, decode_e8m0(static_cast<uint8_t>(v)));
    case Elem::kF32: return ::fmt::format("0x{:08x} ({})", v, bits_f32(v));
    case Elem::kBF16: return ::fmt::format("0x{:04x} (bf16 {})", v, bits_f32(v << 16));
    case Elem::kF16: return ::fmt::format("0x{:04x} (f16 {})", v, f16_to_f32(static_cast<uint16_t>(v)));
    case Elem::kU8: return ::fmt::format("0x{:02x}", v);
  }
  return "?";
}

uint32_t element_at(ElementCode e, const uint8_t* p, int64_t i) {
  switch (e) {
    case Elem::kE2M1: return (p[i / 2] >> (4 * (i % 2))) & 0xFu;
    case Elem::kF32: {
      uint32_t u;
      std::memcpy(&u, p + 4 * i, 4);
      return u;
    }
    case Elem::kBF16:
    case Elem::kF16: {
      uint16_t u;
      std::memcpy(&u, p + 2 * i, 2);
      return u;
    }
    default: return p[i];
  }
}

int64_t element_bytes(ElementCode e, int64_t n) {
  switch (e) {
    case Elem::kE2M1: return (n + 1) / 2;
    case Elem::kF32: return 4 * n;
    case Elem::kBF16:
    case Elem::kF16: return 2 * n;
    default: return n;
  }
}

Mismatch find_mismatch(ElementCode e, const uint8_t* want, const uint8_t* got, int64_t n, bool nan_equal) {
  Mismatch m;
  // Equal bytes mean equal elements (a NaN equals itself); only a difference needs the element loop.
  const int64_t nbytes = element_bytes(e, n);
  if (nbytes == 0 || std::memcmp(want, got, static_cast<size_t>(nbytes)) == 0) return m;
  auto is_nan = [e](uint32_t v) {
    switch (e) {
      case Elem::kF32: return std::isnan(bits_f32(v));
      case Elem::kBF16: return std::isnan(bits_f32(v << 16));
      case Elem::kF16: return (v & 0x7C00u) == 0x7C00u && (v & 0x3FFu) != 0;
      default: return false;
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = element_at(e, want, i), b = element_at(e, got, i);
    if (a == b || (nan_equal && is_nan(a) && is_nan(b))) continue;
    if (m.count++ == 0) m.first = i, m.want = a, m.got = b;
  }
  return m;
}

std::string mismatch_line(std::string_view name, ElementCode e, const Mismatch& m, int64_t total, std::string_view coord,
                          std::string_view block) {
  std::string line = ::fmt::format("{}: {} of {} elements differ; first at {}: expected {}, got {}", name, m.count, total, coord,
                                   element_text(e, m.want), element_text(e, m.got));
  if (!block.empty()) line += ::fmt::format("; block {}", block);
  return line;
}

std::string block_inputs_text(const Recipe& r, std::string_view tensor, int64_t a, int64_t b, const MatrixView& x) {
  std::string why;
  const auto s = spec_for(std::string(tensor), r, x.rows, x.cols, why);
  if (!s) return {};
  std::string note;
  if (r.nvfp4_rht() && s->plane == PlaneKind::kColumnwise && s->role != Role::kAmax) note = " (before the RHT)";
  if (r.kind() == RecipeKind::kFP8Tensor && (s->role == Role::kData || s->role == Role::kDequant)) note = " (per-tensor scale)";
  return describe_region(x, region_of(*s, r, a, b, x.rows, x.cols), note);
}

}  // namespace qtc::conformance
