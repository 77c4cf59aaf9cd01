/// \file device_verify.hpp
/// \brief What the two halves of verify_on_device (qtc/cuda/verify.hpp) share (internal): device_verify.cpp (a
///        vector of one recipe) and device_verify_hybrid.cpp (recipe=hybrid, one such vector per plane).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "qtc/cuda/verify.hpp"

namespace qtc::cuda::detail {

/// A message without the " [check `...` failed at file:line]" suffix of QTC_CHECK (verify.cpp's clean()).
std::string clean_message(std::string m);

/// verify_on_device for a vector that is not hybrid (device_verify.cpp).
conformance::FileResult verify_plain_on_device(const std::vector<DeviceTensor>& tensors,
                                               const std::map<std::string, std::string>& metadata,
                                               const std::string& source, const conformance::VerifyOptions& opts,
                                               cudaStream_t stream, int device);

/// verify_on_device for recipe=hybrid (device_verify_hybrid.cpp).
conformance::FileResult verify_hybrid_on_device(const std::vector<DeviceTensor>& tensors,
                                                const std::map<std::string, std::string>& metadata,
                                                const std::string& source, const conformance::VerifyOptions& opts,
                                                cudaStream_t stream, int device);

}  // namespace qtc::cuda::detail
