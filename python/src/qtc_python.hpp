/// \file qtc_python.hpp
/// \brief What the module's two source files share (internal): qtc_python.cpp (host arrays, the CPU reference) and
///        qtc_python_cuda.cpp (CUDA tensors, the kernels; compiled only with the kernels library).
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "qtc/error.hpp"
#include "qtc/layout.hpp"
#include "qtc/recipe.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/verify.hpp"

namespace nb = nanobind;

namespace qtcpy {

using Metadata = std::map<std::string, std::string>;

/// Drops the " [check `...` failed at file:line]" suffix: users need the rule, not our source line.
std::string rule(std::string m);
/// "[a, b]".
std::string shape_str(const std::vector<int64_t>& s);
/// The recipe and the output layout a metadata map names (its key `source` ignored).
std::pair<qtc::Recipe, qtc::Layout> recipe_and_layout(const Metadata& md);
/// A verdict as the Python side reads it (qtc.VerifyResult's fields).
nb::dict verdict_dict(const qtc::conformance::FileResult& res);

/// Registers quantize_cuda / verify_cuda on the module when the kernels library is compiled in (QTC_PY_CUDA);
/// returns whether it is (the module's `cuda_built`).
bool register_cuda(nb::module_& m);

template <typename A>
std::vector<int64_t> shape_of(const A& a) {
  std::vector<int64_t> s(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) s[i] = static_cast<int64_t>(a.shape(i));
  return s;
}

/// Checks that the array's element size is the dtype's.
template <typename A>
void check_itemsize(const std::string& name, const A& a, const std::string& dtype) {
  const auto sz = qtc::io::dtype_size(dtype);
  QTC_CHECK(sz.has_value(), "tensor '", name, "': unknown or unsupported dtype ", dtype);
  QTC_CHECK(a.itemsize() == *sz, "tensor '", name, "': dtype ", dtype, " has ", *sz, "-byte elements, the array ",
            a.itemsize(), "-byte ones");
}

}  // namespace qtcpy
