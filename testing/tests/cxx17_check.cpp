/// \file cxx17_check.cpp
/// \brief Compiled as C++17 with -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror (an object library of the
///        build, never run): the public testing headers and what they include are valid C++17, and their API is
///        usable from C++17 code (containers as buffers, the matcher, the device overload's declaration).
#include <qtc/testing.hpp>
#include <qtc/testing_device.hpp>
#include <qtc/testing_gmock.hpp>

#include <array>
#include <cstdint>
#include <vector>

#if __cplusplus != 201703L
#error "this translation unit must be compiled as C++17"
#endif

namespace qtc_cxx17_check {

::testing::AssertionResult host_api(const std::vector<float>& x, const std::vector<uint8_t>& data, const std::array<uint8_t, 8>& s) {
  const qtc::Recipe r = qtc::testing::recipe({{"recipe", "mxfp8"}});
  qtc::testing::Outputs out;
  out.layout = qtc::testing::Layout::kPadded;
  out.rowwise_data = data;
  out.rowwise_scale_inv = s;
  const qtc::MatrixView v{x.data(), qtc::DType::kF32, 2, 4};
  EXPECT_THAT(out, qtc::testing::ConformsTo(v, r));
  return qtc::testing::conforms(v, r, out);
}

::testing::AssertionResult device_api(const void* d_x, const void* d_data) {
  qtc::testing::Outputs out;
  out.rowwise_data = {d_data, size_t{8}};
  return qtc::testing::conforms(qtc::testing::on_device, {d_x, qtc::DType::kBF16, 2, 4}, qtc::Recipe{}, out);
}

}  // namespace qtc_cxx17_check
