/// \file hybrid_cases.cpp
/// \brief Hybrid vectors and the hybrid variants of `qtc conform` (hybrid_cases.hpp).
#include "hybrid_cases.hpp"

#include <algorithm>

#include "cases.hpp"
#include "qtc/error.hpp"
#include "qtc/kind.hpp"
#include "qtc/quantize.hpp"

namespace qtc::conformance {

namespace {

bool hybrid_plane_tensor(PlaneKind pk, const std::string& n) {
  const std::string pre = pk == PlaneKind::kRowwise ? "rowwise" : "columnwise";
  return n == pre + "_data" || n == pre + "_scale_inv" || n == "amax_" + pre || n == "dequantized_" + pre;
}

}  // namespace

io::File make_hybrid_vector(const HybridRecipe& h, const HostMatrix& x, QuantizeBackend& backend,
                            Layout lo, bool with_dequantized) {
  h.validate_input(x.dtype, x.rows, x.cols);
  io::File f;
  f.metadata = h.to_metadata();
  f.put(io::from_matrix("x", x));
  HostMatrix source;  // the columnwise plane's input when it is the dequantized rowwise plane
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const bool row = pk == PlaneKind::kRowwise;
    Recipe r = h.plane_recipe(pk);
    // FP8 tensor keeps scale_inv and amax with its rowwise plane in a vector: quantize both planes (they share the
    // one scale of the plane's input) and keep the columnwise plane's tensors and those two.
    if (!row && kind_info(r).per_tensor_scale) r.rowwise = true;
    const HostMatrix& in = row || h.source == ColumnwiseSource::kOriginal ? x : source;
    const QuantizedTensor q = backend.quantize(in.view(), r);
    if (row && h.source == ColumnwiseSource::kRowwiseDequantized)
      source = backend.dequantize(q, PlaneKind::kRowwise, h.source_dtype_for(x.dtype));
    Case c;
    c.recipe = r;
    c.dtype = in.dtype;
    c.rows = in.rows;
    c.cols = in.cols;
    c.id = r.name();
    io::File pf = make_vector(c, in, q, backend, 0);
    // A grouped vector in TE's layout: the fused requantization's output, each group's columnwise scales swizzled on
    // their own (ref::grouped_columnwise_scales_from_compact); its other tensors are the same in both layouts.
    const bool grouped_layout = !row && !h.group_rows.empty() && lo != Layout::kCompact;
    if (grouped_layout) {
      ref::check_grouped_layout(h, x.rows, x.cols, lo);
      for (io::Tensor& t : pf.tensors)
        if (t.name == "columnwise_scale_inv") t.bytes = ref::grouped_columnwise_scales_from_compact(h, x.rows, x.cols, lo, t.bytes);
      ref::layout_to_metadata(lo, f.metadata);
    } else if (lo != Layout::kCompact) {
      pf = ref::convert_vector_layout(pf, lo);
      for (const char* k : {"layout", "swizzled"})
        if (auto it = pf.metadata.find(k); it != pf.metadata.end()) f.metadata[k] = it->second;
    }
    const std::string pre = row ? "rowwise." : "columnwise.";
    for (io::Tensor& t : pf.tensors) {
      if (!with_dequantized && t.name.rfind("dequantized_", 0) == 0) continue;
      if (hybrid_plane_tensor(pk, t.name)) {
        f.put(std::move(t));
      } else if (t.name == "scale_inv" || t.name == "amax") {
        t.name = pre + t.name;
        f.put(std::move(t));
      }
    }
  }
  if (h.source == ColumnwiseSource::kRowwiseDequantized) f.put(io::from_matrix("columnwise_source", source));
  return f;
}

