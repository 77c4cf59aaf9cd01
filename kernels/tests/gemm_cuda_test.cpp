/// \file gemm_cuda_test.cpp
/// \brief GPU GEMMs (qtc/cuda/gemm.hpp) against the exact reference (qtc/gemm.hpp).
///
/// | path                    | exact-by-construction (bitwise)         | random inputs (bound, worst ULPs printed) |
/// |-------------------------|-----------------------------------------|-------------------------------------------|
/// | FP8 per-tensor E4M3/E5M2| fprop/dgrad/wgrad x F32/BF16, bias, C   | fprop/dgrad/wgrad, K = 1024                |
/// | FP8 block 1D/2D mixes   | fprop/dgrad/wgrad x F32/BF16            | fprop, K = 1024                            |
/// | NVFP4 (emulated on 9.x) | fprop/dgrad/wgrad x F32/BF16            | fprop/dgrad/wgrad, K = 1024                |
/// | row-scaled NVFP4 (§7.5) | fprop F32/BF16 + bias, wgrad two-vector | —                                          |
/// | grouped row-scaled NVFP4| uneven/empty groups, capacity padding, F32/BF16 vs ref grouped | —          |
/// | grouped NVFP4 quantize  | device group sizes, CUDA graph captured once, replayed with two size sets | — |
/// | grouped NVFP4 quantize  | strided (stride-2) view of the device group-size array; stride 0 rejected | — |
/// | grouped quantize, every grouped recipe (NVFP4 compact/swizzled/row-scaled, MXFP8, FP8 tensor, FP8 1x128): graph-captured replay, 70 groups with K = 80 | — |
/// | grouped GEMM, device sizes | fprop F32/BF16/F16, bias, cached or per-call weights; wgrad F32/BF16 x every amax mix: eager + CUDA graph replayed with 3 size sets | fprop K = 1024 |
/// | grouped GEMM named cases| widths differ / explicit beta / listed row-scaled rejected before any write; mixed list per-group; 70 groups, K = 80; wgrad | — |
/// | MXFP8, NVFP4 native     | skipped with the gating reason on SM 9.0; refusal carries it             |
///
/// Exact inputs (STYLE.md item 6): element values from {0, ±0.5, ±1, ±1.5, ±2, ±3} and power-of-two scales,
/// so every product and partial sum is exact in FP32 (and in Hopper's FP8 MMA accumulator) in any order.
/// No GPU: skipped with "no CUDA device"; QTC_REQUIRE_GPU=1 turns that into a failure; a path the gating table
/// refuses on this card is skipped with the table's reason (test_support.hpp's gate). QTC_SEED overrides the seed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "qtc/codec.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/gemm.hpp"
#include "qtc/cuda/grouped.hpp"
#include "qtc/gemm.hpp"
#include "qtc/grouped.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "qtc/test_support.hpp"

namespace qtc::cuda {
namespace {

/// The seed (QTC_SEED overrides; test_support.hpp).
uint64_t seed() { return qtc::testing::test_seed(20261129ull); }

/// Empty when a CUDA device is usable, else why not.
std::string device_reason() { return device_count() > 0 ? std::string() : std::string("no CUDA device"); }

/// The one GPU gate (test_support.hpp): no device -> skip, or fail under QTC_REQUIRE_GPU=1; a feature the gating
/// table refuses here -> skip with the table's reason.
#define QTC_REQUIRE_FEATURE(f) QTC_GPU_GATE_FEATURE(device_reason(), device_supports(f))

/// NVFP4 GEMM, native or emulated: supported when either is; else the native path's reason.
gating::Support nvfp4_gemm_support() {
  const gating::Support native = device_supports(gating::Feature::kGemmNvfp4);
  return native.supported ? native : device_supports(gating::Feature::kGemmNvfp4Emulated).supported ? gating::Support{true, {}} : native;
}

// ------------------------------------------------------------------------------------------------
// Exact-by-construction host tensors

const float kVals[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f};

float small_value(std::mt19937_64& g) {
  const float v = kVals[g() % 6];
  return (g() & 1) ? -v : v;
}

uint8_t fp8_code(float v, Fp8Type t) { return t == Fp8Type::kE4M3 ? encode_e4m3(v) : encode_e5m2(v); }

ScaleMatrix f32_scales(int64_t rows, int64_t cols, std::mt19937_64& g) {
  ScaleMatrix s;
  s.type = ScaleType::kF32;
  s.rows = rows;
  s.cols = cols;
  s.bytes.resize(static_cast<size_t>(rows * cols) * 4);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float v = std::ldexp(1.0f, static_cast<int>(g() % 5) - 2);
    std::memcpy(s.bytes.data() + i * 4, &v, 4);
  }
  return s;
}

Plane fp8_plane(int64_t R, int64_t C, Fp8Type t, std::mt19937_64& g) {
  Plane p;
  p.data_rows = R;
  p.data_cols = C;
  p.data.resize(static_cast<size_t>(R * C));
  for (auto& b : p.data) b = fp8_code(small_value(g), t);
  return p;
}

QuantizedTensor exact_fp8_tensor(int64_t M, int64_t K, Fp8Type t, std::mt19937_64& g) {
  QuantizedTensor q;
  q.recipe.set_options(Fp8TensorOptions{});
  q.recipe.set_fp8_type(t);
  q.rows = M;
  q.cols = K;
  q.rowwise = fp8_plane(M, K, t, g);
  Plane c;  // the columnwise plane is the transpose of the same bytes (TE_FORMATS.md §4.1)
  c.data_rows = K;
  c.data_cols = M;
  c.data.resize(static_cast<size_t>(M * K));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) c.data[static_cast<size_t>(j * M + i)] = q.rowwise->data[static_cast<size_t>(i * K + j)];
  q.columnwise = c;
  q.scale_inv = std::ldexp(1.0f, static_cast<int>(g() % 5) - 2);
  return q;
}

QuantizedTensor exact_fp8_block(int64_t M, int64_t K, bool two_d, std::mt19937_64& g) {
  QuantizedTensor q;
  q.recipe.set_options(Fp8BlockOptions{});
  q.recipe.fp8_block().tile_2d = two_d;
  q.rows = M;
  q.cols = K;
  auto cd = [](int64_t a) { return (a + 127) / 128; };
  q.rowwise = fp8_plane(M, K, Fp8Type::kE4M3, g);
  q.rowwise->scale = two_d ? f32_scales(cd(M), cd(K), g) : f32_scales(M, cd(K), g);
  q.columnwise = fp8_plane(K, M, Fp8Type::kE4M3, g);
  q.columnwise->scale = two_d ? f32_scales(cd(K), cd(M), g) : f32_scales(K, cd(M), g);
  ref::convert_layout(q, ScaleLayout::kPadded);
  return q;
}

Plane nvfp4_plane(int64_t R, int64_t C, std::mt19937_64& g, float amax) {
  static const uint8_t kPow2Sf[] = {0x30, 0x38, 0x40, 0x48};  // E4M3 0.5, 1, 2, 4
  Plane p;
  p.data_rows = R;
  p.data_cols = C / 2;
  p.data.resize(static_cast<size_t>(R * C / 2));
  for (auto& b : p.data) b = static_cast<uint8_t>((g() & 0xF) | ((g() & 0xF) << 4));  // every E2M1 code
  p.scale.type = ScaleType::kE4M3;
  p.scale.rows = R;
  p.scale.cols = C / 16;
  p.scale.bytes.resize(static_cast<size_t>(R * C / 16));
  for (auto& b : p.scale.bytes) b = kPow2Sf[g() % 4];
  p.amax = {amax};
  return p;
}

QuantizedTensor exact_nvfp4(int64_t M, int64_t K, std::mt19937_64& g, float amax_row, float amax_col) {
  QuantizedTensor q;
  q.recipe.set_options(Nvfp4Options{});
  q.rows = M;
  q.cols = K;
  q.rowwise = nvfp4_plane(M, K, g, amax_row);
  q.columnwise = nvfp4_plane(K, M, g, amax_col);
  return q;
}

/// Makes `q` row-scaled: amax per row (rowwise) and per column (columnwise), powers of two times 2688.
void make_row_scaled(QuantizedTensor& q, std::mt19937_64& g) {
  q.recipe.nvfp4().row_scaled = true;
  q.rowwise->amax.resize(static_cast<size_t>(q.rows));
  for (auto& a : q.rowwise->amax) a = 2688.0f * std::ldexp(1.0f, static_cast<int>(g() % 7) - 3) * (1.0f + 0.125f * (g() % 8));
  q.columnwise->amax.resize(static_cast<size_t>(q.cols));
  for (auto& a : q.columnwise->amax) a = 2688.0f * std::ldexp(1.0f, static_cast<int>(g() % 7) - 3) * (1.0f + 0.125f * (g() % 8));
}

// ------------------------------------------------------------------------------------------------
// Running and comparing

struct DeviceArray {
  DeviceBuffer buf;
  DeviceArray(const HostMatrix& h, cudaStream_t s) : buf(h.bytes.size(), s) {
    QTC_CUDA_CHECK(cudaMemcpyAsync(buf.data(), h.bytes.data(), h.bytes.size(), cudaMemcpyHostToDevice, s));
  }
};

HostMatrix download(const DeviceBuffer& d, DType t, int64_t rows, int64_t cols) {
  HostMatrix h(t, rows, cols);
  QTC_CUDA_CHECK(cudaMemcpy(h.bytes.data(), d.data(), h.bytes.size(), cudaMemcpyDeviceToHost));
  return h;
}

double at(const HostMatrix& m, int64_t i) {
  uint16_t h = 0;
  float f = 0;
  switch (m.dtype) {
    case DType::kF32: std::memcpy(&f, m.bytes.data() + i * 4, 4); return f;
    case DType::kBF16: std::memcpy(&h, m.bytes.data() + i * 2, 2); return bf16_to_f32(h);
    default: std::memcpy(&h, m.bytes.data() + i * 2, 2); return f16_to_f32(h);
  }
}

/// Bitwise equality of a GPU output with the exact reference: the library's first-mismatch message (coordinate,
/// count, both bit patterns decoded).
::testing::AssertionResult bitwise_equal(const HostMatrix& got, const HostMatrix& want) {
  return qtc::testing::matrices_equal("output", want, got);
}

struct Shapes {
  int64_t a_rows, a_cols, b_rows, b_cols;
};
/// Tensor shapes of A and B for a layout (M tokens, N outputs, K inputs), as in the reference test.
Shapes shapes(ref::GemmKind k, int64_t M, int64_t N, int64_t K) {
  switch (k) {
    case ref::GemmKind::kFprop: return {N, K, M, K};
    case ref::GemmKind::kDgrad: return {N, K, M, N};
    default: return {M, K, M, N};
  }
}

const ref::GemmKind kKinds[] = {ref::GemmKind::kFprop, ref::GemmKind::kDgrad, ref::GemmKind::kWgrad};
const char* kind_name(ref::GemmKind k) {
  return k == ref::GemmKind::kFprop ? "fprop" : (k == ref::GemmKind::kDgrad ? "dgrad" : "wgrad");
}

