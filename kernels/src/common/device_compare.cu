/// \file device_compare.cu
/// \brief compare_on_device, nonzero_padding_on_device and to_compact_on_device (qtc/cuda/compare.hpp): grid-stride
///        passes that count differing (or non-zero padding) elements and keep the smallest index, one warp reduction
///        and two atomics per warp (only the two numbers travel to the host), and a gather of a layout buffer's
///        compact matrix.
#include <climits>

#include "qtc/cuda/check.hpp"
#include "qtc/cuda/compare.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/error.hpp"

namespace qtc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

__device__ __forceinline__ uint32_t load_elem(DeviceElem e, const uint8_t* p, int64_t i) {
  switch (e) {
    case DeviceElem::kE2M1: return (p[i / 2] >> (4 * (i % 2))) & 0xFu;
    case DeviceElem::kByte: return p[i];
    case DeviceElem::kF32:
    case DeviceElem::kF32Value: return reinterpret_cast<const uint32_t*>(p)[i];
    case DeviceElem::kBF16:
    case DeviceElem::kF16: return reinterpret_cast<const uint16_t*>(p)[i];
  }
  return 0;
}

__device__ __forceinline__ bool is_nan(DeviceElem e, uint32_t v) {
  switch (e) {
    case DeviceElem::kF32:
    case DeviceElem::kF32Value: return (v & 0x7F800000u) == 0x7F800000u && (v & 0x007FFFFFu) != 0;
    case DeviceElem::kBF16: return (v & 0x7F80u) == 0x7F80u && (v & 0x007Fu) != 0;
    case DeviceElem::kF16: return (v & 0x7C00u) == 0x7C00u && (v & 0x03FFu) != 0;
    default: return false;
  }
}

/// Adds a warp's count and keeps its smallest index: out[0] += count, out[1] = min(out[1], first).
__device__ __forceinline__ void warp_commit(unsigned long long count, unsigned long long first, unsigned long long* out) {
  for (int o = 16; o > 0; o /= 2) {
    count += __shfl_down_sync(0xFFFFFFFFu, count, o);
    const unsigned long long f = __shfl_down_sync(0xFFFFFFFFu, first, o);
    first = f < first ? f : first;
  }
  if ((threadIdx.x & 31u) == 0 && count != 0) {
    atomicAdd(&out[0], count);
    atomicMin(&out[1], first);
  }
}

__global__ void __launch_bounds__(kThreads) compare_kernel(DeviceElem e, const uint8_t* __restrict__ want,
                                                           const uint8_t* __restrict__ got, int64_t rows, int64_t cols,
                                                           ScaleGeometry geom, bool use_geom, bool nan_equal,
                                                           unsigned long long* out) {
  unsigned long long count = 0, first = ULLONG_MAX;
  const int64_t n = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const uint32_t a = load_elem(e, want, i);
    const uint32_t b = load_elem(e, got, use_geom ? geom.offset(i / cols, i % cols) : i);
    if (a == b || (nan_equal && is_nan(e, a) && is_nan(e, b))) continue;
    if (e == DeviceElem::kF32Value && (__uint_as_float(a) == __uint_as_float(b) || (is_nan(e, a) && is_nan(e, b)))) continue;
    ++count;
    if (static_cast<unsigned long long>(i) < first) first = static_cast<unsigned long long>(i);
  }
  warp_commit(count, first, out);
}

__global__ void __launch_bounds__(kThreads) mark_kernel(ScaleGeometry geom, uint8_t* __restrict__ mask) {
  const int64_t n = geom.rows * geom.cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
    mask[geom.offset(i / geom.cols, i % geom.cols)] = 1;
}

__global__ void __launch_bounds__(kThreads) padding_kernel(const uint8_t* __restrict__ buf, int elem_bytes, int64_t n,
                                                           const uint8_t* __restrict__ mask, unsigned long long* out) {
  unsigned long long count = 0, first = ULLONG_MAX;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    if (mask[i] != 0) continue;
    bool nonzero = false;
    for (int b = 0; b < elem_bytes; ++b) nonzero = nonzero || buf[i * elem_bytes + b] != 0;
    if (!nonzero) continue;
    ++count;
    if (static_cast<unsigned long long>(i) < first) first = static_cast<unsigned long long>(i);
  }
  warp_commit(count, first, out);
}

__global__ void __launch_bounds__(kThreads) gather_kernel(const uint8_t* __restrict__ buf, int elem_bytes, ScaleGeometry geom,
                                                          uint8_t* __restrict__ out) {
  const int64_t n = geom.rows * geom.cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const int64_t at = geom.offset(i / geom.cols, i % geom.cols) * elem_bytes;
    for (int b = 0; b < elem_bytes; ++b) out[i * elem_bytes + b] = buf[at + b];
  }
}

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

