/// \file backend.hpp
/// \brief A quantization backend: the CPU reference, or the CUDA kernels on the GPU. `qtc verify` and the
///        conformance suites run vectors through any backend and compare with the expected outputs.
#pragma once
#include <memory>
#include <string>

#include "qtc/quantized.hpp"

namespace qtc {

class QuantizeBackend {
 public:
  virtual ~QuantizeBackend() = default;
  /// "cpu" or "cuda".
  virtual std::string name() const = 0;
  /// Empty when the backend can run here; otherwise why not ("built without CUDA", "no CUDA device").
  virtual std::string unavailable_reason() const = 0;
  /// Empty when this recipe and input can run on this backend; otherwise the gating reason.
  virtual std::string unsupported_reason(const Recipe& r, DType input, int64_t rows, int64_t cols) const = 0;
  /// Quantizes x; scales in the compact layout, exactly as ref::quantize returns them.
  virtual QuantizedTensor quantize(const MatrixView& x, const Recipe& r) = 0;
  /// Dequantizes one plane (x's orientation), as ref::dequantize.
  virtual HostMatrix dequantize(const QuantizedTensor& q, PlaneKind plane, DType out) = 0;
};

/// The CPU reference as a backend (reference/src/backend_cpu.cpp).
std::unique_ptr<QuantizeBackend> make_cpu_backend();
// make_cuda_backend(), the kernels as a backend, is declared with them: kernels/include/qtc/cuda/backend.hpp.

}  // namespace qtc
