/// \file recipe_policy.cpp
/// \brief describe_plane: the one place that knows every plane's geometry (TE_FORMATS.md §1-§6, VECTORS.md).
#include "qtc/recipe_policy.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <variant>

#include "qtc/error.hpp"
#include "qtc/numeric.hpp"

namespace qtc {

namespace {

int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // a >= 0, b > 0; no overflow
/// a rounded up to a multiple of b; saturates at INT64_MAX where that multiple does not fit (untrusted shapes:
/// the padded shape is computed for every plane, and a size check downstream refuses it).
int64_t roundup(int64_t a, int64_t b) {
  const int64_t n = cdiv(a, b);
  return n > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : n * b;
}

constexpr uint32_t bit(Layout l) { return 1u << static_cast<unsigned>(l); }
constexpr uint32_t kTeLayouts = bit(Layout::kCompact) | bit(Layout::kPadded);
constexpr uint32_t kTiledLayouts = kTeLayouts | bit(Layout::kSwizzled) | bit(Layout::kSwizzled8x4);

}  // namespace

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
  // Data: x's orientation for the rowwise plane and for both MXFP8 planes (§2.1); x^T otherwise.
  s.data_transposed = !row && r.kind() != RecipeKind::kMXFP8;
  s.data_rows = s.data_transposed ? K : M;
  s.data_row_elems = s.data_transposed ? M : K;
  s.data_cols = s.data_elem == DataElem::kE2M1 ? cdiv(s.data_row_elems, 2) : s.data_row_elems;
  s.data_m_axis = s.data_transposed ? MAxis::kCols : MAxis::kRows;

  switch (r.kind()) {
    case RecipeKind::kNVFP4: {  // §1: E4M3 block scales, 1x16 (or 16x16) blocks along each plane's rows
      s.scale_type = ScaleType::kE4M3;
      const int64_t rows = row ? M : K, len = row ? K : M;
      s.compact = {rows, cdiv(len, 16)};
      s.padded = {roundup(rows, 128), roundup(cdiv(len, 16), 4)};
      s.scale_m_axis = row ? MAxis::kRows : MAxis::kCols;
      s.layouts = kTiledLayouts;
      const Nvfp4Options& o = std::get<Nvfp4Options>(opts);
      const int64_t h = o.tile_2d ? 16 : 1;
      s.block_rows = row ? h : 16;
      s.block_cols = row ? 16 : h;
      s.scale_step_m = row ? 1 : 16;
      s.scale_step_k = row ? 16 : 1;
      s.amax_per_line = o.row_scaled;
      s.amax_count = o.row_scaled ? rows : 1;
      break;
    }
    case RecipeKind::kMXFP8: {  // §2: E8M0 scales; the columnwise plane keeps x's orientation, blocks down columns
      s.scale_type = ScaleType::kE8M0;
      const int64_t h = std::get<Mxfp8Options>(opts).tile_2d ? 32 : 1;
      if (row) {
        s.compact = {M, cdiv(K, 32)};
        s.padded = {roundup(M, 128), roundup(cdiv(K, 32), 4)};
        s.block_rows = h;
        s.block_cols = 32;
        s.scale_step_k = 32;
      } else {
        s.compact = {cdiv(M, 32), K};
        s.padded = {roundup(cdiv(M, 32), 4), roundup(K, 128)};
        s.tiles_transposed = true;
        s.block_rows = 32;
        s.block_cols = h;
        s.scale_step_m = 32;
      }
      s.scale_m_axis = MAxis::kRows;
      s.layouts = kTiledLayouts;
      break;
    }
    case RecipeKind::kFP8Block: {  // §3: F32 scale_inv per 1x128 or 128x128 block (UE8M0 bytes: scale_dtype=ue8m0)
      s.scale_type = std::get<Fp8BlockOptions>(opts).ue8m0_scales ? ScaleType::kE8M0 : ScaleType::kF32;
      const int64_t rows = row ? M : K, len = row ? K : M;
      if (std::get<Fp8BlockOptions>(opts).tile_2d) {
        s.compact = {cdiv(rows, 128), cdiv(len, 128)};
        s.padded = {cdiv(rows, 128), roundup(cdiv(len, 128), 4)};
        s.block_rows = 128;
        s.block_cols = 128;
        s.scale_step_m = 128;
        s.scale_step_k = 128;
      } else {
        const int64_t b = std::get<Fp8BlockOptions>(opts).block_1d;  // 128, or 32 (tile 1x32)
        s.compact = {rows, cdiv(len, b)};
        s.padded = {cdiv(len, b), roundup(rows, 4)};  // TE's GEMM-ready transposed layout
        s.padded_transposed = true;
        s.block_rows = row ? 1 : b;
        s.block_cols = row ? b : 1;
        s.scale_step_m = row ? 1 : b;
        s.scale_step_k = row ? b : 1;
      }
      s.scale_m_axis = row ? MAxis::kRows : MAxis::kCols;
      s.layouts = kTeLayouts | (s.scale_type == ScaleType::kE8M0 ? bit(Layout::kDeepGemmPackedUe8m0) : 0u);
      break;
    }
    case RecipeKind::kMXFP4: {  // VECTORS.md mxfp4: NVFP4's geometry with blocks of 32 and E8M0 scales
      // TE-padded shapes as NVFP4's (the columnwise plane is x^T, so both planes pad [rows, blocks] alike and
      // swizzle alike): rowwise [roundup(M,128), roundup(ceil(K/32),4)] = MXFP8's rowwise; columnwise
      // [roundup(K,128), roundup(ceil(M/32),4)] (docs: conformance/README.md, MXFP4).
      s.scale_type = ScaleType::kE8M0;
      const int64_t rows = row ? M : K, len = row ? K : M;
      s.compact = {rows, cdiv(len, 32)};
      s.padded = {roundup(rows, 128), roundup(cdiv(len, 32), 4)};
      s.scale_m_axis = row ? MAxis::kRows : MAxis::kCols;
      s.layouts = kTiledLayouts;
      s.block_rows = row ? 1 : 32;
      s.block_cols = row ? 32 : 1;
      s.scale_step_m = row ? 1 : 32;
      s.scale_step_k = row ? 32 : 1;
      break;
    }
    case RecipeKind::kFP8Tensor:  // §4: one scale_inv (a 1x1 F32 matrix in each plane) and one amax
      s.per_tensor = true;
      s.scale_type = ScaleType::kF32;
      s.compact = {1, 1};
      s.padded = {1, 1};
      s.scale_m_axis = MAxis::kNone;
      s.block_rows = M;
      s.block_cols = K;
      s.amax_count = 1;
      s.layouts = kTeLayouts;  // the 1x1 matrix is the same in both
      break;
  }
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
    if (r.kind() != RecipeKind::kNVFP4) return std::nullopt;  // NVFP4's per-plane amax (amax_count of them)
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
