/// \file backend_cuda.cpp
/// \brief The CUDA kernels as a QuantizeBackend (backend.hpp): host in, host out, compact scales, exactly
///        the reference's QuantizedTensor. Used by `qtc verify --backend cuda` and the conformance suites.
///        Verdicts: a recipe refused here (reference rules or the gating table) throws BackendError kNotSupported
///        with the reason; a CUDA error throws BackendError kError with CUDA's message (qtc verify: skipped / error,
///        never fail).
#include "qtc/cuda/backend.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/quantize.hpp"

namespace qtc {

namespace {

class CudaBackend final : public QuantizeBackend {
 public:
  std::string name() const override { return "cuda"; }

  std::string unavailable_reason() const override {
    return cuda::device_count() > 0 ? std::string() : std::string("no CUDA device");
  }

  std::string unsupported_reason(const Recipe& r, DType input, int64_t rows, int64_t cols) const override {
    const std::string u = unavailable_reason();
    if (!u.empty()) return u;
    return cuda::unsupported_reason(r, input, rows, cols);
  }

  QuantizedTensor quantize(const MatrixView& x, const Recipe& r) override {
    if (const std::string why = unsupported_reason(r, x.dtype, x.rows, x.cols); !why.empty())
      throw BackendError(BackendError::Kind::kNotSupported, "cuda backend: " + why);
    return on_device("quantizing", [&] { return quantize_on_device(x, r); });
  }

  HostMatrix dequantize(const QuantizedTensor& q, PlaneKind plane, DType out) override {
    if (const std::string u = unavailable_reason(); !u.empty())
      throw BackendError(BackendError::Kind::kNotSupported, "cuda backend: " + u);
    return on_device("dequantizing", [&] { return dequantize_on_device(q, plane, out); });
  }

 private:
  /// Runs device work: a CUDA error or a refusal by the kernels is BackendError kError (the backend gave no answer),
  /// never a wrong answer; running out of host memory stays std::bad_alloc.
  template <typename F>
  static auto on_device(const char* what, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const BackendError&) {
      throw;
    } catch (const Error& e) {
      throw BackendError(BackendError::Kind::kError, std::string("cuda backend: ") + what + ": " + e.what());
    }
  }

  static QuantizedTensor quantize_on_device(const MatrixView& x, const Recipe& r) {
    cudaStream_t s = nullptr;
    QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    struct StreamGuard {
      cudaStream_t s;
      ~StreamGuard() { (void)cudaStreamDestroy(s); }
    } guard{s};
    const size_t bytes = static_cast<size_t>(x.rows * x.cols) * dtype_size(x.dtype);
    cuda::DeviceBuffer dx(bytes, s);
    if (bytes > 0) QTC_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.data, bytes, cudaMemcpyHostToDevice, s));
    cuda::DeviceQuantized q = cuda::quantize({dx.data(), x.dtype, x.rows, x.cols}, r, s, ScaleLayout::kCompact);
    QuantizedTensor h = cuda::to_host(q, s);
    return h;
  }

  static HostMatrix dequantize_on_device(const QuantizedTensor& q, PlaneKind plane, DType out) {
    cudaStream_t s = nullptr;
    QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    struct StreamGuard {
      cudaStream_t s;
      ~StreamGuard() { (void)cudaStreamDestroy(s); }
    } guard{s};
    HostMatrix y(out, q.rows, q.cols);
    cuda::DeviceQuantized dq = cuda::from_host(q, s);
    cuda::DeviceBuffer dy(y.bytes.size(), s);
    cuda::dequantize(dq, plane, out, dy.data(), s);
    if (!y.bytes.empty()) QTC_CUDA_CHECK(cudaMemcpyAsync(y.bytes.data(), dy.data(), y.bytes.size(), cudaMemcpyDeviceToHost, s));
    QTC_CUDA_CHECK(cudaStreamSynchronize(s));
    return y;
  }
};

}  // namespace

std::unique_ptr<QuantizeBackend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace qtc
