/// \file nosimd/no_simd.cpp
/// \brief The vectorized reference's entry points for a build without Highway (the Python module built where no
///        libhwy is installed: python/CMakeLists.txt, QTC_PY_HIGHWAY=OFF). It replaces simd/dispatch.cpp and the
///        *_simd.cpp sources: every call takes the scalar path, which gives the same bits (the readable oracle
///        test_simd_exact compares the vectorized path with). Not compiled into qtc_ref (its own folder: the
///        simd/*.cpp glob of reference/CMakeLists.txt does not see it).
#include <string>
#include <vector>

#include "qtc/cpu_path.hpp"
#include "qtc/error.hpp"
#include "simd/simd.hpp"

namespace qtc::ref {

namespace {
constexpr const char* kNoHighway = "built without Highway: the scalar path only";
}

CpuPath cpu_path() { return CpuPath::kScalar; }
void set_cpu_path(CpuPath) {}

bool simd_supports(const Recipe&, DType, std::string* why) {
  if (why != nullptr) *why = kNoHighway;
  return false;
}
bool simd_supports_dequantize(const Recipe&, DType, std::string* why) {
  if (why != nullptr) *why = kNoHighway;
  return false;
}
std::string simd_target() { return "scalar (built without Highway)"; }
std::vector<std::string> simd_available_targets() { return {}; }
void simd_force_target(const std::string& name) {
  QTC_CHECK(name.empty(), "simd_force_target: instruction set '", name, "' is not compiled in (", kNoHighway, ")");
}

namespace simd {

bool enabled_any() { return false; }
bool enabled(const Recipe&, DType) { return false; }
bool enabled_dequantize(const Recipe&, DType) { return false; }

// Never called: enabled*() are false. Defined so that quantize.cpp links; each says so if it ever were.
QuantizedTensor quantize_nvfp4(const MatrixView&, const Recipe&, const float*) { QTC_FAIL("quantize_nvfp4: ", kNoHighway); }
QuantizedTensor quantize_mxfp8(const MatrixView&, const Recipe&) { QTC_FAIL("quantize_mxfp8: ", kNoHighway); }
QuantizedTensor quantize_fp8_block(const MatrixView&, const Recipe&) { QTC_FAIL("quantize_fp8_block: ", kNoHighway); }
QuantizedTensor quantize_fp8_tensor(const MatrixView&, const Recipe&, const float*) { QTC_FAIL("quantize_fp8_tensor: ", kNoHighway); }
QuantizedTensor quantize_mxfp4(const MatrixView&, const Recipe&) { QTC_FAIL("quantize_mxfp4: ", kNoHighway); }
HostMatrix dequantize_nvfp4(const QuantizedTensor&, PlaneKind, DType) { QTC_FAIL("dequantize_nvfp4: ", kNoHighway); }
HostMatrix dequantize_mxfp8(const QuantizedTensor&, PlaneKind, DType) { QTC_FAIL("dequantize_mxfp8: ", kNoHighway); }
HostMatrix dequantize_fp8(const QuantizedTensor&, PlaneKind, DType) { QTC_FAIL("dequantize_fp8: ", kNoHighway); }
float amax(const MatrixView&, bool) { QTC_FAIL("amax: ", kNoHighway); }
const char* dispatched_target() { return "scalar (built without Highway)"; }
HostMatrix rht_transform(const MatrixView&, uint16_t) { QTC_FAIL("rht_transform: ", kNoHighway); }

}  // namespace simd

}  // namespace qtc::ref
