/// \file backend.hpp
/// \brief The CUDA kernels as a QuantizeBackend (qtc/backend.hpp). Declared here, with the backends' code:
///        kernels/src/backend_cuda.cpp in a CUDA build, kernels/stub/backend_unavailable.cpp otherwise. No CUDA
///        header: every layer includes it in both builds.
#pragma once
#include <memory>

#include "qtc/backend.hpp"

namespace qtc {

/// The CUDA kernels as a backend. In a build without CUDA this returns a backend whose unavailable_reason()
/// says so.
std::unique_ptr<QuantizeBackend> make_cuda_backend();

}  // namespace qtc
