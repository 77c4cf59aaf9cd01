/// \file backend.hpp
/// \brief The CUDA kernels as a QuantizeBackend (qtc/backend.hpp), for `qtc verify --backend cuda` and the
///        conformance suites. No CUDA header: a build without CUDA links the stub (kernels/stub/), whose backend
///        says why it cannot run.
#pragma once
#include <memory>

#include "qtc/backend.hpp"

namespace qtc {

/// The CUDA kernels as a backend (kernels/src/backend/backend_cuda.cpp). In a build without CUDA (kernels/stub/) its
/// unavailable_reason() says so. A CUDA error while quantizing throws BackendError kError; a recipe the gating
/// table refuses on this device throws BackendError kNotSupported with the table's reason.
std::unique_ptr<QuantizeBackend> make_cuda_backend();

}  // namespace qtc
