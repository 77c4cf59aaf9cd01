/// \file gemm_kernels.cu
/// \brief Device helpers of the GEMM paths: NVFP4 plane -> BF16 (exact, for the Hopper emulation), the NVFP4
///        device alpha (TE_FORMATS.md §7.4), and the row-scaled post-scale/bias/cast epilogue (§7.5).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "gemm_internal.hpp"
#include "qtc/numeric.hpp"
#include "qtc/cuda/check.hpp"

namespace qtc::cuda::detail {
namespace {

/// Block (r, kb) of an NVFP4 [rows, k] plane: 8 packed bytes and one scale -> 16 BF16 values code·sf at out + r·k + kb·16.
__device__ __forceinline__ void nvfp4_block_to_bf16(const uint8_t* __restrict__ data, const uint8_t* __restrict__ scale,
                                                    int64_t r, int64_t kb, int64_t k, const ScaleGeometry& sg,
                                                    __nv_bfloat16* __restrict__ out) {
  const uint2 packed = *reinterpret_cast<const uint2*>(data + r * (k / 2) + kb * 8);
  const float sf = decode_e4m3(scale[sg.offset(r, kb)]);
  __align__(16) __nv_bfloat16 v[16];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t byte = ((i < 4 ? packed.x : packed.y) >> (8 * (i % 4))) & 0xFFu;
    v[2 * i] = __float2bfloat16_rn(__fmul_rn(decode_e2m1(byte & 0xF), sf));  // exact: <= 6 significant bits
    v[2 * i + 1] = __float2bfloat16_rn(__fmul_rn(decode_e2m1(byte >> 4), sf));
  }
  uint4* dst = reinterpret_cast<uint4*>(out + r * k + kb * 16);
  dst[0] = reinterpret_cast<const uint4*>(v)[0];
  dst[1] = reinterpret_cast<const uint4*>(v)[1];
}

// ---- Fast path: compact scales (scale byte of element e is e / 16), one linear stream per plane ----
// One unit = 8 elements: 4 code bytes and (shared by two units) one scale byte -> 16 BF16 bytes. Thread t of a
// block takes units base + i·256 + t (i < kUnitsPerThread): every load and 16-byte store of a warp is contiguous,
// all loads are issued before the first use, and no division is left (the old kernel's 64-bit r / kb split of
// every block cost more than the bytes it moved).
constexpr int kLinThreads = 256;
constexpr int kUnitsPerThread = 4;
constexpr int64_t kUnitsPerBlock = static_cast<int64_t>(kLinThreads) * kUnitsPerThread;

/// E2M1 code (low 4 bits) -> its value, exactly decode_e2m1: the three magnitude bits become exponent bits 0-1
/// and the top mantissa bit of a float whose exponent bias is off by 126 (code 1 lands on the subnormal 2^-127),
/// then one exact multiply by 2^126 (no FTZ: the TU is built with -ftz=false).
__device__ __forceinline__ float e2m1_fast(uint32_t q) {
  return __fmul_rn(__uint_as_float(((q & 7u) << 22) | ((q & 8u) << 28)), 0x1p126f);
}

/// 4 code bytes (8 elements, low nibble first) · sf -> 8 BF16 (exact: <= 6 significant bits).
__device__ __forceinline__ uint4 unit_to_bf16(uint32_t codes, float sf) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t byte = codes >> (8 * j);
    const __nv_bfloat162 v = __floats2bfloat162_rn(__fmul_rn(e2m1_fast(byte & 0xFu), sf),
                                                   __fmul_rn(e2m1_fast((byte >> 4) & 0xFu), sf));
    w[j] = *reinterpret_cast<const uint32_t*>(&v);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/// Units [u0, u0 + kUnitsPerBlock) ∩ [0, units) of one plane, by the calling block.
__device__ __forceinline__ void linear_block(const uint32_t* __restrict__ codes, const uint8_t* __restrict__ scale,
                                             int64_t units, int64_t u0, uint4* __restrict__ out) {
  uint32_t c[kUnitsPerThread];
  uint32_t s[kUnitsPerThread];
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int64_t u = u0 + i * kLinThreads + threadIdx.x;
    c[i] = u < units ? __ldg(codes + u) : 0u;
    s[i] = u < units ? __ldg(scale + u / 2) : 0u;
  }
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int64_t u = u0 + i * kLinThreads + threadIdx.x;
    if (u < units) out[u] = unit_to_bf16(c[i], decode_e4m3(s[i]));
  }
}