io::File convert_hybrid_vector(const io::File& in, Layout to, uint8_t pad) {
  const HybridRecipe h = HybridRecipe::from_metadata(in.metadata);
  const Layout from = ref::layout_from_metadata(in.metadata);
  const io::Tensor& x = in.at("x");
  QTC_CHECK(x.shape.size() == 2, "tensor 'x' has rank ", x.shape.size(), "; VECTORS.md needs 2-D [M, K]");
  const int64_t M = x.shape[0], K = x.shape[1];
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) ref::check_layout_applies(to, h.plane_recipe(pk));
  const bool grouped = !h.group_rows.empty();
  if (grouped) {
    h.validate_input(DType::kF32, M, K);  // the group sizes against M (the input dtype does not matter here)
    ref::check_grouped_layout(h, M, K, from);
    ref::check_grouped_layout(h, M, K, to);
  }
  io::File out;
  out.metadata = in.metadata;
  ref::layout_to_metadata(to, out.metadata);
  out.put(x);
  if (const io::Tensor* s = in.find("columnwise_source")) out.put(*s);
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const bool row = pk == PlaneKind::kRowwise;
    const std::string pre = row ? "rowwise." : "columnwise.";
    Recipe r = h.plane_recipe(pk);
    if (!row && kind_info(r).per_tensor_scale) r.rowwise = true;  // its scale_inv / amax go with the rowwise plane
    io::File sub;
    sub.metadata = r.to_metadata();
    ref::layout_to_metadata(from, sub.metadata);
    sub.put(x);
    bool any = false;
    for (const io::Tensor& t : in.tensors) {
      io::Tensor c = t;
      if (t.name == pre + "scale_inv" || t.name == pre + "amax") c.name = t.name.substr(pre.size());
      else if (!hybrid_plane_tensor(pk, t.name)) continue;
      sub.put(std::move(c));
      any = true;
    }
    if (!any) continue;
    const bool grouped_col = grouped && !row;
    if (grouped_col && from != Layout::kCompact) {  // each group's scales to compact first
      for (io::Tensor& t : sub.tensors)
        if (t.name == "columnwise_scale_inv") {
          t.bytes = ref::grouped_columnwise_scales_to_compact(h, M, K, from, t.bytes);
          t.shape = {M / 32, K};
        }
      ref::layout_to_metadata(Layout::kCompact, sub.metadata);
    }
    io::File conv = ref::convert_vector_layout(sub, grouped_col ? Layout::kCompact : to, pad);
    for (io::Tensor& t : conv.tensors) {
      if (t.name == "x") continue;
      if (grouped_col && t.name == "columnwise_scale_inv" && to != Layout::kCompact)
        t.bytes = ref::grouped_columnwise_scales_from_compact(h, M, K, to, t.bytes);
      if (t.name == "scale_inv" || t.name == "amax") t.name = pre + t.name;
      out.put(std::move(t));
    }
  }
  return out;
}

std::vector<std::pair<std::string, HybridRecipe>> hybrid_variants() {
  std::vector<std::pair<std::string, HybridRecipe>> out;
  auto add = [&](std::string id, const RecipeOptions& row, const RecipeOptions& col, ColumnwiseSource src,
                 SourceDType sd = SourceDType::kInput, std::vector<int64_t> groups = {}) {
    HybridRecipe h;
    h.rowwise = Recipe::of(row, Profile::kTE, true, false);
    h.columnwise = Recipe::of(col, Profile::kTE, false, true);
    h.source = src;
    h.source_dtype = sd;
    h.group_rows = std::move(groups);
    h.validate();
    out.emplace_back(std::move(id), std::move(h));
  };
  Nvfp4Options plain;  // TE's _plain_nvfp4_quantizer: 1D, no RHT, no SR
  Nvfp4Options row_scaled = plain;
  row_scaled.row_scaled = true;
  Fp8BlockOptions blk;
  // TE 2.20's custom_recipes/quantizer_factory_zoo.py compositions (identity planes left out: qtc holds quantized planes).
  add("mxfp8_nvfp4_original", Mxfp8Options{}, plain, ColumnwiseSource::kOriginal);
  add("mxfp8_nvfp4_rdq", Mxfp8Options{}, plain, ColumnwiseSource::kRowwiseDequantized);
  add("nvfp4_nvfp4_rdq", plain, plain, ColumnwiseSource::kRowwiseDequantized);
  add("nvfp4rs_mxfp8_rdq", row_scaled, Mxfp8Options{}, ColumnwiseSource::kRowwiseDequantized);
  add("nvfp4_mxfp8_rdq", plain, Mxfp8Options{}, ColumnwiseSource::kRowwiseDequantized);
  // Other kinds per plane.
  add("mxfp8_fp8block_rdq", Mxfp8Options{}, blk, ColumnwiseSource::kRowwiseDequantized);
  add("mxfp8_fp8tensor_original", Mxfp8Options{}, Fp8TensorOptions{}, ColumnwiseSource::kOriginal);
  add("mxfp4_mxfp8_rdq", Mxfp4Options{}, Mxfp8Options{}, ColumnwiseSource::kRowwiseDequantized);
  // TE's fused grouped MXFP8 requantization (nvte_group_requantize): F32 source, and BF16 under fast math.
  for (Fp8Type t : {Fp8Type::kE4M3, Fp8Type::kE5M2})
    for (bool fast : {false, true}) {
      HybridRecipe h = HybridRecipe::te_group_requantize(t, fast, {128, 0, 256});
      out.emplace_back(std::string("te_group_requantize_") + (t == Fp8Type::kE4M3 ? "e4m3" : "e5m2") +
                           (fast ? "_fastmath" : ""),
                       std::move(h));
    }
  return out;
}

}  // namespace qtc::conformance
