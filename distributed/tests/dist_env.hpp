/// \file dist_env.hpp
/// \brief What the multi-rank test main gives the tests: the transport under test.
#pragma once
#include "qtc/dist/comm.hpp"

namespace qtc::dist::testenv {
/// The communicator every test uses (MPI or NCCL, see make_default_comm).
Comm& comm();
}  // namespace qtc::dist::testenv
