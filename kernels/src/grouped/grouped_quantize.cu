/// \file grouped_quantize.cu
/// \brief Grouped quantization with device-resident group sizes (qtc/cuda/grouped.hpp): NVFP4 1x16 (per-tensor
///        per group, or row-scaled), MXFP8 1x32, FP8 per-tensor (one scale per group) and FP8 block 1x128, rowwise
///        plane, compact or (NVFP4, MXFP8) swizzled scales. The grids cover every group at its largest possible
///        size (blockIdx.y = group); each block reads its group's real row count and first row from device
///        memory, so the launch sequence is graph-capturable and replays with other sizes.
///
/// NOTES: each group equals quantizing it alone (TE_FORMATS.md §1.13): the amax (NVFP4, FP8 per-tensor) is per
/// group or per row; the block recipes (MXFP8, FP8 block, NVFP4 1x16) only see one row at a time, so a group's
/// blocks never mix rows of two groups. Swizzled scales follow the GroupedTensor layout (§7.6): each group's
/// scales are padded separately to 128-row x 4-block tiles, group g's tiles start at the prefix sum of the
/// padded sizes of the groups before it, which a one-thread kernel computes from the device sizes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <sstream>
#include <string>

#include "grouped_routing.hpp"
#include "nvfp4_common.cuh"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/grouped.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::cuda {
namespace {

using dev::InputTraits;

/// Where group g's row i, block kb goes in the scale buffer: compact (row of the buffer) or swizzled (the
/// group's own tiles at scale_offsets[g], in elements).
struct GScale {
  uint8_t* p = nullptr;
  bool swizzled = false;
  int64_t nkb = 0;                          ///< k-blocks per row
  const int64_t* offsets = nullptr;         ///< swizzled: element offset of each group's tiles
  __device__ int64_t index(int64_t g, int64_t r0, int64_t i, int64_t kb) const {
    return swizzled ? offsets[g] + swizzled_offset(i, kb, nkb) : (r0 + i) * nkb + kb;
  }
};

struct Groups {
  const int64_t* first_dims;
  const int64_t* row_offsets;
  int64_t stride;
  __device__ int64_t rows(int64_t g) const { return first_dims[g * stride]; }
  __device__ int64_t first(int64_t g) const { return row_offsets[g * stride]; }
};

/// Per-group amax (per-tensor) or per-row amax (row-scaled), NaN ignored (§0.5). One warp per row.
template <typename T>
__global__ void grouped_amax_kernel(const T* __restrict__ x, int64_t K, Groups gr, bool per_row,
                                    float* __restrict__ amax) {
  const int64_t g = blockIdx.y;
  const int64_t rows = gr.rows(g), r0 = gr.first(g);
  const int warps = blockDim.x / 32, lane = threadIdx.x % 32;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(warps) + threadIdx.x / 32; i < rows;
       i += static_cast<int64_t>(gridDim.x) * warps) {
    const T* row = x + (r0 + i) * K;
    float m = 0.0f;
    for (int64_t j = lane; j < K; j += 32) m = fmaxf(m, fabsf(InputTraits<T>::to_f32(row[j])));
    m = dev::warp_max(m, false);
    if (lane == 0) {
      if (per_row)
        amax[r0 + i] = m;
      else
        dev::atomic_max_nonneg(amax + g, m);
    }
  }
}

/// Swizzled: element offset of each group's scale tiles = prefix sum of roundup(rows, 128) * roundup(nkb, 4).
__global__ void grouped_scale_offsets_kernel(Groups gr, int64_t groups, int64_t padded_kb, int64_t* __restrict__ out) {
  int64_t o = 0;
  for (int64_t g = 0; g < groups; ++g) {
    out[g] = o;
    o += (gr.rows(g) + 127) / 128 * 128 * padded_kb;
  }
}

