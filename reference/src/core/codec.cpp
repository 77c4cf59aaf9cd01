/// \file codec.cpp
/// \brief Out-of-line scalar codecs: F16 and the FP8 decode tables (from the generic decoder).
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

}  // namespace qtc
