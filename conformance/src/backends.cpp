/// \file backends.cpp
/// \brief make_backends: "cpu", "cuda", "all".
#include "backends.hpp"

#include "qtc/cuda/backend.hpp"
#include "qtc/error.hpp"

namespace qtc::conformance {

std::vector<std::unique_ptr<QuantizeBackend>> make_backends(const std::string& which) {
  std::vector<std::unique_ptr<QuantizeBackend>> out;
  if (which == "cpu" || which == "all") out.push_back(make_cpu_backend());
  if (which == "cuda" || which == "all") out.push_back(make_cuda_backend());
  QTC_CHECK(!out.empty(), "unknown backend '", which, "' (expected cpu, cuda or all)");
  return out;
}

}  // namespace qtc::conformance
