/// \file comm.hpp
/// \brief Transports: ranks are processes launched by MPI. MpiComm moves host buffers with MPI; NcclComm
///        (CUDA builds) bootstraps an NCCL communicator over MPI (ncclUniqueId broadcast), one rank per
///        GPU, and moves device buffers with NCCL. Transports only move bytes; the protocol is in
///        qtc/sharding.hpp.
///
/// Failure handling: every collective is posted non-blocking and polled against a deadline
/// (QTC_DIST_TIMEOUT_S, default 45 s). A peer that throws calls MPI_Abort (Runtime), one that is
/// killed is reaped by mpirun, one that hangs makes the others' collectives time out and throw; in all
/// three cases the job ends with an error well within 60 s instead of hanging.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace qtc::dist {

/// What a communicator has moved since the last reset (this rank's view).
struct WireStats {
  uint64_t collectives = 0;
  uint64_t bytes_sent = 0;      ///< bytes this rank contributed
  uint64_t bytes_received = 0;  ///< bytes this rank received (an all-gather counts its own piece too)
};

/// Seconds a collective may take before this rank gives up on its peers (QTC_DIST_TIMEOUT_S).
double collective_timeout_s();

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" or "nccl".
  virtual std::string name() const = 0;

  /// All-gather of host buffers: every rank sends `bytes`; `recv` receives size() * bytes, rank order.
  /// NCCL copies through device buffers (the bytes move GPU to GPU).
  virtual void all_gather(const void* send, size_t bytes, void* recv) = 0;
  /// Broadcast and barrier (control plane; NCCL uses its MPI bootstrap for these).
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  virtual void barrier() = 0;

  /// MAX all-reduce of floats, NaN ignored (fmaxf), order-independent: an all-gather and a local fold.
  void all_reduce_max(std::span<float> v);
  /// Sum all-reduce of counters (an all-gather and a local sum).
  uint64_t all_reduce_sum(uint64_t v);
  /// All-gather of variable-length byte strings (sizes first, then padded pieces).
  std::vector<std::string> all_gather_strings(const std::string& mine);

  const WireStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  /// Puts back earlier statistics (to keep control traffic out of the parameter byte count).
  void restore_stats(const WireStats& s) { stats_ = s; }

 protected:
  WireStats stats_;
};

/// MPI_COMM_WORLD (duplicated, errors returned instead of aborting). MPI must be initialized (Runtime).
std::unique_ptr<Comm> make_mpi_comm();

/// True when this build has the NCCL transport.
bool nccl_compiled();
/// Empty when NCCL can run here, else why not ("built without CUDA/NCCL", "no CUDA device").
std::string nccl_unavailable_reason();
/// An NCCL communicator over all MPI ranks, one GPU per rank (device = node-local rank % device count),
/// bootstrapped through `mpi` (which it keeps for broadcast and barrier). Throws when unavailable.
std::unique_ptr<Comm> make_nccl_comm(Comm& mpi);

/// The transport the tests and benchmarks use: QTC_DIST_TRANSPORT=mpi|nccl, default nccl when it can
/// run here and mpi otherwise. With QTC_REQUIRE_GPU=1 an unavailable NCCL is an error, not a fall-back.
std::unique_ptr<Comm> make_default_comm(Comm& mpi);

#ifdef QTC_HAVE_NCCL
/// Device-side all-gather for benchmarks: d_send (bytes) to d_recv (size() * bytes) on the
/// communicator's stream, then waits (with the deadline). Only for NCCL communicators.
void nccl_all_gather_device(Comm& c, const void* d_send, size_t bytes, void* d_recv);
#endif

/// MPI lifetime and the failure policy: MPI_Init_thread in the constructor, MPI_Finalize in the
/// destructor; fail() prints the reason with the rank and calls MPI_Abort so that every rank exits.
class Runtime {
 public:
  Runtime(int* argc, char*** argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  int world_rank() const { return rank_; }
  int world_size() const { return size_; }
  [[noreturn]] static void fail(const std::string& why, int code = 2);

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace qtc::dist
