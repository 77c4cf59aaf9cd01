/// \file profile_gpu_paths.cpp
/// \brief The profile records of quantizers' GPU paths whose bits differ from their CPU path's profile (issue 25):
///        compressed-tensors 0.20.0 on CUDA tensors (`compressed_tensors_triton`; its NVFP4 / MX arithmetic in
///        reference/src/peers/ct_peers.cpp, orders Nvfp4Order / MxOrder::kCompressedTensorsTriton; FP8 by the rules
///        of reference/src/peers/fp8_peers.cpp: fp8.data_dtype, fp8.clamp_nan, fp8.nan). profile.cpp
///        appends them after the engines' MXFP4 profiles.
#include <string_view>
#include <vector>

#include "qtc/profile.hpp"

namespace qtc::detail {

void append_gpu_path_profiles(std::vector<ProfileRules>& v, const ProfileRules& compressed_tensors) {
  // compressed-tensors 0.20.0's NVFP4 / MXFP8 / MXFP4 / FP8 / FP8_BLOCK presets on CUDA tensors: the scales by
  // PyTorch's CUDA ops, `quantize` by its Triton `_quantize_kernel`, `pack_fp4_to_uint8` by its Triton kernel
  // (compressed_tensors_dump.py and compressed_tensors_fp8_dump.py --device cuda; the 432 NVFP4 / MX H100 dumps of
  // reports/h200/run_r25_triton and 288 FP8 ones). Read from forward_helpers.py, fp4_utils.py, utils/helpers.py and
  // compressors/nvfp4/helpers.py of the 0.20.0 wheel.
  ProfileRules ctt = compressed_tensors;
  ctt.id = Profile::kCompressedTensorsTriton;
  ctt.name = "compressed_tensors_triton";
  ctt.version = 2;  // 1: NVFP4, MXFP8, MXFP4 only
  ctt.follows = "compressed-tensors 0.20.0 presets NVFP4, MXFP8, MXFP4, FP8, FP8_BLOCK on CUDA tensors (generate_gparam, "
                "calculate_qparams, compute_dynamic_scales_and_zp by PyTorch's CUDA ops; quantize by the Triton "
                "_quantize_kernel, pack_fp4_to_uint8 by its Triton kernel, compress_mx_scale; sm_90)";
  ctt.nvfp4_order = Nvfp4Order::kCompressedTensorsTriton;
  ctt.mx_order = MxOrder::kCompressedTensorsTriton;
  // FP8 / FP8_BLOCK: s = amax / 448 and the eps of s = 0 as on the CPU (PyTorch's CUDA ops in the input dtype T, IEEE
  // division: the same bits), then the kernel: div_rn(x.f32, s.f32) in float32 (not rounded to T), + the zero point
  // (-0.0 -> +0), tl.clamp(y, q_min, q_max) with bounds loaded at run time (a NaN -> -448, 0xFE), tl.float8e4nv.
  // A NaN scale is CUDA's canonical NaN (no CPU vector lanes); the BF16 round trip of the codes never sees a NaN.
  ctt.fp8_data_f32 = true;
  ctt.fp8_clamp_nan = Fp8ClampNaN::kMinusMax;
  ctt.fp8_cuda_nan = true;
  ctt.fp8_block_amax_nan_lanes = false;
  ctt.fp8_bf16_nan_positive = false;
  v.push_back(ctt);
}

std::string_view gpu_path_nvfp4_order_text() {
  return "compressed_tensors_triton: gs and sf as compressed_tensors, by PyTorch's CUDA ops (a NaN block amax or a 0 * "
         "Inf product is a positive NaN: sf 0x7F); data div_rn(x, div_rn(sf, gs)) in float32, + 0 (-0.0 -> +0), "
         "tl.clamp(y, q_min, q_max) with runtime bounds (max.f32 then min.f32: NaN -> -6, code 0xF), _round_to_fp4 "
         "(value buckets; sign from y < 0: a negative rounding to 0 -> 0x8), packed by pack_fp4_to_uint8's Triton kernel";
}

std::string_view gpu_path_mx_order_text() {
  return "compressed_tensors_triton: scales as compressed_tensors (pow2_round in the input dtype T; F16 scales below its "
         "range -> 1.0), by PyTorch's CUDA ops: a NaN block's max(|min|, |max|) is CUDA's canonical NaN (0x7FFFFFFF, "
         "0x7FFF), which pow2_round wraps to -0: scale 2^-127; an Inf scale is stored 127 + int32(Inf) = 0x7E (CUDA's "
         "conversion saturates); data div_rn(x, scale) in float32 (not rounded to T), + 0, tl.clamp with runtime bounds "
         "(NaN -> -elem_max), then tl.float8e4nv (RN-even) or _round_to_fp4 (value buckets, sign from y < 0)";
}

}  // namespace qtc::detail
