/// \file backends.hpp
/// \brief The backends of the `qtc` command by name. Kept out of qtc/verify.hpp (the installed verify library):
///        naming "cuda" needs make_cuda_backend(), which only qtc_cuda (or its stub) defines (qtc/cuda/backend.hpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "qtc/cuda/backend.hpp"

namespace qtc::conformance {

/// Backends by name: "cpu", "cuda" or "all" (cpu then cuda). Throws qtc::Error for another name.
std::vector<std::unique_ptr<QuantizeBackend>> make_backends(const std::string& which);

}  // namespace qtc::conformance
