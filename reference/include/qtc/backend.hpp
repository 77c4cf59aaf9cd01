/// \file backend.hpp
/// \brief A quantization backend: the CPU reference, or the CUDA kernels on the GPU. `qtc verify` and the
///        conformance suites run vectors through any backend and compare with the expected outputs.
#pragma once
#include <memory>
#include <string>

#include "qtc/error.hpp"
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

/// What a backend throws when it could not produce an answer, as opposed to producing a wrong one: a CUDA error or
/// a launch the backend refused. `qtc verify` reports kError as an error and kNotSupported as skipped with the
/// message, never as a failure (VECTORS.md verdicts).
class BackendError : public Error {
 public:
  enum class Kind { kError, kNotSupported };
  BackendError(Kind k, const std::string& what) : Error(what), kind(k) {}
  Kind kind;
};

/// The CPU reference as a backend (reference/src/core/backend_cpu.cpp). The CUDA kernels' backend is
/// make_cuda_backend() in qtc/cuda/backend.hpp (kernels/).
std::unique_ptr<QuantizeBackend> make_cpu_backend();

}  // namespace qtc
