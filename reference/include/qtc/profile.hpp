/// \file profile.hpp
/// \brief Profiles as data: each profile is one named, versioned record of the bit-level rules that
///        implementations choose differently (VECTORS.md "Profiles", DIVERGENCES.md). The reference
///        quantizers and the CUDA launchers read these records; nothing else tests a profile by name.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qtc/numeric.hpp"
#include "qtc/recipe.hpp"

namespace qtc {

// The profiles' constants (kTorchAOPerTensorDivisor, kTorchAOBlockScaleMin, ...) are in numeric.hpp, shared
// with the CUDA kernels.

/// NVFP4 block-scale operation order.
enum class Nvfp4Order : uint8_t {
  kTE,       ///< sf = e4m3(min(bamax * (S_enc * RN(1/6)), FLT_MAX)); x * min(1 / (sf * S_dec), FLT_MAX)
  kTorchAO,  ///< float32 throughout: sf = e4m3(clamp((bamax / 6) / (amax / 2688), 2^-6, 448));
             ///< x * ((1 / (amax / 2688)) / sf) clamped to +-6; torchao's bit-twiddling E2M1 cast
  kModelOpt,  ///< nvidia-modelopt 0.47.0, float32: S = amax / 2688; sf = e4m3(clamp(bamax / (6 * S) (0 -> 1.0), 2^-9,
              ///< 448)); codes of x / (sf * S) by searchsorted (RN-even, saturating, -0.0 and NaN -> +; NaN -> 6)
  kJax,       ///< JAX quantize on XLA CPU (denormals flushed in and out of every float32 operation): xs = x * RN(1/S),
              ///< S = amax / 2688; sf = e4m3(clip(max|xs| / 6, 0, 448)); codes of clip(xs * RN(1/sf), -6, 6), XLA's
              ///< E2M1 convert (NaN -> 0x8); zero blocks: 0 * Inf
  kVllm,      ///< vLLM ref_nvfp4_quant: gs = T(T(1 / amax) * 2688) in the input's dtype T; sf = e4m3(clamp(gs * (bamax * RN(1/6)),
              ///< +-448)); data x * (1 / (sf * (1 / gs))) (a zero divisor replaced by 1e8), clamp +-6, value buckets
  kCompressedTensors,  ///< compressed-tensors 0.20.0 (ct_peers.cpp), in the input dtype T where it computes in it:
                       ///< gs = T(T(1 / max(amax, tiny_T)) * 2688) (NaN/Inf -> 1; amax Inf -> 0); sf = e4m3(clamp(gs *
                       ///< T(bpos / 6), +-448)), 0 -> 0.125; data x / (sf / gs) + 0, clamp +-6, value buckets (sign
                       ///< from signbit: small negatives -> 0x8; NaN -> 0x0, BF16 0x8); NaN block scales by lane
  kMlDtypesCast,  ///< ml_dtypes casts, float32: S = amax / 2688; sf = float8_e4m3fn((bamax / 6) / S) (non-saturating);
                  ///< codes float4_e2m1fn(x / (float(sf) * S)) (saturating, NaN -> 0x8 / 0x0 by the NaN's sign)
  kCompressedTensorsTriton,  ///< compressed-tensors 0.20.0 on CUDA tensors (ct_peers.cpp): gs and sf as kCompressedTensors
                             ///< by PyTorch's CUDA ops (a NaN scale is positive: 0x7F); its Triton _quantize_kernel:
                             ///< data x / div_rn(sf, gs) in float32, + 0, tl.clamp with runtime bounds (NaN -> -6: 0xF)
};

/// MXFP8 block-scale and data-scaling implementation.
enum class MxOrder : uint8_t {
  kTE,       ///< E8M0 from bamax * RN(1/elem_max) (rceil) or the floor of the exponent (ocp_floor);
             ///< data x * 2^(127 - e) (TE `exp2f_rcp`), satfinite cast
  kTorchAO,  ///< torchao `to_mx`: rceil from ceil(log2f(bamax / elem_max)); floor/ceil/even from the bits
             ///< of bamax; data x / max(2^(e-127), 2^-126) (x * 2^(127-e), 1.0 for e = 0, under rceil);
             ///< clamp to +-elem_max, then the cast (NaN keeps its sign)
  kModelOpt,  ///< nvidia-modelopt 0.47.0 MXFP8QTensor: e = ceil(log2f(bamax / 448)) where > 0 else -127 (zero and NaN
              ///< blocks -> 0x00), clamp [-127, 127]; data clamp(x * 2^(127 - e), +-448) (2^127 for e = 0), PyTorch cast
  kJax,       ///< JAX quantize on XLA CPU, in the input's dtype T: e = round-up E8M0 of T(bamax / elem_max) (F16:
              ///< T(bamax * T(1 / elem_max)); a NaN amax -> 0x00); data T(x * T(1 / T(2^(e-127)))) (e = 0: 2^-127,
              ///< F16: 2^-15), clip +-elem_max; denormals flushed in float32 arithmetic (1 / 2^-127 is Inf)
  kCompressedTensors,  ///< compressed-tensors 0.20.0 MXFP8 / MXFP4 (ct_peers.cpp), scale rule pow2_round in the input
                       ///< dtype T: bpos rounded to a power of two on its bits (mantissa >= 0.75 up), e = 127 +
                       ///< floor(log2) - emax_elem clamped [0, 255], scale T(2^(e-127)) (0 -> 1); data T(x / scale) +
                       ///< 0, clamp +-elem_max; NaN blocks by lane (all-ones NaN -> 2^-127, quiet NaN -> Inf)
  kTorchCast,     ///< float32: e = PyTorch's float -> float8_e8m0fnu cast of bamax / elem_max (sign dropped; up when
                  ///< mantissa bit 22 is set, a subnormal's exact half down; 0 -> 0x00, NaN/Inf -> 0xFF); data
                  ///< float8(x / float(e)) (float(0x00) = 2^-127, float(0xFF) = NaN), non-saturating cast
  kMlDtypesCast,  ///< as kTorchCast with ml_dtypes' casts: a scale <= 0 (zero blocks) or NaN -> 0xFF; E5M2 NaN 0x7E | s
  kTritonKernels,  ///< triton_kernels' `_downcast_to_mxfp` (MXFP4 only; mxfp4_codec.hpp): max.f32 amax, scale byte from
                   ///< the bits of bamax / 6 (rceil = ROUND_UP, + 0x7FFFFF) or bamax / 4 (ocp_floor = ROUND_DOWN); data
                   ///< x * 1/2^(e-127) (0 for e = 0x00, 0xFF), E2M1 RN-even saturating by bit arithmetic, NaN -> 0x7
  kVllmCutlass,  ///< vLLM's CUDA FP4 quantizer with UE8M0 scales (MXFP4 only; mxfp4_codec.hpp): __hmax2 amax, byte =
                 ///< clamp(exponent((bits + 2^21) & 0xFF800000) - 2, 0, 254); data x * 1/2^(e-127) (0 for e = 0x00)
  kFbgemm,  ///< FBGEMM MX4 (MXFP4 only; mxfp4_codec.hpp): e = clamp(ceil(log2f(amax)) - 2, -127, 125) with torch's float32
            ///< log2, zero blocks as 2^-126; data x / 2^e rounded half away from zero on 3 significant bits, saturating
  kQuark,  ///< amd-quark qdq_mxfp4 (MXFP4 only; mxfp4_codec.hpp): in the input's 16-bit type T, amax by __hmax (NaN
           ///< ignored), rounded on T's bits (mantissa >= 0.75 up; past T's range: Inf), byte = clamp(floor(log2) - 2 + 127,
           ///< 0, 254) (Inf and 0 -> 254); data x / T(2^(e-127)) (F16: Inf for byte 254), RN-even E2M1
  kCompressedTensorsTriton,  ///< compressed-tensors 0.20.0 MXFP8 / MXFP4 on CUDA tensors (ct_peers.cpp): the scales of
                             ///< kCompressedTensors by PyTorch's CUDA ops (a NaN block: CUDA's canonical NaN, scale
                             ///< 2^-127; an Inf scale stored 0x7E as int32(Inf) saturates); its Triton _quantize_kernel:
                             ///< data x / scale in float32 (not T), + 0, tl.clamp with runtime bounds (NaN -> -elem_max)
};

/// What a NaN or Inf block does to an MXFP8 scale under the kTE order.
enum class MxNonFinite : uint8_t {
  kSatFinite,  ///< NaN ignored by the amax; Inf -> 0xFE (TE `float_to_e8m0`, satfinite)
  kNaN,        ///< NaN propagates into the amax; a NaN or Inf block -> 0xFF (OCP MX v1.0)
};

/// How an FP8 block / tensor quantizer turns a block amax into its scale and scales the data (rule `fp8.form`).
/// TE computes the quantization scale and stores its reciprocal; the PyTorch-level quantizers of the model
/// toolkits and inference engines compute the stored dequantization scale s first and scale the data by it.
enum class Fp8Form : uint8_t {
  kTE,          ///< scale = fp8_max / amax (fp8.scale_order), data x * scale, stored 1 / scale; amax 0, Inf, NaN -> 1
  kInvDiv,      ///< s = amax / fp8_max, data x / s (ModelOpt, compressed-tensors, vLLM `_quantize_group_native`)
  kInvMulRcp,   ///< s = amax / fp8_max, data x * RN(1 / s) (DeepGEMM, vLLM `QuantFP8.forward_native` per tensor)
  kRcpMaxDiv,   ///< s = amax * RN(1 / fp8_max), data x / s
  kRcpMaxMulRcp,  ///< s = amax * rcp(fp8_max), data x * rcp(s), rcp = sm_90's rcp.approx.f32 (qtc/rcp_approx.hpp: RN(1 / s)
                  ///< +- 1 ulp by its measured table; rcp(448) = RN(1 / 448)): the Triton group quantizers on sm_90,
                  ///< whose fp32 `/` is PTX div.full.f32 (a * rcp.approx(b), seen on the H200)
  kCast,  ///< scale = fp8_max / amax unguarded (amax 0 -> Inf, Inf -> 0, NaN -> NaN), data the library's own float8 cast
          ///< of x * scale (not saturating, NaN sign kept), stored 1 / scale: current scaling written with PyTorch's /
          ///< ml_dtypes' casts (profiles torch_cast, ml_dtypes_cast; conformance/peers/cast_dump.py)
};

/// What the Triton group quantizers' tl.clamp(y, fp8_min, fp8_max) makes of a NaN y (rule `fp8.clamp_nan`).
enum class Fp8ClampNaN : uint8_t {
  kNaN,       ///< the NaN reaches the cast (NaN code)
  kPlusMax,   ///< +fp8_max (vLLM: fp8_min/fp8_max constexpr; min.f32 / max.f32 return the non-NaN operand)
  kMinusMax,  ///< -fp8_max (SGLang: bit8_min/bit8_max runtime arguments, max(y, min) first)
};

/// How pow2_scales=1 makes the stored scale a power of two under a form other than kTE (rule `fp8.pow2`).
enum class Fp8Pow2 : uint8_t {
  kNone,      ///< the profile defines no power-of-two scales (pow2_scales=1 is refused, rule fp8-profile-pow2)
  kCeilBits,  ///< DeepGEMM `ceil_to_ue8m0`: exponent of s plus (mantissa != 0), clamped to [1, 254] (NaN, Inf -> 2^127)
  kCeilLog2,  ///< vLLM: exp2(ceil(log2f(s))), the log rounded to float32 once (s just above 2^k, |k| >= 2: 2^k)
};

/// What a stored scale s = 0 (an all-zero block, no eps) becomes under a form other than kTE (rule `fp8.zero_scale`).
enum class Fp8ZeroScale : uint8_t {
  kKeep,      ///< stays 0: the block's data is 0 / 0 = NaN (ModelOpt)
  kDtypeEps,  ///< replaced by torch.finfo(input dtype).eps: 2^-23 (F32), 2^-7 (BF16), 2^-10 (F16) (compressed-tensors)
};

/// One profile's rules. Every field is a rule `qtc profiles` prints and `qtc identify` can toggle.
struct ProfileRules {
  Profile id = Profile::kTE;
  std::string name;     ///< metadata value
  int version = 1;      ///< bumped whenever a rule of this profile changes
  std::string follows;  ///< the implementation (and version) it reproduces
  bool nvfp4 = true, mxfp8 = true, fp8_block = true, fp8_tensor = true;  ///< recipe kinds it defines

