/// \file quantize.hpp
/// \brief The CPU reference quantizers and dequantizers (TE_FORMATS.md §1-§4), in the order of operations
///        the recipe's profile gives. Scales come out in the compact layout (layouts.hpp converts).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "qtc/quantized.hpp"

namespace qtc::ref {

/// Quantizes x with the recipe. Throws qtc::Error naming the rule for illegal recipes or inputs.
QuantizedTensor quantize(const MatrixView& x, const Recipe& recipe);

/// Same, with the global amax supplied by the caller (TE `quantize_with_amax`, or an amax all-reduced
/// across shards): NVFP4 per-tensor (rowwise and columnwise amax) and FP8 tensor current scaling.
QuantizedTensor quantize_with_amax(const MatrixView& x, const Recipe& recipe, float amax_rowwise, float amax_columnwise);

/// Dequantizes one plane to a [M, K] matrix of `out` type in x's orientation (RHT columnwise planes stay
/// in the transformed domain).
HostMatrix dequantize(const QuantizedTensor& q, PlaneKind plane, DType out = DType::kF32);

/// The value an NVFP4 block's E2M1 codes are multiplied by when dequantized: TE's order (sf * amax) * 1/(6 * e4m3_max),
/// or torchao's (amax / 2688) * sf, and sf alone when the recipe has no per-tensor scale. `amax` is the plane's (or the
/// plane row's, row-scaled) global amax, `scale_byte` the block's E4M3 scale. What ref::dequantize applies; built once
/// per recipe (it reads the profile's rules), applied per block.
class Nvfp4BlockDequant {
 public:
  explicit Nvfp4BlockDequant(const Recipe& r);
  float operator()(float amax, uint8_t scale_byte) const;

 private:
  bool torchao_ = false, two_level_ = true;
  float factor_ = 0.0f;
};

/// NaN-ignoring amax over the whole matrix (TE §0.5); `propagate_nan` gives torch.amax semantics.
float amax(const MatrixView& x, bool propagate_nan = false);

/// NVFP4 global encode scale S_enc (TE §1.3, `compute_global_encode_scaling_factor_FP4`).
float nvfp4_global_encode_scale(float global_amax, int e4m3_max = 448, Profile profile = Profile::kTE);

/// FP8 scale from amax (TE §3.2 `compute_scale_from_amax`).
float fp8_scale_from_amax(float amax, float max_fp8, bool pow2, float eps, float value_for_inf,
                          Profile profile = Profile::kTE);

/// The bf16 RHT of x^T (TE §1.9): [K, M] bf16 bits, each output the exact 16-term sum rounded once.
HostMatrix rht_transform(const MatrixView& x, uint16_t sign_mask = 0xD7E8);

/// Delayed scaling (TE §4.4): one amax-history and scale update after the amax reduction.
struct DelayedScalingState {
  std::vector<float> amax_history;  ///< length L, row 0 = the current step's recorded amax
  float scale = 1.0f;
};
enum class AmaxComputeAlgo { kMax, kMostRecent };
void delayed_scaling_update(DelayedScalingState& state, float fp8_max, float margin, AmaxComputeAlgo algo);

}  // namespace qtc::ref
