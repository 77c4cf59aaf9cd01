/// \file roundtrip_util.hpp
/// \brief Helpers shared by the round-trip properties (prop_roundtrip.cpp: E2M1 formats; prop_roundtrip_fp8.cpp: FP8
///        formats).
#pragma once
#include <rapidcheck.h>

#include <cstdint>

#include "qtc/tensor.hpp"

namespace qtc::prop {

inline uint64_t xorshift(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

inline const char* dtype_text(DType d) { return d == DType::kF32 ? "f32" : d == DType::kBF16 ? "bf16" : "f16"; }

/// A uniform choice in [0, n), whatever the case's size (RapidCheck's inRange leans to small values at small sizes).
/// (Not `pick`: support/gen.hpp declares qtc::prop::pick(int) returning a generator, and the two would share one
/// mangled name.)
inline int uniform_index(int n) { return *rc::gen::resize(100, rc::gen::inRange(0, n)); }

}  // namespace qtc::prop