/// NVFP4: one thread per 16-element block of a live row: §1.4 with the group's (or the row's) S_enc.
template <typename T>
__global__ void grouped_nvfp4_kernel(const T* __restrict__ x, int64_t K, Groups gr, bool row_scaled,
                                     const float* __restrict__ amax, uint8_t* __restrict__ data, GScale sc) {
  const int64_t g = blockIdx.y;
  const int64_t rows = gr.rows(g), r0 = gr.first(g);
  const int64_t nkb = K / 16;
  // Profile te, no option but row_scaled (grouped_unsupported_reason refuses the others): a plain 1x16 block.
  const dev::Nvfp4Cfg cfg{.nan_amax = false, .nan_scale = false, .neg_zero_positive = false, .torchao = false,
                          .tiny_block_floor = false, .sr = false, .f46 = false, .mse = false, .e4m3_max = 448.0f,
                          .k6max = 2688.0f, .seed = 0, .ao_two_level = true, .ao_bf16 = false};
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * nkb;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / nkb, kb = t % nkb, r = r0 + i;
    const float a = row_scaled ? amax[r] : amax[g];
    const float s_enc = dev::nvfp4_s_enc(a, 448.0f, false);
    float v[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) v[e] = InputTraits<T>::to_f32(x[r * K + kb * 16 + e]);
    uint32_t sf = 0;
    const uint2 codes = dev::nvfp4_block_1d(v, s_enc, a, cfg, 0, 0, sf);
    *reinterpret_cast<uint2*>(data + r * (K / 2) + kb * 8) = codes;
    sc.p[sc.index(g, r0, i, kb)] = static_cast<uint8_t>(sf);
  }
}

/// MXFP8 1x32 (§2, TE profile: NaN ignored in the block amax): one thread per (possibly partial) block.
/// Scale: RCEIL = E8M0 rounded up of bamax·RN(1/max), or the OCP floor rule; code = fp8(x · 2^(127-e)).
template <typename T>
__global__ void grouped_mxfp8_kernel(const T* __restrict__ x, int64_t K, Groups gr, bool e5m2, bool floor_rule,
                                     uint8_t* __restrict__ data, GScale sc) {
  const int64_t g = blockIdx.y;
  const int64_t rows = gr.rows(g), r0 = gr.first(g);
  const int64_t nkb = sc.nkb;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * nkb;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / nkb, kb = t % nkb, r = r0 + i;
    const int64_t j0 = kb * 32, j1 = min(K, j0 + 32);
    float bamax = 0.0f;
    for (int64_t j = j0; j < j1; ++j) bamax = dev::max_p(bamax, fabsf(InputTraits<T>::to_f32(x[r * K + j])), false);
    const uint32_t e = mx_block_scale(bamax, e5m2, floor_rule, false);  // numeric.hpp
    const float q = e8m0_reciprocal(e);
    for (int64_t j = j0; j < j1; ++j) data[r * K + j] = encode_fp8(__fmul_rn(InputTraits<T>::to_f32(x[r * K + j]), q), e5m2);
    sc.p[sc.index(g, r0, i, kb)] = static_cast<uint8_t>(e);
  }
}

/// TE compute_scale_from_amax (§3.2, TE profile): numeric.hpp's fp8_scale_from_amax.
__device__ __forceinline__ float fp8_scale(float amax, float max_fp8, bool pow2, float eps, float value_for_inf) {
  return fp8_scale_from_amax(amax, max_fp8, pow2, eps, value_for_inf, false, false);
}

struct Fp8Params {
  bool e5m2, pow2;
  float eps, value_for_inf, max_fp8;
};

/// FP8 block 1x128 (§3): one thread per (possibly partial) 128-element block; F32 scale_inv = 1/scale.
template <typename T>
__global__ void grouped_fp8_block_kernel(const T* __restrict__ x, int64_t K, Groups gr, Fp8Params fp,
                                         uint8_t* __restrict__ data, float* __restrict__ scale_inv) {
  const int64_t g = blockIdx.y;
  const int64_t rows = gr.rows(g), r0 = gr.first(g);
  const int64_t nkb = (K + 127) / 128;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * nkb;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = r0 + t / nkb, kb = t % nkb;
    const int64_t j0 = kb * 128, j1 = min(K, j0 + 128);
    float bamax = 0.0f;
    for (int64_t j = j0; j < j1; ++j) bamax = dev::max_p(bamax, fabsf(InputTraits<T>::to_f32(x[r * K + j])), false);
    const float s = fp8_scale(bamax, fp.max_fp8, fp.pow2, fp.eps, fp.value_for_inf);
    for (int64_t j = j0; j < j1; ++j) data[r * K + j] = encode_fp8(__fmul_rn(InputTraits<T>::to_f32(x[r * K + j]), s), fp.e5m2);
    scale_inv[r * nkb + kb] = __fdiv_rn(1.0f, s);
  }
}