/// alpha = alpha_in·amax_A·amax_B·(1/(36·maxA·maxB)), fp32 left to right (§7.4); beta copied. With
/// neutralised operands (row-scaled, §7.5) the amaxes are 1 and the pointers are null.
__device__ __forceinline__ void nvfp4_alpha(const Nvfp4AlphaArgs& a) {
  const float x = a.amax_a != nullptr ? *a.amax_a : 1.0f;
  const float y = a.amax_b != nullptr ? *a.amax_b : 1.0f;
  float v = __fmul_rn(a.alpha_in, x);
  v = __fmul_rn(v, y);
  a.out[0] = __fmul_rn(v, a.factor);
  a.out[1] = a.beta;
}

/// Up to kLinPlanes planes in one launch: block b belongs to the plane p with first_block[p] <= b < first_block[p+1].
/// Block 0's first thread also writes the GEMM's device alpha/beta when alpha.out is set (one launch less).
constexpr int kLinPlanes = 4;
struct LinearJob {
  const uint32_t* codes[kLinPlanes];
  const uint8_t* scale[kLinPlanes];
  uint4* out[kLinPlanes];
  int64_t units[kLinPlanes];
  int64_t first_block[kLinPlanes + 1];
  int planes;
  Nvfp4AlphaArgs alpha;
};

__global__ void __launch_bounds__(kLinThreads) nvfp4_linear_to_bf16_kernel(LinearJob job) {
  const int64_t b = blockIdx.x;
  if (job.alpha.out != nullptr && b == 0 && threadIdx.x == 0) nvfp4_alpha(job.alpha);
  int p = 0;
#pragma unroll
  for (int i = 1; i < kLinPlanes; ++i) p += (i < job.planes && b >= job.first_block[i]) ? 1 : 0;
  linear_block(job.codes[p], job.scale[p], job.units[p], (b - job.first_block[p]) * kUnitsPerBlock, job.out[p]);
}

/// One thread per 16-element block: 8 packed bytes and one scale -> 16 BF16 values code·sf.
__global__ void nvfp4_to_bf16_kernel(const uint8_t* __restrict__ data, const uint8_t* __restrict__ scale,
                                     int64_t rows, int64_t k, ScaleGeometry sg, __nv_bfloat16* __restrict__ out) {
  const int64_t nkb = k / 16;
  const int64_t total = rows * nkb;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / nkb;
    const int64_t kb = t % nkb;
    nvfp4_block_to_bf16(data, scale, r, kb, k, sg, out);
  }
}

__global__ void nvfp4_alpha_kernel(Nvfp4AlphaArgs a) { nvfp4_alpha(a); }

template <typename T>
__device__ __forceinline__ float load_f(const T* p, int64_t i);
template <>
__device__ __forceinline__ float load_f<float>(const float* p, int64_t i) { return p[i]; }
template <>
__device__ __forceinline__ float load_f<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
template <>
__device__ __forceinline__ float load_f<__half>(const __half* p, int64_t i) { return __half2float(p[i]); }

template <typename T>
__device__ __forceinline__ T store_t(float v);
template <>
__device__ __forceinline__ float store_t<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 store_t<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half store_t<__half>(float v) { return __float2half_rn(v); }

