/// \file grouped_routing.hpp
/// \brief The routing of a grouped call as the grouped kernels read it (internal). Group sizes and offsets live in
///        device memory and may be anything (a stale buffer of a captured graph, a routing bug upstream): before
///        any grouped kernel reads them, one tiny kernel rewrites them into a sanitised copy under the rules the
///        host-sized calls check (GroupedRows::validate):
///          group g is kept when 0 <= size, prev_end <= offset and offset + size <= capacity (prev_end: the end of
///          the last kept group, 0 before the first); otherwise it is read as empty (size 0 at offset prev_end).
///        Every kept group therefore lies inside [0, capacity) and after the previous one, so no grouped kernel
///        reads or writes outside its buffers, and two groups never share a row. A valid routing is unchanged.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace qtc::cuda::detail {

/// Writes the sanitised routing of `groups` groups into `out` (device, 2·groups int64: sizes at out[0, groups),
/// offsets at out[groups, 2·groups), i.e. stride 1). `sizes` / `offsets` are read with `stride`. Stream-ordered,
/// graph-capturable (one single-thread launch); groups == 0 launches nothing.
void launch_sanitize_routing(const int64_t* sizes, const int64_t* offsets, int64_t stride, int64_t groups,
                             int64_t capacity, int64_t* out, cudaStream_t stream);

#if defined(__CUDACC__)
#define QTC_ROUTING_HD __host__ __device__
#else
#define QTC_ROUTING_HD
#endif

/// The rule itself (the kernel runs it in one thread; host-callable for tests): sizes/offsets in, kept ones out.
QTC_ROUTING_HD inline void sanitize_routing(const int64_t* sizes, const int64_t* offsets, int64_t stride, int64_t groups,
                                            int64_t capacity, int64_t* out) {
  int64_t end = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t n = sizes[g * stride], o = offsets[g * stride];
    const bool keep = n >= 0 && o >= end && o <= capacity && n <= capacity - o;
    out[g] = keep ? n : 0;
    out[groups + g] = keep ? o : end;
    if (keep) end = o + n;
  }
}

}  // namespace qtc::cuda::detail
