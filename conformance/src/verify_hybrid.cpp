/// \file verify_hybrid.cpp
/// \brief Verifying a hybrid vector (recipe=hybrid, conformance/README.md "Hybrid planes"): the file is split into one
///        vector per plane, each of its plane's recipe, and each is verified as any vector is. The columnwise vector's
///        input is x (columnwise_source=original) or the rowwise plane quantized and dequantized by the same backend
///        (rowwise_dequantized): on the CUDA backend the kernels compose, as TE's HybridQuantizer composes its two
///        sub-quantizers. The file's `columnwise_source` tensor, when present, is compared with that input.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "qtc/footprint.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

/// The message without the " [check ...]" suffix of QTC_CHECK, control bytes escaped (as verify.cpp's messages).
std::string printable(std::string m) {
  const auto at = m.rfind(" [check `");
  if (at != std::string::npos && !m.empty() && m.back() == ']') m.erase(at);
  return printable_text(m);
}

int hybrid_verdict_rank(Verdict v) {
  switch (v) {
    case Verdict::kPass: return 0;
    case Verdict::kEquivalent: return 1;
    case Verdict::kSkipped: return 2;
    case Verdict::kFail: return 3;
    case Verdict::kError: return 4;
  }
  return 4;
}

}  // namespace

std::string read_hybrid_recipe(const std::map<std::string, std::string>& md, HybridRecipe& h, FileResult& res) {
  try {
    h = HybridRecipe::from_metadata(md);
  } catch (const Error& e) {
    return e.what();
  }
  res.recipe = h.name();
  res.profile = std::string(profile_name(h.rowwise.profile));
  if (h.columnwise.profile != h.rowwise.profile) {  // appended in two steps: GCC 12 warns (-Wrestrict) on "/" + string
    res.profile += '/';
    res.profile += profile_name(h.columnwise.profile);
  }
  return {};
}

std::optional<std::pair<PlaneKind, std::string>> hybrid_tensor_plane(const std::string& n) {
  if (n == "rowwise_data" || n == "rowwise_scale_inv" || n == "amax_rowwise" || n == "dequantized_rowwise")
    return std::pair{PlaneKind::kRowwise, n};
  if (n == "columnwise_data" || n == "columnwise_scale_inv" || n == "amax_columnwise" || n == "dequantized_columnwise")
    return std::pair{PlaneKind::kColumnwise, n};
  if (n == "rowwise.scale_inv" || n == "rowwise.amax") return std::pair{PlaneKind::kRowwise, n.substr(8)};
  if (n == "columnwise.scale_inv" || n == "columnwise.amax") return std::pair{PlaneKind::kColumnwise, n.substr(11)};
  return std::nullopt;
}

std::string not_a_hybrid_output_text(const std::string& name) {
  return ::fmt::format("tensor {} is not an output of a hybrid vector (rowwise_*, columnwise_*, amax_*, dequantized_*, "
                       "rowwise.scale_inv, rowwise.amax, columnwise.scale_inv, columnwise.amax, columnwise_source)",
                       printable_name(name));
}

std::map<std::string, std::string> hybrid_part_metadata(const HybridRecipe& h, PlaneKind pk,
                                                        const std::map<std::string, std::string>& md) {
  std::map<std::string, std::string> out = h.plane_recipe(pk).to_metadata();
  for (const char* k : {"layout", "swizzled", "source"})
    if (auto it = md.find(k); it != md.end()) out[k] = it->second;
  return out;
}

std::string columnwise_source_shape_text(DType want, int64_t rows, int64_t cols, std::string_view dtype, size_t rank) {
  return ::fmt::format("tensor 'columnwise_source' must be {} [{}, {}] (the dequantized rowwise plane in the source dtype), "
                       "got {} of rank {}",
                       dtype_name(want), rows, cols, dtype, rank);
}

std::string columnwise_source_mismatch_text(int64_t bad, int64_t total, int64_t first_row, int64_t first_col, float expected,
                                            std::string_view backend) {
  return ::fmt::format("columnwise_source: {} of {} elements differ; first at [{}, {}]: expected {} (the rowwise plane "
                       "dequantized by backend {})",
                       bad, total, first_row, first_col, expected, backend);
}