/// §7.5 step 3-4 on the FP32 scratch [n, m]: post-scale (one fused factor when a side is scalar, two
/// roundings otherwise), + bias in fp32, cast; with accumulate, + C in the output dtype.
template <typename T>
__global__ void row_scaled_epilogue_kernel(const float* __restrict__ scratch, int64_t n, int64_t m,
                                           const float* __restrict__ row_scales, int64_t n_row,
                                           const float* __restrict__ col_scales, int64_t n_col,
                                           const T* __restrict__ bias, const T* __restrict__ c, T* __restrict__ d) {
  const int64_t total = n * m;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / m;
    const int64_t j = t % m;
    float v = scratch[t];
    const float r = row_scales[n_row == 1 ? 0 : i];
    const float cs = col_scales[n_col == 1 ? 0 : j];
    if (n_col == 1)
      v = __fmul_rn(v, __fmul_rn(r, cs));
    else if (n_row == 1)
      v = __fmul_rn(v, __fmul_rn(cs, r));
    else
      v = __fmul_rn(__fmul_rn(v, r), cs);
    if (bias != nullptr) v = __fadd_rn(v, load_f(bias, j));
    T o = store_t<T>(v);
    if (c != nullptr) o = store_t<T>(__fadd_rn(load_f(c, t), load_f(&o, 0)));
    d[t] = o;
  }
}


/// Grouped §7.5 epilogue: blockIdx.y = group; the group's row count and first row are read from device
/// memory (no host synchronisation). Each live row r: v = scratch[r][j] · (row_scales[r] · col_scale[g])
/// (one fused factor: the weight side is a scalar), + bias[g][j] in FP32, cast.
template <typename T>
__global__ void grouped_row_scaled_epilogue_kernel(const float* __restrict__ scratch, int64_t n_cols,
                                                   const int64_t* __restrict__ first_dims,
                                                   const int64_t* __restrict__ row_offsets, int64_t stride,
                                                   const float* __restrict__ row_scales, int64_t n_row,
                                                   const float* __restrict__ col_scales, const T* __restrict__ bias,
                                                   T* __restrict__ d) {
  const int64_t g = blockIdx.y;
  const int64_t rows = first_dims[g * stride];
  const int64_t r0 = row_offsets[g * stride];
  const float cs = col_scales[g];
  const int64_t total = rows * n_cols;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = r0 + t / n_cols;
    const int64_t j = t % n_cols;
    float v = __fmul_rn(scratch[r * n_cols + j], __fmul_rn(row_scales[n_row == 1 ? 0 : r], cs));
    if (bias != nullptr) v = __fadd_rn(v, load_f(bias, g * n_cols + j));
    d[r * n_cols + j] = store_t<T>(v);
  }
}


/// Weights of a grouped GEMM, one launch per kWeightChunk groups (pointers by value: no host->device copy).
constexpr int kWeightChunk = 64;
struct WeightChunk {
  const uint8_t* data[kWeightChunk];
  const uint8_t* scale[kWeightChunk];
};

/// blockIdx.y = group of the chunk: that weight [rows, k] -> out + (g0 + y)·rows·k (BF16, exact), skipped when the
/// group has no rows (device group sizes; sizes == nullptr: every group).
__global__ void nvfp4_to_bf16_grouped_kernel(WeightChunk w, int g0, const int64_t* __restrict__ sizes, int64_t stride,
                                             int64_t rows, int64_t k, ScaleGeometry sg, __nv_bfloat16* __restrict__ out) {
  const int g = g0 + static_cast<int>(blockIdx.y);
  if (sizes != nullptr && sizes[g * stride] == 0) return;
  const uint8_t* data = w.data[blockIdx.y];
  const uint8_t* scale = w.scale[blockIdx.y];
  __nv_bfloat16* o = out + static_cast<int64_t>(g) * rows * k;
  const int64_t nkb = k / 16;
  const int64_t total = rows * nkb;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / nkb;
    const int64_t kb = t % nkb;
    nvfp4_block_to_bf16(data, scale, r, kb, k, sg, o);
  }
}

