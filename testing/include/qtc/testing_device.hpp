/// \file testing_device.hpp
/// \brief conforms() on device memory (library qtc::testing_cuda, built and exported only when qtc was built with
///        CUDA). Same checks and verdicts as conforms() of testing.hpp, computed on the GPU: the CUDA kernels
///        (bit-exact to the reference) quantize x where it is and a device pass compares every buffer; only what a
///        failure message shows is copied to the host (qtc::cuda::verify_on_device, qtc/cuda/verify.hpp). The
///        message is `qtc verify`'s line for the same tensors, tagged [cuda] instead of [cpu]. The host path
///        (every buffer copied to the host, then conforms() of testing.hpp: the [cpu] line) serves pointers the
///        kernels cannot read (pageable host memory; buffers on several devices), recipes the kernels do not run
///        on that device, and Outputs::stochastic_admissible. This header needs no CUDA header; include
///        <cuda_runtime.h> before it to get on_stream().
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

/// Marks the pointers of x and of every Outputs buffer as memory the CUDA runtime can read (device memory, managed or
/// host memory). `stream` is a cudaStream_t (nullptr: the legacy default stream); the check is ordered after the work
/// already queued on it, and the stream is synchronized.
struct OnDevice {
  void* stream = nullptr;
};
inline constexpr OnDevice on_device{};

/// conforms() of testing.hpp for buffers in device memory: same checks, same verdicts, the same message but for its
/// [cuda] tag. A CUDA error fails the assertion naming it (no exception escapes).
::testing::AssertionResult conforms(OnDevice where, const MatrixView& x, const Recipe& r, const Outputs& out,
                                    const std::string& name = "");

#if defined(CUDART_VERSION)
/// The tag for a stream of the caller's (only when <cuda_runtime.h> was included first).
inline OnDevice on_stream(cudaStream_t s) { return OnDevice{static_cast<void*>(s)}; }
#endif

}  // namespace qtc::testing