void join_hybrid_results(FileResult& res, const HybridRecipe& h, const std::vector<FileResult>& parts,
                         const std::vector<PlaneKind>& planes) {
  res.verdict = Verdict::kPass;
  for (size_t i = 0; i < parts.size(); ++i) {
    const FileResult& r = parts[i];
    const bool row = planes[i] == PlaneKind::kRowwise;
    const std::string prefix = row ? "rowwise plane (" + h.rowwise.name() + ")"
                                   : "columnwise plane (" + h.columnwise.name() +
                                         (h.source == ColumnwiseSource::kRowwiseDequantized ? ", of the dequantized rowwise plane)" : ")");
    // The file's names: the plane-named tensors as they are, an FP8 tensor plane's scale_inv / amax prefixed.
    const std::string plane_prefix = row ? "rowwise." : "columnwise.";
    auto file_name = [&](const std::string& n) { return n == "scale_inv" || n == "amax" ? plane_prefix + n : n; };
    for (const std::string& c : r.checked) res.checked.push_back(file_name(c));
    for (TensorMismatch m : r.mismatches) {  // the records, under the file's names
      m.tensor = file_name(m.tensor);
      res.mismatches.push_back(std::move(m));
    }
    for (const std::string& d : r.details) {
      const std::string head = d.substr(0, d.find(':'));
      res.details.push_back(file_name(head) + d.substr(head.size()));
    }
    if (hybrid_verdict_rank(r.verdict) > hybrid_verdict_rank(res.verdict)) {
      res.verdict = r.verdict;
      res.message = prefix + ": " + r.message;
    }
  }
  if (res.verdict == Verdict::kPass) res.message.clear();
}

