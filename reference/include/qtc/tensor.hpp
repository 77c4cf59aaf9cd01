/// \file tensor.hpp
/// \brief Element types and the host matrices the reference reads and writes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"

namespace qtc {

/// Element types of inputs, outputs and raw buffers (the safetensors dtype names in comments).
enum class DType : uint8_t {
  kF32,   ///< "F32"
  kBF16,  ///< "BF16"
  kF16,   ///< "F16"
  kU8,    ///< "U8" (also F8_E4M3, F8_E5M2, F8_E8M0: raw bytes)
};

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
/// Largest finite value of an input type (FP8 block scaling's `value_for_inf`).
float dtype_max(DType t);

/// A row-major 2-D matrix of F32, BF16 or F16 values owned elsewhere: the quantizers' input.
/// Inputs of higher rank are flattened to [prod(leading dims), last dim] by the caller.
struct MatrixView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;  ///< M
  int64_t cols = 0;  ///< K

  /// Element (i, j) converted to float (exact for all three types).
  float at(int64_t i, int64_t j) const {
    const int64_t idx = i * cols + j;
    switch (dtype) {
      case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[idx]);
      case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(data)[idx]);
      default: return static_cast<const float*>(data)[idx];
    }
  }
};

/// An owned row-major matrix with raw storage of any DType.
struct HostMatrix {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> bytes;

  HostMatrix() = default;
  HostMatrix(DType t, int64_t r, int64_t c) : dtype(t), rows(r), cols(c), bytes(static_cast<size_t>(r * c) * dtype_size(t)) {}
  MatrixView view() const { return MatrixView{bytes.data(), dtype, rows, cols}; }
  int64_t numel() const { return rows * cols; }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
  /// Element (i, j) as float (F32/BF16/F16) or byte value (U8).
  float get(int64_t i, int64_t j) const;
  /// Stores v at (i, j), rounding RN-even to the matrix's type (U8: truncated to a byte).
  void set(int64_t i, int64_t j, float v);
};

/// Float -> value of type t (RN-even), returned as raw bits in the low bytes.
uint32_t float_to_dtype_bits(float v, DType t);

}  // namespace qtc