/// A [count, first] pair on the device, set to [0, max] on the stream.
struct Tally {
  DeviceBuffer buf;
  explicit Tally(cudaStream_t s) : buf(2 * sizeof(unsigned long long), s) {
    QTC_CUDA_CHECK(cudaMemsetAsync(p(), 0, sizeof(unsigned long long), s));
    QTC_CUDA_CHECK(cudaMemsetAsync(p() + 1, 0xFF, sizeof(unsigned long long), s));  // ULLONG_MAX
  }
  unsigned long long* p() const { return buf.as<unsigned long long>(); }
  /// Synchronizes and returns {count, first} (first -1 when none).
  std::pair<int64_t, int64_t> read(cudaStream_t s) const {
    unsigned long long h[2] = {0, 0};
    QTC_CUDA_CHECK(cudaMemcpyAsync(h, buf.data(), sizeof(h), cudaMemcpyDeviceToHost, s));
    QTC_CUDA_CHECK(cudaStreamSynchronize(s));
    return {static_cast<int64_t>(h[0]), h[0] == 0 ? int64_t{-1} : static_cast<int64_t>(h[1])};
  }
};

}  // namespace

int device_elem_bytes(DeviceElem e) {
  switch (e) {
    case DeviceElem::kF32:
    case DeviceElem::kF32Value: return 4;
    case DeviceElem::kBF16:
    case DeviceElem::kF16: return 2;
    default: return 1;
  }
}

DeviceMismatch compare_on_device(DeviceElem e, const void* want, const void* got, int64_t rows, int64_t cols,
                                 const ScaleGeometry* geom, bool nan_equal, cudaStream_t stream) {
  QTC_CHECK(rows >= 0 && cols >= 0, "compare_on_device: shape [", rows, ", ", cols, "] is negative");
  const bool use_geom = geom != nullptr && !geom->identity();
  QTC_CHECK(!use_geom || e != DeviceElem::kE2M1, "compare_on_device: E2M1 data has no scale layout");
  QTC_CHECK(!use_geom || (geom->rows == rows && geom->cols == cols), "compare_on_device: the geometry is of a [",
            geom->rows, ", ", geom->cols, "] matrix, the compared one [", rows, ", ", cols, "]");
  DeviceMismatch m;
  if (rows == 0 || cols == 0) return m;
  Tally t(stream);
  compare_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(e, static_cast<const uint8_t*>(want),
                                                                   static_cast<const uint8_t*>(got), rows, cols,
                                                                   use_geom ? *geom : ScaleGeometry{}, use_geom, nan_equal, t.p());
  QTC_CUDA_CHECK_LAUNCH();
  const auto [count, first] = t.read(stream);
  m.count = count;
  m.first = first;
  return m;
}

DevicePadding nonzero_padding_on_device(const void* buf, int elem_bytes, const ScaleGeometry& geom, cudaStream_t stream) {
  QTC_CHECK(elem_bytes == 1 || elem_bytes == 4, "nonzero_padding_on_device: elements of ", elem_bytes, " bytes (1 or 4)");
  DevicePadding p;
  const int64_t n = geom.size();
  p.total = n - geom.rows * geom.cols;
  if (p.total <= 0) {
    p.total = 0;
    return p;
  }
  DeviceBuffer mask(static_cast<size_t>(n), stream);
  QTC_CUDA_CHECK(cudaMemsetAsync(mask.data(), 0, static_cast<size_t>(n), stream));
  if (geom.rows > 0 && geom.cols > 0) {
    mark_kernel<<<blocks_for(geom.rows * geom.cols), kThreads, 0, stream>>>(geom, mask.as<uint8_t>());
    QTC_CUDA_CHECK_LAUNCH();
  }
  Tally t(stream);
  padding_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(buf), elem_bytes, n, mask.as<uint8_t>(), t.p());
  QTC_CUDA_CHECK_LAUNCH();
  const auto [count, first] = t.read(stream);
  p.nonzero = count;
  p.first = first;
  return p;
}

void to_compact_on_device(const void* buf, int elem_bytes, const ScaleGeometry& geom, void* compact, cudaStream_t stream) {
  QTC_CHECK(elem_bytes == 1 || elem_bytes == 4, "to_compact_on_device: elements of ", elem_bytes, " bytes (1 or 4)");
  QTC_CHECK(geom.rows >= 0 && geom.cols >= 0, "to_compact_on_device: shape [", geom.rows, ", ", geom.cols, "] is negative");
  if (geom.rows == 0 || geom.cols == 0) return;
  gather_kernel<<<blocks_for(geom.rows * geom.cols), kThreads, 0, stream>>>(static_cast<const uint8_t*>(buf), elem_bytes, geom,
                                                                            static_cast<uint8_t*>(compact));
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace qtc::cuda
