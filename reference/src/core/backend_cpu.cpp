/// \file backend_cpu.cpp
/// \brief The CPU reference as a QuantizeBackend.
#include "qtc/backend.hpp"
#include "qtc/quantize.hpp"

namespace qtc {

namespace {
class CpuBackend final : public QuantizeBackend {
 public:
  std::string name() const override { return "cpu"; }
  std::string unavailable_reason() const override { return {}; }
  std::string unsupported_reason(const Recipe& r, DType input, int64_t rows, int64_t cols) const override {
    try {
      r.validate_input(input, rows, cols);
    } catch (const Error& e) {
      return e.what();
    }
    return {};
  }
  QuantizedTensor quantize(const MatrixView& x, const Recipe& r) override { return ref::quantize(x, r); }
  HostMatrix dequantize(const QuantizedTensor& q, PlaneKind plane, DType out) override { return ref::dequantize(q, plane, out); }
};
}  // namespace

std::unique_ptr<QuantizeBackend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace qtc
