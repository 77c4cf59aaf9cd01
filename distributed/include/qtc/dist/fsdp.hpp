/// \file fsdp.hpp
/// \brief The FSDP2 protocol of qtc/sharding.hpp run over a transport: amax all-reduce, quantized
///        all-gather, and distributed checkpoint save/load (each rank writes its shard file; rank 0
///        commits the index).
#pragma once
#include <string>
#include <vector>

#include "qtc/checkpoint.hpp"
#include "qtc/dist/comm.hpp"
#include "qtc/sharding.hpp"

namespace qtc::dist {

/// The MAX all-reduce of amaxes over the communicator, as the protocol's callback.
ref::AmaxAllReduce amax_all_reduce(Comm& c);

/// One FSDP2 all-gather: pre-all-gather of this rank's shard, one all-gather of the packed buffers
/// (quantized data and scales only), post-all-gather. Every rank must pass a shard of the same shape.
QuantizedTensor all_gather_quantized(Comm& c, const QuantizedTensor& shard, const ref::FsdpOptions& opt = {});
/// Same, updating `out` (the previous step's gathered tensor) in place.
void all_gather_quantized(Comm& c, const QuantizedTensor& shard, QuantizedTensor& out, const ref::FsdpOptions& opt = {});

/// Collective save: every rank writes its shard file of one generation (chosen by rank 0), rank 0 checks
/// the gathered file infos and commits the index, then all ranks wait for the commit.
void save_checkpoint(Comm& c, const std::string& dir, const std::vector<ref::TensorShard>& mine, const ref::SaveOptions& opt = {});

}  // namespace qtc::dist
