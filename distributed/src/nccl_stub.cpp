/// \file nccl_stub.cpp
/// \brief The NCCL transport in a build without CUDA/NCCL: present, and says why it cannot run.
#include "qtc/dist/comm.hpp"
#include "qtc/error.hpp"

namespace qtc::dist {

bool nccl_compiled() { return false; }
std::string nccl_unavailable_reason() { return "built without CUDA/NCCL (QTC_ENABLE_CUDA=OFF or NCCL not found)"; }
std::unique_ptr<Comm> make_nccl_comm(Comm&) { QTC_FAIL("make_nccl_comm: ", nccl_unavailable_reason()); }

}  // namespace qtc::dist