/// GPU result of gemm() for host operands, as a host matrix.
HostMatrix run_gpu(GemmContext& ctx, const QuantizedTensor& A, const QuantizedTensor& B, const ref::GemmArgs& args,
                   bool row_scaled = false) {
  const ref::ResolvedGemm dims = row_scaled ? ref::ResolvedGemm{} : ref::resolve_gemm(A, B, args);
  const DeviceQuantized da = from_host(A, ctx.stream()), db = from_host(B, ctx.stream());
  const int64_t n = row_scaled ? (args.transb ? B.cols : B.rows) : dims.b.rows;
  const int64_t m = row_scaled ? (args.transa ? A.rows : A.cols) : dims.a.rows;
  DeviceGemmArgs d;
  d.transa = args.transa;
  d.transb = args.transb;
  d.alpha = args.alpha;
  d.beta = args.beta;
  d.out = args.out;
  std::optional<DeviceArray> c, bias;
  if (args.c != nullptr) {
    c.emplace(*args.c, ctx.stream());
    d.c = c->buf.data();
  }
  HostMatrix bias_h;
  if (!args.bias.empty()) {
    // cuBLASLt's FP8 table: with F32 output the bias is BF16 (gemm.hpp, DeviceGemmArgs::bias)
    const bool fp8 = A.recipe.kind() == RecipeKind::kFP8Tensor || A.recipe.kind() == RecipeKind::kFP8Block;
    bias_h = HostMatrix(fp8 && args.out == DType::kF32 ? DType::kBF16 : args.out, 1, m);
    for (int64_t j = 0; j < m; ++j) bias_h.set(0, j, args.bias[static_cast<size_t>(j)]);
    bias.emplace(bias_h, ctx.stream());
    d.bias = bias->buf.data();
  }
  DeviceBuffer out(static_cast<size_t>(n * m) * dtype_size(args.out), ctx.stream());
  if (row_scaled)
    gemm_nvfp4_row_scaled(ctx, da, db, d, out.data());
  else
    gemm(ctx, da, db, d, out.data());
  QTC_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  return download(out, args.out, n, m);
}

constexpr int64_t kM = 256, kN = 384, kK = 512;

// ------------------------------------------------------------------------------------------------
// Bitwise on exact inputs

TEST(GemmCudaExact, Fp8TensorAllLayoutsAndOutputs) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmFp8Tensor);
  GemmContext ctx;
  std::mt19937_64 g(seed());
  for (ref::GemmKind k : kKinds)
    for (DType out : {DType::kF32, DType::kBF16})
      for (Fp8Type tb : {Fp8Type::kE4M3, Fp8Type::kE5M2}) {
        SCOPED_TRACE(std::string(kind_name(k)) + (out == DType::kF32 ? " F32" : " BF16") +
                     (tb == Fp8Type::kE4M3 ? " E4M3xE4M3" : " E4M3xE5M2") + " seed " + std::to_string(seed()));
        const Shapes s = shapes(k, kM, kN, kK);
        const QuantizedTensor a = exact_fp8_tensor(s.a_rows, s.a_cols, Fp8Type::kE4M3, g);
        const QuantizedTensor b = exact_fp8_tensor(s.b_rows, s.b_cols, tb, g);
        const ref::GemmArgs args = ref::GemmArgs::of(k, out);
        EXPECT_TRUE(bitwise_equal(run_gpu(ctx, a, b, args), ref::gemm_exact(a, b, args)));
      }
}

/// alpha and beta·C, or alpha and bias: separate tests, so a refused epilogue names itself.
void fp8_epilogue_case(bool with_c, bool with_bias) {
  GemmContext ctx;
  std::mt19937_64 g(seed() + 1);
  for (DType out : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(out == DType::kF32 ? "F32" : "BF16");
    const QuantizedTensor a = exact_fp8_tensor(kN, kK, Fp8Type::kE4M3, g), b = exact_fp8_tensor(kM, kK, Fp8Type::kE4M3, g);
    ref::GemmArgs args = ref::GemmArgs::of(ref::GemmKind::kFprop, out);
    args.alpha = 0.5f;
    HostMatrix c(out, kM, kN);
    if (with_c) {
      args.beta = 2.0f;
      for (int64_t i = 0; i < kM; ++i)
        for (int64_t j = 0; j < kN; ++j) c.set(i, j, small_value(g));
      args.c = &c;
    }
    if (with_bias) {
      args.bias.resize(kN);
      for (auto& v : args.bias) v = small_value(g);
    }
    EXPECT_TRUE(bitwise_equal(run_gpu(ctx, a, b, args), ref::gemm_exact(a, b, args)));
  }
}

TEST(GemmCudaExact, Fp8TensorAlphaAndBetaC) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmFp8Tensor);
  fp8_epilogue_case(true, false);
}

TEST(GemmCudaExact, Fp8TensorAlphaAndBias) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmFp8Tensor);
  fp8_epilogue_case(false, true);
}

TEST(GemmCudaExact, Fp8BlockEveryAcceptedMix) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmFp8Block);
  GemmContext ctx;
  std::mt19937_64 g(seed() + 2);
  const std::pair<bool, bool> mixes[] = {{true, false}, {false, false}, {false, true}};  // (A 2D, B 2D)
  for (auto [a2, b2] : mixes)
    for (ref::GemmKind k : kKinds)
      for (DType out : {DType::kF32, DType::kBF16}) {
        SCOPED_TRACE(std::string(kind_name(k)) + (a2 ? " 128x128" : " 1x128") + (b2 ? " x 128x128" : " x 1x128") +
                     (out == DType::kF32 ? " F32" : " BF16"));
        const Shapes s = shapes(k, kM, kN, kK);
        const QuantizedTensor a = exact_fp8_block(s.a_rows, s.a_cols, a2, g), b = exact_fp8_block(s.b_rows, s.b_cols, b2, g);
        const ref::GemmArgs args = ref::GemmArgs::of(k, out);
        EXPECT_TRUE(bitwise_equal(run_gpu(ctx, a, b, args), ref::gemm_exact(a, b, args)));
      }
}

/// amax_b for which the NVFP4 alpha with amax_a = 1 is a power of two, so BF16 output is one rounding.
float pow2_alpha_amax() {
  const float f = 1.0f / 7225344.0f;
  for (int j = -4; j <= 4; ++j) {
    float x = std::ldexp(1.0f, j) / f;
    for (int t = 0; t < 8; ++t, x = std::nextafter(x, 0.0f)) {
      const float al = ref::nvfp4_gemm_alpha(1.0f, 1.0f, x, 448, 448);
      int e = 0;
      if (std::frexp(al, &e) == 0.5f) return x;
    }
  }
  return 0.0f;
}

TEST(GemmCudaExact, Nvfp4AllLayouts) {
  QTC_GPU_GATE_FEATURE(device_reason(), nvfp4_gemm_support());
  GemmContext ctx;
  std::mt19937_64 g(seed() + 3);
  const float pow2_amax = pow2_alpha_amax();
  ASSERT_NE(pow2_amax, 0.0f);
  for (ref::GemmKind k : kKinds)
    for (DType out : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::string(kind_name(k)) + (out == DType::kF32 ? " F32" : " BF16"));
      const Shapes s = shapes(k, kM, kN, kK);
      // F32: arbitrary amaxes (alpha·S rounds once in FP32 on both sides); BF16: alpha a power of two.
      const float aa = out == DType::kF32 ? 1234.5f : 1.0f, ab = out == DType::kF32 ? 77.25f : pow2_amax;
      const QuantizedTensor a = exact_nvfp4(s.a_rows, s.a_cols, g, aa, aa), b = exact_nvfp4(s.b_rows, s.b_cols, g, ab, ab);
      const ref::GemmArgs args = ref::GemmArgs::of(k, out);
      EXPECT_TRUE(bitwise_equal(run_gpu(ctx, a, b, args), ref::gemm_exact(a, b, args)));
    }
}

// The emulated NVFP4 GEMM (Hopper) decodes its operands through the planes' ScaleGeometry: every scale layout an
// NVFP4 plane has, FlashInfer's 8x4 one included, gives the exact reference's bits. (Where the native cuBLASLt path
// runs, it takes the 128x4 swizzle only: Nvfp4AllLayouts covers it.)
TEST(GemmCudaExact, Nvfp4EmulatedReadsEveryScaleLayout) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmNvfp4Emulated);
  if (device_supports(gating::Feature::kGemmNvfp4).supported) GTEST_SKIP() << "native NVFP4 GEMM here: it reads swizzled_128x4 only";
  GemmContext ctx;
  std::mt19937_64 g(seed() + 13);
  for (ScaleLayout lay : {ScaleLayout::kCompact, ScaleLayout::kPadded, ScaleLayout::kSwizzled, ScaleLayout::kSwizzled8x4})
    for (ref::GemmKind k : kKinds) {
      SCOPED_TRACE(std::string(kind_name(k)) + " " + std::string(layout_name(lay)));
      const Shapes s = shapes(k, kM, kN, kK);
      QuantizedTensor a = exact_nvfp4(s.a_rows, s.a_cols, g, 1234.5f, 1234.5f), b = exact_nvfp4(s.b_rows, s.b_cols, g, 77.25f, 77.25f);
      ref::convert_layout(a, lay);
      ref::convert_layout(b, lay);
      const ref::GemmArgs args = ref::GemmArgs::of(k, DType::kF32);
      EXPECT_TRUE(bitwise_equal(run_gpu(ctx, a, b, args), ref::gemm_exact(a, b, args)));
    }
}

// MXFP4 on Hopper: exact BF16 decode + BF16 GEMM (gemm.mxfp4_emulated_bf16); natively where gemm.mxfp4 holds.
// Elements from the E2M1 grid with block amax 3 or 6: every decoded value is exact and every sum of products is an
// integer multiple of 2^-2 below 2^24, so FP32 accumulation is exact and the result equals the exact reference.
TEST(GemmCudaExact, Mxfp4AllLayouts) {
  const gating::Support native = device_supports(gating::Feature::kGemmMxfp4);
  QTC_GPU_GATE_FEATURE(device_reason(), native.supported ? native : device_supports(gating::Feature::kGemmMxfp4Emulated));
  GemmContext ctx;
  std::mt19937_64 g(seed() + 11);
  const Recipe r = Recipe::of(Mxfp4Options{.scale_rule = MxScaleRule::kOcpFloor});
  auto exact_mxfp4 = [&](int64_t rows, int64_t cols) {
    HostMatrix x(DType::kF32, rows, cols);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) x.set(i, j, small_value(g));
    QuantizedTensor q = ref::quantize(x.view(), r);
    if (native.supported) ref::convert_layout(q, ScaleLayout::kSwizzled);  // cuBLASLt reads swizzled scales
    return q;
  };
  for (ref::GemmKind k : kKinds)
    for (DType out : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::string(kind_name(k)) + (out == DType::kF32 ? " F32" : " BF16"));
      const Shapes s = shapes(k, kM, kN, kK);
      const QuantizedTensor a = exact_mxfp4(s.a_rows, s.a_cols), b = exact_mxfp4(s.b_rows, s.b_cols);
      const ref::GemmArgs args = ref::GemmArgs::of(k, out);
      EXPECT_TRUE(bitwise_equal(run_gpu(ctx, a, b, args), ref::gemm_exact(a, b, args)));
    }
}

