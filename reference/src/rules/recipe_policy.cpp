/// \file recipe_policy.cpp
/// \brief describe_plane: the one place that knows every plane's geometry (TE_FORMATS.md §1-§6, VECTORS.md).
#include "qtc/recipe_policy.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <variant>

#include "kind_module.hpp"
#include "qtc/error.hpp"
#include "qtc/kind.hpp"
#include "qtc/numeric.hpp"

namespace qtc {

DataElem data_elem_of(const Recipe& r) {
  return std::visit(
      [](const auto& o) {
        if constexpr (std::is_same_v<std::decay_t<decltype(o)>, Nvfp4Options> ||
                      std::is_same_v<std::decay_t<decltype(o)>, Mxfp4Options>) {
          return DataElem::kE2M1;
        } else {
          return o.fp8 == Fp8Type::kE4M3 ? DataElem::kE4M3 : DataElem::kE5M2;
        }
      },
      r.options());
}

std::string_view data_elem_name(DataElem e) {
  switch (e) {
    case DataElem::kE2M1: return "e2m1";
    case DataElem::kE4M3: return "e4m3";
    case DataElem::kE5M2: return "e5m2";
  }
  return "?";
}

std::string_view plane_kind_name(PlaneKind p) { return p == PlaneKind::kRowwise ? "rowwise" : "columnwise"; }

bool one_amax_per_tensor(const Recipe& r) {
  const PlaneSpec s = describe_plane(r, PlaneKind::kRowwise, 1, 1);
  return s.amax_count == 1 && !s.amax_per_line;
}

PlaneSpec describe_plane(const Recipe& r, PlaneKind pk, int64_t M, int64_t K) {
  const bool row = pk == PlaneKind::kRowwise;
  const RecipeOptions& opts = r.options();  // the kind's alternative: only its own options are read below
  PlaneSpec s;
  s.plane = pk;
  s.requested = row ? r.rowwise : r.columnwise;
  s.M = M;
  s.K = K;
  s.data_elem = data_elem_of(r);
  // Data: x's orientation for the rowwise plane and for a kind whose columnwise plane keeps it (MXFP8, §2.1); x^T
  // otherwise.
  s.data_transposed = !row && kind_info(r).columnwise_transposed;
  s.data_rows = s.data_transposed ? K : M;
  s.data_row_elems = s.data_transposed ? M : K;
  s.data_cols = s.data_elem == DataElem::kE2M1 ? ref::detail::geom::cdiv(s.data_row_elems, 2) : s.data_row_elems;
  s.data_m_axis = s.data_transposed ? MAxis::kCols : MAxis::kRows;

  // The scale geometry is the kind's (kinds/<kind>_kind.cpp).
  ref::detail::kind_module(r.kind()).plane_geometry(opts, pk, M, K, s);
  s.scale_elem_bytes = s.scale_type == ScaleType::kF32 ? 4 : 1;
  return s;
}

std::string PlaneSpec::layout_refusal(Layout l) const {
  if (has_layout(l)) return {};
  const std::string name(layout_name(l));
  std::string why = "rule 'layout-" + name + "': layout " + name + " ";
  switch (l) {
    case Layout::kSwizzled:
      why += "(the cuBLAS 128x4 swizzle, TE_FORMATS.md §6) holds NVFP4, MXFP8 and MXFP4 scales only";
      break;
    case Layout::kSwizzled8x4:
      why += "(FlashInfer / TensorRT-LLM's 8x4 swizzle) holds the byte scales of NVFP4, MXFP8 and MXFP4 only";
      break;
    case Layout::kDeepGemmPackedUe8m0:
      why += "packs UE8M0 scales: it needs recipe fp8_block with scale_dtype=ue8m0";
      break;
    case Layout::kFbgemmMx4:
      if (has_file_layout(l))
        why += "(FBGEMM's MX4 rows) keeps a plane's codes and E8M0 bytes in one tensor: a layout of files and tensor sets "
               "(qtc verify, qtc quantize / convert, the Python module's tensors, qtc::testing), not of a scale buffer: "
               "quantize with compact scales and convert (native_layout.hpp; the CUDA kernels write no such buffer)";
      else
        why += "(FBGEMM's MX4 rows: per 32 elements 16 bytes of E2M1 codes, then the E8M0 exponent byte) holds MXFP4 "
               "planes only";
      break;
    default: why += "does not apply"; break;
  }
  if (per_tensor) why += " (per-tensor FP8 has one scale_inv, no scale matrix)";
  return why;
}

ScaleGeometry PlaneSpec::geometry(Layout l) const {
  if (!has_layout(l)) QTC_FAIL(layout_refusal(l));
  return make_scale_geometry(l, compact.rows, compact.cols, padded.rows, padded.cols,
                             l == Layout::kPadded ? padded_transposed : tiles_transposed);
}

float PlaneSpec::decode(uint8_t code) const {
  switch (data_elem) {
    case DataElem::kE2M1: return decode_e2m1(code & 0xFu);
    case DataElem::kE4M3: return decode_e4m3(code);
    case DataElem::kE5M2: return decode_e5m2(code);
  }
  return 0.0f;
}

XRegion PlaneSpec::block_of(int64_t i, int64_t j) const {
  if (per_tensor) return {0, M, 0, K};
  const int64_t r0 = i / block_rows * block_rows, c0 = j / block_cols * block_cols;
  return {r0, std::min(M, r0 + block_rows), c0, std::min(K, c0 + block_cols)};
}

void PlaneSpec::data_to_x(int64_t a, int64_t b, int64_t& i, int64_t& j) const {
  i = data_transposed ? b : a;
  j = data_transposed ? a : b;
}

XRegion PlaneSpec::scale_block(int64_t a, int64_t b) const {
  if (per_tensor) return {0, M, 0, K};
  // Compact entry (a, b): the index along scale_m_axis counts steps of scale_step_m rows of x, the other
  // one steps of scale_step_k columns.
  const int64_t along_m = scale_m_axis == MAxis::kRows ? a : b;
  const int64_t along_k = scale_m_axis == MAxis::kRows ? b : a;
  return block_of(along_m * scale_step_m, along_k * scale_step_k);
}

std::span<const std::string_view> tensor_names() {
  static constexpr std::string_view kNames[] = {"rowwise_data",        "rowwise_scale_inv",     "columnwise_data",
                                                "columnwise_scale_inv", "amax_rowwise",          "amax_columnwise",
                                                "scale_inv",           "amax",                  "dequantized_rowwise",
                                                "dequantized_columnwise"};
  return kNames;
}

std::optional<TensorSpec> describe_tensor(const Recipe& r, std::string_view name, int64_t M, int64_t K) {
  const auto names = tensor_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) return std::nullopt;
  TensorSpec t;
  t.name = *it;
  const bool col = name.starts_with("columnwise") || name.ends_with("_columnwise");
  t.plane = describe_plane(r, col ? PlaneKind::kColumnwise : PlaneKind::kRowwise, M, K);
  const PlaneSpec& ps = t.plane;
  if (name.ends_with("_data")) {  // FP8 tensor's columnwise: x^T cast with the same scale
    t.role = TensorRole::kData;
    t.shape = {ps.data_rows, ps.data_cols};
  } else if (name.ends_with("_scale_inv")) {
    if (ps.per_tensor) return std::nullopt;
    t.role = TensorRole::kScale;
    t.shape = {ps.compact.rows, ps.compact.cols};
    t.elem_bytes = static_cast<int>(ps.scale_elem_bytes);
    t.f32 = ps.scale_type == ScaleType::kF32;
  } else if (name.starts_with("amax_")) {
    if (!kind_info(r).plane_amax) return std::nullopt;  // per-plane amaxes (NVFP4: amax_count of them)
    t.role = TensorRole::kAmax;
    t.shape = {ps.amax_count};
  } else if (name == "scale_inv" || name == "amax") {
    if (!ps.per_tensor) return std::nullopt;
    t.role = name == "amax" ? TensorRole::kTensorAmax : TensorRole::kScaleInv;
    t.shape = {1};
  } else {  // dequantized_<plane>
    if (col && ps.per_tensor) return std::nullopt;
    t.role = TensorRole::kDequant;
    t.shape = {M, K};
  }
  if (t.role != TensorRole::kData && t.role != TensorRole::kScale) {
    t.elem_bytes = 4;
    t.f32 = true;
  }
  return t;
}

}  // namespace qtc
