/// \file backend_unavailable.cpp
/// \brief make_cuda_backend() for builds without CUDA: a backend that says why it cannot run.
#include "qtc/cuda/backend.hpp"
#include "qtc/error.hpp"

namespace qtc {

namespace {

constexpr const char* kReason = "qtc was built without CUDA";

class UnavailableCudaBackend final : public QuantizeBackend {
 public:
  std::string name() const override { return "cuda"; }
  std::string unavailable_reason() const override { return kReason; }
  std::string unsupported_reason(const Recipe&, DType, int64_t, int64_t) const override { return kReason; }
  QuantizedTensor quantize(const MatrixView&, const Recipe&) override {
    throw BackendError(BackendError::Kind::kNotSupported, std::string("cuda backend: ") + kReason);
  }
  HostMatrix dequantize(const QuantizedTensor&, PlaneKind, DType) override {
    throw BackendError(BackendError::Kind::kNotSupported, std::string("cuda backend: ") + kReason);
  }
};

}  // namespace

std::unique_ptr<QuantizeBackend> make_cuda_backend() { return std::make_unique<UnavailableCudaBackend>(); }

}  // namespace qtc