TEST(GemmCudaExact, Nvfp4RowScaledFpropAndWgrad) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmNvfp4RowScaled);
  GemmContext ctx;
  std::mt19937_64 g(seed() + 4);
  for (DType out : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(out == DType::kF32 ? "F32" : "BF16");
    // fprop: X row-scaled [M, K], W per-tensor [N, K]: per-row fused factor, + bias
    QuantizedTensor w = exact_nvfp4(kN, kK, g, 448.0f * 6.0f, 448.0f * 6.0f), x = exact_nvfp4(kM, kK, g, 1.0f, 1.0f);
    make_row_scaled(x, g);
    ref::GemmArgs args = ref::GemmArgs::of(ref::GemmKind::kFprop, out);
    args.bias.resize(kN);
    for (auto& v : args.bias) v = small_value(g);
    EXPECT_TRUE(bitwise_equal(run_gpu(ctx, w, x, args, true), ref::gemm_nvfp4_row_scaled(w, x, args)));
    // wgrad: A = X columnwise (amax per K column), B = dY row-scaled columnwise (per N): two roundings
    QuantizedTensor xa = exact_nvfp4(kM, kK, g, 1.0f, 1.0f), dy = exact_nvfp4(kM, kN, g, 1.0f, 1.0f);
    make_row_scaled(xa, g);
    make_row_scaled(dy, g);
    const ref::GemmArgs wargs = ref::GemmArgs::of(ref::GemmKind::kWgrad, out);
    EXPECT_TRUE(bitwise_equal(run_gpu(ctx, xa, dy, wargs, true), ref::gemm_nvfp4_row_scaled(xa, dy, wargs)));
  }
}

// ------------------------------------------------------------------------------------------------
// Random inputs: error within the path's bound; worst error printed in ULPs next to the bound

struct Bound {
  double per_term;   ///< relative error per accumulated term (FP32 accumulation: 2^-24 per addition)
  double constant;   ///< extra relative error independent of K (Hopper FP8 MMA internal accumulation)
};

void check_random(GemmContext& ctx, const char* path, const Recipe& ra, const Recipe& rb, ref::GemmKind k, DType out,
                  Bound bnd, std::mt19937_64& g) {
  const int64_t M = 256, N = 256, K = 1024;
  const Shapes s = shapes(k, M, N, K);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  auto input = [&](int64_t r, int64_t c) {
    HostMatrix x(DType::kBF16, r, c);
    for (int64_t i = 0; i < r * c; ++i) x.as<uint16_t>()[i] = f32_to_bf16(dn(g) * (1.0f + static_cast<float>(i % 13)));
    return x;
  };
  QuantizedTensor a = ref::quantize(input(s.a_rows, s.a_cols).view(), ra);
  QuantizedTensor b = ref::quantize(input(s.b_rows, s.b_cols).view(), rb);
  if (ra.kind() == RecipeKind::kFP8Block) {
    ref::convert_layout(a, ScaleLayout::kPadded);
    ref::convert_layout(b, ScaleLayout::kPadded);
  }
  const ref::GemmArgs args = ref::GemmArgs::of(k, out);
  const HostMatrix got = run_gpu(ctx, a, b, args);
  QuantizedTensor ac = a, bc = b;
  ref::convert_layout(ac, ScaleLayout::kCompact);
  ref::convert_layout(bc, ScaleLayout::kCompact);
  const ref::ResolvedGemm rg = ref::resolve_gemm(ac, bc, args);
  const HostMatrix want = ref::gemm_exact(rg, args);
  // Σ|alpha·a·b| per output, from the FP64 bound helper (E = γ·S, so S = E/γ).
  const std::vector<double> e = ref::gemm_eigen_error_bound(rg, args);
  const int64_t kred = rg.a.k;  // the reduction length of this layout
  const double nk = static_cast<double>(kred + 3), gamma = nk * 0x1p-53 / (1 - nk * 0x1p-53) * 1.01;
  // Reported in "ULPs of S": the error divided by the output ULP at the magnitude of S = Σ|alpha·a·b|
  // (ULPs of the result itself are meaningless where the sum cancels to near zero).
  double worst = 0, worst_bound = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double x = at(want, i), y = at(got, i);
    const double sabs = e[static_cast<size_t>(i)] / gamma;
    const double ulp = ref::ulp_of(out, std::max(std::fabs(x), std::fabs(y)));
    const double bound = ulp + (bnd.per_term * static_cast<double>(kred) + bnd.constant) * sabs;
    const double err = std::fabs(x - y);
    const double ulp_s = ref::ulp_of(out, std::max(sabs, std::fabs(x)));
    if (err / ulp_s > worst) {
      worst = err / ulp_s;
      worst_bound = bound / ulp_s;
    }
    if (err > bound && bad++ < 4)
      ADD_FAILURE() << path << " " << kind_name(k) << ": (" << i / want.cols << ", " << i % want.cols << ") gpu " << y
                    << " exact " << x << " err " << err << " > bound " << bound << " (S = " << sabs << ")";
  }
  EXPECT_EQ(bad, 0);
  std::printf("GEMMERR path=%s layout=%s out=%s k=%lld worst_ulps_of_S=%.3f bound_ulps_of_S=%.3f\n", path, kind_name(k),
              out == DType::kF32 ? "F32" : "BF16", static_cast<long long>(kred), worst, worst_bound);
}

// FP32 accumulation: one rounding per addition (2^-24 relative each) plus the alpha/epilogue rounding.
constexpr Bound kFp32Acc{0x1p-24, 0x1p-23};
// Hopper's FP8 MMA adds each 32-deep k-step into an accumulator that keeps about 14 significant bits
// (DeepSeek-V3 report, §3.3.2) before cuBLAS promotes to FP32 (FAST_ACCUM = 0): up to 2^-13 of |S| per
// k-step, i.e. 2^-13/32 = 2^-18 per term. The first H200 run measured up to about 2^-11.3·|S| at k = 256
// (dgrad/wgrad), beyond the 2^-13 constant assumed before; 2^-18·k covers it (2^-10 at k = 256).
constexpr Bound kFp8Hopper{0x1p-18, 0x1p-23};

TEST(GemmCudaRandom, Fp8TensorWithinBound) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmFp8Tensor);
  GemmContext ctx;
  std::mt19937_64 g(seed() + 10);
  Recipe r = Recipe::of(Fp8TensorOptions{});
  for (ref::GemmKind k : kKinds) check_random(ctx, "fp8_tensor", r, r, k, DType::kF32, kFp8Hopper, g);
  check_random(ctx, "fp8_tensor", r, r, ref::GemmKind::kFprop, DType::kBF16, kFp8Hopper, g);
}

TEST(GemmCudaRandom, Fp8BlockWithinBound) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmFp8Block);
  GemmContext ctx;
  std::mt19937_64 g(seed() + 11);
  const Recipe r1 = Recipe::of(Fp8BlockOptions{}), r2 = Recipe::of(Fp8BlockOptions{.tile_2d = true});
  for (ref::GemmKind k : kKinds) check_random(ctx, "fp8_block_2dx1d", r2, r1, k, DType::kF32, kFp8Hopper, g);
  check_random(ctx, "fp8_block_1dx1d", r1, r1, ref::GemmKind::kFprop, DType::kBF16, kFp8Hopper, g);
}

TEST(GemmCudaRandom, Nvfp4WithinBound) {
  QTC_GPU_GATE_FEATURE(device_reason(), nvfp4_gemm_support());
  GemmContext ctx;
  std::mt19937_64 g(seed() + 12);
  Recipe r = Recipe::of(Nvfp4Options{});
  for (ref::GemmKind k : kKinds) check_random(ctx, "nvfp4", r, r, k, DType::kF32, kFp32Acc, g);
  check_random(ctx, "nvfp4", r, r, ref::GemmKind::kFprop, DType::kBF16, kFp32Acc, g);
}

// ------------------------------------------------------------------------------------------------
// Grouped row-scaled NVFP4 fprop (MoE)

/// Rows [r0, r0 + n) of a row-scaled NVFP4 rowwise-only tensor, as its own tensor (row-scaled quantization
/// is row-independent, so this is what quantizing the group alone gives).
QuantizedTensor slice_rows(const QuantizedTensor& q, int64_t r0, int64_t n) {
  QuantizedTensor s;
  s.recipe = q.recipe;
  s.rows = n;
  s.cols = q.cols;
  if (n == 0) return s;
  Plane p;
  const Plane& src = *q.rowwise;
  p.data_rows = n;
  p.data_cols = src.data_cols;
  p.data.assign(src.data.begin() + r0 * src.data_cols, src.data.begin() + (r0 + n) * src.data_cols);
  p.scale = src.scale;
  p.scale.rows = n;
  p.scale.bytes.assign(src.scale.bytes.begin() + r0 * src.scale.cols, src.scale.bytes.begin() + (r0 + n) * src.scale.cols);
  p.amax.assign(src.amax.begin() + r0, src.amax.begin() + r0 + n);
  s.rowwise = p;
  return s;
}

TEST(GemmCudaGrouped, Nvfp4RowScaledFpropEqualsPerGroupReference) {
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmGroupedNvfp4RowScaled);
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmNvfp4Emulated);
  GemmContext ctx;
  std::mt19937_64 g(seed() + 20);
  const int64_t N = 128, K = 256, cap = 256;
  // uneven groups, an empty one, gaps between groups (capacity padding), sizes summing to fewer rows
  ref::GroupedRows rows;
  rows.first_dims = {32, 0, 48, 16, 64};
  rows.tensor_offsets = {0, 40 * K, 40 * K, 96 * K, 160 * K};
  rows.last_dim = K;
  rows.capacity = cap;
  QuantizedTensor x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
  make_row_scaled(x, g);
  x.columnwise.reset();
  x.recipe.columnwise = false;
  std::vector<QuantizedTensor> wq, xq;
  for (int64_t i = 0; i < rows.groups(); ++i) {
    QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f * std::ldexp(1.0f, static_cast<int>(i) - 2), 1.0f);
    w.columnwise.reset();
    wq.push_back(w);
    xq.push_back(slice_rows(x, rows.row_offset(i), rows.first_dims[static_cast<size_t>(i)]));
  }
  for (DType out : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(out == DType::kF32 ? "F32" : "BF16");
    HostMatrix want(out, cap, N);
    std::fill(want.bytes.begin(), want.bytes.end(), 0x3F);  // sentinel in the padding rows
    ref::GemmArgs args = ref::GemmArgs::of(ref::GemmKind::kFprop, out);
    ref::gemm_nvfp4_row_scaled_grouped_fprop(wq, xq, rows, args, want);

    const DeviceQuantized dx = from_host(x, ctx.stream());
    std::vector<DeviceQuantized> dw;
    std::vector<const DeviceQuantized*> dwp;
    for (const auto& w : wq) dw.push_back(from_host(w, ctx.stream()));
    for (const auto& w : dw) dwp.push_back(&w);
    GroupedRowsDevice gr;
    gr.first_dims = rows.first_dims;
    for (int64_t i = 0; i < rows.groups(); ++i) gr.row_offsets.push_back(rows.row_offset(i));
    gr.capacity = cap;
    DeviceBuffer d_fd(8 * gr.first_dims.size(), ctx.stream()), d_off(8 * gr.row_offsets.size(), ctx.stream());
    QTC_CUDA_CHECK(cudaMemcpy(d_fd.data(), gr.first_dims.data(), d_fd.bytes(), cudaMemcpyHostToDevice));
    QTC_CUDA_CHECK(cudaMemcpy(d_off.data(), gr.row_offsets.data(), d_off.bytes(), cudaMemcpyHostToDevice));
    gr.d_first_dims = d_fd.as<int64_t>();
    gr.d_row_offsets = d_off.as<int64_t>();
    DeviceBuffer d(want.bytes.size(), ctx.stream());
    QTC_CUDA_CHECK(cudaMemset(d.data(), 0x3F, d.bytes()));
    gemm_nvfp4_row_scaled_grouped_fprop(ctx, dwp, dx, gr, out, d.data());
    QTC_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    const HostMatrix got = download(d, out, cap, N);
    EXPECT_TRUE(bitwise_equal(got, want));  // padding rows: the sentinel, untouched
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isfinite(at(got, i))) << "output " << i << " not finite";
  }
}