  // Every recipe
  bool nan_amax = false;  ///< NaN propagates into block and tensor amaxes (else ignored, maxNum)

  // NVFP4
  Nvfp4Order nvfp4_order = Nvfp4Order::kTE;
  bool nvfp4_neg_zero_positive = false;  ///< -0.0 and NaN data -> code 0x0 (TE's PyTorch reference)
  bool nvfp4_nan_scale = false;          ///< a NaN block scale is stored as 0x7F (else fminf drops it)
  bool nvfp4_tiny_block_floor = false;   ///< block scale clamped up to 2^-6 (zero and tiny blocks)
  bool nvfp4_single_level = false;       ///< defines NVFP4 without a per-tensor scale (metadata per_tensor_scale=0)
  bool nvfp4_stochastic = true;          ///< defines NVFP4 stochastic rounding (TE's references have none)

  // MXFP8
  MxOrder mx_order = MxOrder::kTE;
  MxNonFinite mx_nonfinite = MxNonFinite::kSatFinite;
  std::vector<MxScaleRule> mx_scale_rules;  ///< scale rules this profile defines

  // FP8 block / tensor
  bool fp8_inf_amax_scale_zero = false;  ///< amax = +Inf -> scale 0 (TE's Python/C++ references), else 1
  bool fp8_scale_reciprocal = false;     ///< FP8 scale = fp8_max * RN(1 / amax) (PyTorch's `fp8_max / amax_tensor`),
                                         ///< else RN(fp8_max / amax) (TE)
  bool fp8_satfinite = true;             ///< FP8 block/tensor data cast saturates (cvt satfinite); else a value past
                                         ///< the range becomes NaN (E4M3) / Inf (E5M2), as PyTorch's and ml_dtypes' casts