/// FP8 per-tensor (§4) with one amax per group: every element of group g with scale(amax[g]); block (0, g)
/// also writes the group's scale_inv.
template <typename T>
__global__ void grouped_fp8_tensor_kernel(const T* __restrict__ x, int64_t K, Groups gr, Fp8Params fp,
                                          const float* __restrict__ amax, uint8_t* __restrict__ data,
                                          float* __restrict__ scale_inv) {
  const int64_t g = blockIdx.y;
  const int64_t rows = gr.rows(g), r0 = gr.first(g);
  const float s = fp8_scale(amax[g], fp.max_fp8, fp.pow2, fp.eps, fp.value_for_inf);
  if (blockIdx.x == 0 && threadIdx.x == 0) scale_inv[g] = __fdiv_rn(1.0f, s);
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < rows * K;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = r0 * K + t;
    data[e] = encode_fp8(__fmul_rn(InputTraits<T>::to_f32(x[e]), s), fp.e5m2);
  }
}

unsigned grid_x(int64_t work, int threads) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((work + threads - 1) / threads, 4096)));
}

/// Scale entries per row of the rowwise plane (1 for FP8 tensor), as the recipe policy describes the plane.
int64_t k_blocks(const Recipe& r, int64_t K) { return describe_plane(r, PlaneKind::kRowwise, 0, K).compact.cols; }