// ------------------------------------------------------------------------------------------------
// Grouped NVFP4 quantization with device group sizes, captured once in a CUDA graph and replayed

/// A non-blocking stream destroyed (after a synchronisation) when it goes out of scope: declare it before
/// the buffers made on it, so they are freed while it is alive.
struct OwnedStream {
  cudaStream_t s = nullptr;
  OwnedStream() { QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~OwnedStream() {
    (void)cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
};

TEST(GroupedQuantizeCuda, GraphCapturedReplayWithDifferentGroupSizes) {
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t cap = 512, K = 128, G = 5;
  std::mt19937_64 g(seed() + 30);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  HostMatrix x(DType::kBF16, cap, K);
  for (int64_t i = 0; i < cap * K; ++i) x.as<uint16_t>()[i] = f32_to_bf16(dn(g) * (1.0f + static_cast<float>(i % 7)));
  // The stream outlives every buffer made on it: a DeviceBuffer frees with cudaFreeAsync on its stream, and
  // freeing on a destroyed stream (buffers declared after a raw stream, destroyed after cudaStreamDestroy at
  // the end of the scope) was the segmentation fault of the first H200 run.
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  DeviceBuffer dx(x.bytes.size(), st), d_fd(G * 8, st), d_off(G * 8, st);
  QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
  for (bool row_scaled : {false, true}) {
    SCOPED_TRACE(row_scaled ? "row-scaled" : "per-tensor per group");
    DeviceGroupedNvfp4 out = allocate_grouped_nvfp4(cap, K, G, row_scaled, st);
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    QTC_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    quantize_grouped_nvfp4_into({dx.data(), DType::kBF16, cap, K}, d_fd.as<int64_t>(), d_off.as<int64_t>(), out, st);
    QTC_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    QTC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    // two replays with different sizes: uneven + empty + fewer rows than the buffer, then others
    const std::vector<std::vector<int64_t>> size_sets{{32, 0, 96, 16, 64}, {128, 64, 0, 160, 32}};
    for (const auto& sizes : size_sets) {
      std::vector<int64_t> offs(G);
      for (int64_t i = 0, o = 0; i < G; o += sizes[static_cast<size_t>(i)] + 16, ++i) offs[static_cast<size_t>(i)] = o;  // gaps of 16 rows
      QTC_CUDA_CHECK(cudaMemcpyAsync(d_fd.data(), sizes.data(), G * 8, cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(d_off.data(), offs.data(), G * 8, cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaGraphLaunch(exec, st));
      std::vector<uint8_t> data(out.data.bytes()), scale(out.scale.bytes());
      std::vector<float> amax(out.amax.bytes() / 4);
      QTC_CUDA_CHECK(cudaMemcpyAsync(data.data(), out.data.data(), data.size(), cudaMemcpyDeviceToHost, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(scale.data(), out.scale.data(), scale.size(), cudaMemcpyDeviceToHost, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(amax.data(), out.amax.data(), amax.size() * 4, cudaMemcpyDeviceToHost, st));
      QTC_CUDA_CHECK(cudaStreamSynchronize(st));
      ref::GroupedRows rows;
      rows.first_dims = sizes;
      for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
      rows.last_dim = K;
      rows.capacity = cap;
      Recipe r = Recipe::of(Nvfp4Options{.row_scaled = row_scaled});
      r.columnwise = false;
      const auto want = ref::quantize_grouped(x.view(), rows, r);
      for (int64_t gi = 0; gi < G; ++gi) {
        const int64_t n = sizes[static_cast<size_t>(gi)], o = offs[static_cast<size_t>(gi)];
        if (n == 0) continue;
        const Plane& p = *want[static_cast<size_t>(gi)].rowwise;
        EXPECT_EQ(std::memcmp(data.data() + o * K / 2, p.data.data(), p.data.size()), 0) << "group " << gi << " data";
        EXPECT_EQ(std::memcmp(scale.data() + o * K / 16, p.scale.bytes.data(), p.scale.bytes.size()), 0)
            << "group " << gi << " scales";
        for (int64_t i = 0; i < static_cast<int64_t>(p.amax.size()); ++i)
          EXPECT_EQ(amax[static_cast<size_t>(row_scaled ? o + i : gi)], p.amax[static_cast<size_t>(i)]) << "group " << gi << " amax " << i;
      }
    }
    QTC_CUDA_CHECK(cudaGraphExecDestroy(exec));
    QTC_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
}

TEST(GroupedQuantizeCuda, StridedViewOfTheGroupSizeArray) {
  // sizes and offsets interleaved in one [G, 2] int64 tensor: each is a stride-2 view
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t cap = 256, K = 64, G = 4;
  std::mt19937_64 g(seed() + 31);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  HostMatrix x(DType::kF32, cap, K);
  for (int64_t i = 0; i < cap * K; ++i) x.as<float>()[i] = dn(g);
  const std::vector<int64_t> sizes{48, 0, 16, 96}, offs{0, 48, 64, 96};
  std::vector<int64_t> inter;
  for (int64_t i = 0; i < G; ++i) inter.insert(inter.end(), {sizes[static_cast<size_t>(i)], offs[static_cast<size_t>(i)]});
  DeviceBuffer dx(x.bytes.size(), nullptr), dint(inter.size() * 8, nullptr);
  QTC_CUDA_CHECK(cudaMemcpy(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice));
  QTC_CUDA_CHECK(cudaMemcpy(dint.data(), inter.data(), dint.bytes(), cudaMemcpyHostToDevice));
  DeviceGroupedNvfp4 out = allocate_grouped_nvfp4(cap, K, G, /*row_scaled=*/false, nullptr);
  quantize_grouped_nvfp4_into({dx.data(), DType::kF32, cap, K}, dint.as<int64_t>(), dint.as<int64_t>() + 1, out, nullptr, 2);
  std::vector<uint8_t> data(out.data.bytes());
  std::vector<float> amax(G);
  QTC_CUDA_CHECK(cudaMemcpy(data.data(), out.data.data(), data.size(), cudaMemcpyDeviceToHost));
  QTC_CUDA_CHECK(cudaMemcpy(amax.data(), out.amax.data(), G * 4, cudaMemcpyDeviceToHost));
  ref::GroupedRows rows = ref::GroupedRows::packed(sizes, K, cap);
  for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);  // the offsets the device read (not packed)
  Recipe r = Recipe::of(Nvfp4Options{});
  r.columnwise = false;
  const auto want = ref::quantize_grouped(x.view(), rows, r);
  for (int64_t gi = 0; gi < G; ++gi) {
    if (sizes[static_cast<size_t>(gi)] == 0) continue;
    const Plane& p = *want[static_cast<size_t>(gi)].rowwise;
    EXPECT_EQ(std::memcmp(data.data() + offs[static_cast<size_t>(gi)] * K / 2, p.data.data(), p.data.size()), 0) << "group " << gi;
    EXPECT_EQ(amax[static_cast<size_t>(gi)], p.amax[0]) << "group " << gi;
  }
  EXPECT_THROW(quantize_grouped_nvfp4_into({dx.data(), DType::kF32, cap, K}, dint.as<int64_t>(), dint.as<int64_t>() + 1, out,
                                           nullptr, 0),
               qtc::Error);
}

// ------------------------------------------------------------------------------------------------
// Grouped quantization, every grouped recipe (quantize_grouped_into), captured in a CUDA graph

struct GroupCase {
  const char* name;
  Recipe r;
  ScaleLayout layout;
};

std::vector<GroupCase> grouped_recipes() {
  std::vector<GroupCase> v;
  auto add = [&](const char* n, RecipeKind k, ScaleLayout l, auto&& tweak) {
    Recipe r;
    r.set_options(Recipe::default_options(k));
    r.columnwise = false;
    tweak(r);
    v.push_back({n, r, l});
  };
  add("nvfp4 per-tensor compact", RecipeKind::kNVFP4, ScaleLayout::kCompact, [](Recipe&) {});
  add("nvfp4 per-tensor swizzled", RecipeKind::kNVFP4, ScaleLayout::kSwizzled, [](Recipe&) {});
  add("nvfp4 row-scaled swizzled", RecipeKind::kNVFP4, ScaleLayout::kSwizzled, [](Recipe& r) { r.nvfp4().row_scaled = true; });
  add("mxfp8 e4m3 compact", RecipeKind::kMXFP8, ScaleLayout::kCompact, [](Recipe&) {});
  add("mxfp8 e5m2 swizzled", RecipeKind::kMXFP8, ScaleLayout::kSwizzled, [](Recipe& r) { r.set_fp8_type(Fp8Type::kE5M2); });
  add("mxfp8 e4m3 ocp floor swizzled", RecipeKind::kMXFP8, ScaleLayout::kSwizzled,
      [](Recipe& r) { r.mxfp8().scale_rule = MxScaleRule::kOcpFloor; });
  add("fp8 tensor e4m3", RecipeKind::kFP8Tensor, ScaleLayout::kCompact, [](Recipe&) {});
  add("fp8 block 1x128", RecipeKind::kFP8Block, ScaleLayout::kCompact, [](Recipe&) {});
  add("fp8 block 1x128 pow2", RecipeKind::kFP8Block, ScaleLayout::kCompact, [](Recipe& r) { r.set_pow2_scales(true); });
  return v;
}

template <typename T>
std::vector<T> to_host_vec(const DeviceBuffer& b, cudaStream_t st) {
  std::vector<T> h(b.bytes() / sizeof(T));
  if (!h.empty()) QTC_CUDA_CHECK(cudaMemcpyAsync(h.data(), b.data(), h.size() * sizeof(T), cudaMemcpyDeviceToHost, st));
  return h;
}

/// Compares every group of a grouped quantization with quantizing the group alone (reference), and checks
/// that rows in no group kept the sentinel byte of the data buffer.
void expect_groups_equal(const GroupCase& c, const HostMatrix& x, const std::vector<int64_t>& sizes,
                         const std::vector<int64_t>& offs, const DeviceGroupedQuantized& out, uint8_t sentinel,
                         cudaStream_t st) {
  const int64_t K = x.cols, cap = x.rows, G = static_cast<int64_t>(sizes.size());
  const auto data = to_host_vec<uint8_t>(out.data, st);
  const auto scale = to_host_vec<uint8_t>(out.scale, st);
  const auto amax = to_host_vec<float>(out.amax, st);
  const auto sinv = to_host_vec<float>(out.scale_inv, st);
  const auto soff = to_host_vec<int64_t>(out.scale_offsets, st);
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  ref::GroupedRows rows;
  rows.first_dims = sizes;
  for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
  rows.last_dim = K;
  rows.capacity = cap;
  const auto want = ref::quantize_grouped(x.view(), rows, c.r);
  const int64_t row_bytes = c.r.kind() == RecipeKind::kNVFP4 ? K / 2 : K;
  std::vector<uint8_t> live(static_cast<size_t>(cap), 0);
  for (int64_t gi = 0; gi < G; ++gi) {
    const int64_t n = sizes[static_cast<size_t>(gi)], o = offs[static_cast<size_t>(gi)];
    for (int64_t i = 0; i < n; ++i) live[static_cast<size_t>(o + i)] = 1;
    if (n == 0) continue;
    QuantizedTensor q = want[static_cast<size_t>(gi)];
    if (c.layout == ScaleLayout::kSwizzled) ref::convert_layout(q, ScaleLayout::kSwizzled);
    const Plane& p = *q.rowwise;
    EXPECT_EQ(std::memcmp(data.data() + o * row_bytes, p.data.data(), p.data.size()), 0) << c.name << " group " << gi << " data";
    if (c.r.kind() != RecipeKind::kFP8Tensor) {
      const size_t at = c.layout == ScaleLayout::kSwizzled ? static_cast<size_t>(soff[static_cast<size_t>(gi)])
                                                           : static_cast<size_t>(o * out.scale_cols) * p.scale.elem_size();
      ASSERT_LE(at + p.scale.bytes.size(), scale.size()) << c.name << " group " << gi;
      EXPECT_EQ(std::memcmp(scale.data() + at, p.scale.bytes.data(), p.scale.bytes.size()), 0)
          << c.name << " group " << gi << " scales (" << p.scale.bytes.size() << " bytes at " << at << ")";
    }
    if (c.r.kind() == RecipeKind::kNVFP4) {
      for (int64_t i = 0; i < static_cast<int64_t>(p.amax.size()); ++i) {
        EXPECT_EQ(amax[static_cast<size_t>(c.r.nvfp4_row_scaled() ? o + i : gi)], p.amax[static_cast<size_t>(i)])
            << c.name << " group " << gi << " amax " << i;
      }
    }
    if (c.r.kind() == RecipeKind::kFP8Tensor) {
      EXPECT_EQ(amax[static_cast<size_t>(gi)], p.amax[0]) << c.name << " group " << gi << " amax";
      EXPECT_EQ(sinv[static_cast<size_t>(gi)], q.scale_inv) << c.name << " group " << gi << " scale_inv";
    }
  }
  int64_t touched = 0;
  for (int64_t r = 0; r < cap; ++r)
    if (!live[static_cast<size_t>(r)])
      for (int64_t j = 0; j < row_bytes; ++j) touched += data[static_cast<size_t>(r * row_bytes + j)] != sentinel;
  EXPECT_EQ(touched, 0) << c.name << ": bytes of rows in no group were written";
}

HostMatrix random_input(DType t, int64_t rows, int64_t cols, std::mt19937_64& g) {
  std::normal_distribution<float> dn(0.0f, 1.0f);
  HostMatrix x(t, rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) x.set(i / cols, i % cols, dn(g) * (1.0f + static_cast<float>(i % 7)));
  return x;
}

TEST(GroupedQuantizeCuda, EveryGroupedRecipeEqualsEachGroupAloneUnderGraphReplay) {
  // Captured once per recipe, replayed with two size sets (uneven, empty, gaps, fewer rows than the buffer);
  // K = 160: not a multiple of 128 (a partial FP8 block), two scale columns of padding in the swizzled NVFP4 tiles.
  // Sizes are multiples of 16 (NVFP4's M % 16, a caller contract: the sizes live on the device); odd sizes for
  // the other recipes are in MoreThan64GroupsAndLastDimNotMultipleOf128.
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t cap = 512, K = 160, G = 5;
  std::mt19937_64 g(seed() + 32);
  const HostMatrix x = random_input(DType::kBF16, cap, K, g);
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  DeviceBuffer dx(x.bytes.size(), st), d_fd(G * 8, st), d_off(G * 8, st);
  QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
  const std::vector<std::vector<int64_t>> size_sets{{32, 0, 96, 16, 64}, {128, 64, 0, 144, 32}};
  for (const GroupCase& c : grouped_recipes()) {
    SCOPED_TRACE(c.name);
    DeviceGroupedQuantized out = allocate_grouped(c.r, DType::kBF16, cap, K, G, c.layout, st);
    QTC_CUDA_CHECK(cudaMemsetAsync(out.data.data(), 0xA5, out.data.bytes(), st));
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    QTC_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    quantize_grouped_into({dx.data(), DType::kBF16, cap, K}, d_fd.as<int64_t>(), d_off.as<int64_t>(), out, st);
    QTC_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    QTC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (const auto& sizes : size_sets) {
      std::vector<int64_t> offs(G);
      for (int64_t i = 0, o = 0; i < G; o += sizes[static_cast<size_t>(i)] + 16, ++i) offs[static_cast<size_t>(i)] = o;
      QTC_CUDA_CHECK(cudaMemcpyAsync(d_fd.data(), sizes.data(), G * 8, cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(d_off.data(), offs.data(), G * 8, cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemsetAsync(out.data.data(), 0xA5, out.data.bytes(), st));
      QTC_CUDA_CHECK(cudaGraphLaunch(exec, st));
      expect_groups_equal(c, x, sizes, offs, out, 0xA5, st);
    }
    QTC_CUDA_CHECK(cudaGraphExecDestroy(exec));
    QTC_CUDA_CHECK(cudaGraphDestroy(graph));
  }
}

TEST(GroupedQuantizeCuda, MoreThan64GroupsAndLastDimNotMultipleOf128) {
  // TE's fused grouped kernels take <= 64 tensors and K % 128 (§1.13); here 70 groups and K = 80 (a partial
  // MXFP8 block, a partial FP8 block) must give the per-group result.
  // Sizes 0..12 rows (odd ones included) for MXFP8 and FP8; 16x that for NVFP4 (M % 16).
  QTC_REQUIRE_FEATURE(gating::Feature::kQuantizeGrouped);
  const int64_t G = 70, K = 80;
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  for (const GroupCase& c : grouped_recipes()) {
    SCOPED_TRACE(c.name);
    const int64_t mult = c.r.kind() == RecipeKind::kNVFP4 ? 16 : 1;
    std::vector<int64_t> sizes(G), offs(G);
    int64_t cap = 0;
    for (int64_t i = 0; i < G; ++i) {
      sizes[static_cast<size_t>(i)] = mult * ((i * 7) % 13);  // several empty
      offs[static_cast<size_t>(i)] = cap;
      cap += sizes[static_cast<size_t>(i)];
    }
    std::mt19937_64 g(seed() + 33);
    const HostMatrix x = random_input(DType::kF32, cap, K, g);
    DeviceBuffer dx(x.bytes.size(), st), d_fd(G * 8, st), d_off(G * 8, st);
    QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(d_fd.data(), sizes.data(), G * 8, cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(d_off.data(), offs.data(), G * 8, cudaMemcpyHostToDevice, st));
    DeviceGroupedQuantized out = allocate_grouped(c.r, DType::kF32, cap, K, G, c.layout, st);
    quantize_grouped_into({dx.data(), DType::kF32, cap, K}, d_fd.as<int64_t>(), d_off.as<int64_t>(), out, st);
    expect_groups_equal(c, x, sizes, offs, out, 0, st);
  }
}

TEST(GroupedQuantizeCuda, RefusedRecipesNameTheRule) {
  Recipe r;
  r.set_options(Nvfp4Options{});  // columnwise by default
  EXPECT_NE(grouped_unsupported_reason(r, 128, ScaleLayout::kCompact).find("rowwise plane only"), std::string::npos);
  r.columnwise = false;
  EXPECT_EQ(grouped_unsupported_reason(r, 128, ScaleLayout::kCompact), "");
  EXPECT_NE(grouped_unsupported_reason(r, 120, ScaleLayout::kCompact).find("multiple of 16"), std::string::npos);
  r.set_options(Fp8BlockOptions{});
  r.fp8_block().tile_2d = true;
  EXPECT_NE(grouped_unsupported_reason(r, 128, ScaleLayout::kCompact).find("128x128"), std::string::npos);
}

// ------------------------------------------------------------------------------------------------
// Grouped GEMM: the named cases (rejections before any work, listed/mixed fallback, > 64 groups, wgrad)

struct GroupedFixture {
  GemmContext ctx;
  ref::GroupedRows rows;
  QuantizedTensor x;                       ///< contiguous row-scaled [cap, K]
  std::vector<QuantizedTensor> wq, xq;     ///< host weights, per-group slices of x
  DeviceQuantized dx;
  std::vector<DeviceQuantized> dw;
  std::vector<const DeviceQuantized*> dwp;
  GroupedRowsDevice gr;
  DeviceBuffer d_fd, d_off;

  GroupedFixture(std::vector<int64_t> sizes, std::vector<int64_t> offs, int64_t cap, int64_t N, int64_t K, uint64_t s) {
    std::mt19937_64 g(s);
    rows.first_dims = sizes;
    for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
    rows.last_dim = K;
    rows.capacity = cap;
    x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
    make_row_scaled(x, g);
    x.columnwise.reset();
    x.recipe.columnwise = false;
    for (int64_t i = 0; i < rows.groups(); ++i) {
      QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f * std::ldexp(1.0f, static_cast<int>(i % 5) - 2), 1.0f);
      w.columnwise.reset();
      wq.push_back(w);
      xq.push_back(slice_rows(x, rows.row_offset(i), rows.first_dims[static_cast<size_t>(i)]));
    }
    dx = from_host(x, ctx.stream());
    for (const auto& w : wq) dw.push_back(from_host(w, ctx.stream()));
    for (const auto& w : dw) dwp.push_back(&w);
    gr.first_dims = rows.first_dims;
    for (int64_t i = 0; i < rows.groups(); ++i) gr.row_offsets.push_back(rows.row_offset(i));
    gr.capacity = cap;
    d_fd = DeviceBuffer(8 * gr.first_dims.size(), ctx.stream());
    d_off = DeviceBuffer(8 * gr.row_offsets.size(), ctx.stream());
    QTC_CUDA_CHECK(cudaMemcpy(d_fd.data(), gr.first_dims.data(), d_fd.bytes(), cudaMemcpyHostToDevice));
    QTC_CUDA_CHECK(cudaMemcpy(d_off.data(), gr.row_offsets.data(), d_off.bytes(), cudaMemcpyHostToDevice));
    gr.d_first_dims = d_fd.as<int64_t>();
    gr.d_row_offsets = d_off.as<int64_t>();
  }
};

#define QTC_REQUIRE_GROUPED_GEMM()                                                                                  \
  do {                                                                                                              \
    QTC_REQUIRE_FEATURE(gating::Feature::kGemmGroupedNvfp4RowScaled);                                               \
    QTC_REQUIRE_FEATURE(gating::Feature::kGemmNvfp4Emulated);                                                       \
  } while (0)

/// The output filled with a sentinel; returns whether a call threw a qtc::Error containing `needle` and left
/// every byte of the output as it was.
void expect_rejected_untouched(const std::function<void(void*)>& call, size_t bytes, const std::string& needle) {
  DeviceBuffer d(bytes, nullptr);
  QTC_CUDA_CHECK(cudaMemset(d.data(), 0x11, bytes));
  try {
    call(d.data());
    ADD_FAILURE() << "accepted; expected a rejection naming \"" << needle << "\"";
  } catch (const qtc::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  QTC_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> h(bytes);
  QTC_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), bytes, cudaMemcpyDeviceToHost));
  int64_t changed = 0;
  for (uint8_t b : h) changed += b != 0x11;
  EXPECT_EQ(changed, 0) << "a rejected call wrote into the output";
}

TEST(GemmCudaGrouped, OutputWidthsDifferRejectedBeforeGemm) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t N = 64, K = 128, cap = 256;
  GroupedFixture f({32, 0, 48, 16, 64}, {0, 40, 40, 96, 160}, cap, N, K, seed() + 40);
  std::mt19937_64 g(seed() + 41);
  QuantizedTensor w4 = exact_nvfp4(N + 32, K, g, 2688.0f, 1.0f);  // expert 4: 96 outputs
  w4.columnwise.reset();
  const DeviceQuantized dw4 = from_host(w4, f.ctx.stream());
  f.dwp[4] = &dw4;
  expect_rejected_untouched(
      [&](void* d) { gemm_nvfp4_row_scaled_grouped_fprop(f.ctx, f.dwp, f.dx, f.gr, DType::kBF16, d); },
      static_cast<size_t>(cap * N) * 2, "output width");
}

TEST(GemmCudaGrouped, ExplicitBetaRejected) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t N = 64, K = 128, cap = 256;
  GroupedFixture f({32, 0, 48, 16, 64}, {0, 40, 40, 96, 160}, cap, N, K, seed() + 42);
  DeviceBuffer c(static_cast<size_t>(cap * N) * 4, nullptr);
  DeviceGemmArgs a = DeviceGemmArgs::of(ref::GemmKind::kFprop, DType::kF32);
  a.beta = 0.5f;
  a.c = c.data();
  expect_rejected_untouched([&](void* d) { gemm_nvfp4_row_scaled_grouped_fprop(f.ctx, f.dwp, f.dx, f.gr, a, d); },
                            static_cast<size_t>(cap * N) * 4, "explicit beta");
}

TEST(GemmCudaGrouped, ListedRowScaledOperandsRejected) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t N = 64, K = 128, cap = 256;
  GroupedFixture f({32, 0, 48, 16, 64}, {0, 40, 40, 96, 160}, cap, N, K, seed() + 43);
  std::vector<DeviceQuantized> dxs;
  for (const auto& q : f.xq) dxs.push_back(q.rows > 0 ? from_host(q, f.ctx.stream()) : DeviceQuantized{});
  for (size_t i = 0; i < dxs.size(); ++i) {
    dxs[i].recipe = f.xq[i].recipe;
    dxs[i].cols = K;
  }
  std::vector<const DeviceQuantized*> xp;
  for (const auto& q : dxs) xp.push_back(&q);
  const DeviceGemmArgs a = DeviceGemmArgs::of(ref::GemmKind::kFprop, DType::kF32);
  expect_rejected_untouched(
      [&](void* d) { gemm_nvfp4_row_scaled_grouped_fprop_listed(f.ctx, f.dwp, xp, f.gr, a, d); },
      static_cast<size_t>(cap * N) * 4, "listed (non-contiguous) row-scaled");
}

TEST(GemmCudaGrouped, MixedRowScaledAndPerTensorGroupsFallBackPerGroup) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t N = 64, K = 128, cap = 256;
  GroupedFixture f({32, 0, 48, 16, 64}, {0, 40, 40, 96, 160}, cap, N, K, seed() + 44);
  std::mt19937_64 g(seed() + 45);
  // group 2 quantized per-tensor (one amax), its neighbours row-scaled
  QuantizedTensor x2 = exact_nvfp4(48, K, g, 2688.0f, 1.0f);
  x2.columnwise.reset();
  x2.recipe.columnwise = false;
  f.xq[2] = x2;
  std::vector<DeviceQuantized> dxs;
  for (const auto& q : f.xq) {
    DeviceQuantized d = q.rows > 0 ? from_host(q, f.ctx.stream()) : DeviceQuantized{};
    d.recipe = q.recipe;
    d.cols = K;
    dxs.push_back(std::move(d));
  }
  std::vector<const DeviceQuantized*> xp;
  for (const auto& q : dxs) xp.push_back(&q);
  const std::vector<float> amax3_before = f.xq[3].rowwise->amax;
  for (DType out : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(out == DType::kF32 ? "F32" : "BF16");
    HostMatrix want(out, cap, N);
    std::fill(want.bytes.begin(), want.bytes.end(), 0x3F);
    ref::gemm_nvfp4_row_scaled_grouped_fprop(f.wq, f.xq, f.rows, ref::GemmArgs::of(ref::GemmKind::kFprop, out), want);
    DeviceBuffer d(want.bytes.size(), nullptr);
    QTC_CUDA_CHECK(cudaMemset(d.data(), 0x3F, d.bytes()));
    gemm_nvfp4_row_scaled_grouped_fprop_listed(f.ctx, f.dwp, xp, f.gr, DeviceGemmArgs::of(ref::GemmKind::kFprop, out),
                                               d.data());
    QTC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(bitwise_equal(download(d, out, cap, N), want));
  }
  std::vector<float> amax3(amax3_before.size());
  QTC_CUDA_CHECK(cudaMemcpy(amax3.data(), dxs[3].rowwise->amax.data(), amax3.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(amax3, amax3_before) << "the neighbour's (group 3's) amax was written";
  float amax2 = 0;
  QTC_CUDA_CHECK(cudaMemcpy(&amax2, dxs[2].rowwise->amax.data(), 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(amax2, 2688.0f) << "the per-tensor group's own amax was written";
}

TEST(GemmCudaGrouped, MoreThan64GroupsAndKNotMultipleOf128) {
  QTC_REQUIRE_GROUPED_GEMM();
  const int64_t G = 70, N = 64, K = 80;
  std::vector<int64_t> sizes(G), offs(G);
  int64_t cap = 0;
  for (int64_t i = 0; i < G; ++i) {
    sizes[static_cast<size_t>(i)] = (i * 7) % 13;
    offs[static_cast<size_t>(i)] = cap + (i % 3 == 0 ? 2 : 0);  // some padding rows between groups
    cap = offs[static_cast<size_t>(i)] + sizes[static_cast<size_t>(i)];
  }
  cap += 5;
  GroupedFixture f(sizes, offs, cap, N, K, seed() + 46);
  HostMatrix want(DType::kBF16, cap, N);
  std::fill(want.bytes.begin(), want.bytes.end(), 0x3F);
  ref::gemm_nvfp4_row_scaled_grouped_fprop(f.wq, f.xq, f.rows, ref::GemmArgs::of(ref::GemmKind::kFprop, DType::kBF16), want);
  DeviceBuffer d(want.bytes.size(), nullptr);
  QTC_CUDA_CHECK(cudaMemset(d.data(), 0x3F, d.bytes()));
  gemm_nvfp4_row_scaled_grouped_fprop(f.ctx, f.dwp, f.dx, f.gr, DType::kBF16, d.data());
  QTC_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(bitwise_equal(download(d, DType::kBF16, cap, N), want));
}

TEST(GemmCudaGrouped, WgradEqualsPerGroupReference) {
  QTC_REQUIRE_GROUPED_GEMM();
  QTC_REQUIRE_FEATURE(gating::Feature::kGemmNvfp4RowScaled);
  GemmContext ctx;
  std::mt19937_64 g(seed() + 47);
  const int64_t N = 96, K = 128;
  const std::vector<int64_t> sizes{32, 0, 64, 16};
  std::vector<QuantizedTensor> x, dy;
  for (int64_t n : sizes) {
    if (n == 0) {
      QuantizedTensor ex, ed;
      ex.recipe = Recipe::of(Nvfp4Options{.row_scaled = true});
      ex.cols = K;
      ed.cols = N;
      x.push_back(ex);
      dy.push_back(ed);
      continue;
    }
    QuantizedTensor xa = exact_nvfp4(n, K, g, 1.0f, 1.0f);
    make_row_scaled(xa, g);  // per-token amax rowwise, per-column amax columnwise
    x.push_back(xa);
    dy.push_back(exact_nvfp4(n, N, g, 2688.0f, 2688.0f));
  }
  for (DType out : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(out == DType::kF32 ? "F32" : "BF16");
    const auto want = ref::gemm_nvfp4_row_scaled_grouped_wgrad(x, dy, out);
    std::vector<DeviceQuantized> dx, ddy;
    for (size_t i = 0; i < x.size(); ++i) {
      DeviceQuantized a = x[i].rows > 0 ? from_host(x[i], ctx.stream()) : DeviceQuantized{};
      DeviceQuantized b = dy[i].rows > 0 ? from_host(dy[i], ctx.stream()) : DeviceQuantized{};
      a.recipe = x[i].recipe;
      a.cols = K;
      b.recipe = dy[i].recipe;
      b.cols = N;
      dx.push_back(std::move(a));
      ddy.push_back(std::move(b));
    }
    std::vector<const DeviceQuantized*> xp, dyp;
    std::vector<DeviceBuffer> outs;
    std::vector<void*> dp;
    for (size_t i = 0; i < x.size(); ++i) {
      xp.push_back(&dx[i]);
      dyp.push_back(&ddy[i]);
      outs.emplace_back(static_cast<size_t>(N * K) * dtype_size(out), nullptr);
      QTC_CUDA_CHECK(cudaMemset(outs.back().data(), 0x5A, outs.back().bytes()));  // the empty group must be zeroed
      dp.push_back(outs.back().data());
    }
    gemm_nvfp4_row_scaled_grouped_wgrad(ctx, xp, dyp, out, dp);
    QTC_CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < x.size(); ++i) {
      SCOPED_TRACE("group " + std::to_string(i));
      EXPECT_TRUE(bitwise_equal(download(outs[i], out, N, K), want[i]));
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Gating: refused calls carry the table's reason

// ------------------------------------------------------------------------------------------------
// Device-driven grouped row-scaled NVFP4 GEMM: group sizes on the device only, captured in a CUDA graph once and
// replayed with other sizes; every replay bitwise the per-group reference (exact inputs)

/// The engine row of the device-driven path (gating::grouped_row_scaled_path): skip with its reason when none.
gating::Support device_grouped_support() {
  const gating::GroupedPath gp = gating::grouped_row_scaled_path(device_capability());
  if (!gp.engine) return {false, "grouped row-scaled NVFP4 with device group sizes: " + gp.why};
  return device_supports(*gp.engine);
}

/// Offsets for sizes with `gap` unused rows after each group (capacity padding between groups).
std::vector<int64_t> offsets_with_gaps(const std::vector<int64_t>& sizes, int64_t gap) {
  std::vector<int64_t> o;
  int64_t r = 0;
  for (int64_t n : sizes) {
    o.push_back(r);
    r += n + gap;
  }
  return o;
}

ref::GroupedRows ref_rows(const std::vector<int64_t>& sizes, const std::vector<int64_t>& offs, int64_t K, int64_t cap) {
  ref::GroupedRows rows;
  rows.first_dims = sizes;
  for (int64_t o : offs) rows.tensor_offsets.push_back(o * K);
  rows.last_dim = K;
  rows.capacity = cap;
  return rows;
}

/// The reference grouped fprop for one size set (padding rows: the 0x3F sentinel).
HostMatrix grouped_fprop_reference(const std::vector<QuantizedTensor>& wq, const QuantizedTensor& x,
                                   const std::vector<int64_t>& sizes, const std::vector<int64_t>& offs, DType out,
                                   const std::vector<float>* bias_gn, int64_t N) {
  const int64_t K = x.cols, cap = x.rows;
  const ref::GroupedRows rows = ref_rows(sizes, offs, K, cap);
  HostMatrix want(out, cap, N);
  std::fill(want.bytes.begin(), want.bytes.end(), 0x3F);
  for (size_t gi = 0; gi < wq.size(); ++gi) {  // per group: the ungrouped reference with the group's own bias
    if (sizes[gi] == 0) continue;
    ref::GemmArgs args = ref::GemmArgs::of(ref::GemmKind::kFprop, out);
    if (bias_gn != nullptr) args.bias.assign(bias_gn->begin() + static_cast<int64_t>(gi) * N, bias_gn->begin() + static_cast<int64_t>(gi + 1) * N);
    const HostMatrix dg = ref::gemm_nvfp4_row_scaled(wq[gi], slice_rows(x, offs[gi], sizes[gi]), args);
    std::memcpy(want.bytes.data() + static_cast<size_t>(offs[gi] * N) * dtype_size(out), dg.bytes.data(), dg.bytes.size());
  }
  (void)rows;
  return want;
}

struct DeviceSizes {
  DeviceBuffer fd, off;
  DeviceSizes(int64_t G, cudaStream_t st) : fd(static_cast<size_t>(G) * 8, st), off(static_cast<size_t>(G) * 8, st) {}
  void set(const std::vector<int64_t>& sizes, const std::vector<int64_t>& offs, cudaStream_t st) {
    QTC_CUDA_CHECK(cudaMemcpyAsync(fd.data(), sizes.data(), sizes.size() * 8, cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(off.data(), offs.data(), offs.size() * 8, cudaMemcpyHostToDevice, st));
  }
};

TEST(GemmCudaGroupedDevice, FpropGraphReplayWithDifferentDeviceSizesEqualsPerGroupReference) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 40);
  // N, K not multiples of the 128/64 tile; 6 groups, capacity 640
  const int64_t N = 200, K = 272, cap = 640, G = 6;
  QuantizedTensor x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
  make_row_scaled(x, g);
  x.columnwise.reset();
  x.recipe.columnwise = false;
  std::vector<QuantizedTensor> wq;
  for (int64_t i = 0; i < G; ++i) {
    QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f * std::ldexp(1.0f, static_cast<int>(i % 5) - 2), 1.0f);
    w.columnwise.reset();
    w.recipe.columnwise = false;
    wq.push_back(w);
  }
  std::vector<float> bias(static_cast<size_t>(G * N));
  for (auto& b : bias) b = static_cast<float>(static_cast<int>(g() % 9) - 4) * 0.25f;
  const DeviceQuantized dx = from_host(x, st);
  std::vector<DeviceQuantized> dw;
  std::vector<const DeviceQuantized*> dwp;
  for (const auto& w : wq) dw.push_back(from_host(w, st));
  for (const auto& w : dw) dwp.push_back(&w);
  GroupedWeightsBf16 cache = allocate_grouped_weights(G, N, K, st);
  dequantize_grouped_weights_into(ctx, dwp, cache);
  // uneven sizes (not multiples of 16: row-scaled rows are independent), empty groups, gaps, fewer rows than cap
  const std::vector<std::vector<int64_t>> size_sets{
      {37, 0, 128, 16, 201, 64}, {0, 300, 1, 0, 95, 144}, {100, 100, 100, 0, 0, 3}};
  const std::vector<int64_t> gaps{8, 0, 40};
  DeviceSizes ds(G, st);
  GroupedRowsOnDevice rows;
  rows.groups = G;
  rows.capacity = cap;
  rows.first_dims = ds.fd.as<int64_t>();
  rows.row_offsets = ds.off.as<int64_t>();
  struct Case {
    DType out;
    bool cached;
    bool with_bias;
  };
  for (const Case c : {Case{DType::kF32, true, false}, Case{DType::kBF16, false, true}, Case{DType::kF16, true, true},
                       Case{DType::kBF16, true, false}}) {
    SCOPED_TRACE(std::string(dtype_name(c.out)) + (c.cached ? " cached weights" : " weights per call") +
                 (c.with_bias ? " + bias" : ""));
    DeviceGemmArgs args = DeviceGemmArgs::of(ref::GemmKind::kFprop, c.out);
    HostMatrix bias_h(c.out, G, N);
    for (int64_t i = 0; i < G * N; ++i) bias_h.set(i / N, i % N, bias[static_cast<size_t>(i)]);
    std::optional<DeviceArray> dbias;
    if (c.with_bias) {
      dbias.emplace(bias_h, st);
      args.bias = dbias->buf.data();
    }
    // the bias the reference sees: the output-dtype values, widened
    std::vector<float> bias_ref(static_cast<size_t>(G * N));
    for (int64_t i = 0; i < G * N; ++i) bias_ref[static_cast<size_t>(i)] = static_cast<float>(at(bias_h, i));
    DeviceBuffer d(static_cast<size_t>(cap * N) * dtype_size(c.out), st);
    auto call = [&] {
      if (c.cached)
        gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, cache, dx, rows, args, d.data());
      else
        gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, dwp, dx, rows, args, d.data());
    };
    auto check = [&](size_t si, const char* how) {
      const auto offs = offsets_with_gaps(size_sets[si], gaps[si]);
      QTC_CUDA_CHECK(cudaStreamSynchronize(st));
      const HostMatrix got = download(d, c.out, cap, N);
      const HostMatrix want = grouped_fprop_reference(wq, x, size_sets[si], offs, c.out, c.with_bias ? &bias_ref : nullptr, N);
      EXPECT_TRUE(bitwise_equal(got, want)) << how << " size set " << si;  // padding rows: the sentinel, untouched
    };
    // eager with the first size set (also sizes the context's scratch outside capture)
    ds.set(size_sets[0], offsets_with_gaps(size_sets[0], gaps[0]), st);
    QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
    call();
    check(0, "eager");
    // captured once, replayed with every size set (sizes and offsets rewritten in the same device arrays)
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    QTC_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    call();
    QTC_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    QTC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (size_t si = 0; si < size_sets.size(); ++si) {
      ds.set(size_sets[si], offsets_with_gaps(size_sets[si], gaps[si]), st);
      QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
      QTC_CUDA_CHECK(cudaGraphLaunch(exec, st));
      check(si, "graph replay");
    }
    QTC_CUDA_CHECK(cudaGraphExecDestroy(exec));
    QTC_CUDA_CHECK(cudaGraphDestroy(graph));
  }
}

TEST(GemmCudaGroupedDevice, FpropRandomInputsWithinBound) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 41);
  std::normal_distribution<float> dn(0.0f, 1.0f);
  const int64_t N = 256, K = 1024, cap = 384, G = 4;
  const std::vector<int64_t> sizes{96, 0, 160, 112}, offs{0, 96, 96, 272};
  auto input = [&](int64_t r, int64_t c) {
    HostMatrix m(DType::kBF16, r, c);
    for (int64_t i = 0; i < r * c; ++i) m.as<uint16_t>()[i] = f32_to_bf16(dn(g) * (1.0f + static_cast<float>(i % 13)));
    return m;
  };
  Recipe rx = Recipe::of(Nvfp4Options{.row_scaled = true}), rw;
  rx.columnwise = rw.columnwise = false;
  const QuantizedTensor x = ref::quantize(input(cap, K).view(), rx);
  std::vector<QuantizedTensor> wq;
  for (int64_t i = 0; i < G; ++i) wq.push_back(ref::quantize(input(N, K).view(), rw));
  const DeviceQuantized dx = from_host(x, st);
  std::vector<DeviceQuantized> dw;
  std::vector<const DeviceQuantized*> dwp;
  for (const auto& w : wq) dw.push_back(from_host(w, st));
  for (const auto& w : dw) dwp.push_back(&w);
  DeviceSizes ds(G, st);
  ds.set(sizes, offs, st);
  GroupedRowsOnDevice rows{G, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
  const DType out = DType::kF32;
  DeviceBuffer d(static_cast<size_t>(cap * N) * 4, st);
  gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, dwp, dx, rows, DeviceGemmArgs::of(ref::GemmKind::kFprop, out), d.data());
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  const HostMatrix got = download(d, out, cap, N);
  const HostMatrix want = grouped_fprop_reference(wq, x, sizes, offs, out, nullptr, N);
  // Bound (FP32 accumulation in any order, then alpha and the post-scale factor: 3 roundings):
  // |gpu - exact| <= ulp + (K·2^-24 + 3·2^-24)·S, S = Σ_k |x_deq·w_deq| (dequantized values carry every scale).
  const HostMatrix xd = ref::dequantize(x, PlaneKind::kRowwise);
  double worst = 0, worst_bound = 0;
  int64_t bad = 0;
  for (size_t gi = 0; gi < sizes.size(); ++gi) {
    if (sizes[gi] == 0) continue;
    const HostMatrix wd = ref::dequantize(wq[gi], PlaneKind::kRowwise);
    for (int64_t i = offs[gi]; i < offs[gi] + sizes[gi]; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sabs = 0;
        for (int64_t k = 0; k < K; ++k) sabs += std::fabs(static_cast<double>(xd.as<float>()[i * K + k]) * wd.as<float>()[j * K + k]);
        const double w = at(want, i * N + j), y = at(got, i * N + j);
        const double bound = ref::ulp_of(out, std::max(std::fabs(w), std::fabs(y))) + (static_cast<double>(K) + 3) * 0x1p-24 * sabs;
        const double ulp_s = ref::ulp_of(out, std::max(sabs, std::fabs(w)));
        if (std::fabs(w - y) / ulp_s >= worst) {  // >=: with no error at all, the bound at the last output
          worst = std::fabs(w - y) / ulp_s;
          worst_bound = bound / ulp_s;
        }
        if (std::fabs(w - y) > bound && bad++ < 4)
          ADD_FAILURE() << "(" << i << ", " << j << ") gpu " << y << " exact " << w << " > bound " << bound;
      }
  }
  EXPECT_EQ(bad, 0);
  std::printf("GEMMERR path=grouped_device layout=fprop out=F32 k=%lld worst_ulps_of_S=%.3f bound_ulps_of_S=%.3f\n",
              static_cast<long long>(K), worst, worst_bound);
}

/// Group g's tokens [o, o + t) of a grouped columnwise plane [cols, cap] as the columnwise plane [cols, t] of a
/// per-group tensor [t, cols] (the rowwise plane left empty), with the group's amax.
QuantizedTensor columnwise_group(const Plane& full, int64_t cols, int64_t cap, int64_t o, int64_t t,
                                 std::vector<float> amax, bool row_scaled) {
  QuantizedTensor q;
  q.recipe.set_options(Nvfp4Options{});
  q.recipe.nvfp4().row_scaled = row_scaled;
  q.recipe.rowwise = false;
  q.rows = t;
  q.cols = cols;
  if (t == 0) return q;
  Plane p;
  p.data_rows = cols;
  p.data_cols = t / 2;
  p.scale.type = ScaleType::kE4M3;
  p.scale.rows = cols;
  p.scale.cols = t / 16;
  for (int64_t r = 0; r < cols; ++r) {
    p.data.insert(p.data.end(), full.data.begin() + r * (cap / 2) + o / 2, full.data.begin() + r * (cap / 2) + (o + t) / 2);
    p.scale.bytes.insert(p.scale.bytes.end(), full.scale.bytes.begin() + r * (cap / 16) + o / 16,
                         full.scale.bytes.begin() + r * (cap / 16) + (o + t) / 16);
  }
  p.amax = std::move(amax);
  q.columnwise = p;
  return q;
}

TEST(GemmCudaGroupedDevice, WgradGraphReplayWithDifferentDeviceSizesEqualsPerGroupReference) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 42);
  const int64_t N = 136, K = 200, cap = 512, G = 5;
  // grouped columnwise planes of x [cap, K] and dY [cap, N]: codes and power-of-two scales over every token
  const Plane px = nvfp4_plane(K, cap, g, 1.0f), pdy = nvfp4_plane(N, cap, g, 1.0f);
  auto amaxes = [&](int64_t n) {
    std::vector<float> a(static_cast<size_t>(n));
    for (auto& v : a) v = 2688.0f * std::ldexp(1.0f, static_cast<int>(g() % 7) - 3) * (1.0f + 0.125f * (g() % 8));
    return a;
  };
  const std::vector<std::vector<int64_t>> size_sets{{64, 0, 160, 16, 96}, {0, 256, 32, 0, 176}, {112, 112, 112, 112, 0}};
  const std::vector<int64_t> gaps{16, 0, 16};
  for (const auto& [x_rs, dy_rs] : {std::pair{true, true}, std::pair{false, true}, std::pair{true, false}}) {
    SCOPED_TRACE(std::string("x ") + (x_rs ? "row-scaled" : "per-tensor") + ", dY " + (dy_rs ? "row-scaled" : "per-tensor"));
    const std::vector<float> ax = amaxes(x_rs ? G * K : G), ady = amaxes(dy_rs ? G * N : G);
    auto upload = [&](const Plane& p, int64_t cols, bool rs, const std::vector<float>& a) {
      DeviceGroupedColumnwise c;
      c.capacity = cap;
      c.cols = cols;
      c.groups = G;
      c.row_scaled = rs;
      c.data = DeviceBuffer(p.data.size(), st);
      c.scale = DeviceBuffer(p.scale.bytes.size(), st);
      c.amax = DeviceBuffer(a.size() * 4, st);
      QTC_CUDA_CHECK(cudaMemcpyAsync(c.data.data(), p.data.data(), p.data.size(), cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(c.scale.data(), p.scale.bytes.data(), p.scale.bytes.size(), cudaMemcpyHostToDevice, st));
      QTC_CUDA_CHECK(cudaMemcpyAsync(c.amax.data(), a.data(), a.size() * 4, cudaMemcpyHostToDevice, st));
      return c;
    };
    const DeviceGroupedColumnwise dx = upload(px, K, x_rs, ax), ddy = upload(pdy, N, dy_rs, ady);
    DeviceSizes ds(G, st);
    GroupedRowsOnDevice rows{G, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
    for (DType out : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(dtype_name(out));
      DeviceBuffer d(static_cast<size_t>(G * N * K) * dtype_size(out), st);
      auto check = [&](size_t si, const char* how) {
        const auto offs = offsets_with_gaps(size_sets[si], gaps[si]);
        std::vector<QuantizedTensor> xq, dyq;
        for (int64_t gi = 0; gi < G; ++gi) {
          const int64_t t = size_sets[si][static_cast<size_t>(gi)], o = offs[static_cast<size_t>(gi)];
          auto part = [&](const std::vector<float>& a, int64_t n, bool rs) {
            return rs ? std::vector<float>(a.begin() + gi * n, a.begin() + (gi + 1) * n) : std::vector<float>{a[static_cast<size_t>(gi)]};
          };
          xq.push_back(columnwise_group(px, K, cap, o, t, part(ax, K, x_rs), x_rs));
          dyq.push_back(columnwise_group(pdy, N, cap, o, t, part(ady, N, dy_rs), dy_rs));
        }
        const std::vector<HostMatrix> want = ref::gemm_nvfp4_row_scaled_grouped_wgrad(xq, dyq, out);
        QTC_CUDA_CHECK(cudaStreamSynchronize(st));
        const HostMatrix got = download(d, out, G * N, K);
        for (int64_t gi = 0; gi < G; ++gi) {
          HostMatrix part(out, N, K);
          std::memcpy(part.bytes.data(), got.bytes.data() + part.bytes.size() * static_cast<size_t>(gi), part.bytes.size());
          EXPECT_TRUE(bitwise_equal(part, want[static_cast<size_t>(gi)])) << how << " size set " << si << " group " << gi;
        }
      };
      ds.set(size_sets[0], offsets_with_gaps(size_sets[0], gaps[0]), st);
      QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
      gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, dx, ddy, rows, out, d.data());
      check(0, "eager");
      QTC_CUDA_CHECK(cudaStreamSynchronize(st));
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      QTC_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, dx, ddy, rows, out, d.data());
      QTC_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
      QTC_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (size_t si = 0; si < size_sets.size(); ++si) {
        ds.set(size_sets[si], offsets_with_gaps(size_sets[si], gaps[si]), st);
        QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
        QTC_CUDA_CHECK(cudaGraphLaunch(exec, st));
        check(si, "graph replay");
      }
      QTC_CUDA_CHECK(cudaGraphExecDestroy(exec));
      QTC_CUDA_CHECK(cudaGraphDestroy(graph));
    }
  }
}