  // MXFP4 (E2M1 elements, E8M0 scales per 32). Its scale and data arithmetic follow mx_order and mx_nonfinite
  // (as for MXFP8) with E2M1's constants: elem_max 6, emax 2; the E2M1 cast is RN-even satfinite (te, ocp: NaN ->
  // 0x7, -0 -> 0x8, TE_FORMATS.md §0.3) or torchao's `f32_to_f4_unpacked` (profile torchao).
  bool mxfp4 = true;                           ///< defines recipe kind mxfp4
  /// MXFP4 as TransformerEngine's PyTorch reference computes it (NVFP4QuantizerRef with pow_2_scales=True and tile
  /// 1x32; profile te_pyref; mxfp4_codec.hpp: the rule `mxfp4.order te_pyref`), whatever mx_order says for MXFP8
  bool mxfp4_te_reference = false;
  std::vector<MxScaleRule> mxfp4_scale_rules;  ///< MXFP4 scale rules this profile defines
  // FP8 block / tensor, the forms of the model toolkits and inference engines (issue 25)
  Fp8Form fp8_form = Fp8Form::kTE;         ///< FP8 block
  Fp8Form fp8_tensor_form = Fp8Form::kTE;  ///< FP8 tensor (vLLM: x * (1/s) per tensor, x / s per group)
  bool fp8_block_amax_nan_lanes = false;  ///< a block amax of NaN is 0xFFFFFFFF for the blocks in the vector chunks
                                          ///< of PyTorch's torch.maximum over the scale tensor (16 F32 / 32 BF16, F16
                                          ///< blocks, flat index) and 0x7FC00000 in its tail (ModelOpt,
                                          ///< compressed-tensors: max(|amin|, |amax|) per block)
  bool fp8_zero_point_add = false;  ///< data (x / s) + 0: -0.0 becomes +0.0 (compressed-tensors adds its zero point)
  bool fp8_bf16_nan_positive = false;  ///< BF16 input: a NaN code is 0x7F (compressed-tensors casts the FP8 codes to
                                       ///< BF16 and back, and PyTorch's scalar BF16 conversion makes NaN 0x7FC0)
  bool fp8_tensor_amax_full_reduction = false;  ///< per-tensor amax of a NaN as torch.max(|x|) of the input dtype
                                                ///< gives it (F32: 0xFFFFFFFF; torchao_codec.hpp tensor_amax)
  bool fp8_input_dtype_arith = false;  ///< s and x / s computed in the input dtype (BF16/F16 results rounded to it, as
                                       ///< PyTorch's elementwise ops on BF16/F16 tensors; a BF16 NaN is 0xFFFF inside
                                       ///< the 32-element vector chunks of the op and 0x7FC0 in its scalar tail)
  Fp8Pow2 fp8_pow2 = Fp8Pow2::kNone;
  Fp8ZeroScale fp8_zero_scale = Fp8ZeroScale::kKeep;
  float fp8_scale_min = 0.0f;          ///< s clamped to at least this (vLLM: RN(1 / (fp8_max * 512))); 0: none
  bool fp8_torch_nan = false;          ///< NaN results as PyTorch's CPU kernels give them (torchao_codec.hpp), the
                                       ///< data cast keeps a NaN's sign (0x7F | s), the per-tensor F32 amax of a NaN is
                                       ///< 0xFFFFFFFF (torch.max's full reduction); else a NaN code is 0x7F
  Fp8ClampNaN fp8_clamp_nan = Fp8ClampNaN::kNaN;  ///< a NaN data value after the clamp (Triton group quantizers)
  bool fp8_data_f32 = false;  ///< x / s in float32 even where s is computed in the input dtype (fp8_input_dtype_arith):
                              ///< compressed-tensors' Triton _quantize_kernel loads x and s as float32 and div_rn's
                              ///< them (rule `fp8.data_dtype`)
  bool fp8_cuda_nan = false;  ///< a NaN scale as PyTorch's CUDA ops give it: CUDA's canonical NaN 0x7FFFFFFF, stored in
                              ///< the input dtype and widened to float32 (BF16 0x7FFF -> 0x7FFF0000 by its bits, F16
                              ///< 0x7FFF -> cvt.f32.f16's 0x7FFFFFFF); part of rule fp8.nan

