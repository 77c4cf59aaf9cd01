/// \file hybrid.hpp
/// \brief Hybrid planes on the device (qtc/hybrid.hpp): TE's HybridQuantizer composed from the existing kernels,
///        bit for bit the CPU reference's ref::quantize_hybrid. The rowwise plane is quantized from x, the rowwise
///        plane dequantized on the device into the source dtype, and the columnwise plane quantized from that (or
///        from x). Stream-ordered; the intermediate never leaves the device.
#pragma once
#include <vector>

#include "qtc/cuda/quantize.hpp"
#include "qtc/hybrid.hpp"

namespace qtc::cuda {

/// A hybrid tensor on the device: one DeviceQuantized per plane (each holding only its plane), and the dequantized
/// rowwise plane the columnwise one was quantized from (rowwise_dequantized; else empty).
struct DeviceHybrid {
  DeviceQuantized rowwise;
  DeviceQuantized columnwise;
  DeviceBuffer source;  ///< [M, K] of h.source_dtype_for(x.dtype)
  DType source_dtype = DType::kF32;
};

/// Empty when both planes (and the dequantization between them) can run here; otherwise the reason.
std::string unsupported_reason(const HybridRecipe& h, DType input, int64_t rows, int64_t cols);

/// The hybrid quantizer on one tensor (h.group_rows ignored). Throws qtc::Error naming the rule for a recipe or
/// input the reference refuses.
DeviceHybrid quantize_hybrid(const DeviceMatrixView& x, const HybridRecipe& h, cudaStream_t stream,
                             ScaleLayout layout = ScaleLayout::kCompact);

/// Grouped: each group of h.group_rows quantized as its own tensor (a zero-row group gives empty planes); the
/// groups are packed along M of x. What TE's fused grouped MXFP8 requantization computes, group by group.
std::vector<DeviceHybrid> quantize_hybrid_grouped(const DeviceMatrixView& x, const HybridRecipe& h,
                                                  cudaStream_t stream, ScaleLayout layout = ScaleLayout::kCompact);

/// Copies a device hybrid tensor to the host (synchronizes the stream).
HybridQuantized to_host(const DeviceHybrid& d, cudaStream_t stream);

}  // namespace qtc::cuda
