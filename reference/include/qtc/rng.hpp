/// \file rng.hpp
/// \brief The counter-based random source of stochastic rounding: Philox4x32-10 keyed by the seed,
///        counted by element index, so that any element's random bits can be recomputed anywhere (CPU or GPU).
#pragma once
#include <array>
#include <cstdint>

#include "qtc/host_device.hpp"

namespace qtc {

/// Philox4x32 with 10 rounds (Salmon et al., SC'11; the constants of Random123 and cuRAND).
QTC_HD void philox4x32_10(uint32_t ctr[4], uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ ctr[1] ^ key0, n2 = hi0 ^ ctr[3] ^ key1;
    ctr[0] = n0; ctr[1] = lo1; ctr[2] = n2; ctr[3] = lo0;
    key0 += kW0; key1 += kW1;
  }
}

/// The 8 random bits of stochastic rounding for element `index` of plane `plane` (0 rowwise, 1 columnwise),
/// where index is the element's position in that plane's row-major storage order (rowwise: i*K + j;
/// columnwise: k*M + m). One Philox call covers 16 consecutive elements: word w = index/4 % 4 of the
/// output for counter (index/16, plane, 0, 0), byte index % 4 of that word.
QTC_HD uint8_t sr_random_byte(uint64_t seed, uint32_t plane, uint64_t index) {
  uint32_t ctr[4] = {static_cast<uint32_t>(index >> 4), static_cast<uint32_t>(index >> 36), plane, 0x51A7u};
  philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint32_t word = ctr[(index >> 2) & 3u];
  return static_cast<uint8_t>(word >> (8u * (index & 3u)));
}

}  // namespace qtc
