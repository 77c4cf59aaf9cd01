/// \file hybrid_cases.cpp
/// \brief Hybrid vectors and the hybrid variants of `qtc conform` (hybrid_cases.hpp).
#include "hybrid_cases.hpp"

#include <algorithm>

#include "cases.hpp"
#include "qtc/error.hpp"
#include "qtc/quantize.hpp"

namespace qtc::conformance {

namespace {

bool hybrid_plane_tensor(PlaneKind pk, const std::string& n) {
  const std::string pre = pk == PlaneKind::kRowwise ? "rowwise" : "columnwise";
  return n == pre + "_data" || n == pre + "_scale_inv" || n == "amax_" + pre || n == "dequantized_" + pre;
}

}  // namespace

io::File make_hybrid_vector(const HybridRecipe& h, const HostMatrix& x, QuantizeBackend& backend,
                            const ref::LayoutOptions& lo, bool with_dequantized) {
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
    if (!row && r.is(RecipeKind::kFP8Tensor)) r.rowwise = true;
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
    const bool grouped_layout = !row && !h.group_rows.empty() && lo != ref::LayoutOptions{};
    if (grouped_layout) {
      ref::check_grouped_layout(h, x.rows, x.cols, lo);
      for (io::Tensor& t : pf.tensors)
        if (t.name == "columnwise_scale_inv") t.bytes = ref::grouped_columnwise_scales_from_compact(h, x.rows, x.cols, lo, t.bytes);
      ref::layout_to_metadata(lo, f.metadata);
    } else if (lo != ref::LayoutOptions{}) {
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
