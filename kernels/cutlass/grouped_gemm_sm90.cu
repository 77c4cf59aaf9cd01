/// \file grouped_gemm_sm90.cu
/// \brief The device-driven grouped BF16 GEMM with the §7.5 post-scale epilogue (grouped_gemm_sm90.hpp): CUTLASS 3.x
///        sm_90a, ptr-array TMA warp-specialized cooperative kernel with the grouped persistent scheduler, problem shapes
///        in device memory only. Two instantiations (FP32 and BF16 output), nothing else: this TU is compiled for sm_90a
///        alone and is the slowest of the build (kernels/CMakeLists.txt, option QTC_CUTLASS).
///
/// NOTES: the epilogue is a visitor tree (EVT) of separate multiplies/plus nodes; the TU is compiled with
/// --fmad=false, so no node pair contracts into an FMA and each step rounds as TE's torch ops do.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "grouped_gemm_sm90.hpp"
#include "qtc/cuda/check.hpp"

namespace qtc::cuda::detail {
namespace {

using namespace cute;
namespace fus = cutlass::epilogue::fusion;

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
using ElementA = cutlass::bfloat16_t;
using ElementB = cutlass::bfloat16_t;
using LayoutA = cutlass::layout::RowMajor;     // [M, K], K contiguous
using LayoutB = cutlass::layout::ColumnMajor;  // [N, K], K contiguous
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlignAB = 8;
using TileShape = Shape<_128, _256, _64>;  // 128 token rows: half the tile-quantization waste of 256 per uneven group
using ClusterShape = Shape<_1, _2, _1>;
using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

template <class ElementD>
struct KernelCfg {
  using Mul = fus::Sm90Compute<cutlass::multiplies, float, float, kRound>;
  using AlphaAcc = fus::Sm90EVT<Mul, fus::Sm90ScalarBroadcast<float>, fus::Sm90AccFetch>;
  using ColVec = fus::Sm90ColBroadcast<0, TileShape, float*, float, Stride<_1, _0, int64_t>>;
  using RowVec = fus::Sm90RowBroadcast<0, TileShape, float*, float, Stride<_0, _1, int64_t>>;
  using Scaled = fus::Sm90EVT<Mul, AlphaAcc, ColVec>;
  using Scaled2 = fus::Sm90EVT<Mul, Scaled, RowVec>;
  using Tree = fus::Sm90EVT<fus::Sm90Compute<cutlass::plus, ElementD, float, kRound>, Scaled2, RowVec>;

  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD, ElementD, LayoutD*,
      kAlignD, EpilogueSchedule, Tree>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA*, kAlignAB, ElementB, LayoutB*, kAlignAB,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};

using Shape3 = typename ProblemShape::UnderlyingProblemShape;
// The strides are the same types for both instantiations (RowMajor/ColumnMajor tags of the same ranks).
using StrideA = KernelCfg<float>::StrideA;
using StrideB = KernelCfg<float>::StrideB;
using StrideD = KernelCfg<float>::StrideD;
static_assert(std::is_same_v<StrideD, KernelCfg<cutlass::bfloat16_t>::StrideD>);

/// The device argument arrays, carved from one scratch buffer (each 256-byte aligned).
struct Arrays {
  Shape3* shapes;
  const ElementA** a;
  const ElementB** b;
  void** d;
  StrideA* sa;
  StrideB* sb;
  StrideD* sd;
  const float** col;
  const float** row_mul;
  const float** row_add;
  void* workspace;
};

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

size_t arrays_bytes(int g) {
  const auto n = static_cast<size_t>(g);
  return align256(n * sizeof(Shape3)) + 3 * align256(n * sizeof(void*)) + align256(n * sizeof(StrideA)) +
         align256(n * sizeof(StrideB)) + align256(n * sizeof(StrideD)) + 3 * align256(n * sizeof(void*));
}

Arrays carve(void* scratch, int g) {
  auto* p = static_cast<uint8_t*>(scratch);
  const auto n = static_cast<size_t>(g);
  Arrays r{};
  auto take = [&](size_t bytes) {
    void* q = p;
    p += align256(bytes);
    return q;
  };
  r.shapes = static_cast<Shape3*>(take(n * sizeof(Shape3)));
  r.a = static_cast<const ElementA**>(take(n * sizeof(void*)));
  r.b = static_cast<const ElementB**>(take(n * sizeof(void*)));
  r.d = static_cast<void**>(take(n * sizeof(void*)));
  r.sa = static_cast<StrideA*>(take(n * sizeof(StrideA)));
  r.sb = static_cast<StrideB*>(take(n * sizeof(StrideB)));
  r.sd = static_cast<StrideD*>(take(n * sizeof(StrideD)));
  r.col = static_cast<const float**>(take(n * sizeof(void*)));
  r.row_mul = static_cast<const float**>(take(n * sizeof(void*)));
  r.row_add = static_cast<const float**>(take(n * sizeof(void*)));
  r.workspace = p;
  return r;
}

template <class S>
__device__ S leading_stride(int64_t ld) {
  S s{};
  get<0>(s) = ld;
  return s;
}

template <class T>
__device__ T* at(const GroupedPtr& p, int64_t elems) {
  return static_cast<T*>(const_cast<void*>(p.base)) + elems;
}

/// One thread per group: the problem shape and every pointer from the device group sizes (group_args).
__global__ void fill_kernel(GroupedGemmProblem p, Arrays r) {
  const int g = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (g >= p.groups) return;
  const GroupArgs q = group_args(p, p.sizes[g * p.stride], p.offsets[g * p.stride], g);
  r.shapes[g] = Shape3{q.m, q.n, q.k};
  r.a[g] = at<const ElementA>(p.a, q.a);
  r.b[g] = at<const ElementB>(p.b, q.b);
  r.d[g] = p.d_bf16 ? static_cast<void*>(at<cutlass::bfloat16_t>(p.d, q.d)) : static_cast<void*>(at<float>(p.d, q.d));
  r.sa[g] = leading_stride<StrideA>(p.lda);
  r.sb[g] = leading_stride<StrideB>(p.ldb);
  r.sd[g] = leading_stride<StrideD>(p.ldd);
  r.col[g] = at<const float>(p.col, q.col);
  r.row_mul[g] = at<const float>(p.row_mul, q.row_mul);
  r.row_add[g] = at<const float>(p.row_add, q.row_add);
}

template <class ElementD>
typename KernelCfg<ElementD>::Gemm::Arguments make_args(const GroupedGemmProblem& p, const Arrays& r, int sm_count) {
  using Cfg = KernelCfg<ElementD>;
  typename Cfg::Tree::Arguments fusion{
      {                                            // · row_mul[j]
       {                                           // · col[i]
        {                                          // alpha · acc
         {{p.alpha}, {}, {}},                      //   scalar alpha
         {},                                       //   acc
         {}},                                      //   multiplies
        {r.col, 0.0f, {_1{}, _0{}, int64_t(0)}},
        {}},
       {r.row_mul, 0.0f, {_0{}, _1{}, int64_t(0)}},
       {}},
      {r.row_add, 0.0f, {_0{}, _1{}, int64_t(0)}},  // + row_add[j]
      {}};
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = sm_count;
  return typename Cfg::Gemm::Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                                     {p.groups, r.shapes, nullptr},
                                     {r.a, r.sa, r.b, r.sb},
                                     {fusion, nullptr, nullptr, reinterpret_cast<ElementD**>(r.d), r.sd},
                                     hw};
}

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    QTC_CUDA_CHECK(cudaGetDevice(&dev));
    QTC_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

size_t workspace_bytes(int groups) {
  GroupedGemmProblem p;
  p.groups = groups;
  Arrays r{};
  const size_t a = KernelCfg<float>::Gemm::get_workspace_size(make_args<float>(p, r, sm_count()));
  const size_t b = KernelCfg<cutlass::bfloat16_t>::Gemm::get_workspace_size(make_args<cutlass::bfloat16_t>(p, r, sm_count()));
  return std::max(a, b);
}

template <class ElementD>
void launch(const GroupedGemmProblem& p, const Arrays& r, cudaStream_t stream) {
  using Gemm = typename KernelCfg<ElementD>::Gemm;
  const auto args = make_args<ElementD>(p, r, sm_count());
  Gemm gemm;
  cutlass::Status st = gemm.can_implement(args);
  QTC_CHECK(st == cutlass::Status::kSuccess, "grouped GEMM (CUTLASS sm_90a): arguments refused: ",
            cutlassGetStatusString(st));
  st = gemm.initialize(args, r.workspace, stream);
  QTC_CHECK(st == cutlass::Status::kSuccess, "grouped GEMM (CUTLASS sm_90a): initialize failed: ",
            cutlassGetStatusString(st));
  st = gemm.run(stream);
  QTC_CHECK(st == cutlass::Status::kSuccess, "grouped GEMM (CUTLASS sm_90a): launch failed: ", cutlassGetStatusString(st));
  QTC_CUDA_CHECK_LAUNCH();
}

}  // namespace

const char* sm90_grouped_unavailable_reason() { return nullptr; }

size_t sm90_grouped_scratch_bytes(int groups) { return arrays_bytes(groups) + workspace_bytes(groups); }

void run_sm90_grouped(const GroupedGemmProblem& p, void* scratch, cudaStream_t stream) {
  QTC_CHECK(p.groups > 0, "grouped GEMM: no groups");
  QTC_CHECK(p.k % 8 == 0 && p.n % 8 == 0, "grouped GEMM (CUTLASS sm_90a) needs N and K multiples of 8, got N = ", p.n,
            ", K = ", p.k);
  const Arrays r = carve(scratch, p.groups);
  fill_kernel<<<(p.groups + 127) / 128, 128, 0, stream>>>(p, r);
  QTC_CUDA_CHECK_LAUNCH();
  if (p.d_bf16)
    launch<cutlass::bfloat16_t>(p, r, stream);
  else
    launch<float>(p, r, stream);
}

}  // namespace qtc::cuda::detail
