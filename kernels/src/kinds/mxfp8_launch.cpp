/// \file mxfp8_launch.cpp
/// \brief The MXFP8 module of the kernels (TE_FORMATS.md §2): block amaxes are the kernel's own (mxfp8.cu).
#include "kind_launch.hpp"
#include "qtc/kind.hpp"

namespace qtc::cuda::detail {

const CudaKindModule kMxfp8Launch = {
    .kind = kind_of_options<Mxfp8Options>,
    .quantize = [](const QuantizeArgs& a, DeviceQuantized&, const float*, cudaStream_t s) { launch_mxfp8(a, s); },
    .unsupported = [](const Recipe&, int64_t) { return std::string(); },
    .gating_features = [](const Recipe&, std::vector<gating::Feature>& out) { out.push_back(gating::Feature::kQuantizeMxfp8); },
    .dequantize = launch_dequantize_mxfp8};

}  // namespace qtc::cuda::detail
