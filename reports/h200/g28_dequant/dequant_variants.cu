/// \file dequant_variants.cu
/// \brief Standalone microbenchmark (g28, issue 28): NVFP4 (compact scales) -> BF16 kernel variants against a device
///        copy, on the grouped benchmark's shapes; not part of the build. By hand:
///        nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -ftz=false --fmad=false dequant_variants.cu
///        Prints TB/s = (0.5 + 1/16 + 2) bytes per element over the median of 15 timed launches, and counts every
///        variant's 4-byte words that differ from variant "block16_div" (the library's kernel before g28).
///        Results: ../run_2026-12-07T1709Z_g28/dequant_variants_h100*.txt, summarised in ../gemm.md.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

__device__ __forceinline__ float e4m3(uint32_t c) {
  const uint32_t s = (c & 0x80u) << 24, e = (c >> 3) & 0xFu, m = c & 7u;
  if ((c & 0x7Fu) == 0x7Fu) return __uint_as_float(0x7FC00000u);
  if (e == 0) return __uint_as_float(s | __float_as_uint(static_cast<float>(m) * 0x1p-9f));
  return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}
__device__ __forceinline__ float e2m1_old(uint32_t c) {
  const uint32_t m = c & 7u;
  const float v = m < 2u ? 0.5f * static_cast<float>(m) : __uint_as_float((((m >> 1) + 126u) << 23) | ((m & 1u) << 22));
  return (c & 8u) ? -v : v;
}
__device__ __forceinline__ float e2m1_fast(uint32_t q) {
  return __fmul_rn(__uint_as_float(((q & 7u) << 22) | ((q & 8u) << 28)), 0x1p126f);
}
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint4 unit8(uint32_t codes, float sf) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t b = codes >> (8 * j);
    w[j] = pack2(__fmul_rn(e2m1_fast(b & 0xFu), sf), __fmul_rn(e2m1_fast((b >> 4) & 0xFu), sf));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// V0: the library's kernel before g28 (one thread per 16-element block, 64-bit r / kb split, grid-stride)
__global__ void block16_div(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t k, __nv_bfloat16* out) {
  const int64_t nkb = k / 16, total = rows * nkb;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / nkb, kb = t % nkb;
    const uint2 packed = *reinterpret_cast<const uint2*>(data + r * (k / 2) + kb * 8);
    const float sf = e4m3(scale[r * nkb + kb]);
    __align__(16) __nv_bfloat16 v[16];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t byte = ((i < 4 ? packed.x : packed.y) >> (8 * (i % 4))) & 0xFFu;
      v[2 * i] = __float2bfloat16_rn(__fmul_rn(e2m1_old(byte & 0xF), sf));
      v[2 * i + 1] = __float2bfloat16_rn(__fmul_rn(e2m1_old(byte >> 4), sf));
    }
    uint4* dst = reinterpret_cast<uint4*>(out + r * k + kb * 16);
    dst[0] = reinterpret_cast<const uint4*>(v)[0];
    dst[1] = reinterpret_cast<const uint4*>(v)[1];
  }
}

// V1/V2: g28's linear kernel, U units of 8 elements per thread (4-byte code loads, 16-byte stores, coalesced)
template <int U>
__global__ void __launch_bounds__(256) linear8(const uint32_t* codes, const uint8_t* scale, int64_t units, uint4* out) {
  const int64_t u0 = static_cast<int64_t>(blockIdx.x) * 256 * U;
  uint32_t c[U], s[U];
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int64_t u = u0 + i * 256 + threadIdx.x;
    c[i] = u < units ? __ldg(codes + u) : 0u;
    s[i] = u < units ? __ldg(scale + u / 2) : 0u;
  }
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int64_t u = u0 + i * 256 + threadIdx.x;
    if (u < units) out[u] = unit8(c[i], e4m3(s[i]));
  }
}

// V3: one thread per 16-element block, linear (8-byte code load, one scale, two 16-byte stores), U blocks per thread
template <int U>
__global__ void __launch_bounds__(256) linear16(const uint2* codes, const uint8_t* scale, int64_t nblk, uint4* out) {
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * 256 * U;
  uint2 c[U];
  uint32_t s[U];
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int64_t b = b0 + i * 256 + threadIdx.x;
    c[i] = b < nblk ? __ldg(codes + b) : make_uint2(0, 0);
    s[i] = b < nblk ? __ldg(scale + b) : 0u;
  }
