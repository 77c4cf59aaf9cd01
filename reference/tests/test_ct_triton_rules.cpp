/// \file test_ct_triton_rules.cpp
/// \brief Profile compressed_tensors_triton (compressed-tensors 0.20.0 on CUDA tensors: its Triton _quantize_kernel;
///        ct_peers.cpp, orders kCompressedTensorsTriton) where its bits differ from the CPU path's profile
///        compressed_tensors: rows of the H100 dumps (reports/h200/run_r25_triton, ct_gpu_dumps.tar.xz; FP8 / FP8_BLOCK:
///        compressed_tensors_fp8_dump.py --device cuda), each checked against both profiles, and the paths that refuse
///        it by the rule's name. Part of test_torchao_rules.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "qtc/cpu_path.hpp"
#include "qtc/numeric.hpp"
#include "qtc/path_rules.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"

using namespace qtc;

namespace {

/// One row of an H100 dump (`x` as its dtype's bits) and the row's expected bytes under the GPU path; `cpu_*` the
/// CPU path's first differing data byte and its scale byte (profile compressed_tensors), which the GPU row must not
/// equal.
struct MxRow {
  const char* file;
  bool fp4;
  DType t;
  std::vector<uint32_t> x;
  uint8_t scale;
  std::vector<uint8_t> data;
};

const MxRow kRows[] = {
    // a NaN block: CUDA's canonical NaN amax rounds to -0 in round_to_power_2, scale 2^-127 (0x00); every finite x
    // saturates to +-448, the NaN clamps to -448 (0xFE); the CPU (a vector lane) gives 0x00 too, but NaN data 0x7F
    {"ctgpu_mxfp8_f32_nan_32x32 row 0", false, DType::kF32,
     {0xBD91E15F, 0xBFCC34F4, 0xBF5A672D, 0x7FC00000, 0xBDB8C5E6, 0xBECC7D72, 0x3E05D56A, 0xC011ACB0,
      0x3F56BBF4, 0xBF79A496, 0xBF3C5020, 0xBEA027B8, 0xBF3AC5E6, 0xC0147750, 0x3F9DE6C6, 0x3FA10B36,
      0xBE810538, 0xBF92B6AE, 0xBF46E055, 0xBF3416AA, 0xBF90D5AB, 0xBF1ABB09, 0xC04A13E8, 0x3F9FE58F,
      0x3DE1D6F8, 0xBE87186F, 0x3E3930BD, 0xBEE5AD12, 0x3EAF6B89, 0x3F8AF04A, 0xBF7E8C95, 0xBF2E60C6},
     0x00,
     {0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0x7E, 0xFE, 0x7E, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0x7E, 0x7E,
      0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0x7E, 0x7E, 0xFE, 0x7E, 0xFE, 0x7E, 0x7E, 0xFE, 0xFE}},
    // an Inf block: scale Inf, stored 127 + int32(Inf) = 0x7E on CUDA (the CPU: 0x7F); data x / Inf = 0, Inf / Inf
    // clamps to -448
    {"ctgpu_mxfp8_f32_inf_32x32 row 0", false, DType::kF32,
     {0xBF28ABF1, 0x3F8E692E, 0x3F95FB54, 0x3F080F50, 0xBDE311E9, 0x7F800000, 0x3EB4201C, 0x3E03974D,
      0xBF634951, 0x3FBF15B0, 0xBFCB79A9, 0xBF9F1D05, 0xBF6CFDD8, 0x3F46F876, 0x3EDF59FF, 0x3F8EBCFF,
      0xBEE4F472, 0x3F3D20AF, 0xBF4D4331, 0xBF51BE56, 0xBEB6ABF3, 0x3E5A0FEE, 0x3D9C7EBF, 0xBF746AC3,
      0x3F3D018F, 0xBFB0511F, 0x3F69B895, 0xBEE1E76A, 0xBE7FD8A4, 0x3EECBA26, 0xBFCE6E60, 0x3F3098C8},
     0x7E,
     {0x00, 0x00, 0x00, 0x00, 0x00, 0xFE, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},
    // F16 data divided in float32: -2^-24 / 2^7 is a negative value that rounds to 0 (code 0x8); the CPU divides in
    // F16, where it underflows to -0.0, and the zero point makes it +0 (0x0)
    {"ctgpu_mxfp4_f16_wide_32x32 row 1", true, DType::kF16,
     {0x0000, 0x8000, 0x0000, 0x8001, 0x0000, 0x8000, 0x8000, 0x0001, 0x0000, 0x8001, 0x8001, 0x8001, 0x0001, 0x8001,
      0x0001, 0x8001, 0x5DB0, 0x5F45, 0x59C9, 0x5BB7, 0xE078, 0x5DBA, 0x5F62, 0xD7C2, 0x5D70, 0x51C6, 0x610F, 0x5B27,
      0x6231, 0xE00A, 0xD984, 0xDDD7},
     0x86,
     {0x00, 0x80, 0x00, 0x00, 0x80, 0x88, 0x80, 0x80, 0x65, 0x43, 0x5E, 0xA6, 0x15, 0x47, 0xE7, 0xDB}},
    // a BF16 NaN block (PyTorch's all-ones NaN): scale 0x00 as on the CPU, the data +-6 and the NaN -6 (0xF; CPU 0x8)
    {"ctgpu_mxfp4_bf16_nan_32x32 row 0", true, DType::kBF16,
     {0xBFA0, 0x3E75, 0x3FB0, 0xFFFF, 0xBE03, 0x3B8F, 0xBEF1, 0x3FA6, 0xBEBD, 0xBF9D, 0x3F69, 0x3E0B, 0xBF96, 0xBF59,
      0x3F6C, 0xBFAA, 0x3F0C, 0x3F0D, 0x3F97, 0x3FC5, 0xBEB3, 0xBFCA, 0x3F21, 0x3F17, 0x3EBD, 0xBF8A, 0x3E9F, 0xBF3D,
      0xBF6E, 0xBF3C, 0x3F3D, 0x3F83},
     0x00,
     {0x7F, 0xF7, 0x7F, 0x7F, 0xFF, 0x77, 0xFF, 0xF7, 0x77, 0x77, 0xFF, 0x77, 0xF7, 0xF7, 0xFF, 0x77}},
};

QuantizedTensor quantize_row(const MxRow& c, Profile p) {
  std::vector<float> f(32);
  std::vector<uint16_t> h(32);
  for (size_t i = 0; i < 32; ++i) {
    const uint32_t b = c.x[i];
    std::memcpy(&f[i], &b, 4);
    h[i] = static_cast<uint16_t>(b);
  }
  const MatrixView in{c.t == DType::kF32 ? static_cast<const void*>(f.data()) : h.data(), c.t, 1, 32};
  Recipe r = c.fp4 ? Recipe::of(Mxfp4Options{.scale_rule = MxScaleRule::kPow2Round})
                   : Recipe::of(Mxfp8Options{.scale_rule = MxScaleRule::kPow2Round});
  r.profile = p;
  r.columnwise = false;
  return ref::quantize(in, r);
}

TEST(CompressedTensorsTriton, MxRowsOfTheH100Dumps) {
  for (const MxRow& c : kRows) {
    const QuantizedTensor gpu = quantize_row(c, Profile::kCompressedTensorsTriton);
    EXPECT_EQ(gpu.rowwise->scale.bytes[0], c.scale) << c.file;
    EXPECT_EQ(gpu.rowwise->data, c.data) << c.file;
    // The CPU path's profile gives other bytes for each of these rows (why the GPU path has a profile of its own).
    const QuantizedTensor cpu = quantize_row(c, Profile::kCompressedTensors);
    EXPECT_TRUE(cpu.rowwise->data != c.data || cpu.rowwise->scale.bytes[0] != c.scale) << c.file;
  }
}

TEST(CompressedTensorsTriton, Nvfp4NanAndInf) {
  // F32 [NaN, -0.04, 0.5 ...]: amax NaN -> global scale 1; the NaN block's scale is CUDA's positive NaN (0x7F) and
  // every datum x / NaN clamps to -6 (0xF), where the CPU path stores 0x0; the other block: e4m3(0.5 / 6) = 0x1B,
  // 0.5 / 0.0859375 -> 6 (0x7).
  std::vector<float> x(32, 0.5f);
  x[0] = NAN;
  x[1] = -0.04f;
  Recipe r = Recipe::of(Nvfp4Options{});
  r.profile = Profile::kCompressedTensorsTriton;
  r.columnwise = false;
  QuantizedTensor q = ref::quantize(MatrixView{x.data(), DType::kF32, 1, 32}, r);
  EXPECT_EQ(q.rowwise->scale.bytes[0], 0x7F);
  EXPECT_EQ(q.rowwise->scale.bytes[1], 0x1B);
  std::vector<uint8_t> want(8, 0xFF);
  want.insert(want.end(), 8, 0x77);
  EXPECT_EQ(q.rowwise->data, want);
  // F16 with an Inf: amax Inf -> global scale 0. The block holding Inf: 0 * Inf = NaN (0x7F), data -6; the other
  // block: scale 0 -> 0.125 (0x20), data x / (0.125 / 0) = +-0 -> 0x0 (as in the dumps' F16 pow2 / ulps files).
  std::vector<uint16_t> h(32, f32_to_f16(0.75f));
  h[3] = 0x7C00;
  h[20] = f32_to_f16(-3.0f);
  q = ref::quantize(MatrixView{h.data(), DType::kF16, 1, 32}, r);
  EXPECT_EQ(q.rowwise->scale.bytes[0], 0x7F);
  EXPECT_EQ(q.rowwise->scale.bytes[1], 0x20);
  EXPECT_EQ(std::vector<uint8_t>(q.rowwise->data.begin(), q.rowwise->data.begin() + 8), std::vector<uint8_t>(8, 0xFF));
  EXPECT_EQ(std::vector<uint8_t>(q.rowwise->data.begin() + 8, q.rowwise->data.end()), std::vector<uint8_t>(8, 0x00));
  // Finite F32: the CPU path's bytes (-0.04 / (sf / gs) rounds to -0: code 0x8; -0.0 + the zero point: 0x0).
  std::vector<float> f = {1.0f, -0.04f, 0.3f, -0.0f};
  f.insert(f.end(), 12, 0.5f);
  q = ref::quantize(MatrixView{f.data(), DType::kF32, 1, 16}, r);
  EXPECT_EQ(q.rowwise->scale.bytes[0], 126);
  EXPECT_EQ(q.rowwise->data, (std::vector<uint8_t>{135, 4, 85, 85, 85, 85, 85, 85}));
}

/// Rows of the FP8 / FP8_BLOCK presets (compressed_tensors_fp8_dump.py --device cuda, the 288 H100 dumps), quantized
/// under profile p: x as float32 values of dtype t (BF16 / F16 values exact), one 1x128 block or the whole tensor.
QuantizedTensor quantize_fp8_row(const std::vector<float>& x, DType t, bool tensor, Profile p) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = t == DType::kBF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
  const MatrixView in{t == DType::kF32 ? static_cast<const void*>(x.data()) : h.data(), t, 1, static_cast<int64_t>(x.size())};
  Recipe r = tensor ? Recipe::of(Fp8TensorOptions{}) : Recipe::of(Fp8BlockOptions{});
  r.profile = p;
  r.columnwise = false;
  return ref::quantize(in, r);
}

uint32_t fp8_scale_bits(const QuantizedTensor& q, bool tensor) {
  const float s = tensor ? q.scale_inv : q.rowwise->scale.f32(0, 0);
  uint32_t b = 0;
  std::memcpy(&b, &s, 4);
  return b;
}

TEST(CompressedTensorsTriton, Fp8RulesOfTheH100Dumps) {
  // fp8.data_dtype float32: BF16 [100, 1.3984375, 0 ...]: s = BF16(100 / 448) = 0.2236328125 on both paths; the
  // kernel's div_rn(x.f32, s.f32) = 6.2533 rounds up to 6.5 (0x4D), the CPU's BF16 quotient 6.25 is a tie -> 6 (0x4C)
  std::vector<float> x(128, 0.0f);
  x[0] = 100.0f;
  x[1] = 1.3984375f;
  QuantizedTensor gpu = quantize_fp8_row(x, DType::kBF16, false, Profile::kCompressedTensorsTriton);
  QuantizedTensor cpu = quantize_fp8_row(x, DType::kBF16, false, Profile::kCompressedTensors);
  EXPECT_EQ(fp8_scale_bits(gpu, false), 0x3E650000u);
  EXPECT_EQ(fp8_scale_bits(cpu, false), 0x3E650000u);
  EXPECT_EQ(gpu.rowwise->data[0], 0x7E);
  EXPECT_EQ(gpu.rowwise->data[1], 0x4D);
  EXPECT_EQ(cpu.rowwise->data[1], 0x4C);
  // fp8.nan CUDA + fp8.clamp_nan -448: a NaN block (the dumps' specials): the scale is CUDA's canonical NaN
  // (0x7FFFFFFF; BF16 0x7FFF0000 widened by its bits; F16 0x7FFF, whose cvt.f32.f16 is canonical again), every
  // datum x / NaN clamps to -448 (0xFE); the CPU path: its lanes' NaN scale, NaN codes 0x7F / 0xFF
  x.assign(128, 0.5f);
  x[3] = NAN;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool tensor : {false, true}) {
      gpu = quantize_fp8_row(x, t, tensor, Profile::kCompressedTensorsTriton);
      cpu = quantize_fp8_row(x, t, tensor, Profile::kCompressedTensors);
      EXPECT_EQ(fp8_scale_bits(gpu, tensor), t == DType::kBF16 ? 0x7FFF0000u : 0x7FFFFFFFu) << dtype_name(t) << tensor;
      EXPECT_NE(fp8_scale_bits(cpu, tensor), fp8_scale_bits(gpu, tensor)) << dtype_name(t) << tensor;
      EXPECT_EQ(gpu.rowwise->data, std::vector<uint8_t>(128, 0xFE)) << dtype_name(t) << tensor;
      EXPECT_NE(cpu.rowwise->data[3] & 0x7F, 0x7E) << dtype_name(t) << tensor;
    }
  // An Inf (F16 tensor): s = Inf, x / Inf = +-0 -> +0 (the zero point), Inf / Inf = NaN -> -448 (the CPU: NaN code)
  x.assign(128, -0.75f);
  x[5] = INFINITY;
  gpu = quantize_fp8_row(x, DType::kF16, true, Profile::kCompressedTensorsTriton);
  EXPECT_EQ(fp8_scale_bits(gpu, true), 0x7F800000u);
  std::vector<uint8_t> want(128, 0x00);
  want[5] = 0xFE;
  EXPECT_EQ(gpu.rowwise->data, want);
  cpu = quantize_fp8_row(x, DType::kF16, true, Profile::kCompressedTensors);
  EXPECT_EQ(cpu.rowwise->data[5] & 0x7F, 0x7F);
}

