/// \file grouped_routing.cu
/// \brief The sanitised routing of the grouped kernels (grouped_routing.hpp).
#include "grouped_routing.hpp"

#include "qtc/cuda/check.hpp"

namespace qtc::cuda::detail {
namespace {

/// One thread: the groups in order (the rule needs the end of the last kept group). G <= 65535.
__global__ void sanitize_routing_kernel(const int64_t* __restrict__ sizes, const int64_t* __restrict__ offsets,
                                        int64_t stride, int64_t groups, int64_t capacity, int64_t* __restrict__ out) {
  sanitize_routing(sizes, offsets, stride, groups, capacity, out);
}

}  // namespace

void launch_sanitize_routing(const int64_t* sizes, const int64_t* offsets, int64_t stride, int64_t groups,
                             int64_t capacity, int64_t* out, cudaStream_t stream) {
  if (groups <= 0) return;
  sanitize_routing_kernel<<<1, 1, 0, stream>>>(sizes, offsets, stride, groups, capacity, out);
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace qtc::cuda::detail
