/// \file mxfp4_launch.cpp
/// \brief The MXFP4 module of the kernels (VECTORS.md `mxfp4`): one thread per block of 32 (mxfp4.cu).
#include "kind_launch.hpp"
#include "qtc/kind.hpp"
#include "qtc/profile.hpp"

namespace qtc::cuda::detail {
namespace mxfp4_launch {  // named, not anonymous: the unity build shares anonymous namespaces

void quantize(const QuantizeArgs& a, DeviceQuantized&, const float*, cudaStream_t s) {
  // te / ocp / triton_kernels: rceil and ocp_floor; torchao: its four modes; vllm_cutlass and quark: even (their one rule);
  // fbgemm: ceil.
  QTC_CHECK(a.rules.mx_order == MxOrder::kTorchAO || a.rules.mx_order == MxOrder::kVllmCutlass ||
                a.rules.mx_order == MxOrder::kFbgemm || a.rules.mx_order == MxOrder::kQuark ||
                a.mxfp4.scale_rule == MxScaleRule::kRceil ||
                a.mxfp4.scale_rule == MxScaleRule::kOcpFloor,
            "MXFP4 scale_rule ", mx_scale_rule_name(a.mxfp4.scale_rule),
            " is defined by torchao's to_mx, vLLM's UE8M0 quantizer, FBGEMM's MX4 and amd-quark's qdq_mxfp4 only (profiles "
            "torchao, vllm_cutlass, fbgemm, quark)");
  launch_mxfp4(a, s);
}

}  // namespace mxfp4_launch

const CudaKindModule kMxfp4Launch = {
    .kind = kind_of_options<Mxfp4Options>,
    .quantize = mxfp4_launch::quantize,
    .unsupported = [](const Recipe&, int64_t) { return std::string(); },
    .gating_features = [](const Recipe&, std::vector<gating::Feature>& out) { out.push_back(gating::Feature::kQuantizeMxfp4); },
    .dequantize = launch_dequantize_mxfp4};

}  // namespace qtc::cuda::detail