TEST(CompressedTensorsTriton, RefusedByRuleNameWhereNotImplemented) {
  // The CUDA kernels' rule set (kernels/src/backend/quantize.cpp kCudaRules) and the vectorized CPU path's.
  const PathRules kernels{.path = "the CUDA kernels", .nvfp4_order_torchao = true, .mx_order_torchao = true,
                          .mx_order_triton_kernels = true, .mx_order_fbgemm = true};
  auto starts = [](const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; };
  Recipe nv = Recipe::of(Nvfp4Options{});
  Recipe mx8 = Recipe::of(Mxfp8Options{.scale_rule = MxScaleRule::kPow2Round});
  Recipe mx4 = Recipe::of(Mxfp4Options{.scale_rule = MxScaleRule::kPow2Round});
  for (Recipe* r : {&nv, &mx8, &mx4}) {
    r->profile = Profile::kCompressedTensorsTriton;
    EXPECT_NO_THROW(r->validate());
    const std::string rule = r == &nv ? "nvfp4" : r == &mx8 ? "mxfp8" : "mxfp4";
    EXPECT_TRUE(starts(unimplemented_rule(*r, kernels),
                       "rule " + rule + ".order compressed_tensors_triton (profile 'compressed_tensors_triton')"))
        << unimplemented_rule(*r, kernels);
    std::string why;
    EXPECT_FALSE(ref::simd_supports(*r, DType::kBF16, &why)) << rule;
    EXPECT_NE(why.find("compressed_tensors_triton"), std::string::npos) << why;
  }
  // FP8 block / tensor (presets FP8_BLOCK, FP8): the kernels and the vectorized CPU path implement fp8.form te only.
  Recipe blk = Recipe::of(Fp8BlockOptions{});
  Recipe ten = Recipe::of(Fp8TensorOptions{});
  for (Recipe* r : {&blk, &ten}) {
    r->profile = Profile::kCompressedTensorsTriton;
    EXPECT_NO_THROW(r->validate());
    const std::string rule = r == &blk ? "fp8.form" : "fp8.tensor_form";
    EXPECT_TRUE(starts(unimplemented_rule(*r, kernels), "rule " + rule + " s = amax / fp8_max (profile 'compressed_tensors_triton')"))
        << unimplemented_rule(*r, kernels);
    std::string why;
    EXPECT_FALSE(ref::simd_supports(*r, DType::kBF16, &why)) << rule;
    EXPECT_NE(why.find("compressed_tensors_triton"), std::string::npos) << why;
  }
  Recipe e5 = mx8;
  e5.mxfp8().fp8 = Fp8Type::kE5M2;
  EXPECT_THROW(e5.validate(), Error);
}

}  // namespace
