/// \file test_support.hpp
/// \brief The verdict library of qtc's own test layers (reference, kernels, property, distributed, checkpoints),
///        part of qtc::testing:
///
///   * first mismatch: GoogleTest AssertionResults comparing quantized tensors, planes, scale matrices, byte and F32
///     buffers and host matrices bit for bit. A failure prints the line `qtc verify` prints (same formatting
///     function, conformance::mismatch_line): the tensor, the mismatch count, the first mismatch's coordinates, both
///     values in hex and decoded, and the quantization block's inputs when x is given.
///       EXPECT_TRUE(qtc::testing::quantized_equal(want, got, &x));
///   * one GPU gate: QTC_GPU_GATE(device_reason) / QTC_GPU_GATE_FEATURE(device_reason, support). No usable device:
///     skip with the reason, or a failure when QTC_REQUIRE_GPU is set (and not "0"). A feature the gating table
///     (qtc/gating.hpp) refuses on this device: skip with the table's reason, even under QTC_REQUIRE_GPU (the table
///     says it is not supported; it is not a missing device).
///   * one seeded RNG: test_seed() (QTC_SEED overrides the default), QTC_SEED_TRACE(seed) prints it on failure, and
///     a counter-based generator (mix, uniform01, normal) so any slice of an input can be regenerated.
///   * one set of input families (make_input): normal, heavy-tailed, zero rows/columns/blocks, tiny and subnormal,
///     huge, E2M1/E4M3 ties, NaN/Inf/-0.0.
/// The property tests keep their own generators and oracle on purpose (independence); they use the reporting only.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "qtc/gating.hpp"
#include "qtc/quantized.hpp"
#include "qtc/tensor.hpp"
#include "qtc/testing.hpp"
#include "qtc/verify.hpp"

