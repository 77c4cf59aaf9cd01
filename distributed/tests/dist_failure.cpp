/// \file dist_failure.cpp
/// \brief A job in which one rank fails in the middle of a series of quantized all-gathers. Run by
///        expect_failure.sh, which passes only if the whole job exits with an error within 60 s.
///
/// Usage: qtc_dist_failure MODE   (MODE: throw | abort | kill | hang; the failing rank is the last one)
///   throw: the rank throws qtc::Error; main reports it and aborts the job (MPI_Abort).
///   abort: the rank calls std::abort() (SIGABRT); mpirun reaps the job.
///   kill:  the rank sends itself SIGKILL; mpirun reaps the job.
///   hang:  the rank sleeps forever; the others' collectives hit the deadline and abort the job.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <chrono>
#include <thread>

#include "../../reference/tests/sharding_fixtures.hpp"
#include "qtc/dist/fsdp.hpp"

int main(int argc, char** argv) {
  qtc::dist::Runtime rt(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "throw";
  try {
    auto mpi = qtc::dist::make_mpi_comm();
    auto comm = qtc::dist::make_default_comm(*mpi);
    const int victim = comm->size() - 1;
    const qtc::Recipe r = qtc::testing::make_nvfp4(false, false);
    const int64_t shard = qtc::testing::kShardRows;
    for (int step = 0; step < 4; ++step) {
      const qtc::HostMatrix x = qtc::testing::weight_rows(step, comm->rank() * shard, (comm->rank() + 1) * shard, 256);
      const qtc::QuantizedTensor mine = qtc::ref::quantize_shard(x.view(), r, qtc::dist::amax_all_reduce(*comm));
      if (step == 2 && comm->rank() == victim) {
        std::fprintf(stderr, "rank %d: injecting failure '%s' before all-gather %d\n", comm->rank(), mode.c_str(), step);
        std::fflush(stderr);
        if (mode == "throw") throw qtc::Error("injected failure in the middle of the all-gathers");
        if (mode == "abort") std::abort();
        if (mode == "kill") std::raise(SIGKILL);
        if (mode == "hang") for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      const qtc::QuantizedTensor full = qtc::dist::all_gather_quantized(*comm, mine);
      if (comm->rank() == 0) std::printf("all-gather %d done (%lld rows)\n", step, static_cast<long long>(full.rows));
    }
  } catch (const std::exception& e) {
    qtc::dist::Runtime::fail(e.what());
  }
  std::printf("rank %d: finished without failure (mode %s)\n", rt.world_rank(), mode.c_str());
  return 0;
}
