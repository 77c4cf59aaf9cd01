/// \file kind_launch.hpp
/// \brief Internal: a recipe kind's module at the kernels layer (one file per kind: kinds/<kind>_launch.cpp,
///        registered in kinds/kind_launch_table.cpp in RecipeKind order, checked as the reference's kind table is):
///        the amax passes and kernel launches of one quantize call, what the kernels refuse beyond the recipe's
///        rules, and the gating features the call needs. backend/quantize.cpp looks the kind up here.
#pragma once
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "launch.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/error.hpp"
#include "qtc/gating.hpp"

namespace qtc::cuda::detail {

struct CudaKindModule {
  RecipeKind kind;
  /// Amax passes (host_amax: quantize_with_amax's rowwise and columnwise amaxes, or nullptr) and the kind's kernels,
  /// all on stream s, writing the outputs `a` names (and the per-tensor scale of `out`'s planes where there is one).
  void (*quantize)(const QuantizeArgs& a, DeviceQuantized& out, const float* host_amax, cudaStream_t s);
  /// Why the kernels do not take an input of `rows` rows for this recipe, beyond the recipe's own rules (empty: they do).
  std::string (*unsupported)(const Recipe& r, int64_t rows);
  /// The capability-table features (gating.hpp) a quantize of `r` needs on the device.
  void (*gating_features)(const Recipe& r, std::vector<gating::Feature>& out);
  /// One plane to [M, K] in x's orientation (the kind's decoder on dequantize.cuh's pass), on stream s.
  void (*dequantize)(const DequantizeArgs& a, cudaStream_t s);
};

/// The kernels' module of kind `k`.
const CudaKindModule& cuda_kind_module(RecipeKind k);

extern const CudaKindModule kNvfp4Launch;
extern const CudaKindModule kMxfp8Launch;
extern const CudaKindModule kFp8BlockLaunch;
extern const CudaKindModule kFp8TensorLaunch;
extern const CudaKindModule kMxfp4Launch;

// Shared by the launchers (backend/quantize.cpp).
/// Copies one float on the device (nothing when dst == src).
void copy_f32(float* dst, const float* src, cudaStream_t s);
/// The amax pass over the call's input with the profile's NaN rule; the caller names the outputs.
inline AmaxParams amax_over(const QuantizeArgs& a) {
  return {.x = a.x, .dtype = a.dtype, .rows = a.M, .cols = a.K, .nan_amax = a.rules.nan_amax};
}

}  // namespace qtc::cuda::detail
