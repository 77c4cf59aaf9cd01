/// \file mpi_comm.cpp
/// \brief The MPI transport (host buffers), the shared Comm helpers, the Runtime and the default choice
///        of transport.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "qtc/dist/check.hpp"
#include "qtc/dist/comm.hpp"

namespace qtc::dist {

double collective_timeout_s() {
  const char* s = std::getenv("QTC_DIST_TIMEOUT_S");
  if (s == nullptr || *s == '\0') return 45.0;
  const double v = std::strtod(s, nullptr);
  return v > 0 ? v : 45.0;
}

void Comm::all_reduce_max(std::span<float> v) {
  std::vector<float> all(v.size() * static_cast<size_t>(size()));
  all_gather(v.data(), v.size_bytes(), all.data());
  for (size_t i = 0; i < v.size(); ++i) {
    float m = 0.0f;  // amaxes are >= 0; fmax ignores NaN like TE's reductions (§0.5)
    for (int r = 0; r < size(); ++r) m = std::fmax(m, all[static_cast<size_t>(r) * v.size() + i]);
    v[i] = m;
  }
}

uint64_t Comm::all_reduce_sum(uint64_t v) {
  std::vector<uint64_t> all(static_cast<size_t>(size()));
  all_gather(&v, sizeof v, all.data());
  uint64_t s = 0;
  for (uint64_t x : all) s += x;
  return s;
}

std::vector<std::string> Comm::all_gather_strings(const std::string& mine) {
  uint64_t n = mine.size();
  std::vector<uint64_t> sizes(static_cast<size_t>(size()));
  all_gather(&n, sizeof n, sizes.data());
  uint64_t mx = 0;
  for (uint64_t s : sizes) mx = std::max(mx, s);
  std::string padded = mine;
  padded.resize(mx, '\0');
  std::string all(mx * static_cast<size_t>(size()), '\0');
  all_gather(padded.data(), mx, all.data());
  std::vector<std::string> out;
  for (int r = 0; r < size(); ++r) out.push_back(all.substr(static_cast<size_t>(r) * mx, sizes[static_cast<size_t>(r)]));
  return out;
}

namespace {

class MpiComm final : public Comm {
 public:
  MpiComm() {
    QTC_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    QTC_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    QTC_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    QTC_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~MpiComm() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_gather(const void* send, size_t bytes, void* recv) override {
    QTC_CHECK(bytes <= static_cast<size_t>(INT32_MAX), "MpiComm::all_gather: ", bytes, " bytes exceed one MPI count");
    MPI_Request req;
    QTC_MPI_CHECK(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, comm_, &req));
    wait(req, "all_gather");
    ++stats_.collectives;
    stats_.bytes_sent += bytes;
    stats_.bytes_received += bytes * static_cast<uint64_t>(size_);
  }
  void broadcast(void* buf, size_t bytes, int root) override {
    MPI_Request req;
    QTC_MPI_CHECK(MPI_Ibcast(buf, static_cast<int>(bytes), MPI_BYTE, root, comm_, &req));
    wait(req, "broadcast");
  }
  void barrier() override {
    MPI_Request req;
    QTC_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    wait(req, "barrier");
  }

 private:
  /// Polls a request until it completes or the deadline passes; a peer that died or hangs turns into
  /// an error here instead of a hang.
  void wait(MPI_Request& req, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    const double limit = collective_timeout_s();
    for (int spins = 0;; ++spins) {
      int done = 0;
      QTC_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      if (done) return;
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (el > limit)
        QTC_FAIL("rank ", rank_, ": MPI ", what, " did not complete within ", limit,
                 " s (QTC_DIST_TIMEOUT_S): a peer rank failed or hangs");
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(spins > 100000 ? 1000 : 50));
    }
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm() { return std::make_unique<MpiComm>(); }

std::unique_ptr<Comm> make_default_comm(Comm& mpi) {
  const char* t = std::getenv("QTC_DIST_TRANSPORT");
  const std::string want = t ? t : "";
  const char* rg = std::getenv("QTC_REQUIRE_GPU");
  const bool require_gpu = rg != nullptr && std::string(rg) == "1";
  const std::string why = nccl_unavailable_reason();
  if (want == "mpi") {
    QTC_CHECK(!require_gpu, "QTC_REQUIRE_GPU=1 but QTC_DIST_TRANSPORT=mpi");
    return make_mpi_comm();
  }
  if (want == "nccl" || require_gpu || (want.empty() && why.empty())) {
    QTC_CHECK(why.empty(), "the NCCL transport cannot run here: ", why,
              require_gpu ? " (QTC_REQUIRE_GPU=1 turns this into a failure)" : "");
    return make_nccl_comm(mpi);
  }
  QTC_CHECK(want.empty(), "QTC_DIST_TRANSPORT must be mpi or nccl, got '", want, "'");
  return make_mpi_comm();
}

Runtime::Runtime(int* argc, char*** argv) {
  int provided = 0;
  QTC_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

Runtime::~Runtime() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

void Runtime::fail(const std::string& why, int code) {
  int rank = -1, init = 0;
  MPI_Initialized(&init);
  if (init) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "qtc dist: rank %d failed: %s\nqtc dist: aborting all ranks\n", rank, why.c_str());
  std::fflush(stderr);
  if (init) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace qtc::dist
