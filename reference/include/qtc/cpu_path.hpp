/// \file cpu_path.hpp
/// \brief Which implementation of the CPU reference runs: the vectorized one (Highway, the best instruction set
///        of the machine, chosen at run time) or the scalar one, the readable oracle. Both give the same bits;
///        test_simd_exact compares them on every generated case and every bundled vector input.
///
/// The vectorized path covers the recipes and profiles that `simd_supports` accepts; for every other recipe
/// (a profile or rule it does not implement) quantize() and dequantize() take the scalar path, so a rule added
/// to the scalar code never produces different bits on the vectorized one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "qtc/recipe.hpp"

namespace qtc::ref {

enum class CpuPath : uint8_t {
  kSimd,    ///< vectorized where simd_supports() says so, scalar elsewhere (default)
  kScalar,  ///< scalar everywhere (environment variable QTC_SCALAR=1, or set_cpu_path)
};

/// The path in force: kScalar when QTC_SCALAR is set to anything but "0" or "" at the first call, else kSimd,
/// unless set_cpu_path() chose one. Process-wide; not meant to change while a quantize() call runs.
CpuPath cpu_path();
void set_cpu_path(CpuPath p);

/// The dispatch predicate of quantize()/quantize_with_amax(): true when the vectorized path implements this
/// recipe for this input type. It implements profiles te and te_pyref for every recipe option, and ocp for
/// MXFP8; MXFP8 scale rules rceil and ocp_floor. Everything else (profile torchao, other scale rules, every MXFP4 recipe: MXFP4 routes to the scalar code) is
/// false, with the reason in `why` when given.
bool simd_supports(const Recipe& r, DType input, std::string* why = nullptr);
/// The same for dequantize() of a plane of a tensor quantized with `r` to `out`.
bool simd_supports_dequantize(const Recipe& r, DType out, std::string* why = nullptr);

/// The instruction set the vectorized path runs on now (e.g. "AVX2"), and every one compiled in that this
/// machine can run (best first). simd_force_target(name) restricts dispatch to that one (tests); "" undoes it.
std::string simd_target();
std::vector<std::string> simd_available_targets();
void simd_force_target(const std::string& name);

}  // namespace qtc::ref