TEST(GemmCudaGroupedDevice, WgradGroupBreakingThe16TokenContractGetsNaN) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 43);
  const int64_t N = 64, K = 64, cap = 128, G = 2;
  const Plane px = nvfp4_plane(K, cap, g, 1.0f), pdy = nvfp4_plane(N, cap, g, 1.0f);
  auto up = [&](const Plane& p, int64_t cols) {
    DeviceGroupedColumnwise c;
    c.capacity = cap;
    c.cols = cols;
    c.groups = G;
    c.data = DeviceBuffer(p.data.size(), st);
    c.scale = DeviceBuffer(p.scale.bytes.size(), st);
    c.amax = DeviceBuffer(G * 4, st);
    const float ones[2] = {2688.0f, 2688.0f};
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.data.data(), p.data.data(), p.data.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.scale.data(), p.scale.bytes.data(), p.scale.bytes.size(), cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaMemcpyAsync(c.amax.data(), ones, 8, cudaMemcpyHostToDevice, st));
    QTC_CUDA_CHECK(cudaStreamSynchronize(st));
    return c;
  };
  const DeviceGroupedColumnwise dx = up(px, K), ddy = up(pdy, N);
  DeviceSizes ds(G, st);
  ds.set({36, 64}, {0, 36}, st);  // group 0: 36 tokens, group 1 starts at 36 (not 8-aligned): both break it
  GroupedRowsOnDevice rows{G, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
  DeviceBuffer d(static_cast<size_t>(G * N * K) * 4, st);
  gemm_nvfp4_row_scaled_grouped_wgrad_device(ctx, dx, ddy, rows, DType::kF32, d.data());
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  const HostMatrix got = download(d, DType::kF32, G * N, K);
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isnan(at(got, i))) << "output " << i;
}

