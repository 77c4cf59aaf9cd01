/// \file quantize.hpp
/// \brief The CUDA quantizers on device memory: the same recipes, planes, layouts and profiles as
///        qtc::ref::quantize (reference/include/qtc/quantize.hpp), bit for bit.
///
/// Usage:
///   auto q = qtc::cuda::allocate_quantized(recipe, DType::kBF16, M, K, ScaleLayout::kSwizzled, stream);
///   qtc::cuda::quantize_into({d_x, DType::kBF16, M, K}, q, stream);   // stream-ordered, no host sync
///   QuantizedTensor h = qtc::cuda::to_host(q, stream);                 // synchronizes the stream
///
/// quantize_into never synchronizes with the host and never allocates, so it can be captured in a CUDA
/// graph; the amax passes it needs (global, per row, per column, post-RHT) run on the device.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>

#include "qtc/quantized.hpp"

namespace qtc::cuda {

/// An owning device allocation, stream-ordered (cudaMallocAsync / cudaFreeAsync on the stream it was
/// made on). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, cudaStream_t stream);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void reset() noexcept;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

/// A row-major [M, K] matrix of F32, BF16 or F16 in device memory (16-byte aligned base recommended).
struct DeviceMatrixView {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
};

/// One plane on the device, shaped exactly like qtc::Plane.
struct DevicePlane {
  int64_t data_rows = 0;
  int64_t data_cols = 0;  ///< bytes per row
  DeviceBuffer data;
  ScaleType scale_type = ScaleType::kE4M3;
  ScaleLayout scale_layout = ScaleLayout::kCompact;
  int64_t scale_rows = 0;  ///< shape of the scale buffer in its layout (PlaneSpec::geometry(scale_layout))
  int64_t scale_cols = 0;
  DeviceBuffer scale;      ///< scale_rows * scale_cols elements (E4M3/E8M0 bytes or F32)
  int64_t amax_count = 0;  ///< 0, 1, or M/K (row-scaled)
  DeviceBuffer amax;       ///< amax_count floats
};

/// A quantized tensor on the device.
struct DeviceQuantized {
  Recipe recipe;
  DType input_dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  std::optional<DevicePlane> rowwise;
  std::optional<DevicePlane> columnwise;
  DeviceBuffer scale_inv;  ///< FP8 tensor: one float, 1/scale
  DeviceBuffer workspace;  ///< internal: amaxes that no plane holds
};

/// Which NVFP4 quantization kernel serves a call. Every choice writes the same bytes (the GPU tests compare each
/// with the reference); tests, diagnostics and benchmarks choose.
enum class Nvfp4Kernel : uint8_t {
  kAuto,     ///< the fast kernel wherever it applies, else the generic one (the default)
  kGeneric,  ///< the generic kernel (every NVFP4 recipe)
  kFast,     ///< the fast kernel (1x16 / 16x16 RN, te's rules, BF16/F16, aligned); a call it cannot serve is refused
};

/// Which MXFP8 / FP8 block / FP8 tensor cast kernels (and FP8 tensor's device amax pass) serve a call, for BF16/F16
/// inputs whose rows are 16-byte aligned (the others always take the generic kernels). Both write the same bytes.
enum class CastKernel : uint8_t {
  kAuto,       ///< the default: kRegister until the pipelined kernels have passed on a GPU
  kRegister,   ///< one tile per warp (MXFP8) or CTA (FP8) held in registers, loaded, cast, stored, exit
  kPipelined,  ///< persistent warps / CTAs, cp.async into per-thread shared-memory stages two tiles ahead,
               ///< compile-time FP8 type and NaN rule; FP8 tensor: the device amax pass on packed words
};

/// Launch choices that never change the output bytes.
struct LaunchOptions {
  Nvfp4Kernel nvfp4_kernel = Nvfp4Kernel::kAuto;
  int nvfp4_stages = 0;  ///< the fast NVFP4 kernel's shared-memory stages, 2 or 3; 0: the default (2)
  int nvfp4_strip = 0;   ///< the fast NVFP4 kernel's tile order, strips of 1..64 tiles (1: row-major); 0: the default (8)
  CastKernel cast_kernel = CastKernel::kAuto;  ///< MXFP8, FP8 block, FP8 tensor
};

/// Empty when the recipe and input can run on this build and device; otherwise the reason: the recipe's
/// rules (Recipe::validate_input), then, when a device is present, the capability table (qtc/gating.hpp).
std::string unsupported_reason(const Recipe& r, DType input, int64_t rows, int64_t cols);

/// Allocates the output planes for (recipe, input type, M, K) with scales in `layout`.
/// Throws qtc::Error naming the rule for illegal recipes or shapes (the reference's validation).
DeviceQuantized allocate_quantized(const Recipe& r, DType input, int64_t rows, int64_t cols, ScaleLayout layout,
                                   cudaStream_t stream);

/// Quantizes x into preallocated outputs (shapes must match). Stream-ordered; no host synchronization,
/// no allocation. Padding of padded/swizzled scales is written as zero.
void quantize_into(const DeviceMatrixView& x, DeviceQuantized& out, cudaStream_t stream, const LaunchOptions& launch = {});

/// Same with the global amaxes supplied (TE `quantize_with_amax`): NVFP4 per-tensor and FP8 tensor.
void quantize_with_amax_into(const DeviceMatrixView& x, DeviceQuantized& out, float amax_rowwise,
                             float amax_columnwise, cudaStream_t stream, const LaunchOptions& launch = {});

/// Allocates and quantizes.
DeviceQuantized quantize(const DeviceMatrixView& x, const Recipe& r, cudaStream_t stream,
                         ScaleLayout layout = ScaleLayout::kCompact, const LaunchOptions& launch = {});

/// Copies a device result to the host (synchronizes the stream).
QuantizedTensor to_host(const DeviceQuantized& q, cudaStream_t stream);

/// Uploads a host quantized tensor (any scale layout) to the device (synchronizes the stream).
DeviceQuantized from_host(const QuantizedTensor& q, cudaStream_t stream);

/// Dequantizes one plane into y, a device [M, K] matrix of type `out` in x's orientation (as
/// qtc::ref::dequantize; RHT columnwise planes stay in the transformed domain). Stream-ordered.
void dequantize(const DeviceQuantized& q, PlaneKind plane, DType out, void* y, cudaStream_t stream);

/// Number of CUDA devices (0 when the driver or device is missing; never throws).
int device_count();

}  // namespace qtc::cuda
