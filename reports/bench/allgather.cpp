/// \file allgather.cpp
/// \brief FSDP2 all-gather of quantized parameters against the same parameters in BF16, reported the way
///        nccl-tests reports (size, count, type, time, algbw, busbw, #wrong), over the transport the
///        job runs on (MPI host buffers here, NCCL device buffers on a GPU machine); then checkpoint save
///        and load throughput of the quantized shards.
///
/// Conventions (nccl-tests doc/PERFORMANCE.md, all-gather): size = bytes gathered per rank x ranks,
/// algbw = size / time, busbw = algbw * (n - 1) / n, time = the slowest rank's mean over the timed
/// iterations. Two extra columns say what the quantization buys: bf16eq = the parameter's BF16 bytes
/// over the same time, and xBF16 = BF16 all-gather time / this time.
/// #wrong: each rank hashes its piece; after the last iteration every received piece is re-hashed and
/// compared with its sender's hash; #wrong is the bytes of mismatching pieces, summed over ranks.
///
/// Usage: mpirun -np N bench_allgather [--cols K] [--rows R1,R2,...] [--iters I] [--warmup W] [--json FILE]
///                                     [--repetitions N] [--checkpoint-dir DIR] [--synthetic]
/// --json writes Google Benchmark's JSON schema (context from qtc::bench::context_pairs plus the transport;
/// one entry per repetition, and a median aggregate when N > 1), so compare.py and `qtc report` read it
/// like every other suite; the table shows the median repetition.
/// --synthetic skips the CPU reference quantizer: each piece gets the exact byte count the protocol would
/// send (fsdp_buffer_specs) filled with counter-based bytes, so GPU runs can sweep 64 MiB - 4 GiB per rank.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "qtc/bench_context.hpp"
#include "qtc/checkpoint.hpp"
#include "qtc/dist/comm.hpp"
#include "qtc/dist/fsdp.hpp"
#include "qtc/quantize.hpp"
#include "qtc/sharding.hpp"

#ifdef QTC_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

float value(uint64_t seed, int64_t i, int64_t j) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull + static_cast<uint64_t>(j);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (static_cast<float>(z >> 40) * 0x1p-24f * 2.0f - 1.0f) * static_cast<float>(1 + (i % 13));
}

struct Format {
  std::string name;
  bool bf16 = false;
  qtc::Recipe recipe;
};

std::vector<Format> formats() {
  std::vector<Format> v;
  v.push_back({"bf16", true, {}});
  qtc::Recipe r;  // NVFP4 1x16
  r.columnwise = false;
  v.push_back({"nvfp4_1x16", false, r});
  r.nvfp4().tile_2d = true;
  r.columnwise = true;  // columnwise derived locally after the gather: same wire bytes
  v.push_back({"nvfp4_16x16", false, r});
  qtc::Recipe m = qtc::Recipe::of(qtc::Mxfp8Options{});
  m.columnwise = false;
  v.push_back({"mxfp8_rowwise", false, m});
  qtc::Recipe b = qtc::Recipe::of(qtc::Fp8BlockOptions{.tile_2d = true, .pow2_scales = true});
  v.push_back({"fp8_block_128x128", false, b});
  qtc::Recipe t = qtc::Recipe::of(qtc::Fp8TensorOptions{});
  v.push_back({"fp8_tensor", false, t});
  return v;
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}

double max_over_ranks(qtc::dist::Comm& c, double v) {
  std::vector<double> all(static_cast<size_t>(c.size()));
  c.all_gather(&v, sizeof v, all.data());
  double m = v;
  for (double x : all) m = std::max(m, x);
  return m;
}

