/// \file dist_main.cpp
/// \brief GoogleTest main for multi-rank tests: initializes MPI, picks the transport, lets only rank 0
///        print the full report (other ranks print their failures, prefixed with the rank), and makes
///        the verdict collective: the job fails on every rank if any rank failed. A rank that throws
///        outside a test aborts the whole job (Runtime::fail) instead of leaving its peers waiting.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "dist_env.hpp"
#include "qtc/dist/comm.hpp"
#include "qtc/error.hpp"

namespace qtc::dist::testenv {
namespace {
std::unique_ptr<Comm> g_mpi, g_comm;
}
Comm& comm() { return *g_comm; }
}  // namespace qtc::dist::testenv

namespace {

/// Prints failed assertions of a non-zero rank, prefixed with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed()) std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  qtc::dist::Runtime rt(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // An exception (a collective that timed out, a transport error) must not be swallowed by one test while
  // the other ranks move on to the next collective: let it reach main, which aborts the whole job.
  GTEST_FLAG_SET(catch_exceptions, false);
  int rc = 1;
  try {
    using namespace qtc::dist::testenv;
    g_mpi = qtc::dist::make_mpi_comm();
    g_comm = qtc::dist::make_default_comm(*g_mpi);
    if (rt.world_rank() == 0)
      std::printf("qtc distributed tests: %d ranks, transport %s, collective timeout %.0f s\n", rt.world_size(), g_comm->name().c_str(),
                  qtc::dist::collective_timeout_s());
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (rt.world_rank() != 0) {
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(rt.world_rank()));
    }
    rc = RUN_ALL_TESTS();
    // Collective verdict: any rank's failure fails the job everywhere.
    const uint64_t failed = g_mpi->all_reduce_sum(rc != 0 ? 1 : 0);
    if (rt.world_rank() == 0) std::printf("qtc distributed tests: %llu of %d ranks failed\n", static_cast<unsigned long long>(failed), rt.world_size());
    rc = failed ? 1 : 0;
    g_comm.reset();
    g_mpi.reset();
  } catch (const std::exception& e) {
    qtc::dist::Runtime::fail(e.what());
  }
  return rc;
}
