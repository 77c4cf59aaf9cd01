/// \file sharding_fixtures.hpp
/// \brief Shared by the sharding, checkpoint and distributed tests: the FSDP2 recipe table, counter-based
///        inputs any rank can rebuild (keyed by seed, row, column), and expected wire sizes computed
///        independently of the protocol code.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "qtc/quantize.hpp"
#include "qtc/recipe.hpp"
#include "qtc/tensor.hpp"

namespace qtc::testing {

/// The seed of every random input: QTC_SEED overrides the default, and failures print it.
inline uint64_t test_seed() {
  const char* s = std::getenv("QTC_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 0x5EEDF5D2ull;
}

inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Element (i, j) of the test weight: uniform in [-1, 1) times a magnitude that depends on the row
/// band (16 rows), so shards have different amaxes (the amax-reduction bug needs that), plus a few
/// outliers.
inline float weight_value(uint64_t seed, int64_t i, int64_t j, int64_t cols) {
  const uint64_t h = mix64(seed ^ mix64(static_cast<uint64_t>(i * cols + j)));
  const float u = static_cast<float>(h >> 40) * 0x1p-24f * 2.0f - 1.0f;
  const float band = std::ldexp(1.0f, static_cast<int>((i / 16) % 7) - 3);
  const bool outlier = (h & 0xFFF) == 7;
  return u * band * (outlier ? 37.0f : 1.0f);
}

/// Rows [r0, r1) of the M x K weight as an F32 (or BF16) host matrix.
inline HostMatrix weight_rows(uint64_t seed, int64_t r0, int64_t r1, int64_t K, DType t = DType::kF32) {
  HostMatrix m(t, r1 - r0, K);
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = 0; j < K; ++j) m.set(i - r0, j, weight_value(seed, i, j, K));
  return m;
}

/// One FSDP2 case: a recipe with a short name.
struct FsdpCase {
  std::string name;
  Recipe recipe;
};

inline void PrintTo(const FsdpCase& c, std::ostream* os) { *os << c.name; }

inline Recipe make_nvfp4(bool tile_2d, bool columnwise) {
  Recipe r;
  r.kind = RecipeKind::kNVFP4;
  r.tile_2d = tile_2d;
  r.rowwise = true;
  r.columnwise = columnwise;
  return r;
}
inline Recipe make_mxfp8(bool columnwise) {
  Recipe r;
  r.kind = RecipeKind::kMXFP8;
  r.rowwise = true;
  r.columnwise = columnwise;
  return r;
}
inline Recipe make_fp8_block_2d(bool columnwise) {
  Recipe r;
  r.kind = RecipeKind::kFP8Block;
  r.block_2d = true;
  r.pow2_scales = true;
  r.rowwise = true;
  r.columnwise = columnwise;
  return r;
}
inline Recipe make_fp8_tensor(bool columnwise) {
  Recipe r;
  r.kind = RecipeKind::kFP8Tensor;
  r.rowwise = true;
  r.columnwise = columnwise;
  return r;
}

/// The recipes FSDP2 supports, with the planes the gathered tensor needs.
inline std::vector<FsdpCase> fsdp_cases() {
  return {{"Nvfp4x1x16", make_nvfp4(false, false)},   {"Nvfp4x16x16", make_nvfp4(true, true)},
          {"Mxfp8", make_mxfp8(true)},                {"Mxfp8Rowwise", make_mxfp8(false)},
          {"Fp8Block128", make_fp8_block_2d(true)},   {"Fp8Tensor", make_fp8_tensor(true)}};
}

inline int64_t roundup(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

/// Bytes one rank puts on the wire for a shard of shard_M x K, from TE_FORMATS.md §5/§8 directly.
inline int64_t expected_wire_bytes(const Recipe& r, int64_t shard_M, int64_t K) {
  switch (r.kind) {
    case RecipeKind::kNVFP4: return shard_M * K / 2 + shard_M * roundup(K / 16, 4);
    case RecipeKind::kMXFP8: {
      int64_t n = shard_M * K + shard_M * roundup((K + 31) / 32, 4);
      if (r.columnwise) n += shard_M * K + (shard_M / 32) * roundup(K, 128);
      return n;
    }
    case RecipeKind::kFP8Block: return shard_M * K + (shard_M / 128) * roundup((K + 127) / 128, 4) * 4;
    case RecipeKind::kFP8Tensor: return shard_M * K;
  }
  return -1;
}

/// The shard rows every FSDP case supports (a multiple of 128).
inline constexpr int64_t kShardRows = 128;

}  // namespace qtc::testing