TEST(GemmCudaGroupedDevice, RejectedCallsNameTheRuleAndWriteNothing) {
  QTC_GPU_GATE_FEATURE(device_reason(), device_grouped_support());
  OwnedStream stream;
  const cudaStream_t st = stream.s;
  GemmContext ctx(st);
  std::mt19937_64 g(seed() + 44);
  const int64_t N = 64, K = 64, cap = 64;
  QuantizedTensor x = exact_nvfp4(cap, K, g, 1.0f, 1.0f);
  make_row_scaled(x, g);
  x.columnwise.reset();
  QuantizedTensor w = exact_nvfp4(N, K, g, 2688.0f, 1.0f);
  w.columnwise.reset();
  QuantizedTensor w_odd = exact_nvfp4(N - 4, K, g, 2688.0f, 1.0f);  // N = 60: not a multiple of 8
  w_odd.columnwise.reset();
  const DeviceQuantized dx = from_host(x, st), dw = from_host(w, st), dw_odd = from_host(w_odd, st);
  DeviceSizes ds(1, st);
  ds.set({cap}, {0}, st);
  GroupedRowsOnDevice rows{1, cap, ds.fd.as<int64_t>(), ds.off.as<int64_t>(), 1};
  DeviceBuffer d(static_cast<size_t>(cap * N) * 4, st);
  QTC_CUDA_CHECK(cudaMemsetAsync(d.data(), 0x3F, d.bytes(), st));
  auto expect_rule = [&](const std::function<void()>& f, const char* rule) {
    try {
      f();
      ADD_FAILURE() << "accepted; expected: " << rule;
    } catch (const qtc::Error& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  DeviceGemmArgs beta = DeviceGemmArgs::of(ref::GemmKind::kFprop);
  beta.beta = 1.0f;
  expect_rule([&] { gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, {&dw}, dx, rows, beta, d.data()); }, "explicit beta");
  expect_rule([&] { gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, {&dw_odd}, dx, rows, DeviceGemmArgs::of(ref::GemmKind::kFprop), d.data()); },
              "multiples of 8");
  GroupedRowsOnDevice no_sizes = rows;
  no_sizes.first_dims = nullptr;
  expect_rule([&] { gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, {&dw}, dx, no_sizes, DeviceGemmArgs::of(ref::GemmKind::kFprop), d.data()); },
              "device group sizes missing");
  expect_rule([&] { gemm_nvfp4_row_scaled_grouped_fprop_device(ctx, {&dw, &dw}, dx, rows, DeviceGemmArgs::of(ref::GemmKind::kFprop), d.data()); },
              "2 weights for 1 groups");
  QTC_CUDA_CHECK(cudaStreamSynchronize(st));
  const std::vector<uint8_t> bytes = [&] {
    std::vector<uint8_t> b(d.bytes());
    QTC_CUDA_CHECK(cudaMemcpy(b.data(), d.data(), b.size(), cudaMemcpyDeviceToHost));
    return b;
  }();
  for (uint8_t b : bytes) ASSERT_EQ(b, 0x3F) << "a rejected call wrote the output";
}


