/// \file codec.cpp
/// \brief Out-of-line scalar codecs: F16, E8M0 and the FP8 decode tables.
#include "qtc/codec.hpp"

#include <array>

namespace qtc {

uint16_t f32_to_f16(float f) {
  return static_cast<uint16_t>(round_pack<fmt::F16>(f, Rounding::kNearestEven, Overflow::kNaN));
}

namespace {
template <typename F>
std::array<float, 256> make_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = static_cast<float>(decode_generic<F>(static_cast<uint32_t>(c)));
  return t;
}
}  // namespace

const std::array<float, 256> kE4M3Table = make_table<fmt::E4M3>();
const std::array<float, 256> kE5M2Table = make_table<fmt::E5M2>();

int floor_log2(float v) {
  const uint32_t a = f32_bits(v) & 0x7FFFFFFFu;
  const int e = static_cast<int>(a >> 23);
  if (e != 0) return e - 127;
  // subnormal: value = m * 2^-149
  return (31 - std::countl_zero(a)) - 149;
}

uint8_t encode_e8m0(float v, E8m0Rounding rounding) {
  if (std::isnan(v) || (std::signbit(v) && v != 0.0f)) return 0xFF;
  if (std::isinf(v)) return 0xFE;
  if (v == 0.0f) return 0x00;
  const uint32_t u = f32_bits(v);
  switch (rounding) {
    case E8m0Rounding::kUp: {
      uint32_t e = u >> 23;
      const uint32_t m = u & 0x7FFFFFu;
      if ((m > 0 && e != 0xFE) && !(e == 0 && m <= 0x400000u)) ++e;
      return static_cast<uint8_t>(e);
    }
    case E8m0Rounding::kDown: {
      const int fl = floor_log2(v);
      return static_cast<uint8_t>(fl < -127 ? 0 : fl + 127);
    }
    case E8m0Rounding::kNearest: {
      const int fl = floor_log2(v);
      if (fl < -127) {  // below 2^-127: nearest of {0 (not representable), 2^-127}: clamp to 0x00
        return 0x00;
      }
      const double lo = std::ldexp(1.0, fl);
      const double mid = lo * 1.5;
      int e = fl;
      if (static_cast<double>(v) > mid || (static_cast<double>(v) == mid && ((fl + 127) & 1))) ++e;
      if (e + 127 > 254) return 0xFE;
      return static_cast<uint8_t>(e + 127);
    }
  }
  return 0xFF;
}

}  // namespace qtc
