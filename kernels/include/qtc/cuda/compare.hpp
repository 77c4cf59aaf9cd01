/// \file compare.hpp
/// \brief Comparing outputs on the device (issue 23 item 3: the Python module checks CUDA tensors on their GPU):
///        how many elements of a caller's buffer differ from the kernels' compact result and which one is first,
///        and which padding entries of a layout buffer are not zero, without copying either buffer to the host.
///        Only the counts and the first index come back; a caller that shows the first mismatch copies that one
///        element. Element rules as conformance's find_mismatch (verify.hpp): bits compared, E2M1 per nibble (low
///        nibble first), and with nan_equal any NaN equals any NaN in F32, BF16 and F16.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "qtc/layout.hpp"

namespace qtc::cuda {

/// How a compared element is encoded: E2M1 nibbles, single bytes (E4M3, E5M2, E8M0, U8), or a float type.
/// kF32Value: F32 compared as values, the rule of value_equivalence.hpp (any NaN equals any NaN, -0.0 equals +0.0;
/// nan_equal is not read): what the value-equivalence tier compares two dequantized planes with.
enum class DeviceElem : uint8_t { kE2M1, kByte, kF32, kBF16, kF16, kF32Value };

/// Bytes one element occupies (E2M1: 1, for the byte that holds two).
int device_elem_bytes(DeviceElem e);

/// The result of compare_on_device.
struct DeviceMismatch {
  int64_t count = 0;   ///< elements that differ
  int64_t first = -1;  ///< flat compact index of the first of them; -1 when none
};

/// Compares `want` (a compact row-major [rows, cols] matrix of elements; E2M1: cols nibbles a row) with `got`, the same
/// matrix stored as `geom` says (nullptr: compact too; only byte and F32 elements may have a geometry, rows and cols
/// then geom->rows and geom->cols). Both are device pointers. Stream-ordered; synchronizes the stream to return the
/// two numbers.
DeviceMismatch compare_on_device(DeviceElem e, const void* want, const void* got, int64_t rows, int64_t cols,
                                 const ScaleGeometry* geom, bool nan_equal, cudaStream_t stream);

/// The padding of a layout buffer: entries that hold no compact value.
struct DevicePadding {
  int64_t nonzero = 0;  ///< padding elements with a non-zero byte
  int64_t total = 0;    ///< padding elements
  int64_t first = -1;   ///< flat buffer index of the first non-zero one; -1 when none
};

/// The padding entries of `buf` (geom.size() elements of `elem_bytes` bytes, 1 or 4, in device memory) that are not
/// zero. Uses a geom.size()-byte device mask; synchronizes the stream.
DevicePadding nonzero_padding_on_device(const void* buf, int elem_bytes, const ScaleGeometry& geom, cudaStream_t stream);

/// The compact [geom.rows, geom.cols] matrix of a layout buffer: compact[r * cols + c] = buf[geom.offset(r, c)], elements
/// of `elem_bytes` bytes (1 or 4). Both device pointers; stream-ordered, no synchronization.
void to_compact_on_device(const void* buf, int elem_bytes, const ScaleGeometry& geom, void* compact, cudaStream_t stream);

}  // namespace qtc::cuda