TEST(GemmCudaGating, UnsupportedPathsRefuseWithTheTableReason) {
  QTC_GPU_GATE(device_reason());
  const gating::Support mx = device_supports(gating::Feature::kGemmMxfp8);
  if (mx.supported) GTEST_SKIP() << "MXFP8 GEMM is supported on this card; nothing to refuse";
  GemmContext ctx;
  std::mt19937_64 g(seed());
  Recipe r = Recipe::of(Mxfp8Options{});
  HostMatrix x(DType::kF32, 128, 128);
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = small_value(g);
  QuantizedTensor q = ref::quantize(x.view(), r);
  ref::convert_layout(q, ScaleLayout::kSwizzled);
  try {
    (void)run_gpu(ctx, q, q, ref::GemmArgs::of(ref::GemmKind::kFprop));
    FAIL() << "MXFP8 GEMM ran on a card the table refuses";
  } catch (const qtc::Error& e) {
    EXPECT_NE(std::string(e.what()).find(mx.reason), std::string::npos) << e.what();
  }
}

TEST(GemmCudaGating, MissingDeviceIsASkipOrAFailure) {
  // Documents the rule: with a device this passes; without one it skips, or fails under QTC_REQUIRE_GPU=1.
  QTC_GPU_GATE(device_reason());
  const gating::Capability c = device_capability();
  std::printf("GEMMCAP sm=%d cublas=%s\n%s", c.sm(), gating::cublas_version_string(c.cublas).c_str(),
              gating::format_table(c).c_str());
  EXPECT_GT(c.sm(), 0);
}

}  // namespace
}  // namespace qtc::cuda
