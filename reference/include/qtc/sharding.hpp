/// \file sharding.hpp
/// \brief The FSDP2 protocol for quantized parameters as pure functions (TE_FORMATS.md §8): what a rank
///        sends before the dim-0 all-gather, how the gathered pieces become a full quantized tensor, the
///        local derivation of the columnwise plane (§1.7, §1.8, §3.3), row slicing and concatenation of
///        quantized tensors, the amax reduction (§8.4) and the optimizer step on shards.
///
/// Nothing here communicates: a transport (distributed/) moves the bytes of GatherBuffer::bytes, and the
/// amax reduction is a callback. A single process can therefore simulate any world size.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "qtc/quantized.hpp"
#include "qtc/tensor.hpp"

namespace qtc::ref {

// ---------------------------------------------------------------------------------------------------
// Row granularity, slicing and concatenation (compact, padded or swizzled scales; the result keeps the
// input's layout).

/// Rows a shard boundary must be a multiple of, so that no block of any present plane straddles it:
/// NVFP4 16 (2-D tiles, 1-D columnwise blocks), MXFP8 32, FP8 block 128 (1x128 rowwise-only: 1),
/// FP8 tensor 1. The last shard may end at M whatever M is.
int64_t row_granularity(const QuantizedTensor& q);
int64_t row_granularity(const Recipe& r, bool rowwise, bool columnwise);

/// Rows [r0, r1) of q as a quantized tensor of r1-r0 rows, without dequantizing. Both boundaries must be
/// multiples of row_granularity(q) (r1 may also be q.rows). Row-scaled columnwise amax (one per column of
/// the whole tensor) cannot be sliced and is refused.
QuantizedTensor slice_rows(const QuantizedTensor& q, int64_t r0, int64_t r1);

/// Concatenates quantized tensors along dim 0 (the inverse of slice_rows). They must share recipe, input
/// type, column count, scale layout and, where the recipe has one, the per-tensor amax / scale_inv:
/// shards quantized with different global scales cannot form one tensor (§8.4) and are refused.
QuantizedTensor concat_rows(std::span<const QuantizedTensor> parts);

/// The rows [begin, end) of `rank` when M rows are split over `world` ranks the FSDP2 way (torch.chunk:
/// equal chunks, the last one shorter), each chunk rounded up to a multiple of `granularity`.
std::pair<int64_t, int64_t> shard_row_range(int64_t M, int world, int rank, int64_t granularity = 1);

// ---------------------------------------------------------------------------------------------------
// Views (the aten ops FSDP2 applies to a parameter: view, as_strided, slice).

/// Accepts only the identity view of the [rows, cols] tensor (sizes {rows, cols}, strides {cols, 1},
/// storage offset 0); anything else throws an error that says only identity views are supported.
void check_identity_view(const QuantizedTensor& q, std::span<const int64_t> sizes, std::span<const int64_t> strides,
                         int64_t storage_offset = 0);
/// Accepts only the identity slice (start 0, end = size or larger, step 1) of dim 0 or 1.
void check_identity_slice(const QuantizedTensor& q, int dim, int64_t start, int64_t end, int64_t step = 1);

// ---------------------------------------------------------------------------------------------------
// Columnwise derivation.

/// True when the columnwise plane is an exact transpose of the rowwise one: NVFP4 16x16 without RHT and
/// not row-scaled, FP8 block 128x128, FP8 per-tensor. Otherwise `why` says why not.
bool can_derive_columnwise(const Recipe& r, std::string* why = nullptr);

/// Builds q's columnwise plane from its rowwise plane: nibble (NVFP4) or byte (FP8) transpose of the data,
/// transpose of the block scales, rowwise amax copied (TE `_create_columnwise`, §1.8). Throws a clear
/// error for recipes where the two planes are quantized independently (1-D blocks, MXFP8, RHT).
/// Works in any non-swizzled scale layout; the new plane uses q's layout.
void derive_columnwise(QuantizedTensor& q);

// ---------------------------------------------------------------------------------------------------
// FSDP2 all-gather protocol.

/// One buffer all-gathered along dim 0: `rows` rows of `row_bytes` bytes each.
struct GatherBuffer {
  std::string name;  ///< "rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"
  int64_t rows = 0;
  int64_t row_bytes = 0;
  std::vector<uint8_t> bytes;  ///< rows * row_bytes
  bool operator==(const GatherBuffer&) const = default;
};

/// What travels next to the buffers but is not gathered (TE: the pre-all-gather metadata).
struct FsdpMetadata {
  Recipe recipe;
  DType input_dtype = DType::kF32;
  int64_t cols = 0;                     ///< K
  int64_t shard_rows = 0;               ///< this rank's M
  bool columnwise_usage = false;        ///< the gathered tensor needs a columnwise plane
  bool columnwise_gathered = false;     ///< ... which travels (MXFP8) instead of being derived locally
  std::vector<float> amax_rowwise;      ///< this rank's amax (valid for the whole tensor only after §8.4)
  std::vector<float> amax_columnwise;
  float scale_inv = 1.0f;               ///< FP8 per-tensor
  ScaleLayout layout = ScaleLayout::kCompact;  ///< layout of the reassembled tensor's scales
};

/// A rank's contribution: the buffers (in a fixed order) and the metadata.
struct ShardPayload {
  std::vector<GatherBuffer> buffers;
  FsdpMetadata meta;
  /// Bytes this rank puts on the wire: the sum of the buffers' sizes.
  int64_t wire_bytes() const;
};

struct FsdpOptions {
  /// Whether the gathered tensor must have a columnwise plane (NVFP4/FP8 2-D: derived locally; MXFP8:
  /// gathered). Default: whatever the shard has.
  std::optional<bool> columnwise_usage;
  /// Layout of the reassembled tensor's scales (kCompact or kPadded). Default: the shard's layout.
  std::optional<ScaleLayout> out_layout;
};

/// FSDP2 pre-all-gather (§8.1-§8.3). NVFP4: the rowwise data and the first shard_M rows of the padded
/// rowwise scales (dim 1 keeps its roundup to 4); amax travels as metadata. MXFP8: the rowwise plane and,
/// when asked, the columnwise one (scales un-padded in dim 0). FP8 block: 128x128 only, rowwise plane.
/// FP8 tensor: the rowwise data. Refused: swizzled scales, shard_M not a multiple of the recipe's block
/// (16 NVFP4, 32 MXFP8, 128 FP8 block), a columnwise usage the recipe cannot derive, a missing rowwise plane.
ShardPayload fsdp_pre_all_gather(const QuantizedTensor& shard, const FsdpOptions& opt = {});

/// The buffer shapes every rank sends for a shard of `shard_rows` rows (what a transport allocates).
std::vector<GatherBuffer> fsdp_buffer_specs(const FsdpMetadata& meta);

/// Simulates the all-gather: buffer i of the result is the dim-0 concatenation of buffer i of every rank,
/// in rank order. Checks that every rank sends the same buffer list.
std::vector<GatherBuffer> concat_gathered(std::span<const ShardPayload> per_rank);

/// Packs a rank's buffers back to back (the bytes one all-gather call moves) and splits the gathered
/// blob (world equal-sized pieces, rank order) back into per-buffer concatenations.
std::vector<uint8_t> pack_payload(const ShardPayload& p);
std::vector<GatherBuffer> unpack_gathered(std::span<const uint8_t> gathered, int world, const FsdpMetadata& meta);

/// FSDP2 post-all-gather: a new full tensor. Scales are zero-padded in dim 0 to the full tensor's padded
/// shape, then converted to meta.layout; the columnwise plane is derived locally when needed.
QuantizedTensor fsdp_post_all_gather(std::span<const GatherBuffer> gathered, const FsdpMetadata& meta);
/// Same, updating `out` (the previous step's tensor) in place: its buffers are overwritten, not
/// reallocated. `out` must have the gathered shape and recipe.
void fsdp_post_all_gather(std::span<const GatherBuffer> gathered, const FsdpMetadata& meta, QuantizedTensor& out);

// ---------------------------------------------------------------------------------------------------
// Amax reduction (§8.4) and quantizing shards.

/// Reduces a vector of amaxes in place across the shard group with MAX (NaN ignored, as fmaxf). The
/// transport provides it; `nullptr` means no reduction (the bug the fix exists for).
using AmaxAllReduce = std::function<void(std::span<float>)>;

/// {rowwise, columnwise} amax of x for the recipe (columnwise: of RHT(x^T) when the recipe has RHT).
std::pair<float, float> local_amaxes(const MatrixView& x, const Recipe& r);

/// Quantizes a shard. For recipes with a per-tensor scale (NVFP4 not row-scaled, FP8 tensor) the local
/// amaxes are all-reduced first, so every shard uses the same global scale; other recipes quantize as is.
QuantizedTensor quantize_shard(const MatrixView& x, const Recipe& r, const AmaxAllReduce& reduce);
/// Same, writing into `dst` in place (TE `update_quantized`): dst keeps its buffers and scale layout.
void requantize_shard_into(QuantizedTensor& dst, const MatrixView& x, const AmaxAllReduce& reduce);

// ---------------------------------------------------------------------------------------------------
// Optimizer step on FP32 master-weight shards.

struct AdamConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  ///< decoupled (AdamW) when non-zero
};

/// One plain Adam step (element-wise, float arithmetic in a fixed order, no FMA contraction), so a shard
/// and the full tensor give identical bits. `step` counts from 1.
void adam_step(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
               const AdamConfig& cfg, int step);

}  // namespace qtc::ref
