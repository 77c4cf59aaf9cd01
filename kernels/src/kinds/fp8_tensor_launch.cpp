/// \file fp8_tensor_launch.cpp
/// \brief The FP8 per-tensor module of the kernels (TE_FORMATS.md §4): the global amax pass (or quantize_with_amax's
///        amax), the cast kernel (fp8.cu), and the one scale_inv copied into each plane's 1x1 scale.
#include "kind_launch.hpp"
#include "qtc/kind.hpp"

namespace qtc::cuda::detail {
namespace fp8_tensor_launch {  // named, not anonymous: the unity build shares anonymous namespaces

void quantize(const QuantizeArgs& a, DeviceQuantized& out, const float* host_amax, cudaStream_t s) {
  if (host_amax != nullptr) {
    launch_fill(a.amax_row, 1, host_amax[0], s);
  } else {
    AmaxParams p = amax_over(a);
    p.global = a.amax_row;
    p.packed_reverse = a.launch.cast_kernel == CastKernel::kPipelined;
    launch_amax(p, s);
  }
  if (a.rowwise && a.columnwise) copy_f32(a.amax_col, a.amax_row, s);
  if (a.M * a.K == 0) launch_fill(a.scale_inv, 1, 1.0f, s);  // no tile runs: the scale still follows from amax = 0
  launch_fp8_tensor(a, s);
  for (const std::optional<DevicePlane>* pl : {&out.rowwise, &out.columnwise})
    if (pl->has_value()) copy_f32((*pl)->scale.as<float>(), a.scale_inv, s);
}

}  // namespace fp8_tensor_launch

const CudaKindModule kFp8TensorLaunch = {
    .kind = kind_of_options<Fp8TensorOptions>,
    .quantize = fp8_tensor_launch::quantize,
    .unsupported = [](const Recipe&, int64_t) { return std::string(); },
    .gating_features = [](const Recipe&, std::vector<gating::Feature>& out) { out.push_back(gating::Feature::kQuantizeFp8Tensor); },
    .dequantize = launch_dequantize_fp8_tensor};

}  // namespace qtc::cuda::detail
