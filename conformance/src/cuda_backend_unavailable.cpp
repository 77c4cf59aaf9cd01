/// \file cuda_backend_unavailable.cpp
/// \brief Fallback make_cuda_backend() for a tree whose kernels/ defines no qtc_cuda target: a backend that
///        is never available, so `--backend cuda` answers `skipped` with the reason.
#include "qtc/backend.hpp"

namespace qtc {

namespace {
class UnavailableCudaBackend final : public QuantizeBackend {
 public:
  std::string name() const override { return "cuda"; }
  std::string unavailable_reason() const override { return "qtc was built without the CUDA kernels (no qtc_cuda target)"; }
  std::string unsupported_reason(const Recipe&, DType, int64_t, int64_t) const override { return unavailable_reason(); }
  QuantizedTensor quantize(const MatrixView&, const Recipe&) override { QTC_FAIL("cuda backend: ", unavailable_reason()); }
  HostMatrix dequantize(const QuantizedTensor&, PlaneKind, DType) override { QTC_FAIL("cuda backend: ", unavailable_reason()); }
};
}  // namespace

std::unique_ptr<QuantizeBackend> make_cuda_backend() { return std::make_unique<UnavailableCudaBackend>(); }

}  // namespace qtc
