/// \file testing_device.hpp
/// \brief conforms() on device memory (library qtc::testing_cuda, built and exported only when qtc was built with
///        CUDA). The input and the output buffers are copied to the host inside (cudaMemcpyDefault: device, managed
///        or host pointers alike), then checked exactly as conforms() of testing.hpp checks host buffers, with the
///        same message. This header needs no CUDA header; include <cuda_runtime.h> before it to get on_stream().
///
///   TEST(MyKernel, Mxfp8OnTheGpu) {
///     my_kernel<<<grid, block, 0, stream>>>(d_x, d_data, d_scales, M, K);
///     qtc::testing::Outputs out;                              // device pointers and their sizes in bytes
///     out.layout = qtc::testing::Layout::kPadded;
///     out.rowwise_data = {d_data, data_bytes};
///     out.rowwise_scale_inv = {d_scales, scale_bytes};
///     EXPECT_TRUE(qtc::testing::conforms(qtc::testing::on_stream(stream), {d_x, qtc::DType::kBF16, M, K}, recipe, out));
///   }
#pragma once
#include <string>

#include "qtc/testing.hpp"

namespace qtc::testing {

/// Marks the pointers of x and of every Outputs buffer as memory the CUDA runtime can copy from (device memory of
/// the current device, managed or pinned host memory). `stream` is a cudaStream_t (nullptr: the legacy default
/// stream); the copies are ordered after the work already queued on it, and the stream is synchronized.
struct OnDevice {
  void* stream = nullptr;
};
inline constexpr OnDevice on_device{};

/// conforms() of testing.hpp for buffers in device memory: same checks, same message. A CUDA error while copying
/// fails the assertion naming the buffer and the error (no exception escapes).
::testing::AssertionResult conforms(OnDevice where, const MatrixView& x, const Recipe& r, const Outputs& out,
                                    const std::string& name = "");

#if defined(CUDART_VERSION)
/// The tag for a stream of the caller's (only when <cuda_runtime.h> was included first).
inline OnDevice on_stream(cudaStream_t s) { return OnDevice{static_cast<void*>(s)}; }
#endif

}  // namespace qtc::testing