#pragma unroll
  for (int i = 0; i < U; ++i) {
    const int64_t b = b0 + i * 256 + threadIdx.x;
    if (b < nblk) {
      const float sf = e4m3(s[i]);
      out[2 * b] = unit8(c[i].x, sf);
      out[2 * b + 1] = unit8(c[i].y, sf);
    }
  }
}

__global__ void count_diff(const uint4* a, const uint4* b, int64_t n, unsigned long long* bad) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 x = a[i], y = b[i];
    local += (x.x != y.x) + (x.y != y.y) + (x.z != y.z) + (x.w != y.w);
  }
  if (local) atomicAdd(bad, local);
}
__global__ void fill(uint8_t* p, int64_t n, uint32_t salt) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ salt;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = static_cast<uint8_t>(h);
  }
}

template <class F>
float median_ms(F&& f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 15; ++i) {
    CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  printf("device %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
  struct Shape { const char* name; int64_t rows, k; } shapes[] = {
      {"x 32768x4096", 32768, 4096}, {"weights 64x4096x4096", 64 * 4096, 4096}, {"emulated 6208x7168", 6208, 7168}};
  uint8_t *data, *scale;
  uint4 *ref, *out;
  const int64_t maxE = 64ll * 4096 * 4096;
  CK(cudaMalloc(&data, maxE / 2)); CK(cudaMalloc(&scale, maxE / 16));
  CK(cudaMalloc(&ref, maxE * 2)); CK(cudaMalloc(&out, maxE * 2));
  unsigned long long* bad;
  CK(cudaMalloc(&bad, 8));
  fill<<<4096, 256>>>(data, maxE / 2, 1);
  fill<<<4096, 256>>>(scale, maxE / 16, 2);  // every E4M3 byte, NaN included
  CK(cudaDeviceSynchronize());
  {
    const float ms = median_ms([&] { CK(cudaMemcpyAsync(out, ref, maxE * 2, cudaMemcpyDeviceToDevice)); });
    printf("%-22s %-16s %8.1f us  %5.2f TB/s (read + write)\n", "weights 2 GiB", "D2D copy", ms * 1e3, 2.0 * maxE * 2 / (ms * 1e-3) / 1e12);
  }
  for (const Shape& s : shapes) {
    const int64_t E = s.rows * s.k;
    const double bytes = E * (0.5 + 1.0 / 16 + 2);
    auto report = [&](const char* v, float ms, bool check) {
      unsigned long long h = 0;
      if (check) {
        CK(cudaMemset(bad, 0, 8));
        count_diff<<<2048, 256>>>(out, ref, E / 8, bad);
        CK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
      }
      printf("%-22s %-16s %8.1f us  %5.2f TB/s  mismatching words %llu\n", s.name, v, ms * 1e3, bytes / (ms * 1e-3) / 1e12, h);
    };
    const int64_t blocks16 = E / 16;
    const int grid0 = static_cast<int>(std::min<int64_t>((blocks16 + 255) / 256, 65535 * 8));
    report("block16_div", median_ms([&] { block16_div<<<grid0, 256>>>(data, scale, s.rows, s.k, reinterpret_cast<__nv_bfloat16*>(ref)); }), false);
    const int64_t units = E / 8;
    report("linear8 U4", median_ms([&] { linear8<4><<<static_cast<unsigned>((units + 1023) / 1024), 256>>>(reinterpret_cast<const uint32_t*>(data), scale, units, out); }), true);
    report("linear8 U2", median_ms([&] { linear8<2><<<static_cast<unsigned>((units + 511) / 512), 256>>>(reinterpret_cast<const uint32_t*>(data), scale, units, out); }), true);
    report("linear8 U8", median_ms([&] { linear8<8><<<static_cast<unsigned>((units + 2047) / 2048), 256>>>(reinterpret_cast<const uint32_t*>(data), scale, units, out); }), true);
    report("linear16 U2", median_ms([&] { linear16<2><<<static_cast<unsigned>((blocks16 + 511) / 512), 256>>>(reinterpret_cast<const uint2*>(data), scale, blocks16, out); }), true);
    report("linear16 U4", median_ms([&] { linear16<4><<<static_cast<unsigned>((blocks16 + 1023) / 1024), 256>>>(reinterpret_cast<const uint2*>(data), scale, blocks16, out); }), true);
  }
  return 0;
}
