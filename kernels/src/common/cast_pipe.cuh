/// \file cast_pipe.cuh
/// \brief Helpers of the pipelined FP8 cast kernels (mxfp8_pipe.cu, fp8_pipe.cu; LaunchOptions::cast_kernel =
///        kPipelined): 16-byte cp.async copies into shared memory (zero-filled where out of range), their groups,
///        an ordering token that keeps a stage's refill behind the reads of its previous contents, and a four-value
///        E4M3 conversion with the reference's NaN code.
///
///        Stage discipline: every thread copies its own 16-byte slots and later reads back only those slots, so no
///        barrier orders a stage between threads. Before a thread refills a slot it must have read the slot's old
///        contents: refill() takes a token computed from every value read (`token_of`), and the empty asm below
///        makes the copy's size operand depend on it, so the copy is issued (in order) only after the loads that
///        produced the token have returned their data.
#pragma once
#include <cstdint>

#include <algorithm>

#include "device_util.cuh"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"

namespace qtc::cuda::dev {

/// One 16-byte global -> shared copy through L2 only (cp.async.cg); `bytes` 16 copies, 0 fills the slot with zeros
/// (then `src` is not read, but must still be a valid address: callers pass the tensor's base).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, uint32_t bytes) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// A value that depends on every word of v[0..n): the ordering token of a stage's reads.
template <int n>
__device__ __forceinline__ uint32_t token_of(const uint4 (&v)[n]) {
  uint32_t t = 0;
#pragma unroll
  for (int i = 0; i < n; ++i) t ^= v[i].x;
  return t;
}

/// `bytes`, made (opaquely to the compiler) dependent on `token`: a copy given the result issues after the token's
/// producers have completed.
__device__ __forceinline__ uint32_t after(uint32_t bytes, uint32_t token) {
  asm volatile("" : "+r"(bytes) : "r"(token));
  return bytes;
}

/// e8m0_reciprocal (numeric.hpp: 2^(127 - e), 2^-127 for e = 254, NaN for e = 255) by selects instead of branches.
__device__ __forceinline__ float e8m0_reciprocal_sel(uint32_t e) {
  const uint32_t pow2 = (254u - e) << 23;
  return __uint_as_float(e < 254u ? pow2 : (e == 254u ? 0x00400000u : 0x7FFFFFFFu));
}

/// Four floats -> four E4M3 codes (a in bits 7:0 ... d in bits 31:24), RN-even satfinite, NaN as 0x7F (the
/// reference's code; numeric.hpp encode_fp8). Two cvt.rn.satfinite.e4m3x2.f32, then the NaN rule on the word: by
/// the instruction's definition a NaN input gives a NaN code (0x7F or 0xFF, the only E4M3 NaNs) and every other
/// input a finite one (saturated to +-448), so a byte is a NaN iff its low 7 bits are all ones; (b & 0x7F) + 1 sets
/// bit 7 exactly then (no carry leaves the byte), and clearing that bit turns 0xFF into 0x7F. Three integer
/// instructions per four codes instead of a compare and a select per code.
__device__ __forceinline__ uint32_t cvt_e4m3x4(float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(d), "f"(c));
  const uint32_t w = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  const uint32_t nan = ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
  return w & ~nan;
#else
  return cvt_fp8x2(a, b, false) | (cvt_fp8x2(c, d, false) << 16);
#endif
}

/// Launches a persistent pipelined kernel of 256 threads with `smem` bytes of dynamic shared memory: as many CTAs
/// as fit on the device at once (at most `want`, at most the grid-stride cap of the determinism test).
template <typename P>
void launch_pipelined_grid(void (*kernel)(P), size_t smem, int64_t want, const P& p, cudaStream_t s) {
  int dev = 0, sms = 0, per_sm = 0;
  QTC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  QTC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  QTC_CUDA_CHECK(cudaGetDevice(&dev));
  QTC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  QTC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, smem));
  int64_t slots = static_cast<int64_t>(sms) * std::max(per_sm, 1);
  if (const int64_t cap = detail::grid_stride_cap(); cap > 0) slots = std::min(slots, cap);
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(want, slots)));
  kernel<<<grid, 256, smem, s>>>(p);
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace qtc::cuda::dev
