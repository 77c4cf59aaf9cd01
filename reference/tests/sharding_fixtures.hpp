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
#include "qtc/test_support.hpp"

namespace qtc::testing {

/// The seed of every random input: QTC_SEED overrides this layer's default (test_support.hpp), and failures print it.
inline uint64_t test_seed() { return test_seed(0x5EEDF5D2ull); }

/// Rows [r0, r1) of the M x K test weight, an F32 (or BF16) host matrix: the library's Banded input family (row bands
/// of 16 with different magnitudes, so shards have different amaxes -- the amax-reduction bug needs that -- plus a few
/// outliers), keyed by (seed, row, column) so any rank rebuilds its rows.
inline HostMatrix weight_rows(uint64_t seed, int64_t r0, int64_t r1, int64_t K, DType t = DType::kF32) {
  return make_rows(Family::kBanded, t, r0, r1, K, seed);
}

/// One FSDP2 case: a recipe with a short name.
struct FsdpCase {
  std::string name;
  Recipe recipe;
};

inline void PrintTo(const FsdpCase& c, std::ostream* os) { *os << c.name; }

inline Recipe make_nvfp4(bool tile_2d, bool columnwise) {
  Recipe r = Recipe::of(Nvfp4Options{.tile_2d = tile_2d});
  r.rowwise = true;
  r.columnwise = columnwise;
  return r;
}
inline Recipe make_mxfp8(bool columnwise) {
  Recipe r = Recipe::of(Mxfp8Options{});
  r.rowwise = true;
  r.columnwise = columnwise;
  return r;
}
inline Recipe make_mxfp4() {  // rowwise only: FSDP2 refuses MXFP4's columnwise plane (test_mxfp4.cpp)
  Recipe r = Recipe::of(Mxfp4Options{});
  r.rowwise = true;
  r.columnwise = false;
  return r;
}
inline Recipe make_fp8_block_2d(bool columnwise) {
  Recipe r = Recipe::of(Fp8BlockOptions{.tile_2d = true, .pow2_scales = true});
  r.rowwise = true;
  r.columnwise = columnwise;
  return r;
}
inline Recipe make_fp8_tensor(bool columnwise) {
  Recipe r = Recipe::of(Fp8TensorOptions{});
  r.rowwise = true;
  r.columnwise = columnwise;
  return r;
}

/// The recipes FSDP2 supports, with the planes the gathered tensor needs.
inline std::vector<FsdpCase> fsdp_cases() {
  return {{"Nvfp4x1x16", make_nvfp4(false, false)},   {"Nvfp4x16x16", make_nvfp4(true, true)},
          {"Mxfp8", make_mxfp8(true)},                {"Mxfp8Rowwise", make_mxfp8(false)},
          {"Fp8Block128", make_fp8_block_2d(true)},   {"Fp8Tensor", make_fp8_tensor(true)},
          {"Mxfp4Rowwise", make_mxfp4()}};
}

inline int64_t roundup(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

/// Bytes one rank puts on the wire for a shard of shard_M x K, from TE_FORMATS.md §5/§8 directly.
inline int64_t expected_wire_bytes(const Recipe& r, int64_t shard_M, int64_t K) {
  switch (r.kind()) {
    case RecipeKind::kNVFP4: return shard_M * K / 2 + shard_M * roundup(K / 16, 4);
    case RecipeKind::kMXFP8: {
      int64_t n = shard_M * K + shard_M * roundup((K + 31) / 32, 4);
      if (r.columnwise) n += shard_M * K + (shard_M / 32) * roundup(K, 128);
      return n;
    }
    case RecipeKind::kFP8Block: return shard_M * K + (shard_M / 128) * roundup((K + 127) / 128, 4) * 4;
    case RecipeKind::kFP8Tensor: return shard_M * K;
    case RecipeKind::kMXFP4: return shard_M * K / 2 + shard_M * roundup((K + 31) / 32, 4);  // rowwise only
  }
  return -1;
}

/// The shard rows every FSDP case supports (a multiple of 128).
inline constexpr int64_t kShardRows = 128;

}  // namespace qtc::testing
