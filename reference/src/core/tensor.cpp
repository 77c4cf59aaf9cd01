/// \file tensor.cpp
/// \brief Element types and host matrices.
#include "qtc/tensor.hpp"

#include <cstring>

#include "qtc/error.hpp"
#include "qtc/numeric.hpp"
#include "qtc/quantized.hpp"

#include <cfloat>

namespace qtc {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16:
    case DType::kF16: return 2;
    case DType::kU8: return 1;
  }
  return 1;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kU8: return "U8";
  }
  return "?";
}

float dtype_max(DType t) {
  switch (t) {
    case DType::kBF16: return bits_f32(0x7F7F0000u);  // 0x1.FEp127
    case DType::kF16: return 65504.0f;
    default: return FLT_MAX;
  }
}

uint32_t float_to_dtype_bits(float v, DType t) {
  switch (t) {
    case DType::kF32: return f32_bits(v);
    case DType::kBF16: return f32_to_bf16(v);
    case DType::kF16: return f32_to_f16(v);
    case DType::kU8: return static_cast<uint8_t>(v);
  }
  return 0;
}

float HostMatrix::get(int64_t i, int64_t j) const {
  if (dtype == DType::kU8) return static_cast<float>(bytes[static_cast<size_t>(i * cols + j)]);
  return view().at(i, j);
}

void HostMatrix::set(int64_t i, int64_t j, float v) {
  const size_t idx = static_cast<size_t>(i * cols + j);
  switch (dtype) {
    case DType::kF32: as<float>()[idx] = v; break;
    case DType::kBF16: as<uint16_t>()[idx] = f32_to_bf16(v); break;
    case DType::kF16: as<uint16_t>()[idx] = f32_to_f16(v); break;
    case DType::kU8: bytes[idx] = static_cast<uint8_t>(v); break;
  }
}

const Plane& QuantizedTensor::plane(PlaneKind k) const {
  const auto& p = k == PlaneKind::kRowwise ? rowwise : columnwise;
  QTC_CHECK(p.has_value(), "quantized tensor (", recipe.name(), ") has no ",
            k == PlaneKind::kRowwise ? "rowwise" : "columnwise", " plane");
  return *p;
}

bool ScaleMatrix::operator==(const ScaleMatrix&) const = default;
bool Plane::operator==(const Plane&) const = default;

float ScaleMatrix::f32(int64_t r, int64_t c) const {
  if (type == ScaleType::kE8M0) return decode_e8m0(byte(r, c));  // FP8 block scales stored as UE8M0 (scale_dtype)
  float v;
  std::memcpy(&v, bytes.data() + static_cast<size_t>(r * cols + c) * 4, 4);
  return v;
}

void ScaleMatrix::set_f32(int64_t r, int64_t c, float v) {
  if (type == ScaleType::kE8M0) {
    QTC_CHECK(e8m0_is_pow2(v) || is_inf(v), "rule 'fp8-block-ue8m0-pow2': scale ", v, " is not a power of two in UE8M0's range");
    bytes[static_cast<size_t>(r * cols + c)] = e8m0_of_pow2(v);
    return;
  }
  std::memcpy(bytes.data() + static_cast<size_t>(r * cols + c) * 4, &v, 4);
}

}  // namespace qtc