/// Fast grouped path (compact scales): blockIdx.y = group of the chunk, blockIdx.x = unit block of its weight;
/// groups without rows are skipped as above.
__global__ void __launch_bounds__(kLinThreads) nvfp4_linear_to_bf16_grouped_kernel(WeightChunk w, int g0,
                                                                                   const int64_t* __restrict__ sizes,
                                                                                   int64_t stride, int64_t units,
                                                                                   uint4* __restrict__ out) {
  const int g = g0 + static_cast<int>(blockIdx.y);
  if (sizes != nullptr && sizes[g * stride] == 0) return;
  linear_block(reinterpret_cast<const uint32_t*>(w.data[blockIdx.y]), w.scale[blockIdx.y], units,
               static_cast<int64_t>(blockIdx.x) * kUnitsPerBlock, out + static_cast<int64_t>(g) * units);
}

/// s[r] = row_scales[n_row == 1 ? 0 : r] · col_scales[g] for every row r of group g (the fused §7.5 factor of
/// the grouped epilogue); rows in no group are not written.
__global__ void grouped_row_factors_kernel(const int64_t* __restrict__ sizes, const int64_t* __restrict__ offsets,
                                           int64_t stride, const float* __restrict__ row_scales, int64_t n_row,
                                           const float* __restrict__ col_scales, float* __restrict__ s) {
  const int64_t g = blockIdx.y;
  const int64_t rows = sizes[g * stride];
  const int64_t r0 = offsets[g * stride];
  const float cs = col_scales[g];
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x)
    s[r0 + t] = __fmul_rn(row_scales[n_row == 1 ? 0 : r0 + t], cs);
}

/// out[g·len + i] = a[g·a_g + i·a_i] (· b[g·b_g + i·b_i] when b is given), blockIdx.y = g.
__global__ void scale_product_kernel(const float* __restrict__ a, int64_t a_g, int64_t a_i, const float* __restrict__ b,
                                     int64_t b_g, int64_t b_i, int64_t len, float* __restrict__ out) {
  const int64_t g = blockIdx.y;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < len;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = a[g * a_g + i * a_i];
    out[g * len + i] = b != nullptr ? __fmul_rn(x, b[g * b_g + i * b_i]) : x;
  }
}

__global__ void fill_f32_kernel(float* __restrict__ out, int64_t n, float v) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = v;
}

template <typename T>
__global__ void to_f32_kernel(const T* __restrict__ in, int64_t n, float* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = load_f(in, i);
}

/// Wgrad outputs the grouped GEMM does not write: zeros for a group without tokens, NaN for a group that breaks
/// the 16-token alignment contract (so the violation shows). blockIdx.y = group; `elems` values per group.
template <typename T>
__global__ void grouped_fill_skipped_kernel(const int64_t* __restrict__ sizes, const int64_t* __restrict__ offsets,
                                            int64_t stride, int64_t elems, T* __restrict__ d) {
  const int64_t g = blockIdx.y;
  const int64_t t = sizes[g * stride];
  const int64_t o = offsets[g * stride];
  const bool aligned = o % 8 == 0 && t % 8 == 0;
  if (t > 0 && aligned) return;
  const float v = t == 0 ? 0.0f : __int_as_float(0x7FC00000);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < elems;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    d[g * elems + i] = store_t<T>(v);
}

constexpr int kGather = 256;
struct GatherPtrs {
  const float* p[kGather];
};
/// out[i] = *ptrs.p[i]: the per-group weight amaxes of a grouped GEMM in one launch (not one copy each).
__global__ void gather_scalars_kernel(GatherPtrs ptrs, int n, float* __restrict__ out) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) out[i] = *ptrs.p[i];
}

int grid_for(int64_t work, int threads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

}  // namespace

bool nvfp4_linear_ok(const uint8_t* data, const ScaleGeometry& sg, int64_t k, const void* out) {
  return sg.layout == Layout::kCompact && k % 16 == 0 && reinterpret_cast<uintptr_t>(data) % 4 == 0 &&
         reinterpret_cast<uintptr_t>(out) % 16 == 0;
}