template <typename T>
void launch(const DeviceMatrixView& x, const Groups& caller, DeviceGroupedQuantized& o, cudaStream_t s) {
  const T* px = static_cast<const T*>(x.data);
  const Recipe& r = o.recipe;
  const int64_t K = o.cols, G = o.groups, cap = o.capacity;
  // Every kernel below reads the sanitised routing (grouped_routing.hpp), never the caller's arrays.
  auto* routing = o.routing.as<int64_t>();
  detail::launch_sanitize_routing(caller.first_dims, caller.row_offsets, caller.stride, G, cap, routing, s);
  const Groups gr{routing, routing + G, 1};
  const unsigned gy = static_cast<unsigned>(G);
  GScale sc;
  sc.p = o.scale.as<uint8_t>();
  sc.nkb = k_blocks(r, K);
  if (o.scale_layout == ScaleLayout::kSwizzled) {
    sc.swizzled = true;
    sc.offsets = o.scale_offsets.as<int64_t>();
    // padding of every group's tiles reads as zero, as the reference's swizzled layout
    QTC_CUDA_CHECK(cudaMemsetAsync(o.scale.data(), 0, o.scale.bytes(), s));
    grouped_scale_offsets_kernel<<<1, 1, 0, s>>>(gr, G, o.scale_cols, o.scale_offsets.as<int64_t>());
    QTC_CUDA_CHECK_LAUNCH();
  }
  Fp8Params fp{};
  QTC_CHECK(!r.is(RecipeKind::kMXFP4), "grouped quantize: MXFP4 has no grouped kernel");
  if (r.kind() != RecipeKind::kNVFP4) {
    const bool e5m2 = r.fp8_type() == Fp8Type::kE5M2;
    const bool scaled = r.kind() != RecipeKind::kMXFP8;  // FP8 block / tensor: pow2 and eps
    fp = Fp8Params{.e5m2 = e5m2,
                   .pow2 = scaled && r.pow2_scales(),
                   .eps = scaled ? r.eps() : 0.0f,
                   .value_for_inf = 0.0f,
                   .max_fp8 = e5m2 ? 57344.0f : 448.0f};
  }
  switch (r.kind()) {
    case RecipeKind::kNVFP4: {
      auto* amax = o.amax.as<float>();
      if (!r.nvfp4_row_scaled()) QTC_CUDA_CHECK(cudaMemsetAsync(amax, 0, static_cast<size_t>(G) * sizeof(float), s));
      // grids sized for a group as large as the whole buffer: the real sizes are only known on the device
      grouped_amax_kernel<T><<<dim3(grid_x(cap, 8), gy), 256, 0, s>>>(px, K, gr, r.nvfp4_row_scaled(), amax);
      QTC_CUDA_CHECK_LAUNCH();
      grouped_nvfp4_kernel<T><<<dim3(grid_x(cap * (K / 16), 256), gy), 256, 0, s>>>(px, K, gr, r.nvfp4_row_scaled(), amax,
                                                                                     o.data.as<uint8_t>(), sc);
      break;
    }
    case RecipeKind::kMXFP8:
      grouped_mxfp8_kernel<T><<<dim3(grid_x(cap * sc.nkb, 256), gy), 256, 0, s>>>(
          px, K, gr, fp.e5m2, r.mxfp8().scale_rule == MxScaleRule::kOcpFloor, o.data.as<uint8_t>(), sc);
      break;
    case RecipeKind::kFP8Block:
      fp.value_for_inf = o.value_for_inf;
      grouped_fp8_block_kernel<T><<<dim3(grid_x(cap * sc.nkb, 256), gy), 256, 0, s>>>(px, K, gr, fp, o.data.as<uint8_t>(),
                                                                                       o.scale.as<float>());
      break;
    case RecipeKind::kMXFP4: break;  // refused above
    case RecipeKind::kFP8Tensor: {
      fp.value_for_inf = FLT_MAX;
      auto* amax = o.amax.as<float>();
      QTC_CUDA_CHECK(cudaMemsetAsync(amax, 0, static_cast<size_t>(G) * sizeof(float), s));
      grouped_amax_kernel<T><<<dim3(grid_x(cap, 8), gy), 256, 0, s>>>(px, K, gr, false, amax);
      QTC_CUDA_CHECK_LAUNCH();
      grouped_fp8_tensor_kernel<T><<<dim3(grid_x(cap * K, 256), gy), 256, 0, s>>>(px, K, gr, fp, amax,
                                                                                   o.data.as<uint8_t>(),
                                                                                   o.scale_inv.as<float>());
      break;
    }
  }
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace

std::string grouped_unsupported_reason(const Recipe& r, int64_t cols, ScaleLayout layout) {
  std::ostringstream os;
  if (r.profile != Profile::kTE) os << "grouped quantize: TE profile only (got profile " << static_cast<int>(r.profile) << "); ";
  if (!r.rowwise || r.columnwise)
    os << "grouped quantize: rowwise plane only (a columnwise block spans 16/32/128 tokens and would mix groups "
          "unless every group size is a multiple of it; TE's grouped columnwise kernels require that alignment); ";
  switch (r.kind()) {
    case RecipeKind::kNVFP4:
      if (r.is_2d()) os << "grouped NVFP4: 2D blocks are rejected (TE split_quantize rejects 2D); ";
      if (r.nvfp4_rht()) os << "grouped NVFP4: RHT is columnwise and grouped RHT is SM 100-110 only; ";
      if (r.nvfp4().fourover6 || r.nvfp4().stochastic || r.nvfp4().e4m3_max != 448)
        os << "grouped NVFP4: 4over6 and stochastic rounding are not grouped here; ";
      if (cols % 16 != 0) os << "grouped NVFP4: K must be a multiple of 16, got " << cols << "; ";
      break;
    case RecipeKind::kMXFP8:
      if (r.is_2d()) os << "grouped MXFP8: 32x32 blocks are not grouped; ";
      break;
    case RecipeKind::kFP8Block:
      if (r.is_2d()) os << "grouped FP8 block: 128x128 blocks span 128 tokens and would mix groups; ";
      if (layout == ScaleLayout::kSwizzled) os << "grouped FP8 block: swizzled scales are an MXFP8/NVFP4 layout; ";
      if (r.fp8_block().ue8m0_scales) os << "grouped FP8 block: UE8M0 scales (scale_dtype=ue8m0) are not grouped; ";
      break;
    case RecipeKind::kFP8Tensor:
      if (layout == ScaleLayout::kSwizzled) os << "grouped FP8 per-tensor: one scale per group, nothing to swizzle; ";
      break;
    case RecipeKind::kMXFP4: os << "grouped MXFP4: no grouped kernel (quantize each group on its own); "; break;
  }
  if (layout != ScaleLayout::kCompact && layout != ScaleLayout::kSwizzled)
    os << "grouped quantize: compact or swizzled_128x4 scales only (got " << layout_name(layout) << "); ";
  std::string s = os.str();
  if (s.size() >= 2) s.resize(s.size() - 2);
  return s;
}

DeviceGroupedQuantized allocate_grouped(const Recipe& r, DType input, int64_t capacity, int64_t cols, int64_t groups,
                                        ScaleLayout layout, cudaStream_t stream) {
  const std::string why = grouped_unsupported_reason(r, cols, layout);
  QTC_CHECK(why.empty(), why);
  QTC_CHECK(groups > 0 && groups < 65536, "grouped quantize: 1..65535 groups, got ", groups);
  QTC_CHECK(capacity >= 0 && cols > 0, "grouped quantize: buffer ", capacity, "x", cols);
  QTC_CHECK(input == DType::kF32 || input == DType::kBF16 || input == DType::kF16,
            "grouped quantize: input must be F32, BF16 or F16");
  DeviceGroupedQuantized o;
  o.recipe = r;
  o.capacity = capacity;
  o.cols = cols;
  o.groups = groups;
  o.scale_layout = layout;
  o.input_dtype = input;
  o.value_for_inf = dtype_max(input);
  o.routing = DeviceBuffer(static_cast<size_t>(2 * groups) * sizeof(int64_t), stream);
  // The rowwise plane of the whole buffer as the recipe policy describes it; the groups split its rows.
  const PlaneSpec spec = describe_plane(r, PlaneKind::kRowwise, capacity, cols);
  const int64_t nkb = spec.compact.cols;
  o.data = DeviceBuffer(static_cast<size_t>(spec.data_bytes()), stream);
  if (layout == ScaleLayout::kSwizzled) {
    o.scale_cols = (nkb + 3) / 4 * 4;
    // each group padded to whole 128-row tiles: at most capacity + 127 rows per group more
    o.scale = DeviceBuffer(static_cast<size_t>((capacity + 128 * groups) * o.scale_cols), stream);
    o.scale_offsets = DeviceBuffer(static_cast<size_t>(groups) * sizeof(int64_t), stream);
  } else if (!spec.per_tensor) {
    o.scale_cols = nkb;
    o.scale = DeviceBuffer(static_cast<size_t>(spec.scale_bytes(ScaleLayout::kCompact)), stream);
  }
  if (r.kind() == RecipeKind::kNVFP4)  // one amax per row (row-scaled) or per group
    o.amax = DeviceBuffer(static_cast<size_t>(spec.amax_per_line ? capacity : groups) * sizeof(float), stream);
  if (spec.per_tensor) {  // one amax and one scale_inv per group
    o.amax = DeviceBuffer(static_cast<size_t>(groups) * sizeof(float), stream);
    o.scale_inv = DeviceBuffer(static_cast<size_t>(groups) * sizeof(float), stream);
  }
  return o;
}

void quantize_grouped_into(const DeviceMatrixView& x, const int64_t* d_first_dims, const int64_t* d_row_offsets,
                           DeviceGroupedQuantized& out, cudaStream_t stream, int64_t stride) {
  QTC_CHECK(stride >= 1, "grouped quantize: the group-size stride must be >= 1 element, got ", stride);
  QTC_CHECK(d_first_dims != nullptr && d_row_offsets != nullptr, "grouped quantize: device group sizes missing");
  QTC_CHECK(x.rows == out.capacity && x.cols == out.cols, "grouped quantize: input ", x.rows, "x", x.cols,
            ", outputs for ", out.capacity, "x", out.cols);
  QTC_CHECK(x.data != nullptr || x.rows == 0, "grouped quantize: input has no data");
  QTC_CHECK(out.routing.bytes() >= static_cast<size_t>(2 * out.groups) * sizeof(int64_t),
            "grouped quantize: the outputs have no routing buffer (allocate them with allocate_grouped)");
  QTC_CHECK(x.dtype == out.input_dtype, "grouped quantize: input is ", dtype_name(x.dtype), ", outputs were allocated for ",
            dtype_name(out.input_dtype));
  const Groups gr{d_first_dims, d_row_offsets, stride};
  switch (x.dtype) {
    case DType::kF32: launch<float>(x, gr, out, stream); break;
    case DType::kBF16: launch<__nv_bfloat16>(x, gr, out, stream); break;
    case DType::kF16: launch<__half>(x, gr, out, stream); break;
    default: QTC_FAIL("grouped quantize: input must be F32, BF16 or F16");
  }
}

}  // namespace qtc::cuda