FileResult verify_hybrid_vector(const io::File& file, const std::string& source, QuantizeBackend& backend,
                                const VerifyOptions& opts) {
  FileResult res;
  res.path = source;
  res.backend = backend.name();
  auto error = [&](const std::string& msg) {
    res.verdict = Verdict::kError;
    res.message = printable(msg);
    return res;
  };
  try {
    HybridRecipe h;
    if (std::string why = read_hybrid_recipe(file.metadata, h, res); !why.empty()) return error(why);

    const io::Tensor* xt = file.find("x");
    if (xt == nullptr) return error("missing required tensor 'x' (the input)");
    io::File part[2];
    for (io::File& p : part) p.tensors.push_back(*xt);
    const io::Tensor* src_t = nullptr;
    for (const io::Tensor& t : file.tensors) {
      if (t.name == "x") continue;
      if (t.name == "columnwise_source") {
        if (h.source != ColumnwiseSource::kRowwiseDequantized)
          return error("tensor 'columnwise_source' is the dequantized rowwise plane; this file has columnwise_source=original");
        src_t = &t;
        continue;
      }
      const auto where = hybrid_tensor_plane(t.name);
      if (!where) return error(not_a_hybrid_output_text(t.name));
      io::Tensor copy = t;
      copy.name = where->second;
      part[where->first == PlaneKind::kRowwise ? 0 : 1].put(std::move(copy));
    }
    const bool any_row = part[0].tensors.size() > 1, any_col = part[1].tensors.size() > 1 || src_t != nullptr;
    if (!any_row && !any_col) return error("no expected output (the file holds only the input; VECTORS.md, Tensors)");
    if (xt->shape.size() != 2) return error("tensor 'x' has shape of rank " + std::to_string(xt->shape.size()) + "; VECTORS.md needs 2-D [M, K]");
    try {
      DType xd = xt->dtype == "BF16" ? DType::kBF16 : xt->dtype == "F16" ? DType::kF16 : DType::kF32;
      if (xt->dtype != "F32" && xt->dtype != "BF16" && xt->dtype != "F16")
        return error("tensor 'x' has dtype " + xt->dtype + "; VECTORS.md allows F32, BF16 or F16");
      h.validate_input(xd, xt->shape[0], xt->shape[1]);
    } catch (const Error& e) {
      return error(e.what());
    }

    for (int i = 0; i < 2; ++i)
      part[i].metadata = hybrid_part_metadata(h, i == 0 ? PlaneKind::kRowwise : PlaneKind::kColumnwise, file.metadata);

    std::vector<FileResult> results;
    std::vector<PlaneKind> plane_of;
    if (any_row) {
      results.push_back(verify_vector(part[0], source, backend, opts));
      plane_of.push_back(PlaneKind::kRowwise);
    }
    if (any_col && h.source == ColumnwiseSource::kRowwiseDequantized) {
      // The columnwise input: the rowwise plane quantized and dequantized by this backend.
      const DType xd = xt->dtype == "BF16" ? DType::kBF16 : xt->dtype == "F16" ? DType::kF16 : DType::kF32;
      const MatrixView x{xt->bytes.data(), xd, xt->shape[0], xt->shape[1]};
      if (const std::string why = backend.unavailable_reason(); !why.empty()) {
        res.verdict = Verdict::kSkipped;
        res.message = printable(why);
        return res;
      }
      HostMatrix src;
      try {
        const Recipe rr = h.plane_recipe(PlaneKind::kRowwise);
        // The rowwise plane and its dequantized copy within the memory the process may use (footprint.hpp), before
        // anything is allocated; the per-plane vectors below check their own outputs.
        try {
          check_quantize_resources(rr, xd, x.rows, x.cols, true);
        } catch (const Error& e) {
          return error(e.what());
        }
        if (const std::string why = backend.unsupported_reason(rr, xd, x.rows, x.cols); !why.empty()) {
          res.verdict = Verdict::kSkipped;
          res.message = printable("rowwise plane (the columnwise source): " + why);
          return res;
        }
        const QuantizedTensor q = backend.quantize(x, rr);
        src = backend.dequantize(q, PlaneKind::kRowwise, h.source_dtype_for(xd));
      } catch (const BackendError& e) {
        if (e.kind == BackendError::Kind::kError) return error(std::string("columnwise source: ") + e.what());
        res.verdict = Verdict::kSkipped;
        res.message = printable(std::string("columnwise source: ") + e.what());
        return res;
      }
      if (src_t != nullptr) {
        res.checked.push_back("columnwise_source");
        if (src_t->dtype != dtype_name(src.dtype) || src_t->shape != std::vector<int64_t>{src.rows, src.cols})
          return error(columnwise_source_shape_text(src.dtype, src.rows, src.cols, src_t->dtype, src_t->shape.size()));
        const size_t es = dtype_size(src.dtype);
        int64_t bad = 0, first = -1;
        for (int64_t e = 0; e < src.numel(); ++e) {
          const uint8_t* a = src.bytes.data() + e * es;
          const uint8_t* b = src_t->bytes.data() + e * es;
          if (std::memcmp(a, b, es) == 0) continue;
          // A NaN equals any NaN in a dequantized output (F32, BF16 or F16), as verify compares dequantized tensors.
          const float fa = src.get(e / src.cols, e % src.cols);
          const float fb = MatrixView{src_t->bytes.data(), src.dtype, src.rows, src.cols}.at(e / src.cols, e % src.cols);
          if (std::isnan(fa) && std::isnan(fb)) continue;
          ++bad;
          if (first < 0) first = e;
        }
        if (bad > 0) {
          res.verdict = Verdict::kFail;
          res.message = columnwise_source_mismatch_text(bad, src.numel(), first / src.cols, first % src.cols,
                                                        src.get(first / src.cols, first % src.cols), backend.name());
          res.details.push_back(res.message);
          return res;
        }
      }
      io::Tensor sx;
      sx.name = "x";
      sx.dtype = std::string(dtype_name(src.dtype));
      sx.shape = {src.rows, src.cols};
      sx.bytes = std::move(src.bytes);
      part[1].put(std::move(sx));
    }
    // A grouped vector in TE's layout (the fused requantization's output): each group's columnwise scales swizzled
    // on their own; the columnwise vector gets them compact (its other tensors are the same in both layouts).
    if (!h.group_rows.empty()) {
      try {
        const Layout lo = ref::layout_from_metadata(file.metadata);
        if (lo != Layout::kCompact) {
          ref::check_grouped_layout(h, xt->shape[0], xt->shape[1], lo);
          for (io::Tensor& t : part[1].tensors)
            if (t.name == "columnwise_scale_inv") {
              if (!t.is_byte_tensor()) return error("tensor 'columnwise_scale_inv' has dtype " + t.dtype + ", expected a byte type");
              t.bytes = ref::grouped_columnwise_scales_to_compact(h, xt->shape[0], xt->shape[1], lo, t.bytes);
              t.shape = {xt->shape[0] / 32, xt->shape[1]};
            }
          part[1].metadata.erase("layout");
          part[1].metadata.erase("swizzled");
        }
      } catch (const Error& e) {
        return error(e.what());
      }
    }
    if (part[1].tensors.size() > 1) {
      results.push_back(verify_vector(part[1], source, backend, opts));
      plane_of.push_back(PlaneKind::kColumnwise);
    }
    join_hybrid_results(res, h, results, plane_of);
    return res;
  } catch (const std::exception& e) {
    return error(std::string("internal error: ") + e.what());
  }
}

}  // namespace qtc::conformance
