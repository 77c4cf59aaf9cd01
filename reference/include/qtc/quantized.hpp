/// \file quantized.hpp
/// \brief A quantized tensor: logical shape, recipe, and up to two planes of data, scales and amax.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "qtc/layout.hpp"
#include "qtc/recipe.hpp"

namespace qtc {

enum class ScaleType : uint8_t { kE4M3, kE8M0, kF32 };
/// The scale layout of a ScaleMatrix: qtc::Layout (layout.hpp), the one layout value (the old name, kept so that
/// code written against it reads on).
using ScaleLayout = Layout;
enum class PlaneKind : uint8_t { kRowwise, kColumnwise };

/// A matrix of block scales: E4M3/E8M0 bytes or F32 values stored as little-endian bytes.
struct ScaleMatrix {
  ScaleType type = ScaleType::kE4M3;
  ScaleLayout layout = ScaleLayout::kCompact;
  int64_t rows = 0;  ///< the buffer's shape in `layout` (PlaneSpec::geometry(layout).buf_rows / buf_cols)
  int64_t cols = 0;
  std::vector<uint8_t> bytes;  ///< rows*cols elements (swizzled layouts: tile order)

  size_t elem_size() const { return type == ScaleType::kF32 ? 4 : 1; }
  uint8_t byte(int64_t r, int64_t c) const { return bytes[static_cast<size_t>(r * cols + c)]; }
  float f32(int64_t r, int64_t c) const;
  void set_f32(int64_t r, int64_t c, float v);
  bool operator==(const ScaleMatrix&) const;  // defaulted in the .cpp (C++20), declared alike in C++17
};

/// One plane: data bytes (FP4 packed two per byte, low nibble first; or FP8 bytes), scales, amax.
struct Plane {
  int64_t data_rows = 0;  ///< NVFP4: M (rowwise) or K (columnwise); MXFP8: M; FP8 block/tensor: M or K
  int64_t data_cols = 0;  ///< bytes per row
  std::vector<uint8_t> data;
  ScaleMatrix scale;        ///< empty for FP8 tensor (its scale_inv is in amax/scale_inv below)
  std::vector<float> amax;  ///< NVFP4: [1], or [M]/[K] when row-scaled; FP8 tensor: [1]; else empty
  bool operator==(const Plane&) const;  // defaulted in the .cpp (C++20), declared alike in C++17
};

struct QuantizedTensor {
  Recipe recipe;
  DType input_dtype = DType::kF32;
  int64_t rows = 0;  ///< M
  int64_t cols = 0;  ///< K
  std::optional<Plane> rowwise;
  std::optional<Plane> columnwise;
  float scale_inv = 1.0f;  ///< FP8 tensor only: 1/scale (both planes share it)

  const Plane& plane(PlaneKind k) const;
};

}  // namespace qtc
