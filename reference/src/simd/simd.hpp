/// \file simd.hpp
/// \brief The vectorized quantizers (simd/*.cpp), called from quantize.cpp when simd::enabled() holds; and the
///        per-block scale rules they share with nvfp4.cpp, in scalar form, from numeric.hpp (one value per
///        block: the vector work is per element). Only the profiles of cpu_path.hpp's simd_supports() are here.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "qtc/cpu_path.hpp"
#include "qtc/numeric.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/rng.hpp"

namespace qtc::ref::simd {

/// cpu_path() == kSimd and simd_supports(r, input).
bool enabled(const Recipe& r, DType input);
bool enabled_dequantize(const Recipe& r, DType out);
/// cpu_path() == kSimd (recipe-independent helpers: amax).
bool enabled_any();

QuantizedTensor quantize_nvfp4(const MatrixView& x, const Recipe& r, const float* amax_override);
QuantizedTensor quantize_mxfp8(const MatrixView& x, const Recipe& r);
QuantizedTensor quantize_fp8_block(const MatrixView& x, const Recipe& r);
QuantizedTensor quantize_fp8_tensor(const MatrixView& x, const Recipe& r, const float* amax_override);
QuantizedTensor quantize_mxfp4(const MatrixView& x, const Recipe& r);
/// The vectorized dequantizers the kinds' modules name (dequantize_simd): NVFP4, MXFP8, FP8 block and FP8 tensor.
HostMatrix dequantize_nvfp4(const QuantizedTensor& q, PlaneKind pk, DType out);
HostMatrix dequantize_mxfp8(const QuantizedTensor& q, PlaneKind pk, DType out);
HostMatrix dequantize_fp8(const QuantizedTensor& q, PlaneKind pk, DType out);
float amax(const MatrixView& x, bool propagate_nan);
/// The instruction set HWY_DYNAMIC_DISPATCH runs now (e.g. "AVX2").
const char* dispatched_target();
/// rht_transform (quantize.cpp) with the same bits.
HostMatrix rht_transform(const MatrixView& x, uint16_t sign_mask);

// ---- NVFP4 per-block rules (nvfp4.cpp, profiles te and te_pyref) --------------------------------------

struct GlobalScale {
  float s_enc = 1.0f;
  float s_dec = 1.0f;
  float amax = 0.0f;
};

inline GlobalScale make_global(float a, const Recipe& r) {
  GlobalScale g;
  g.amax = a;
  g.s_enc = nvfp4_global_encode_scale(a, r.nvfp4().e4m3_max, r.profile);
  g.s_dec = 1.0f / g.s_enc;
  return g;
}

inline float fmin_num(float a, float b) { return min_num(a, b); }

inline constexpr float kInv6 = kNvfp4Rcp6;  // RN(1/6)

/// §1.4: sf = e4m3(fminf(bamax * (S_enc * RN(1/6)), FLT_MAX)); te_pyref: NaN -> 0x7F (numeric.hpp).
inline uint8_t nvfp4_scale_byte(float bamax, const GlobalScale& g, bool pyref) {
  return nvfp4_block_scale(bamax, g.s_enc, pyref);
}

/// enc = fminf(1 / (float(sf) * S_dec), FLT_MAX), NaN kept (numeric.hpp).
inline float nvfp4_encode_factor(uint8_t sf, const GlobalScale& g) { return qtc::nvfp4_encode_factor(sf, g.s_dec); }

/// 4over6 candidates (§1.12): map-to-4 (returned) and map-to-6 (c6).
struct Candidate {
  uint8_t sf;
  float enc;
};
inline Candidate nvfp4_candidates(float bamax, const GlobalScale& g, Candidate& c6) {
  uint8_t sf4 = 0, sf6 = 0;
  nvfp4_4over6_scales(bamax, g.s_enc, sf4, sf6);
  c6 = {sf6, nvfp4_encode_factor(sf6, g)};
  return {sf4, nvfp4_encode_factor(sf4, g)};
}

/// The 16 random bytes of stochastic rounding for elements index16 .. index16 + 15 (index16 % 16 == 0):
/// sr_random_byte of each, from one Philox call.
inline void sr_block_bytes(uint64_t seed, uint32_t plane, uint64_t index16, uint8_t out[16]) {
  uint32_t ctr[4] = {static_cast<uint32_t>(index16 >> 4), static_cast<uint32_t>(index16 >> 36), plane, 0x51A7u};
  philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  for (int w = 0; w < 4; ++w)
    for (int b = 0; b < 4; ++b) out[4 * w + b] = static_cast<uint8_t>(ctr[w] >> (8 * b));
}

}  // namespace qtc::ref::simd