/// One Google Benchmark JSON entry (run_type iteration, or aggregate "median").
nlohmann::json gbench_entry(const std::string& name, int64_t iterations, double time, const char* unit, int reps, int rep,
                            const nlohmann::json& counters) {
  nlohmann::json e = {{"name", rep < 0 ? name + "_median" : name}, {"run_name", name}, {"threads", 1},
                      {"iterations", iterations}, {"real_time", time}, {"cpu_time", time}, {"time_unit", unit},
                      {"repetitions", reps}};
  if (rep < 0) {
    e["run_type"] = "aggregate";
    e["aggregate_name"] = "median";
    e["aggregate_unit"] = "time";
  } else {
    e["run_type"] = "iteration";
    e["repetition_index"] = rep;
  }
  for (const auto& [k, v] : counters.items()) e[k] = v;
  return e;
}

nlohmann::json bench_context_json(const qtc::dist::Comm& comm, int64_t K, int64_t iters) {
  qtc::bench::GpuContext g;
#ifdef QTC_HAVE_NCCL
  if (comm.name() == "nccl") {
    cudaDeviceProp p{};
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess) g.gpu = p.name;
    if (cudaDriverGetVersion(&v) == cudaSuccess) g.driver = std::to_string(v);
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) g.cuda_runtime = std::to_string(v);
    if (ncclGetVersion(&v) == ncclSuccess) g.nccl = std::to_string(v);
    g.gpu_count = std::to_string(comm.size());
  }
