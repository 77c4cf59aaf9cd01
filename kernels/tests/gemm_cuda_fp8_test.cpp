/// \file gemm_cuda_fp8_test.cpp
/// \brief GPU FP8 GEMMs (per-tensor E4M3/E5M2 and FP8 block 1D/2D mixes, cuBLASLt) against the exact reference.
///
/// | path                    | exact-by-construction (bitwise)         | random inputs (bound, worst ULPs printed) |
/// |-------------------------|-----------------------------------------|-------------------------------------------|
/// | FP8 per-tensor E4M3/E5M2| fprop/dgrad/wgrad x F32/BF16, bias, C   | fprop/dgrad/wgrad, K = 1024                |
/// | FP8 block 1D/2D mixes   | fprop/dgrad/wgrad x F32/BF16            | fprop, K = 1024                            |
/// Shared helpers, the exact-input rule and the GPU gate: gemm_cuda_test_util.hpp.
#include "gemm_cuda_test_util.hpp"

namespace qtc::cuda {
namespace {

using namespace gemm_test;

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


// ------------------------------------------------------------------------------------------------
// Random inputs: error within the path's bound; worst error printed in ULPs next to the bound

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

}  // namespace
}  // namespace qtc::cuda