void launch_nvfp4_to_bf16_linear(const Nvfp4Linear* planes, int n, cudaStream_t stream, const Nvfp4AlphaArgs* alpha) {
  QTC_CHECK(alpha == nullptr || n <= kLinPlanes, "NVFP4 -> BF16 with the GEMM's alpha: at most ", kLinPlanes, " planes");
  for (int p0 = 0; p0 < n || (p0 == 0 && alpha != nullptr); p0 += kLinPlanes) {
    LinearJob job{};
    if (alpha != nullptr) job.alpha = *alpha;
    job.planes = std::min(kLinPlanes, n - p0);
    int64_t blocks = 0;
    for (int i = 0; i < job.planes; ++i) {
      const Nvfp4Linear& q = planes[p0 + i];
      QTC_CHECK(q.elems % 16 == 0, "NVFP4 -> BF16: ", q.elems, " elements are not whole 16-element blocks");
      job.codes[i] = reinterpret_cast<const uint32_t*>(q.data);
      job.scale[i] = q.scale;
      job.out[i] = static_cast<uint4*>(q.out);
      job.units[i] = q.elems / 8;
      job.first_block[i] = blocks;
      blocks += (job.units[i] + kUnitsPerBlock - 1) / kUnitsPerBlock;
    }
    for (int i = job.planes; i <= kLinPlanes; ++i) job.first_block[i] = blocks;
    if (blocks == 0 && alpha == nullptr) continue;
    blocks = std::max<int64_t>(blocks, 1);  // the alpha of an empty GEMM still written
    QTC_CHECK(blocks <= 0x7FFFFFFF, "NVFP4 -> BF16: ", blocks, " blocks exceed one launch");
    nvfp4_linear_to_bf16_kernel<<<static_cast<unsigned>(blocks), kLinThreads, 0, stream>>>(job);
    QTC_CUDA_CHECK_LAUNCH();
  }
}

/// Both kernels read whole 16-element blocks (8 code bytes) and store 16 bytes at a time.
void check_nvfp4_to_bf16(const uint8_t* data, int64_t k, const void* out) {
  QTC_CHECK(k % 16 == 0, "NVFP4 -> BF16: k = ", k, " is not a whole number of 16-element blocks");
  QTC_CHECK(reinterpret_cast<uintptr_t>(out) % 16 == 0 && reinterpret_cast<uintptr_t>(data) % 8 == 0,
            "NVFP4 -> BF16: the BF16 destination must be 16-byte aligned and the code bytes 8-byte aligned (16-byte "
            "stores, 8-byte block loads); got destination % 16 = ", reinterpret_cast<uintptr_t>(out) % 16,
            ", codes % 8 = ", reinterpret_cast<uintptr_t>(data) % 8);
}

