/// \file fp8_block_launch.cpp
/// \brief The FP8 block module of the kernels (TE_FORMATS.md §3): block amaxes are the kernel's own (fp8.cu).
#include "kind_launch.hpp"
#include "qtc/kind.hpp"

namespace qtc::cuda::detail {

const CudaKindModule kFp8BlockLaunch = {
    .kind = kind_of_options<Fp8BlockOptions>,
    .quantize = [](const QuantizeArgs& a, DeviceQuantized&, const float*, cudaStream_t s) { launch_fp8_block(a, s); },
    .unsupported = [](const Recipe&, int64_t) { return std::string(); },
    .gating_features = [](const Recipe&, std::vector<gating::Feature>& out) { out.push_back(gating::Feature::kQuantizeFp8Block); },
    .dequantize = launch_dequantize_fp8_block};

}  // namespace qtc::cuda::detail