  /// Rule name -> value, in a fixed order (what `qtc profiles` prints and identify toggles).
  std::vector<std::pair<std::string, std::string>> describe() const;
};

/// Every profile, in a fixed order (te, te_pyref, ocp, torchao).
std::span<const ProfileRules> all_profiles();
/// The rules of `p` (a built-in profile or a registered variant).
const ProfileRules& profile_rules(Profile p);
/// The profile whose metadata name is `name`; throws qtc::Error listing the known names otherwise.
Profile profile_from_name(std::string_view name);
/// The names of the built-in profiles, comma-separated (for error messages and help texts).
std::string profile_names();

/// A rule of a profile that `identify` can toggle: its name and a function that changes `rules` to
/// the alternative value (returns false when the alternative does not apply to `rules`).
struct RuleToggle {
  std::string rule;
  std::string alternative;
  bool (*apply)(ProfileRules& rules);
};
/// Every single-rule change of a profile that `identify` tries.
std::span<const RuleToggle> rule_toggles();

/// Registers a variant (a built-in profile with some rules changed, under a name of its own) and returns its
/// id; used by `qtc identify` to test which rule explains a mismatch. A name registered before returns the
/// earlier id. Thread-safe; ids are never reused; profile_from_name finds variants too.
Profile register_profile_variant(const ProfileRules& rules);

std::string_view mx_scale_rule_name(MxScaleRule r);
/// The rule text of an FP8 form (what `qtc profiles` prints for fp8.form).
std::string_view fp8_form_name(Fp8Form f);
// What a code path other than the scalar reference implements of these rules: path_rules.hpp.

/// What each operation order computes (the value `qtc profiles` prints for nvfp4.order / mxfp8.order).
std::string_view nvfp4_order_text(Nvfp4Order o);
std::string_view mx_order_text(MxOrder o);

}  // namespace qtc
