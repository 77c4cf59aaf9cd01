/// \file grouped_gemm_sm90.hpp
/// \brief The device-driven grouped BF16 GEMM of the grouped row-scaled NVFP4 path on Hopper (kernels/cutlass/
///        grouped_gemm_sm90.cu, CUTLASS 3.x sm_90a, built when QTC_CUTLASS is on). Internal: no CUTLASS type here.
///
/// One launch computes every group; the per-group problem shapes, operand pointers and epilogue vectors are
/// written on the device by a small kernel from the device group sizes, and the persistent tile scheduler reads
/// them there (no host problem shapes): no host synchronisation, capturable in a CUDA graph and replayable with
/// other group sizes written into the same device arrays.
///
/// Epilogue (FP32, no FMA contraction, TE_FORMATS.md §7.5 steps 2-4 in TE's order):
///   D[i][j] = ((alpha · acc[i][j]) · col[i]) · row_mul[j] + row_add[j]
/// alpha is the neutralised NVFP4 factor 1/(36·448·maxB), col / row_mul are the post-scale vectors (a fused factor
/// goes into one of them and the other is all ones, which is exact), row_add the FP32 bias or -0 (exact: x + -0 = x
/// for every x, -0 included). The output is FP32 or BF16 (one RN from the FP32 value).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace qtc::cuda::detail {

/// nullptr when this build has the sm_90a grouped GEMM; otherwise why not (a fixed string).
const char* sm90_grouped_unavailable_reason();

/// base + offset·per_offset + g·per_group (elements): one operand of group g, whose first row in the grouped
/// buffer is `offset` (row_offsets[g]).
struct GroupedPtr {
  const void* base = nullptr;
  int64_t per_offset = 0;
  int64_t per_group = 0;
};

/// The grouped problem. Group g has t_g = sizes[g·stride] tokens starting at row o_g = offsets[g·stride]
/// (device int64). fprop: D_g [t_g, n] = A_g [t_g, k] · B_g [n, k]ᵀ (M = t_g, N = n, K = k).
/// wgrad: D_g [n, k] = A_g [n, t_g] · B_g [k, t_g]ᵀ (M = n, N = k, K = t_g; A_g, B_g rows of length lda / ldb,
/// 16-byte aligned: t_g and o_g multiples of 8). A group with t_g = 0 computes nothing (fprop writes no row; wgrad's
/// caller writes its zeros).
struct GroupedGemmProblem {
  bool wgrad = false;
  int groups = 0;
  const int64_t* sizes = nullptr;
  const int64_t* offsets = nullptr;
  int64_t stride = 1;
  int64_t n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;  ///< elements
  GroupedPtr a, b, d;                  ///< BF16, BF16, FP32 or BF16 (d_bf16)
  bool d_bf16 = false;
  float alpha = 1.0f;
  GroupedPtr col, row_mul, row_add;    ///< FP32 vectors along D's rows (col) and columns (row_*)
};

#if defined(__CUDACC__)
#define QTC_GROUPED_HD __host__ __device__
#else
#define QTC_GROUPED_HD
#endif

/// Group g's GEMM as the fill kernel writes it: problem shape and element offsets of every operand from its base.
struct GroupArgs {
  bool live = false;   ///< false: shape (0, ., .), nothing computed
  int m = 0, n = 0, k = 0;
  int64_t a = 0, b = 0, d = 0, col = 0, row_mul = 0, row_add = 0;
};

/// The per-group arithmetic of the fill kernel (host and device; tested on the CPU): t tokens at row o.
/// wgrad reads A_g / B_g at column o: TMA needs 16-byte aligned rows (o % 8 == 0) and a K of whole 16-byte chunks
/// (t % 8 == 0); a group breaking that (the caller contract of grouped NVFP4: multiples of 16) computes nothing.
QTC_GROUPED_HD inline GroupArgs group_args(const GroupedGemmProblem& p, int64_t t, int64_t o, int64_t g) {
  GroupArgs r;
  r.live = t > 0 && (!p.wgrad || (o % 8 == 0 && t % 8 == 0));
  r.m = r.live ? static_cast<int>(p.wgrad ? p.n : t) : 0;
  r.n = static_cast<int>(p.wgrad ? p.k : p.n);
  r.k = p.wgrad ? (r.live ? static_cast<int>(t) : 0) : static_cast<int>(p.k);
  auto off = [&](const GroupedPtr& q) { return o * q.per_offset + g * q.per_group; };
  r.a = off(p.a);
  r.b = off(p.b);
  r.d = off(p.d);
  r.col = off(p.col);
  r.row_mul = off(p.row_mul);
  r.row_add = off(p.row_add);
  return r;
}

/// Device bytes run_sm90_grouped needs as `scratch` for `groups` groups (argument arrays + CUTLASS workspace).
size_t sm90_grouped_scratch_bytes(int groups);

/// Fills the per-group arguments on the device and launches the grouped GEMM on `stream`. Throws qtc::Error when
/// unavailable or CUTLASS refuses the arguments.
void run_sm90_grouped(const GroupedGemmProblem& p, void* scratch, cudaStream_t stream);

}  // namespace qtc::cuda::detail