#endif
  nlohmann::json c = nlohmann::json::object();
  for (const auto& [k, v] : qtc::bench::context_pairs(g)) c[k] = v;
  c["qtc_suite"] = "allgather";
  c["transport"] = comm.name();
  c["ranks"] = std::to_string(comm.size());
  c["cols"] = std::to_string(K);
  c["iterations_per_repetition"] = std::to_string(iters);
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  qtc::dist::Runtime rt(&argc, &argv);
  int64_t K = 4096, iters = 10, warmup = 3;
  int reps = 1;
  std::vector<int64_t> rows{256, 1024, 2048};
  std::string json_path, ckpt_dir;
  bool synthetic = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--cols") K = std::stoll(next());
    else if (a == "--rows") rows = parse_list(next());
    else if (a == "--iters") iters = std::stoll(next());
    else if (a == "--warmup") warmup = std::stoll(next());
    else if (a == "--json") json_path = next();
    else if (a == "--checkpoint-dir") ckpt_dir = next();
    else if (a == "--synthetic") synthetic = true;
    else if (a == "--repetitions") reps = std::max(1, std::stoi(next()));
  }
  try {
    auto mpi = qtc::dist::make_mpi_comm();
    auto comm = qtc::dist::make_default_comm(*mpi);
    const int n = comm->size(), rank = comm->rank();
    nlohmann::json report = {{"context", bench_context_json(*comm, K, iters)}, {"benchmarks", nlohmann::json::array()}};
    if (rank == 0) {
      std::printf("# qtc all-gather of quantized parameters vs BF16: %d ranks, transport %s, K = %lld, %lld iterations (+%lld warm-up)\n", n,
                  comm->name().c_str(), static_cast<long long>(K), static_cast<long long>(iters), static_cast<long long>(warmup));
      std::printf("# %-18s %8s %12s %12s %6s %10s %9s %9s %9s %7s %8s\n", "format", "rows/rk", "size(B)", "count", "type", "time(us)",
                  "algbw", "busbw", "bf16eq", "xBF16", "#wrong");
      std::printf("# %-18s %8s %12s %12s %6s %10s %9s %9s %9s %7s %8s\n", "", "", "", "", "", "", "(GB/s)", "(GB/s)", "(GB/s)", "", "");
    }
    std::vector<qtc::ref::TensorShard> ckpt_shards;
    for (int64_t R : rows) {
      double bf16_time = 0;
      for (const Format& f : formats()) {
        // This rank's shard of an (R * n) x K parameter, as the bytes FSDP2 would put on the wire.
        std::vector<uint8_t> blob;
        if (synthetic) {
          size_t nbytes = static_cast<size_t>(R * K * 2);
          if (!f.bf16) {
            qtc::ref::FsdpMetadata meta;
            meta.recipe = f.recipe;
            meta.cols = K;
            meta.shard_rows = R;
            nbytes = 0;
            for (const auto& b : qtc::ref::fsdp_buffer_specs(meta)) nbytes += static_cast<size_t>(b.rows * b.row_bytes);
          }
          blob.resize(nbytes);
          for (size_t i = 0; i < nbytes; ++i) blob[i] = static_cast<uint8_t>((i * 2654435761u + static_cast<size_t>(rank) * 97u) >> 7);
        }
        qtc::HostMatrix x(f.bf16 ? qtc::DType::kBF16 : qtc::DType::kF32, synthetic ? 0 : R, K);
        for (int64_t i = 0; i < x.rows; ++i)
          for (int64_t j = 0; j < K; ++j) x.set(i, j, value(7, rank * R + i, j));
        if (synthetic) {
        } else if (f.bf16) {
          blob = x.bytes;
        } else {
          const qtc::QuantizedTensor q = qtc::ref::quantize_shard(x.view(), f.recipe, qtc::dist::amax_all_reduce(*comm));
          blob = qtc::ref::pack_payload(qtc::ref::fsdp_pre_all_gather(q));
          if (R == rows.back()) ckpt_shards.push_back({f.name, R * n, rank * R, q});
        }
        const size_t bytes = blob.size();
        std::vector<uint8_t> recv(bytes * static_cast<size_t>(n));
        std::function<void()> run_once = [&]() { comm->all_gather(blob.data(), bytes, recv.data()); };
#ifdef QTC_HAVE_NCCL
        void *d_send = nullptr, *d_recv = nullptr;
        if (comm->name() == "nccl") {
          cudaMalloc(&d_send, bytes);
          cudaMalloc(&d_recv, bytes * static_cast<size_t>(n));
          cudaMemcpy(d_send, blob.data(), bytes, cudaMemcpyHostToDevice);
          run_once = [&]() { qtc::dist::nccl_all_gather_device(*comm, d_send, bytes, d_recv); };
        }
#endif
        for (int64_t w = 0; w < warmup; ++w) run_once();
        std::vector<double> rep_times;  // per repetition: the slowest rank's mean over `iters`
        for (int rp = 0; rp < reps; ++rp) {
          comm->barrier();
          const auto t0 = Clock::now();
          for (int64_t it = 0; it < iters; ++it) run_once();
          const double local = std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(iters);
          rep_times.push_back(max_over_ranks(*comm, local));
        }
        const double t = median(rep_times);
#ifdef QTC_HAVE_NCCL
        if (comm->name() == "nccl") {
          cudaMemcpy(recv.data(), d_recv, recv.size(), cudaMemcpyDeviceToHost);
          cudaFree(d_send);
          cudaFree(d_recv);
        }
#endif
        // #wrong: compare every received piece with its sender's hash.
        const uint64_t h = fnv1a(blob.data(), bytes);
        std::vector<uint64_t> hs(static_cast<size_t>(n));
        comm->all_gather(&h, sizeof h, hs.data());
        uint64_t wrong = 0;
        for (int r = 0; r < n; ++r)
          if (fnv1a(recv.data() + static_cast<size_t>(r) * bytes, bytes) != hs[static_cast<size_t>(r)]) wrong += bytes;
        wrong = comm->all_reduce_sum(wrong);
        if (f.bf16) bf16_time = t;
        const double size = static_cast<double>(bytes) * n;
        const double algbw = size / t / 1e9, busbw = algbw * (n - 1) / n;
        const double bf16eq = static_cast<double>(R * K * 2) * n / t / 1e9;
        const double speedup = bf16_time / t;
        if (rank == 0)
          std::printf("  %-18s %8lld %12.0f %12zu %6s %10.1f %9.3f %9.3f %9.3f %7.2f %8llu\n", f.name.c_str(), static_cast<long long>(R), size,
                      bytes * static_cast<size_t>(n), f.bf16 ? "bf16" : "uint8", t * 1e6, algbw, busbw, bf16eq, speedup,
                      static_cast<unsigned long long>(wrong));
        const std::string bname = "AllGather/" + f.name + "/rows_per_rank:" + std::to_string(R);
        auto counters = [&](double tt) {
          const double a = size / tt / 1e9;
          return nlohmann::json{{"size_bytes", size},      {"algbw_GBps", a}, {"busbw_GBps", a * (n - 1) / n},
                                {"bf16eq_GBps", static_cast<double>(R * K * 2) * n / tt / 1e9},
                                {"x_bf16", bf16_time / tt}, {"wrong", wrong}};
        };
        for (int rp = 0; rp < reps; ++rp)
          report["benchmarks"].push_back(gbench_entry(bname, iters, rep_times[static_cast<size_t>(rp)] * 1e6, "us", reps, rp,
                                                      counters(rep_times[static_cast<size_t>(rp)])));
        if (reps > 1) report["benchmarks"].push_back(gbench_entry(bname, iters, t * 1e6, "us", reps, -1, counters(t)));
        if (wrong != 0) qtc::dist::Runtime::fail("all-gather moved wrong bytes");
      }
    }
    // Checkpoint throughput: every rank saves its quantized shards (fsync on), then loads them back.
    if (!ckpt_dir.empty() && !synthetic) {
      if (rank == 0) std::filesystem::remove_all(ckpt_dir);
      comm->barrier();
      uint64_t mine = 0;
      for (const auto& s : ckpt_shards) {
        for (const auto* p : {&s.tensor.rowwise, &s.tensor.columnwise})
          if (*p) mine += (*p)->data.size() + (*p)->scale.bytes.size();
      }
      const uint64_t total = comm->all_reduce_sum(mine);
      comm->barrier();
      auto t0 = Clock::now();
      qtc::dist::save_checkpoint(*comm, ckpt_dir, ckpt_shards);
      comm->barrier();
      const double ts = max_over_ranks(*comm, std::chrono::duration<double>(Clock::now() - t0).count());
      t0 = Clock::now();
      const auto loaded = qtc::ref::load_checkpoint(ckpt_dir, rank, n);
      comm->barrier();
      const double tl = max_over_ranks(*comm, std::chrono::duration<double>(Clock::now() - t0).count());
      bool ok = loaded.size() == ckpt_shards.size();
      for (size_t i = 0; ok && i < loaded.size(); ++i) ok = qtc::ref::bitwise_equal(loaded[i].tensor, ckpt_shards[i].tensor);
      const uint64_t bad = comm->all_reduce_sum(ok ? 0 : 1);
      if (rank == 0) {
        std::printf("# checkpoint: %llu bytes of quantized shards (%d ranks, fsync on): save %.3f s = %.3f GB/s, load+verify %.3f s = %.3f GB/s, "
                    "%s\n",
                    static_cast<unsigned long long>(total), n, ts, total / ts / 1e9, tl, total / tl / 1e9,
                    bad ? "MISMATCH" : "bit for bit");
        std::filesystem::remove_all(ckpt_dir);
      }
      report["benchmarks"].push_back(gbench_entry("CheckpointSave/fsync", 1, ts * 1e3, "ms", 1, 0,
                                                  {{"bytes", total}, {"GBps", total / ts / 1e9}, {"bitwise_equal", bad == 0}}));
      report["benchmarks"].push_back(gbench_entry("CheckpointLoadVerify", 1, tl * 1e3, "ms", 1, 0,
                                                  {{"bytes", total}, {"GBps", total / tl / 1e9}, {"bitwise_equal", bad == 0}}));
      if (bad) qtc::dist::Runtime::fail("checkpoint reload differs");
    }
    if (rank == 0 && !json_path.empty()) std::ofstream(json_path) << report.dump(1) << "\n";
    comm.reset();
    mpi.reset();
  } catch (const std::exception& e) {
    qtc::dist::Runtime::fail(e.what());
  }
  return 0;
}
