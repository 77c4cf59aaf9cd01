/// \file layout_8x4.hpp
/// \brief The 8x4 small-M swizzled scale layout of FlashInfer and TensorRT-LLM (`SfLayout.layout_8x4`,
///        `QuantizationSFLayout::SWIZZLED_8x4`), next to the cuBLAS 128x4 one (TE_FORMATS.md §6): the scale matrix
///        S [R, C] (R = the plane's outer index, C = its k-blocks) padded to [roundup(R, 8), roundup(C, 4)] and
///        stored as [R/8][C/4][8][4] tiles of 32 bytes: entry (r, c) at
///        (r / 8) * (roundup(C, 4) / 4) * 32 + (c / 4) * 32 + (r % 8) * 4 + c % 4
///        (FlashInfer `quantization_cute_dsl_utils.py: compute_sf_index_swizzled_8x4_gpu`; its tests'
///        `_swizzle_mxfp8_scales`). Padding entries are 0. Which matrix is S: as for the 128x4 layout, the compact
///        scale matrix of NVFP4 and MXFP4 planes and of the MXFP8 rowwise plane, the transposed compact matrix of the
///        MXFP8 columnwise plane (describe_plane's swizzle_transposed). Pure functions, not yet a ScaleLayout value:
///        verify, the kernels and the vector metadata do not read it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "qtc/quantized.hpp"
#include "qtc/recipe.hpp"

namespace qtc::ref {

/// Byte offset of entry (row, kb) of S in the 8x4 layout with num_kb k-blocks (unpadded count is fine).
constexpr int64_t swizzled_8x4_offset(int64_t row, int64_t kb, int64_t num_kb) {
  const int64_t k_tiles = (num_kb + 3) / 4;
  return (row / 8) * k_tiles * 32 + (kb / 4) * 32 + (row % 8) * 4 + kb % 4;
}

/// The 8x4 bytes (roundup(R, 8) * roundup(C, 4) of them, padding 0) of a plane's compact byte scales (NVFP4, MXFP8,
/// MXFP4; throws qtc::Error naming the rule for F32 scales or a matrix of the wrong shape).
std::vector<uint8_t> swizzle_8x4(const ScaleMatrix& compact, const Recipe& r, PlaneKind p, int64_t M, int64_t K);
/// The compact scale matrix back from the 8x4 bytes (throws when their count is not the padded size).
ScaleMatrix unswizzle_8x4(std::span<const uint8_t> bytes, const Recipe& r, PlaneKind p, int64_t M, int64_t K);

}  // namespace qtc::ref
