/// \file grid_cap.cpp
/// \brief The grid-stride cap of launch.hpp (a test hook: the determinism test varies the grid size).
#include <atomic>

#include "launch.hpp"

namespace qtc::cuda::detail {
namespace {
std::atomic<int64_t> g_cap{0};
}
void set_grid_stride_cap(int64_t n) { g_cap.store(n < 0 ? 0 : n, std::memory_order_relaxed); }
int64_t grid_stride_cap() { return g_cap.load(std::memory_order_relaxed); }
}  // namespace qtc::cuda::detail
