/// \file testing_device.cpp
/// \brief conforms() on device memory (testing_device.hpp). Where every buffer is memory the kernels can read on one
///        device, the vector is verified there by qtc::cuda::verify_on_device (the CUDA kernels quantize x, the
///        device comparison compares; only what the message shows is copied). Otherwise (pageable host memory,
///        buffers on several devices, no usable device), for a recipe the kernels do not run there, and for
///        stochastic_admissible, the buffers are copied to the host and the host conforms() checks them. Compiled
///        only when qtc is built with CUDA (library qtc_testing_cuda).
#include "qtc/testing_device.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "qtc/cuda/verify.hpp"
#include "qtc/tensor.hpp"
#include "testing_vector.hpp"

namespace qtc::testing {

namespace {

/// Copies n bytes at `src` (any pointer the runtime can read) into `dst`; an error names the buffer.
bool copy_to_host(const void* src, size_t n, cudaStream_t s, const char* what, std::vector<uint8_t>& dst, std::string& why) {
  dst.resize(n);
  if (n == 0) return true;
  cudaError_t e = cudaMemcpyAsync(dst.data(), src, n, cudaMemcpyDefault, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) return true;
  why = std::string("copying ") + what + " (" + std::to_string(n) + " bytes) to the host failed: " + cudaGetErrorName(e) + ": " +
        cudaGetErrorString(e);
  return false;
}

/// The host path: x and every given buffer copied to the host, then the host conforms().
::testing::AssertionResult via_host(cudaStream_t s, const MatrixView& x, const Recipe& r, const Outputs& out, const std::string& name) {
  const std::string source = name.empty() ? r.name() : name;
  std::string why;
  std::vector<uint8_t> xh;
  if (!copy_to_host(x.data, static_cast<size_t>(x.rows * x.cols) * dtype_size(x.dtype), s, "x", xh, why))
    return ::testing::AssertionFailure() << "ERROR " << source << ": " << why;
  Outputs host = out;
  std::vector<uint8_t> copies[10];
  Buffer* bufs[10] = {&host.rowwise_data, &host.rowwise_scale_inv, &host.columnwise_data, &host.columnwise_scale_inv,
                      &host.amax_rowwise, &host.amax_columnwise,   &host.scale_inv,       &host.amax,
                      &host.dequantized_rowwise, &host.dequantized_columnwise};
  const char* names[10] = {"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv", "amax_rowwise",
                           "amax_columnwise", "scale_inv", "amax", "dequantized_rowwise", "dequantized_columnwise"};
  for (int i = 0; i < 10; ++i) {
    if (bufs[i]->empty()) continue;
    if (!copy_to_host(bufs[i]->data, bufs[i]->size_bytes, s, names[i], copies[i], why))
      return ::testing::AssertionFailure() << "ERROR " << source << ": " << why;
    // A non-null pointer for a zero-byte copy keeps the buffer "given" (the size check then names the shape).
    static const uint8_t kNothing = 0;
    *bufs[i] = Buffer(copies[i].empty() ? &kNothing : copies[i].data(), copies[i].size());
  }
  static const uint8_t kNoInput = 0;
  const MatrixView xv{xh.empty() ? &kNoInput : xh.data(), x.dtype, x.rows, x.cols};
  return conforms(xv, r, host, name);
}

/// The device whose kernels can read every pointer of the vector (device memory of one device; managed or mapped
/// pinned memory, readable at the same address), or -1: a pointer the kernels cannot read (pageable host memory),
/// buffers on several devices, or no usable CUDA runtime. Errors of the queries are cleared.
int readable_device(const detail::GivenVector& v) {
  int device = -1;
  for (const detail::GivenTensor& t : v.tensors) {
    if (t.bytes == 0) continue;
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, t.data) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    if (a.type == cudaMemoryTypeDevice) {
      if (device >= 0 && a.device != device) return -1;
      device = a.device;
    } else if ((a.type != cudaMemoryTypeManaged && a.type != cudaMemoryTypeHost) || a.devicePointer != t.data) {
      return -1;
    }
  }
  if (device >= 0) return device;
  int current = -1;  // managed / mapped memory only: the current device reads it
  if (cudaGetDevice(&current) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return current;
}

}  // namespace

::testing::AssertionResult conforms(OnDevice where, const MatrixView& x, const Recipe& r, const Outputs& out, const std::string& name) {
  const std::string source = name.empty() ? r.name() : name;
  const cudaStream_t s = static_cast<cudaStream_t>(where.stream);
  if (x.rows < 0 || x.cols < 0) return ::testing::AssertionFailure() << "ERROR " << source << ": x has a negative dimension";
  if (out.stochastic_admissible && r.nvfp4_or_null() != nullptr && r.nvfp4().stochastic) return via_host(s, x, r, out, name);
  detail::GivenVector v;
  try {
    v = detail::given_vector(x, r, out);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "ERROR " << source << ": " << detail::rule(e.what());
  }
  const int device = readable_device(v);
  if (device < 0) return via_host(s, x, r, out, name);
  std::vector<cuda::DeviceTensor> tensors;
  for (const detail::GivenTensor& t : v.tensors) tensors.push_back({t.name, t.dtype, t.shape, t.data, t.bytes});
  conformance::VerifyOptions opts;
  opts.strict_padding = out.strict_padding;
  const conformance::FileResult res = cuda::verify_on_device(tensors, v.metadata, source, opts, s, device);
  if (res.verdict == conformance::Verdict::kSkipped) return via_host(s, x, r, out, name);  // the kernels lack it: the reference
  return detail::assertion_for(res, out.accept_equal_values);
}

}  // namespace qtc::testing
