/// \file fsdp.cpp
/// \brief The FSDP2 protocol over a transport: amax all-reduce, one packed all-gather per parameter, and
///        the collective checkpoint save.
#include "qtc/dist/fsdp.hpp"

#include "qtc/error.hpp"

namespace qtc::dist {

ref::AmaxAllReduce amax_all_reduce(Comm& c) {
  return [&c](std::span<float> v) { c.all_reduce_max(v); };
}

namespace {

std::vector<ref::GatherBuffer> gather_buffers(Comm& c, const ref::ShardPayload& p) {
  const std::vector<uint8_t> mine = ref::pack_payload(p);
  // Every rank must send the same number of bytes (FSDP2 pads shards to equal size; so do we, by contract).
  // The 8-byte size handshake is control traffic: it is kept out of the wire statistics, which count
  // the parameter bytes alone.
  uint64_t n = mine.size();
  std::vector<uint64_t> sizes(static_cast<size_t>(c.size()));
  const WireStats saved = c.stats();
  c.all_gather(&n, sizeof n, sizes.data());
  c.restore_stats(saved);
  for (int r = 0; r < c.size(); ++r)
    QTC_CHECK(sizes[static_cast<size_t>(r)] == n, "all_gather_quantized: rank ", r, " sends ", sizes[static_cast<size_t>(r)],
              " bytes, rank ", c.rank(), " sends ", n, ": shards must have equal shapes");
  std::vector<uint8_t> all(mine.size() * static_cast<size_t>(c.size()));
  c.all_gather(mine.data(), mine.size(), all.data());
  return ref::unpack_gathered(all, c.size(), p.meta);
}

}  // namespace

QuantizedTensor all_gather_quantized(Comm& c, const QuantizedTensor& shard, const ref::FsdpOptions& opt) {
  const ref::ShardPayload p = ref::fsdp_pre_all_gather(shard, opt);
  return ref::fsdp_post_all_gather(gather_buffers(c, p), p.meta);
}

void all_gather_quantized(Comm& c, const QuantizedTensor& shard, QuantizedTensor& out, const ref::FsdpOptions& opt) {
  const ref::ShardPayload p = ref::fsdp_pre_all_gather(shard, opt);
  ref::fsdp_post_all_gather(gather_buffers(c, p), p.meta, out);
}

void save_checkpoint(Comm& c, const std::string& dir, const std::vector<ref::TensorShard>& mine, const ref::SaveOptions& opt) {
  uint64_t gen = 0;
  if (c.rank() == 0) gen = ref::next_generation(dir);
  c.broadcast(&gen, sizeof gen, 0);
  // A rank that fails to write reports it through the gathered infos, so rank 0 never commits a partial save.
  std::string info;
  try {
    info = ref::shard_info_to_json(ref::write_shard_file(dir, gen, c.rank(), c.size(), mine, opt));
  } catch (const Error& e) {
    info = std::string("ERROR ") + e.what();
  }
  const std::vector<std::string> all = c.all_gather_strings(info);
  std::vector<ref::ShardFileInfo> infos;
  for (int r = 0; r < c.size(); ++r) {
    const std::string& s = all[static_cast<size_t>(r)];
    QTC_CHECK(s.rfind("ERROR ", 0) != 0, "distributed save: rank ", r, " could not write its shard file: ", s.substr(6));
    infos.push_back(ref::shard_info_from_json(s));
  }
  std::string verdict = "ok";
  if (c.rank() == 0) {
    try {
      ref::commit_checkpoint(dir, gen, c.size(), infos, opt);
    } catch (const Error& e) {
      verdict = e.what();
    }
  }
  const std::vector<std::string> v = c.all_gather_strings(verdict);
  QTC_CHECK(v[0] == "ok", "distributed save: rank 0 could not commit the index: ", v[0]);
}

}  // namespace qtc::dist
