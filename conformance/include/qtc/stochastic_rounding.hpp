/// \file stochastic_rounding.hpp
/// \brief Admissible stochastic rounding (issue 26): a foreign SR output cannot be compared bit for bit (its random
///        numbers are its own), but it can be judged:
///  1. every scale and amax equals the reference's bit for bit (stochastic rounding changes only the element codes);
///  2. every code is one of the two E2M1 neighbours of the exactly scaled value v = x * enc (enc from the block's scale
///     byte and the global scale, TE_FORMATS.md §1.4; the value itself when v is on the grid; a zero of either sign
///     where v rounds to zero);
///  3. the codes are unbiased: for each element not on the grid, p = (|v| - lo) / (hi - lo) is the probability of
///     rounding away from zero, and U = 1 when it did. Elements are split into `bins` bins by p; in each bin
///     S = sum(U - p) is tested with Hoeffding's inequality, which needs only independent U in [0, 1]:
///     P(S >= t) <= exp(-2 t^2 / n). With t_b = sqrt(n_b * ln(2 * bins / alpha) / 2) for both sides of every bin, the
///     union bound gives a false-alarm rate of at most alpha for a correct SR implementation, whatever its p's and the
///     number of elements (no normal approximation). An implementation that draws r random bits per element rounds away
///     with a probability within 2^-r of p: the test allows that (S measured against p - 2^-r and p + 2^-r).
///     Round-to-nearest puts U = [p > 1/2]: the bins above and below 1/2 drift by about n_b / 8, found once
///     n_b / 8 > t_b (about 600 elements per bin at alpha = 1e-6); an all-zero output fails rule 2.
/// NVFP4 1x16 and 16x16 (the 2-D tile's scale copies per row), with or without RHT (the columnwise plane's scaled values
/// are those of RHT(x^T), §1.9): the SR qtc has; both planes, compact layout.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "qtc/safetensors.hpp"

namespace qtc::conformance {

struct SrOptions {
  double alpha = 1e-6;  ///< the false-alarm rate of the unbiasedness test (a correct SR output fails with at most this)
  int bins = 8;
  int random_bits = 8;  ///< resolution of the implementation's random numbers (qtc, TE's software SR: 8)
};

struct SrResult {
  bool admissible = false;
  std::string message;               ///< one line
  std::vector<std::string> details;  ///< per plane and bin
  int64_t elements = 0, on_grid = 0, non_neighbour = 0, scale_mismatch = 0;
  double worst_excess = 0.0;  ///< max over bins and sides of |S| / t (> 1: rejected)
};

/// Judges the SR outputs of a VECTORS.md NVFP4 vector (metadata stochastic_rounding = 1 or not: the codes are
/// judged as SR either way). Never throws: a malformed file gives admissible = false with the reason.
SrResult check_stochastic_rounding(const io::File& file, const SrOptions& opts = {});

}  // namespace qtc::conformance
