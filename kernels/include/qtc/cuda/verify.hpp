/// \file verify.hpp
/// \brief `qtc verify --backend cuda` on a vector whose tensors are in device memory (issue 23): the tensors stay
///        where they are; the kernels quantize x on their device and compare_on_device (compare.hpp) compares each
///        expected output there. Only counts and first indices come to the host, and of the data only what the
///        message shows (the first differing elements, at most 32 inputs of their block). The verdicts, the order of
///        the checks and the messages are those of conformance::verify_vector (qtc/verify.hpp) with the CUDA backend,
///        its two further tiers included:
///          * bytes differ, decoded values equal (EQUIVALENT, value_equivalence.hpp): both encodings of each
///            differing plane are dequantized by the kernels and compared as values on the device; only when every
///            value is equal are the two quantizations copied to the host, where conformance::compare_values decides
///            the verdict and writes the message, as verify_vector does;
///          * hybrid vectors (recipe=hybrid, qtc/hybrid.hpp): each plane verified as its own vector, the columnwise
///            plane's source (rowwise_dequantized) quantized and dequantized on the device, the file's
///            columnwise_source compared there (verify_hybrid_vector's steps and texts).
///        Users: the Python module's CUDA tensors (python/src/qtc_python_cuda.cpp) and qtc::testing's device overload
///        (testing_device.hpp).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qtc/verify.hpp"

namespace qtc::cuda {

/// One tensor of a vector in memory the kernels can read (device memory, managed memory, mapped pinned memory):
/// its VECTORS.md name, its safetensors dtype name (F32, BF16, F16, U8, F8_E4M3, ...), its shape and its bytes
/// (C-contiguous; nbytes = the shape's elements times the dtype's size).
struct DeviceTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

/// Makes CUDA device `device` current for its lifetime (-1: keeps the current one, which must be usable) and makes
/// the caller's current again; throws qtc::Error naming the device and the CUDA error when it cannot be used.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

/// Verifies the vector {tensors, metadata} on CUDA device `device` (-1: the current one), whose memory holds the
/// tensors. Work is queued on `stream` (after the caller's work that produced the tensors); the call synchronizes it.
/// Every check of the names, shapes and dtypes runs on the host before the first CUDA call. Never throws: every
/// problem is a verdict (a device that cannot be used: an error naming it; a recipe the kernels do not run there:
/// skipped, with the reason). The current device is the caller's again on return.
conformance::FileResult verify_on_device(const std::vector<DeviceTensor>& tensors,
                                         const std::map<std::string, std::string>& metadata, const std::string& source,
                                         const conformance::VerifyOptions& opts, cudaStream_t stream, int device = -1);

}  // namespace qtc::cuda
