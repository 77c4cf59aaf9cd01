/// \file roundtrip_util.hpp
/// \brief Helpers shared by the round-trip properties (prop_roundtrip.cpp: E2M1 formats; prop_roundtrip_fp8.cpp: FP8
///        formats).
#pragma once
#include <rapidcheck.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/quantize.hpp"
#include "qtc/tensor.hpp"

namespace qtc::prop {

inline uint64_t xorshift(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

/// Whether dtype d holds v exactly.
inline bool exact_in(float v, DType d) {
  if (d == DType::kF32) return true;
  if (d == DType::kBF16) return bf16_to_f32(f32_to_bf16(v)) == v;
  return f16_to_f32(f32_to_f16(v)) == v;
}

/// TE's SR emulation step (§1.4 SR): 0.5 below 2, 1 below 4, else 2.
inline float sr_step(float v) { return v >= 4.0f ? 2.0f : v >= 2.0f ? 1.0f : 0.5f; }

/// The |value| of E2M1 code `nib` (sign dropped).
inline float e2m1_mag(uint8_t nib) { return std::fabs(decode_e2m1(nib & 0xFu)); }

/// r with only plane pk (the recipe a round trip re-quantizes one dequantized plane with).
inline Recipe plane_only(Recipe r, PlaneKind pk) {
  r.rowwise = pk == PlaneKind::kRowwise;
  r.columnwise = !r.rowwise;
  return r;
}

inline const char* dtype_text(DType d) { return d == DType::kF32 ? "f32" : d == DType::kBF16 ? "bf16" : "f16"; }

/// A uniform choice in [0, n), whatever the case's size (RapidCheck's inRange leans to small values at small sizes).
/// (Not `pick`: support/gen.hpp declares qtc::prop::pick(int) returning a generator, and the two would share one
/// mangled name.)
inline int uniform_index(int n) { return *rc::gen::resize(100, rc::gen::inRange(0, n)); }

/// An input for the FP8 formats: per tile of bt x bc elements (the recipe's block, so that a planted maximum decides
/// its block), a magnitude 2^(e0 - drop), all zero, or a planted maximum 1.75 * 2^k * (1 + u/32) (E4M3 224, E5M2
/// 28672 times a power of two, rounded down onto max/2 by the quantization: the rceil / pow2 "half range" block).
inline HostMatrix make_fp8_input(int64_t M, int64_t K, int64_t bt, int64_t bc, int e0, uint64_t seed) {
  HostMatrix x(DType::kF32, M, K);
  uint64_t s = seed | 1;
  const int drops[] = {0, 0, 0, 1, 2, 3, 5, 8, 10, 12, 16, 20};
  std::map<std::pair<int64_t, int64_t>, std::pair<int, int>> tile;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const auto key = std::make_pair(i / bt, j / bc);
      if (!tile.count(key)) {
        const int mode = static_cast<int>(xorshift(s) % 6);
        tile[key] = {mode, drops[xorshift(s) % (sizeof(drops) / sizeof(drops[0]))]};
      }
      const auto [mode, drop] = tile[key];
      const uint64_t r = xorshift(s);
      const double u = static_cast<double>(r >> 11) * 0x1p-53;
      const double g = (u * 2.0 - 1.0) * (1.0 + static_cast<double>((r >> 3) % 5));
      double v = std::ldexp(g, e0 - drop);
      if (mode == 0) v = 0.0;
      if (mode == 1 && (i % bt) == 0 && (j % bc) == 0) v = std::ldexp(1.75 * (1.0 + u / 32.0), e0 - drop + 3);
      if (mode == 2 && (r % 5) == 0) v = std::ldexp(g, e0 - drop - 14);  // small elements (F16 underflow below big ones)
      x.set(i, j, static_cast<float>(v));
    }
  return x;
}

/// An input for the E2M1 formats (prop_roundtrip.cpp) whose blocks reach the cases of the derivation: per block of 16 x 32 (both planes see mixed blocks), a
/// magnitude 2^(E0 - drop) with drop in {0, 1..12, 16, 17, 20, 40, 130}, and some blocks whose maximum is planted at 3.0..3.5 *
/// 2^k (MXFP4 c = 3), at 2^k (CEIL c = 2), or all zero.
inline HostMatrix make_e2m1_input(int64_t M, int64_t K, int e0, uint64_t seed, float clamp_abs) {
  HostMatrix x(DType::kF32, M, K);
  uint64_t s = seed | 1;
  const int drops[] = {0, 0, 0, 1, 2, 3, 5, 8, 9, 10, 11, 12, 16, 17, 20, 40, 130};  // 16, 17: NVFP4 E4M3-subnormal block scales
  std::map<std::pair<int64_t, int64_t>, int> mode_of, drop_of;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const auto key = std::make_pair(i / 16, j / 32);
      if (!mode_of.count(key)) {
        mode_of[key] = static_cast<int>(xorshift(s) % 8);
        drop_of[key] = drops[xorshift(s) % (sizeof(drops) / sizeof(drops[0]))];
      }
      const int mode = mode_of[key], drop = drop_of[key];
      const uint64_t r = xorshift(s);
      const double u = static_cast<double>(r >> 11) * 0x1p-53;  // [0, 1)
      const double g = (u * 2.0 - 1.0) * (1.0 + static_cast<double>((r >> 3) % 5));
      double v = std::ldexp(g, e0 - drop);
      if (mode == 0) v = 0.0;
      if (mode == 1 && (j % 32) == 7) v = std::ldexp(3.0 + static_cast<double>(r % 64) / 128.0, e0 - drop + 4);  // c = 3 blocks
      if (mode == 2 && (j % 32) == 3) v = std::ldexp(-1.0, e0 - drop + 4);                                      // power-of-two max
      if (mode == 3) v = std::ldexp(g, e0 - drop - 128);                                                         // far below
      if (mode == 4 && (r % 7) == 0) v = -0.0;
      v = std::fmax(std::fmin(v, static_cast<double>(clamp_abs)), -static_cast<double>(clamp_abs));
      x.set(i, j, static_cast<float>(v));
    }
  return x;
}

/// Row-scaled NVFP4 (q, quantized from x under r): every row amax lies in [2^-80, 2^100] (else the case is discarded:
/// `why` says so), and requantizing with a carried amax is refused by design (each row computes its own amax).
inline void check_row_scaled_requantize(const QuantizedTensor& q, const MatrixView& x, const Recipe& r, float A, const char* why) {
  for (float ra : q.rowwise->amax)
    if (ra != 0.0f && !(ra >= 0x1p-80f && ra <= 0x1p100f)) RC_DISCARD(why);
  bool refused = false;
  try {
    (void)ref::quantize_with_amax(x, r, A, A);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("row-scaled") != std::string::npos;
  }
  RC_ASSERT(refused);
}

}  // namespace qtc::prop
