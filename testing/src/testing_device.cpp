/// \file testing_device.cpp
/// \brief conforms() on device memory (testing_device.hpp): copies x and every given buffer to the host, then the
///        host conforms(). Compiled only when qtc is built with CUDA (library qtc_testing_cuda).
#include "qtc/testing_device.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "qtc/tensor.hpp"

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

}  // namespace

::testing::AssertionResult conforms(OnDevice where, const MatrixView& x, const Recipe& r, const Outputs& out, const std::string& name) {
  const std::string source = name.empty() ? r.name() : name;
  const cudaStream_t s = static_cast<cudaStream_t>(where.stream);
  std::string why;
  if (x.rows < 0 || x.cols < 0) return ::testing::AssertionFailure() << "ERROR " << source << ": x has a negative dimension";
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

}  // namespace qtc::testing
