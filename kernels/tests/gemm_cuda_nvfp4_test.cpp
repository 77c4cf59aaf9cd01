/// \file gemm_cuda_nvfp4_test.cpp
/// \brief GPU NVFP4 (emulated on 9.x), MXFP4 and row-scaled NVFP4 GEMMs against the exact reference; gating refusals.
///
/// | path                    | exact-by-construction (bitwise)         | random inputs (bound, worst ULPs printed) |
/// |-------------------------|-----------------------------------------|-------------------------------------------|
/// | NVFP4 (emulated on 9.x) | fprop/dgrad/wgrad x F32/BF16            | fprop/dgrad/wgrad, K = 1024                |
/// | MXFP4 (emulated on 9.x) | fprop/dgrad/wgrad                       | —                                          |
/// | row-scaled NVFP4 (§7.5) | fprop F32/BF16 + bias, wgrad two-vector | —                                          |
/// | MXFP8, NVFP4 native     | skipped with the gating reason on SM 9.0; refusal carries it             |
/// Shared helpers, the exact-input rule and the GPU gate: gemm_cuda_test_util.hpp.
#include "gemm_cuda_test_util.hpp"

namespace qtc::cuda {
namespace {

using namespace gemm_test;

// ------------------------------------------------------------------------------------------------
// Bitwise on exact inputs

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

// The Hopper emulation's NVFP4 -> BF16 pass (nvfp4_plane_to_bf16) against code·sf decoded on the host, for every
// E2M1 code under every E4M3 scale byte (NaN scales included): the compact layout takes the linear kernel (16-byte
// stores, one stream per plane), the padded one the per-block kernel; a shape whose element count is no multiple
// of the linear kernel's block (37 x 1104) covers its tail. Every output element starts as a sentinel, and nothing
// past the plane may be written. A destination off 16-byte alignment is refused before any work (both kernels
// store 16 bytes at a time; before g28 such a call died with a misaligned-address fault).
TEST(GemmCudaExact, Nvfp4ToBf16EveryCodeAndScale) {
  QTC_GPU_GATE(device_reason());
  constexpr int64_t R = 37, K = 1104, E = R * K;
  std::mt19937_64 g(seed() + 28);
  std::vector<uint8_t> codes(static_cast<size_t>(E / 2)), sf(static_cast<size_t>(E / 16));
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i < 128 ? (i * 17) & 0xFF : g() & 0xFF);
  for (size_t i = 0; i < sf.size(); ++i) sf[i] = static_cast<uint8_t>(i < 256 ? i : g() & 0xFF);  // every byte
  auto bf16_of = [](float v) { return static_cast<uint16_t>(f32_bits(v) >> 16); };  // exact values: truncation is RN
  const int64_t pad = 64;  // sentinel elements after the plane
  for (ScaleLayout lay : {ScaleLayout::kCompact, ScaleLayout::kPadded}) {
    SCOPED_TRACE(layout_name(lay));
    QuantizedTensor q;
    q.recipe.set_options(Nvfp4Options{});
    q.rows = R;
    q.cols = K;
    Plane p;
    p.data_rows = R;
    p.data_cols = K / 2;
    p.data = codes;
    p.scale.type = ScaleType::kE4M3;
    p.scale.rows = R;
    p.scale.cols = K / 16;
    p.scale.bytes = sf;
    p.amax = {1.0f};
    q.rowwise = p;
    ref::convert_layout(q, lay);
    const DeviceQuantized dq = from_host(q, nullptr);
    DeviceBuffer out(static_cast<size_t>(E + pad) * 2, nullptr);
    QTC_CUDA_CHECK(cudaMemset(out.data(), 0xA5, out.bytes()));
    nvfp4_plane_to_bf16(*dq.rowwise, R, K, out.data(), nullptr);
    QTC_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> got = to_host_vec<uint16_t>(out, nullptr);
    int64_t bad = 0;
    for (int64_t e = 0; e < E && bad < 5; ++e) {
      const uint32_t c = (codes[static_cast<size_t>(e / 2)] >> (4 * (e % 2))) & 0xFu;
      const float want = decode_e2m1(c) * decode_e4m3(sf[static_cast<size_t>(e / 16)]);
      const uint16_t w = got[static_cast<size_t>(e)];
      const bool ok = want != want ? (w & 0x7F80u) == 0x7F80u && (w & 0x7Fu) != 0 : w == bf16_of(want);
      if (!ok) ADD_FAILURE() << "element " << e << " code " << c << " scale 0x" << std::hex
                             << int(sf[static_cast<size_t>(e / 16)]) << ": got 0x" << w << std::dec;
      bad += ok ? 0 : 1;
    }
    for (int64_t i = 0; i < pad; ++i) EXPECT_EQ(got[static_cast<size_t>(E + i)], 0xA5A5u) << "past the plane";
    // 8 bytes off alignment: refused, nothing written
    QTC_CUDA_CHECK(cudaMemset(out.data(), 0xA5, out.bytes()));
    try {
      nvfp4_plane_to_bf16(*dq.rowwise, R, K, out.as<uint16_t>() + 4, nullptr);
      ADD_FAILURE() << "a destination 8 bytes off 16-byte alignment was accepted";
    } catch (const qtc::Error& ex) {
      EXPECT_NE(std::string(ex.what()).find("16-byte aligned"), std::string::npos) << ex.what();
    }
    QTC_CUDA_CHECK(cudaDeviceSynchronize());
    got = to_host_vec<uint16_t>(out, nullptr);
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != 0xA5A5u) {
        ADD_FAILURE() << "refused call wrote element " << i;
        break;
      }
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

TEST(GemmCudaRandom, Nvfp4WithinBound) {
  QTC_GPU_GATE_FEATURE(device_reason(), nvfp4_gemm_support());
  GemmContext ctx;
  std::mt19937_64 g(seed() + 12);
  Recipe r = Recipe::of(Nvfp4Options{});
  for (ref::GemmKind k : kKinds) check_random(ctx, "nvfp4", r, r, k, DType::kF32, kFp32Acc, g);
  check_random(ctx, "nvfp4", r, r, ref::GemmKind::kFprop, DType::kBF16, kFp32Acc, g);
}

// ------------------------------------------------------------------------------------------------
// Gating: refused calls carry the table's reason

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