namespace qtc::testing {

// ---------------------------------------------------------------------------------------------------------
// First mismatch

using conformance::ElementCode;

/// How F32 / BF16 / F16 elements compare: bit patterns (checkpoints, GEMM outputs), or any NaN equal to any NaN
/// (what `qtc verify` does: kernels may write another NaN payload).
enum class NanRule { kBitExact, kAnyNanEqual };

/// `want` and `got` as [rows, cols] elements of `code` (E2M1: two per byte, `cols` counted in elements). A size
/// difference is a failure naming both sizes. `block(a, b)` (optional) names the inputs behind element (a, b).
::testing::AssertionResult buffers_equal(std::string_view name, ElementCode code, Buffer want, Buffer got, int64_t rows,
                                         int64_t cols, NanRule nan = NanRule::kBitExact,
                                         const std::function<std::string(int64_t, int64_t)>& block = {});
/// F32 vectors (amax, scales, outputs) as [rows, cols].
::testing::AssertionResult f32_equal(std::string_view name, const std::vector<float>& want, const std::vector<float>& got,
                                     int64_t rows, int64_t cols, NanRule nan = NanRule::kBitExact);
/// Host matrices of the same dtype and shape (F32, BF16, F16 or U8), element by element.
::testing::AssertionResult matrices_equal(std::string_view name, const HostMatrix& want, const HostMatrix& got,
                                          NanRule nan = NanRule::kBitExact);
/// A scale matrix: type, layout, shape, then every entry (padding included). `recipe`/`plane`/`x` (optional) give the
/// block inputs of compact scales.
::testing::AssertionResult scales_equal(std::string_view name, const ScaleMatrix& want, const ScaleMatrix& got,
                                        NanRule nan = NanRule::kBitExact);
/// One plane of recipe r: shape, data, scales, amax. Tensor names follow VECTORS.md (rowwise_data, rowwise_scale_inv,
/// amax_rowwise, ...). With x, each mismatch names its block's inputs.
::testing::AssertionResult planes_equal(const Recipe& r, PlaneKind kind, const Plane& want, const Plane& got,
                                        const MatrixView* x = nullptr, NanRule nan = NanRule::kBitExact);
/// The outputs of two quantizations of one input: both planes (present in both or in neither: shape, data, scales in
/// their layout, amax) and scale_inv. The first line is the first mismatching tensor; every other mismatching tensor
/// follows on its own line.
::testing::AssertionResult outputs_equal(const QuantizedTensor& want, const QuantizedTensor& got, const MatrixView* x = nullptr,
                                         NanRule nan = NanRule::kBitExact);
/// outputs_equal, and first the recipe, the input dtype and the shape (a round trip through a checkpoint or a shard
/// gather must keep them): what ref::bitwise_equal decides, with the first mismatch.
::testing::AssertionResult quantized_equal(const QuantizedTensor& want, const QuantizedTensor& got,
                                           const MatrixView* x = nullptr, NanRule nan = NanRule::kBitExact);

// ---------------------------------------------------------------------------------------------------------
// The GPU gate

/// QTC_REQUIRE_GPU is set to something other than "" or "0".
bool gpu_required();

struct GateDecision {
  enum Kind { kRun, kSkip, kFail };
  Kind kind = kRun;
  std::string message;
};
/// The one rule: `device_reason` not empty (no usable device) -> skip with it, or fail under QTC_REQUIRE_GPU;
/// otherwise the feature's verdict from the gating table (asked only when a device is there) -> skip with
/// "gating table: <reason>" when refused (never a failure), else run.
GateDecision gpu_gate(const std::string& device_reason, const std::function<gating::Support()>& feature = {});

/// At the top of a GPU test (a function returning void).
#define QTC_GPU_GATE_FEATURE(device_reason, support)                                                           \
  do {                                                                                                         \
    const ::qtc::testing::GateDecision qtc_gate_ =                                                             \
        ::qtc::testing::gpu_gate((device_reason), [&]() -> ::qtc::gating::Support { return (support); });     \
    if (qtc_gate_.kind == ::qtc::testing::GateDecision::kFail) FAIL() << qtc_gate_.message;                   \
    if (qtc_gate_.kind == ::qtc::testing::GateDecision::kSkip) GTEST_SKIP() << qtc_gate_.message;             \
  } while (0)
#define QTC_GPU_GATE(device_reason) QTC_GPU_GATE_FEATURE(device_reason, (::qtc::gating::Support{true, {}}))

// ---------------------------------------------------------------------------------------------------------
// Seeds and inputs

/// The seed of this run: QTC_SEED (decimal or 0x hex), or the test layer's default `dflt`.
uint64_t test_seed(uint64_t dflt);
/// "seed 0x... (QTC_SEED=0x... reproduces this run)".
std::string seed_note(uint64_t seed);
/// Prints the seed with every failure in the scope.
#define QTC_SEED_TRACE(seed) SCOPED_TRACE(::qtc::testing::seed_note(seed))

/// splitmix64 of (seed, index): counter-based, so any element can be regenerated on its own (any rank, any slice).
inline uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
double uniform01(uint64_t seed, uint64_t i);  ///< in (0, 1)
double normal(uint64_t seed, uint64_t i);     ///< standard normal (Box-Muller of two uniforms)

/// The input families every kernel, grouped and distributed test draws from.
enum class Family { kNormal, kHeavy, kZeros, kTiny, kHuge, kTies, kSpecial, kBanded };
/// The families of the kernels' conformance matrix (kBanded, the sharding tests' weight, is not among them).
inline constexpr Family kAllFamilies[] = {Family::kNormal, Family::kHeavy, Family::kZeros, Family::kTiny,
                                          Family::kHuge,   Family::kTies,  Family::kSpecial};
/// "Normal", "Heavy", "ZeroBlocks", "Tiny", "Huge", "Ties", "NanInfNegZero", "Banded".
const char* family_name(Family f);
/// An [M, K] matrix of dtype t (F32, BF16, F16) from family f, a function of (seed, index) only:
///   Normal: N(0, 9); Heavy: N(0,1) * exp(4 N(0,1)); ZeroBlocks: zero rows, columns and 16x16 / 32x32 / 128x128
///   regions, the rest N(0,1); Tiny: subnormals and the smallest normals of t, every 13th row ordinary; Huge: near t's
///   largest finite value; Ties: E2M1 tie points around a block max of 6 * 2^b (even rows) and E4M3 midpoints (odd
///   rows); NanInfNegZero: N(0,1) with NaN, +-Inf (1/64 each), -0.0 (5/64) and +0.0 (2/64); Banded: uniform in
///   [-1, 1) times 2^((row / 16) % 7 - 3), 1 in 4096 elements x37 (row shards differ in amax).
HostMatrix make_input(Family f, DType t, int64_t M, int64_t K, uint64_t seed);
/// Rows [r0, r1) of that matrix (rows_total: its M, default r1): element (i, j) depends on (seed, i, j, K) only, so
/// each rank rebuilds its own shard.
HostMatrix make_rows(Family f, DType t, int64_t r0, int64_t r1, int64_t K, uint64_t seed, int64_t rows_total = -1);

}  // namespace qtc::testing
