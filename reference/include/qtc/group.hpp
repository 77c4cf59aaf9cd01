/// \file group.hpp
/// \brief Mixed quantizer groups: several tensors quantized in one call, each with its own recipe (row-scaled
///        next to per-tensor NVFP4, NVFP4 next to MXFP8 and FP8 block, empty members), as TE's split and
///        multi-tensor quantization does (TE_FORMATS.md §1.13): every member is an independent tensor with its
///        own amax, global scale and buffers. The property tests check member-alone equality and isolation.
///
/// For one recipe over a row partition of one buffer (MoE groups), see grouped.hpp (`quantize_grouped`).
#pragma once
#include <span>
#include <vector>

#include "qtc/quantized.hpp"

namespace qtc::ref {

/// Quantizes members[i] with recipes[i]. result[i] is bit-identical to quantize(members[i], recipes[i]):
/// the amaxes of all members are computed first (one pass over the group, as TE's grouped amax), then each
/// member is quantized with its own amax only; no amax, scale or data is shared between members. Members
/// with 0 rows are allowed. Every member is validated before any is quantized; an invalid one throws
/// qtc::Error naming its index and the rule. The spans must have the same length.
std::vector<QuantizedTensor> quantize_group(std::span<const MatrixView> members, std::span<const Recipe> recipes);

/// Same, in place: outs[i] (a previous result for a member of the same shape and recipe) is overwritten
/// without reallocating any buffer (data, scales, amax keep their storage); scales are written in the
/// layout outs[i] already has. Members are validated against outs before anything is written.
void quantize_group_into(std::span<const MatrixView> members, std::span<QuantizedTensor> outs);

}  // namespace qtc::ref
