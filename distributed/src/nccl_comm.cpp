/// \file nccl_comm.cpp
/// \brief The NCCL transport: one GPU per rank, communicator bootstrapped over MPI (ncclUniqueId
///        broadcast), device buffers moved by ncclAllGather. The communicator is non-blocking, so every
///        wait polls the stream and ncclCommGetAsyncError against the deadline and aborts the
///        communicator instead of hanging when a peer is gone.
#include <mpi.h>

#include <chrono>
#include <thread>

#include "qtc/dist/check.hpp"
#include "qtc/dist/comm.hpp"

namespace qtc::dist {

bool nccl_compiled() { return true; }

std::string nccl_unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no usable CUDA device (") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
  if (n == 0) return "no CUDA device";
  return "";
}

namespace {

class NcclComm final : public Comm {
 public:
  explicit NcclComm(Comm& mpi) : mpi_(mpi) {
    rank_ = mpi.rank();
    size_ = mpi.size();
    int ndev = 0;
    QTC_CUDA_CHECK(cudaGetDeviceCount(&ndev));
    QTC_CHECK(ndev > 0, "NcclComm: no CUDA device");
    // One rank per GPU: the node-local rank picks the device.
    MPI_Comm local;
    QTC_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
    QTC_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
    MPI_Comm_free(&local);
    device_ = local_rank_ % ndev;
    QTC_CUDA_CHECK(cudaSetDevice(device_));
    QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ncclUniqueId id;
    if (rank_ == 0) QTC_NCCL_CHECK(ncclGetUniqueId(&id));
    mpi_.broadcast(&id, sizeof id, 0);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    const ncclResult_t rc = ncclCommInitRankConfig(&comm_, size_, id, rank_, &cfg);
    QTC_CHECK(rc == ncclSuccess || rc == ncclInProgress, "ncclCommInitRankConfig: ", ncclGetErrorString(rc));
    wait_nccl("communicator init");
  }
  ~NcclComm() override {
    if (comm_ != nullptr) {
      ncclCommFinalize(comm_);
      ncclResult_t st = ncclInProgress;
      const auto t0 = std::chrono::steady_clock::now();
      while (st == ncclInProgress && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) ncclCommGetAsyncError(comm_, &st);
      if (st == ncclSuccess) ncclCommDestroy(comm_);
      else ncclCommAbort(comm_);
    }
    if (d_send_) cudaFree(d_send_);
    if (d_recv_) cudaFree(d_recv_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }

  void all_gather(const void* send, size_t bytes, void* recv) override {
    if (bytes == 0) {  // nothing to move; NCCL rejects null buffers even for a count of 0
      ++stats_.collectives;
      return;
    }
    reserve(bytes);
    QTC_CUDA_CHECK(cudaMemcpyAsync(d_send_, send, bytes, cudaMemcpyHostToDevice, stream_));
    device_all_gather(d_send_, bytes, d_recv_);
    QTC_CUDA_CHECK(cudaMemcpyAsync(recv, d_recv_, bytes * static_cast<size_t>(size_), cudaMemcpyDeviceToHost, stream_));
    wait_stream("all_gather copy-out");
  }
  void broadcast(void* buf, size_t bytes, int root) override { mpi_.broadcast(buf, bytes, root); }
  void barrier() override { mpi_.barrier(); }

  /// d_send (bytes) -> d_recv (size * bytes) with ncclAllGather, waited with the deadline.
  void device_all_gather(const void* d_send, size_t bytes, void* d_recv) {
    const ncclResult_t rc = ncclAllGather(d_send, d_recv, bytes, ncclUint8, comm_, stream_);
    QTC_CHECK(rc == ncclSuccess || rc == ncclInProgress, "ncclAllGather: ", ncclGetErrorString(rc));
    // A non-blocking communicator may still be enqueueing the operation (ncclInProgress): the stream is
    // idle until it is, and no other NCCL call may be made before it reports ncclSuccess.
    wait_nccl("ncclAllGather enqueue");
    wait_stream("ncclAllGather");
    ++stats_.collectives;
    stats_.bytes_sent += bytes;
    stats_.bytes_received += bytes * static_cast<uint64_t>(size_);
  }

 private:
  void reserve(size_t bytes) {
    if (bytes <= cap_) return;
    if (d_send_) QTC_CUDA_CHECK(cudaFree(d_send_));
    if (d_recv_) QTC_CUDA_CHECK(cudaFree(d_recv_));
    d_send_ = d_recv_ = nullptr;
    QTC_CUDA_CHECK(cudaMalloc(&d_send_, bytes));
    QTC_CUDA_CHECK(cudaMalloc(&d_recv_, bytes * static_cast<size_t>(size_)));
    cap_ = bytes;
  }
  [[noreturn]] void give_up(const char* what, const std::string& why) {
    ncclCommAbort(comm_);  // unblocks the stream; the communicator is unusable afterwards
    comm_ = nullptr;
    QTC_FAIL("rank ", rank_, " (GPU ", device_, "): NCCL ", what, " ", why);
  }
  void wait_nccl(const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    const double limit = collective_timeout_s();
    for (;;) {
      ncclResult_t st;
      QTC_NCCL_CHECK(ncclCommGetAsyncError(comm_, &st));
      if (st == ncclSuccess) return;
      if (st != ncclInProgress) give_up(what, std::string("failed: ") + ncclGetErrorString(st));
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit)
        give_up(what, "did not complete within the deadline (QTC_DIST_TIMEOUT_S): a peer rank failed or hangs");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  void wait_stream(const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    const double limit = collective_timeout_s();
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) QTC_CUDA_CHECK(q);
      ncclResult_t st;
      QTC_NCCL_CHECK(ncclCommGetAsyncError(comm_, &st));
      if (st != ncclSuccess && st != ncclInProgress) give_up(what, std::string("failed: ") + ncclGetErrorString(st));
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit)
        give_up(what, "did not complete within the deadline (QTC_DIST_TIMEOUT_S): a peer rank failed or hangs");
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  Comm& mpi_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1, local_rank_ = 0, device_ = 0;
  void* d_send_ = nullptr;
  void* d_recv_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(Comm& mpi) {
  const std::string why = nccl_unavailable_reason();
  QTC_CHECK(why.empty(), "make_nccl_comm: ", why);
  return std::make_unique<NcclComm>(mpi);
}

void nccl_all_gather_device(Comm& c, const void* d_send, size_t bytes, void* d_recv) {
  auto* n = dynamic_cast<NcclComm*>(&c);
  QTC_CHECK(n != nullptr, "nccl_all_gather_device: the communicator is ", c.name(), ", not nccl");
  n->device_all_gather(d_send, bytes, d_recv);
}

}  // namespace qtc::dist