void launch_nvfp4_to_bf16(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t k, const ScaleGeometry& sg,
                          void* out, cudaStream_t stream, int max_blocks) {
  check_nvfp4_to_bf16(data, k, out);
  if (max_blocks == 0 && nvfp4_linear_ok(data, sg, k, out)) {
    const Nvfp4Linear p{data, scale, rows * k, out};
    launch_nvfp4_to_bf16_linear(&p, 1, stream);
    return;
  }
  const int threads = 256;
  int grid = grid_for(rows * (k / 16), threads);
  if (max_blocks > 0) grid = std::min(grid, max_blocks);
  nvfp4_to_bf16_kernel<<<grid, threads, 0, stream>>>(
      data, scale, rows, k, sg, static_cast<__nv_bfloat16*>(out));
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_gather_scalars(const float* const* ptrs, int64_t n, float* out, cudaStream_t stream) {
  for (int64_t i0 = 0; i0 < n; i0 += kGather) {
    GatherPtrs g{};
    const int cnt = static_cast<int>(std::min<int64_t>(kGather, n - i0));
    for (int i = 0; i < cnt; ++i) g.p[i] = ptrs[i0 + i];
    gather_scalars_kernel<<<1, kGather, 0, stream>>>(g, cnt, out + i0);
    QTC_CUDA_CHECK_LAUNCH();
  }
}

void launch_nvfp4_alpha(const float* amax_a, const float* amax_b, float alpha_in, float factor, float beta,
                        float* out, cudaStream_t stream) {
  nvfp4_alpha_kernel<<<1, 1, 0, stream>>>(Nvfp4AlphaArgs{.amax_a = amax_a, .amax_b = amax_b, .alpha_in = alpha_in, .factor = factor, .beta = beta, .out = out});
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_row_scaled_epilogue(const float* scratch, int64_t n, int64_t m, const float* row_scales, int64_t n_row,
                                const float* col_scales, int64_t n_col, const void* bias, const void* c, DType out,
                                void* d, cudaStream_t stream) {
  const int threads = 256;
  const int grid = grid_for(n * m, threads);
  switch (out) {
    case DType::kF32:
      row_scaled_epilogue_kernel<float><<<grid, threads, 0, stream>>>(
          scratch, n, m, row_scales, n_row, col_scales, n_col, static_cast<const float*>(bias),
          static_cast<const float*>(c), static_cast<float*>(d));
      break;
    case DType::kBF16:
      row_scaled_epilogue_kernel<__nv_bfloat16><<<grid, threads, 0, stream>>>(
          scratch, n, m, row_scales, n_row, col_scales, n_col, static_cast<const __nv_bfloat16*>(bias),
          static_cast<const __nv_bfloat16*>(c), static_cast<__nv_bfloat16*>(d));
      break;
    case DType::kF16:
      row_scaled_epilogue_kernel<__half><<<grid, threads, 0, stream>>>(
          scratch, n, m, row_scales, n_row, col_scales, n_col, static_cast<const __half*>(bias),
          static_cast<const __half*>(c), static_cast<__half*>(d));
      break;
    default: QTC_FAIL("row-scaled GEMM output must be F32, BF16 or F16");
  }
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_grouped_row_scaled_epilogue(const float* scratch, int64_t n_cols, int64_t groups, int64_t max_rows,
                                        const int64_t* first_dims, const int64_t* row_offsets,
                                        const float* row_scales, int64_t n_row, const float* col_scales,
                                        const void* bias, DType out, void* d, cudaStream_t stream, int64_t stride) {
  if (groups == 0) return;
  const int threads = 256;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((max_rows * n_cols + threads - 1) / threads + 1, 2048)),
                  static_cast<unsigned>(groups));
  switch (out) {
    case DType::kF32:
      grouped_row_scaled_epilogue_kernel<float><<<grid, threads, 0, stream>>>(
          scratch, n_cols, first_dims, row_offsets, stride, row_scales, n_row, col_scales, static_cast<const float*>(bias),
          static_cast<float*>(d));
      break;
    case DType::kBF16:
      grouped_row_scaled_epilogue_kernel<__nv_bfloat16><<<grid, threads, 0, stream>>>(
          scratch, n_cols, first_dims, row_offsets, stride, row_scales, n_row, col_scales,
          static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(d));
      break;
    case DType::kF16:
      grouped_row_scaled_epilogue_kernel<__half><<<grid, threads, 0, stream>>>(
          scratch, n_cols, first_dims, row_offsets, stride, row_scales, n_row, col_scales, static_cast<const __half*>(bias),
          static_cast<__half*>(d));
      break;
    default: QTC_FAIL("grouped row-scaled GEMM output must be F32, BF16 or F16");
  }
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_nvfp4_to_bf16_grouped(const uint8_t* const* data, const uint8_t* const* scale, int groups,
                                  const int64_t* sizes, int64_t stride, int64_t rows, int64_t k, const ScaleGeometry& sg,
                                  void* out, cudaStream_t stream) {
  const int threads = 256;
  for (int g = 0; g < groups; ++g) check_nvfp4_to_bf16(data[g], k, out);
  bool linear = true;
  for (int g = 0; g < groups && linear; ++g) linear = nvfp4_linear_ok(data[g], sg, k, out);
  for (int g0 = 0; g0 < groups; g0 += kWeightChunk) {
    const int cnt = std::min(kWeightChunk, groups - g0);
    WeightChunk w{};
    for (int i = 0; i < cnt; ++i) {
      w.data[i] = data[g0 + i];
      w.scale[i] = scale[g0 + i];
    }
    if (linear) {  // every weight of the chunk in one launch, 16-byte coalesced stores
      const int64_t units = rows * k / 8;
      const int64_t bx = (units + kUnitsPerBlock - 1) / kUnitsPerBlock;
      if (bx == 0) continue;
      QTC_CHECK(bx <= 0x7FFFFFFF, "NVFP4 -> BF16: ", bx, " blocks per weight exceed one launch");
      nvfp4_linear_to_bf16_grouped_kernel<<<dim3(static_cast<unsigned>(bx), static_cast<unsigned>(cnt)), kLinThreads, 0,
                                            stream>>>(w, g0, sizes, stride, units, static_cast<uint4*>(out));
      QTC_CUDA_CHECK_LAUNCH();
      continue;
    }
    const int gx = std::min(grid_for(rows * (k / 16), threads), 1024);
    nvfp4_to_bf16_grouped_kernel<<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(cnt)), threads, 0, stream>>>(
        w, g0, sizes, stride, rows, k, sg, static_cast<__nv_bfloat16*>(out));
    QTC_CUDA_CHECK_LAUNCH();
  }
}

void launch_grouped_row_factors(const int64_t* sizes, const int64_t* offsets, int64_t stride, int64_t groups,
                                const float* row_scales, int64_t n_row, const float* col_scales, float* s,
                                cudaStream_t stream) {
  if (groups == 0) return;
  grouped_row_factors_kernel<<<dim3(8, static_cast<unsigned>(groups)), 256, 0, stream>>>(sizes, offsets, stride,
                                                                                          row_scales, n_row, col_scales, s);
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_scale_product(const float* a, int64_t a_g, int64_t a_i, const float* b, int64_t b_g, int64_t b_i,
                          int64_t groups, int64_t len, float* out, cudaStream_t stream) {
  if (groups == 0 || len == 0) return;
  const int gx = std::min(grid_for(len, 256), 64);
  scale_product_kernel<<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(groups)), 256, 0, stream>>>(
      a, a_g, a_i, b, b_g, b_i, len, out);
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_fill_f32(float* out, int64_t n, float v, cudaStream_t stream) {
  if (n == 0) return;
  fill_f32_kernel<<<std::min(grid_for(n, 256), 1024), 256, 0, stream>>>(out, n, v);
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_to_f32(const void* in, DType dtype, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return;
  const int grid = std::min(grid_for(n, 256), 1024);
  switch (dtype) {
    case DType::kF32: to_f32_kernel<float><<<grid, 256, 0, stream>>>(static_cast<const float*>(in), n, out); break;
    case DType::kBF16:
      to_f32_kernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(in), n, out);
      break;
    case DType::kF16: to_f32_kernel<__half><<<grid, 256, 0, stream>>>(static_cast<const __half*>(in), n, out); break;
    default: QTC_FAIL("to_f32: F32, BF16 or F16 input");
  }
  QTC_CUDA_CHECK_LAUNCH();
}

void launch_grouped_fill_skipped(const int64_t* sizes, const int64_t* offsets, int64_t stride, int64_t groups,
                                 int64_t elems, DType out, void* d, cudaStream_t stream) {
  if (groups == 0 || elems == 0) return;
  const dim3 grid(static_cast<unsigned>(std::min(grid_for(elems, 256), 256)), static_cast<unsigned>(groups));
  if (out == DType::kF32)
    grouped_fill_skipped_kernel<float><<<grid, 256, 0, stream>>>(sizes, offsets, stride, elems, static_cast<float*>(d));
  else if (out == DType::kBF16)
    grouped_fill_skipped_kernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(sizes, offsets, stride, elems,
                                                                         static_cast<__nv_bfloat16*>(d));
  else
    QTC_FAIL("grouped wgrad output must be F32 or BF16");
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace qtc::cuda::detail
