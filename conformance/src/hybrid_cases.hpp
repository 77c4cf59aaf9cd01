/// \file hybrid_cases.hpp
/// \brief Hybrid vectors (hybrid.hpp; conformance/README.md "Hybrid planes"): writing one from a hybrid recipe and
///        an input, and the hybrid variants `qtc conform` generates.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "qtc/backend.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::conformance {

/// The vector of hybrid recipe `h` on x: x, every output of each plane (each plane's tensors as its recipe's vector
/// holds them; an FP8 tensor plane's scale_inv / amax as '<plane>.scale_inv' / '<plane>.amax'), the columnwise source
/// (rowwise_dequantized) and the hybrid metadata, with the outputs in layout `lo`. Quantized by `backend`: the
/// rowwise plane of x, the columnwise plane of x or of the rowwise plane dequantized by the same backend.
io::File make_hybrid_vector(const HybridRecipe& h, const HostMatrix& x, QuantizeBackend& backend,
                            Layout lo = Layout::kCompact, bool with_dequantized = true);

/// `qtc convert` of a hybrid vector: each plane's tensors rewritten into layout `to` as its recipe's vector would be
/// (a grouped vector's columnwise scales group by group, rule 'hybrid-grouped-layout'), padding filled with `pad`;
/// x, columnwise_source and the metadata other than the layout keys kept. Throws qtc::Error naming the rule.
io::File convert_hybrid_vector(const io::File& in, Layout to, uint8_t pad = 0);

/// The hybrid variants `qtc conform` generates: TE's documented compositions (MXFP8 rowwise with NVFP4 / FP8 block /
/// FP8 tensor columnwise, NVFP4 double quantization, the fused grouped MXFP8 requantization in both source dtypes),
/// each with a stable id.
std::vector<std::pair<std::string, HybridRecipe>> hybrid_variants();

}  // namespace qtc::conformance
