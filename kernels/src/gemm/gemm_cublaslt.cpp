/// \file gemm_cublaslt.cpp
/// \brief The GPU GEMM paths (qtc/cuda/gemm.hpp): operand planes and pair rules as the reference
///        (TE_FORMATS.md §7.1), one cuBLASLt call per GEMM with the scale mode of the format, gating first.
///
/// NOTES: cuBLASLt is column-major. Our D is row-major [n, m], i.e. column-major [m, n] with ld = m, and each
/// operand plane read as [rows, k] row-major is column-major [k, rows]: so A goes in with op T (lda = k) and B
/// with op N (ldb = k) — the TN layout Hopper's FP8 kernels require. MXFP8 columnwise planes keep x's
/// orientation ([k, rows] row-major) and go in with the opposite op.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gemm_internal.hpp"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"  // QTC_CUDA_CHECK, QTC_CUBLAS_CHECK
#include "qtc/cuda/gemm.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::cuda {

using gating::Feature;

gating::Capability device_capability() {
  gating::Capability cap;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return cap;
  }
  int dev = 0;
  QTC_CUDA_CHECK(cudaGetDevice(&dev));
  QTC_CUDA_CHECK(cudaDeviceGetAttribute(&cap.cc_major, cudaDevAttrComputeCapabilityMajor, dev));
  QTC_CUDA_CHECK(cudaDeviceGetAttribute(&cap.cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
  cap.cublas = static_cast<int>(cublasLtGetVersion());
  int rt = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) cap.cuda_runtime = (rt / 1000) * 10000 + ((rt % 1000) / 10) * 100;
  return cap;
}

gating::Support device_supports(Feature f) {
  const gating::Capability cap = device_capability();
  if (cap.sm() == 0) return {false, "no CUDA device"};
  return gating::query(f, cap);
}

// ------------------------------------------------------------------------------------------------
// Context

/// Descriptors and algorithm of one GEMM problem, made once (gemm_cublaslt.cpp: run_lt).
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

struct GemmContext::Impl {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t handle = nullptr;
  gating::Capability cap;
  DeviceBuffer workspace;
  std::vector<DeviceBuffer> scratch;
  std::map<std::string, std::unique_ptr<LtPlan>> plans;
  // concurrent lanes (gemm_internal.hpp): stream, workspace and "done" event per lane, one fork event
  std::vector<cudaStream_t> lane_streams;
  std::vector<cudaEvent_t> lane_done;
  std::vector<DeviceBuffer> lane_ws;
  cudaEvent_t fork = nullptr;
  static constexpr size_t kWorkspace = 32u << 20;
};

GemmContext::GemmContext(cudaStream_t stream) : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  impl_->cap = device_capability();
  QTC_CHECK(impl_->cap.sm() != 0, "no CUDA device");
  QTC_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  impl_->workspace = DeviceBuffer(Impl::kWorkspace, stream);
}

GemmContext::~GemmContext() {
  if (!impl_) return;
  for (size_t i = 0; i < impl_->lane_streams.size(); ++i) {
    (void)cudaStreamSynchronize(impl_->lane_streams[i]);
    (void)cudaEventDestroy(impl_->lane_done[i]);
  }
  impl_->lane_ws.clear();  // freed on the context's stream, before the lane streams go
  for (cudaStream_t s : impl_->lane_streams) (void)cudaStreamDestroy(s);
  if (impl_->fork != nullptr) (void)cudaEventDestroy(impl_->fork);
  impl_->plans.clear();
  if (impl_->handle != nullptr) cublasLtDestroy(impl_->handle);
}

cudaStream_t GemmContext::stream() const { return impl_->stream; }
const gating::Capability& GemmContext::capability() const { return impl_->cap; }

void* GemmContext::scratch(int slot, size_t bytes) {
  auto& s = impl_->scratch;
  if (s.size() <= static_cast<size_t>(slot)) s.resize(static_cast<size_t>(slot) + 1);
  if (s[static_cast<size_t>(slot)].bytes() < bytes) s[static_cast<size_t>(slot)] = DeviceBuffer(bytes, impl_->stream);
  return s[static_cast<size_t>(slot)].data();
}

namespace {

void require(const GemmContext& ctx, Feature f) {
  const gating::Support s = gating::query(f, ctx.capability());
  QTC_CHECK(s.supported, s.reason);
}

cudaDataType cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: QTC_FAIL("GEMM output must be F32, BF16 or F16, got ", dtype_name(t));
  }
}

cudaDataType fp8_type(Fp8Type t) { return t == Fp8Type::kE4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

/// One cublasLtMatmul: D (col-major m x n) = alpha · op(A) · op(B) + beta · C.
struct LtCall {
  cudaDataType a_type = CUDA_R_16BF, b_type = CUDA_R_16BF, d_type = CUDA_R_32F;
  int64_t m = 0, n = 0, k = 0;
  bool a_t = true, b_t = false;  ///< op(A) = T, op(B) = N: the TN layout
  int64_t lda = 0, ldb = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  ///< null: beta must be 0
  void* d = nullptr;
  const void* alpha = nullptr;
  const void* beta = nullptr;
  bool device_scalars = false;
  int a_scale_mode = -1, b_scale_mode = -1;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  const void* bias = nullptr;
  bool fast_accum = false;
  int lane = -1;  ///< >= 0: run on that lane's stream with its workspace (gemm_internal.hpp)
};

template <typename T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const T& v) {
  QTC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof(v)));
}

void run_lt(GemmContext& ctx, const LtCall& c) {
  GemmContext::Impl& im = ctx.impl();
  const bool fp8 = c.a_type == CUDA_R_8F_E4M3 || c.a_type == CUDA_R_8F_E5M2;
  // cuBLASLt's FP8 table: with F32 output the bias is BF16; otherwise it has the output type.
  const cudaDataType bias_type = fp8 && c.d_type == CUDA_R_32F ? CUDA_R_16BF : c.d_type;
  std::ostringstream key;
  key << c.a_type << "," << c.b_type << "," << c.d_type << "," << c.m << "," << c.n << "," << c.k << "," << c.a_t
      << c.b_t << "," << c.lda << "," << c.ldb << "," << c.a_scale_mode << "," << c.b_scale_mode << ","
      << (c.a_scale != nullptr) << (c.bias != nullptr) << (c.c != nullptr) << c.device_scalars << c.fast_accum;
  auto it = im.plans.find(key.str());
  if (it == im.plans.end()) {
    // Descriptors, layouts and the algorithm are made once per problem and reused: a repeated call only
    // sets the data pointers (NOTES in the file comment of gemm.hpp: no heuristic query per call).
    auto plan = std::make_unique<LtPlan>();
    QTC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = c.a_t ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.b_t ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_attr(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, ta);
    set_attr(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, tb);
    if (c.device_scalars) set_attr(plan->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_DEVICE);
    if (c.a_scale != nullptr) {
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, c.a_scale);
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, c.b_scale);
      if (c.a_scale_mode >= 0) {
        set_attr(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, static_cast<cublasLtMatmulMatrixScale_t>(c.a_scale_mode));
        set_attr(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, static_cast<cublasLtMatmulMatrixScale_t>(c.b_scale_mode));
      }
    }
    if (fp8) set_attr(plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<int8_t>(c.fast_accum ? 1 : 0));
    if (c.bias != nullptr) {
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, c.bias);
      set_attr(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
    }
    // operand layouts (column-major): A is [k, m] for op T, [m, k] for op N; B is [k, n] for op N.
    QTC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->la, c.a_type, c.a_t ? c.k : c.m, c.a_t ? c.m : c.k, c.lda));
    QTC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->lb, c.b_type, c.b_t ? c.n : c.k, c.b_t ? c.k : c.n, c.ldb));
    QTC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->ld, c.d_type, c.m, c.n, c.m));
    cublasLtMatmulPreference_t pref = nullptr;
    QTC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = GemmContext::Impl::kWorkspace;
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    const cublasStatus_t st1 =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    const cublasStatus_t st2 = st1 != CUBLAS_STATUS_SUCCESS
                                   ? st1
                                   : cublasLtMatmulAlgoGetHeuristic(im.handle, plan->op, plan->la, plan->lb, plan->ld,
                                                                    plan->ld, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    QTC_CHECK(st2 == CUBLAS_STATUS_SUCCESS && found > 0, "cuBLASLt has no algorithm for this GEMM (",
              cublasLtGetStatusName(st2), "; types A ", c.a_type, " B ", c.b_type, " D ", c.d_type, ", m n k ", c.m,
              " ", c.n, " ", c.k, ", scale modes ", c.a_scale_mode, "/", c.b_scale_mode,
              c.bias != nullptr ? ", bias" : "", c.c != nullptr ? ", beta*C" : "", ")");
    plan->algo = res.algo;
    it = im.plans.emplace(key.str(), std::move(plan)).first;
  } else {
    LtPlan& plan = *it->second;
    if (c.a_scale != nullptr) {
      set_attr(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, c.a_scale);
      set_attr(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, c.b_scale);
    }
    if (c.bias != nullptr) set_attr(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, c.bias);
  }
  const LtPlan& plan = *it->second;
  const bool on_lane = c.lane >= 0;
  QTC_CHECK(!on_lane || static_cast<size_t>(c.lane) < im.lane_streams.size(), "GEMM lane ", c.lane, " not created");
  void* ws = on_lane ? im.lane_ws[static_cast<size_t>(c.lane)].data() : im.workspace.data();
  const cudaStream_t st = on_lane ? im.lane_streams[static_cast<size_t>(c.lane)] : im.stream;
  QTC_CUBLAS_CHECK(cublasLtMatmul(im.handle, plan.op, c.alpha, c.a, plan.la, c.b, plan.lb, c.beta,
                                  c.c != nullptr ? c.c : c.d, plan.ld, c.d, plan.ld, &plan.algo, ws,
                                  GemmContext::Impl::kWorkspace, st));
}

const char* plane_name(PlaneKind p) { return p == PlaneKind::kRowwise ? "rowwise" : "columnwise"; }

/// The operand a GEMM reads: the plane, and its [rows, k] shape (§7.1).
struct Operand {
  const DevicePlane* plane = nullptr;
  PlaneKind kind = PlaneKind::kRowwise;
  int64_t rows = 0;
  int64_t k = 0;
};

Operand operand(const DeviceQuantized& q, PlaneKind p, const char* which) {
  const std::optional<DevicePlane>& opt = p == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
  QTC_CHECK(opt.has_value(), "GEMM operand ", which, " is read through its ", plane_name(p), " plane, which this ",
            q.recipe.name(), " tensor does not have (TE_FORMATS.md §7.1)");
  Operand o;
  o.plane = &*opt;
  o.kind = p;
  o.rows = p == PlaneKind::kRowwise ? q.rows : q.cols;
  o.k = p == PlaneKind::kRowwise ? q.cols : q.rows;
  return o;
}

struct Resolved {
  Operand a, b;
};

Resolved resolve(const DeviceQuantized& A, const DeviceQuantized& B, const DeviceGemmArgs& args, bool row_scaled_ok) {
  const Recipe& ra = A.recipe;
  const Recipe& rb = B.recipe;
  QTC_CHECK(ra.kind() == rb.kind(), "A (", ra.name(), ") and B (", rb.name(),
            ") must have the same scaling mode (TE_FORMATS.md §7.1)");
  QTC_CHECK(args.beta == 0.0f || args.c != nullptr, "beta = ", args.beta, " needs a C matrix");
  if (ra.kind() != RecipeKind::kNVFP4 && ra.kind() != RecipeKind::kMXFP4)
    QTC_CHECK(!(ra.fp8_type() == Fp8Type::kE5M2 && rb.fp8_type() == Fp8Type::kE5M2),
              "E5M2 x E5M2 is not a cuBLASLt FP8 GEMM (one operand must be E4M3)");
  if (ra.kind() == RecipeKind::kFP8Block)
    QTC_CHECK(!(ra.is_2d() && rb.is_2d()), "FP8 block scaling: 128x128 x 128x128 GEMMs are not supported (TE_FORMATS.md §7.3)");
  if (ra.kind() == RecipeKind::kNVFP4 && !row_scaled_ok)
    QTC_CHECK(!ra.nvfp4_row_scaled() && !rb.nvfp4_row_scaled(),
              "row-scaled NVFP4 operands are rejected by the plain NVFP4 GEMM; use gemm_nvfp4_row_scaled (TE_FORMATS.md §7.5)");
  Resolved r;
  r.a = operand(A, args.transa ? PlaneKind::kRowwise : PlaneKind::kColumnwise, "A");
  r.b = operand(B, args.transb ? PlaneKind::kColumnwise : PlaneKind::kRowwise, "B");
  QTC_CHECK(r.a.k == r.b.k, "reduction dims differ: A gives [", r.a.rows, ", ", r.a.k, "], B gives [", r.b.rows, ", ",
            r.b.k, "]");
  return r;
}

/// NVFP4: native on SM >= 10, emulated on Hopper. `neutralised`: amaxes taken as 1 (row-scaled, §7.5).
void gemm_nvfp4(GemmContext& ctx, const DeviceQuantized& A, const DeviceQuantized& B, const Resolved& r,
                const DeviceGemmArgs& args, void* d, bool neutralised) {
  QTC_CHECK(args.out != DType::kF16, "FP4 GEMM does not support FP16 output (TE_FORMATS.md §7.4)");
  const int64_t m = r.a.rows, n = r.b.rows, k = r.a.k;
  const float factor = 1.0f / static_cast<float>(36 * A.recipe.nvfp4().e4m3_max * B.recipe.nvfp4().e4m3_max);
  auto* scalars = static_cast<float*>(ctx.scratch(0, 2 * sizeof(float)));
  const float* amax_a = neutralised ? nullptr : r.a.plane->amax.as<float>();
  const float* amax_b = neutralised ? nullptr : r.b.plane->amax.as<float>();
  if (!neutralised)
    QTC_CHECK(r.a.plane->amax_count == 1 && r.b.plane->amax_count == 1, "NVFP4 GEMM needs one amax per operand plane");
  const detail::Nvfp4AlphaArgs alpha{.amax_a = amax_a, .amax_b = amax_b, .alpha_in = args.alpha, .factor = factor, .beta = args.beta, .out = scalars};

  LtCall c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.d_type = cuda_type(args.out);
  c.c = args.beta != 0.0f ? args.c : nullptr;
  c.d = d;
  c.alpha = scalars;
  c.beta = scalars + 1;
  c.device_scalars = true;
  c.bias = args.bias;
  if (gating::query(Feature::kGemmNvfp4, ctx.capability())) {
    QTC_CHECK(r.a.plane->scale_layout == ScaleLayout::kSwizzled && r.b.plane->scale_layout == ScaleLayout::kSwizzled,
              "NVFP4 cuBLASLt GEMM needs swizzled scales (TE_FORMATS.md §7.4)");
    c.a_type = c.b_type = CUDA_R_4F_E2M1;
    c.a = r.a.plane->data.data();
    c.b = r.b.plane->data.data();
    c.lda = c.ldb = k;
    c.a_scale = r.a.plane->scale.data();
    c.b_scale = r.b.plane->scale.data();
    c.a_scale_mode = c.b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
    detail::launch_nvfp4_alpha(alpha.amax_a, alpha.amax_b, alpha.alpha_in, alpha.factor, alpha.beta, alpha.out, ctx.stream());
    run_lt(ctx, c);
    return;
  }
  require(ctx, Feature::kGemmNvfp4Emulated);
  QTC_CHECK(k % 16 == 0, "NVFP4 GEMM needs k % 16 == 0, got ", k);
  void* a16 = ctx.scratch(1, static_cast<size_t>(m * k) * 2);
  void* b16 = ctx.scratch(2, static_cast<size_t>(n * k) * 2);
  const ScaleGeometry ga = detail::nvfp4_scale_geometry(*r.a.plane, m, k), gb = detail::nvfp4_scale_geometry(*r.b.plane, n, k);
  const uint8_t* da = r.a.plane->data.as<uint8_t>();
  const uint8_t* db = r.b.plane->data.as<uint8_t>();
  if (detail::nvfp4_linear_ok(da, ga, k, a16) && detail::nvfp4_linear_ok(db, gb, k, b16)) {
    // Both operands and the alpha in one bandwidth-bound launch (compact scales): the pass before the GEMM is what
    // the emulation adds to the BF16 GEMM's time.
    const detail::Nvfp4Linear planes[2] = {{da, r.a.plane->scale.as<uint8_t>(), m * k, a16},
                                           {db, r.b.plane->scale.as<uint8_t>(), n * k, b16}};
    detail::launch_nvfp4_to_bf16_linear(planes, 2, ctx.stream(), &alpha);
  } else {
    detail::launch_nvfp4_alpha(alpha.amax_a, alpha.amax_b, alpha.alpha_in, alpha.factor, alpha.beta, alpha.out, ctx.stream());
    detail::launch_nvfp4_to_bf16(da, r.a.plane->scale.as<uint8_t>(), m, k, ga, a16, ctx.stream());
    detail::launch_nvfp4_to_bf16(db, r.b.plane->scale.as<uint8_t>(), n, k, gb, b16, ctx.stream());
  }
  c.a_type = c.b_type = CUDA_R_16BF;
  c.a = a16;
  c.b = b16;
  c.lda = c.ldb = k;
  run_lt(ctx, c);
}

}  // namespace

void gemm(GemmContext& ctx, const DeviceQuantized& A, const DeviceQuantized& B, const DeviceGemmArgs& args, void* d) {
  const Resolved r = resolve(A, B, args, /*row_scaled_ok=*/false);
  const int64_t m = r.a.rows, n = r.b.rows, k = r.a.k;
  LtCall c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.d_type = cuda_type(args.out);
  c.c = args.beta != 0.0f ? args.c : nullptr;
  c.d = d;
  c.alpha = &args.alpha;
  c.beta = &args.beta;
  c.bias = args.bias;
  c.lda = c.ldb = k;
  c.a = r.a.plane->data.data();
  c.b = r.b.plane->data.data();
  switch (A.recipe.kind()) {
    case RecipeKind::kFP8Tensor:
      require(ctx, Feature::kGemmFp8Tensor);
      QTC_CHECK(k % 16 == 0 && m % 16 == 0 && n % 16 == 0, "FP8 GEMM needs m, n, k multiples of 16 (TE_FORMATS.md §5), got ",
                m, "x", n, "x", k);
      c.a_type = fp8_type(A.recipe.fp8_type());
      c.b_type = fp8_type(B.recipe.fp8_type());
      c.a_scale = A.scale_inv.data();
      c.b_scale = B.scale_inv.data();
      c.a_scale_mode = c.b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
      c.fast_accum = args.fast_accum;
      run_lt(ctx, c);
      return;
    case RecipeKind::kFP8Block:
      require(ctx, Feature::kGemmFp8Block);
      QTC_CHECK(r.a.plane->scale_layout == ScaleLayout::kPadded && r.b.plane->scale_layout == ScaleLayout::kPadded,
                "FP8 block GEMM reads TE's GEMM-ready (padded) scales; quantize or convert with ScaleLayout::kPadded");
      QTC_CHECK(k % 16 == 0 && m % 8 == 0 && n % 8 == 0, "FP8 block GEMM needs k % 16, m % 8, n % 8 (TE_FORMATS.md §7.3), got ",
                m, "x", n, "x", k);
      c.a_type = fp8_type(A.recipe.fp8_type());
      c.b_type = fp8_type(B.recipe.fp8_type());
      c.a_scale = r.a.plane->scale.data();
      c.b_scale = r.b.plane->scale.data();
      c.a_scale_mode = A.recipe.is_2d() ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      c.b_scale_mode = B.recipe.is_2d() ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      c.fast_accum = false;  // TE forces use_split_accumulator for block scaling (§7.3)
      run_lt(ctx, c);
      return;
    case RecipeKind::kMXFP8:
      require(ctx, Feature::kGemmMxfp8);
      QTC_CHECK(r.a.plane->scale_layout == ScaleLayout::kSwizzled && r.b.plane->scale_layout == ScaleLayout::kSwizzled,
                "MXFP8 scales are not in format expected by GEMM: swizzled scales required (TE_FORMATS.md §7.4)");
      c.a_type = fp8_type(A.recipe.fp8_type());
      c.b_type = fp8_type(B.recipe.fp8_type());
      // MXFP8 columnwise data keeps x's orientation: [k, rows] row-major, the opposite op.
      if (r.a.kind == PlaneKind::kColumnwise) {
        c.a_t = false;
        c.lda = m;
      }
      if (r.b.kind == PlaneKind::kColumnwise) {
        c.b_t = true;
        c.ldb = n;
      }
      c.a_scale = r.a.plane->scale.data();
      c.b_scale = r.b.plane->scale.data();
      c.a_scale_mode = c.b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
      run_lt(ctx, c);
      return;
    case RecipeKind::kMXFP4: {
      // MXFP4: cuBLASLt block-scaled FP4 (E2M1, VEC32_UE8M0) where the table has it, else (Hopper) the exact emulation:
      // both planes decoded to BF16 (exact), a BF16 GEMM with FP32 accumulation; no global scale, alpha as given.
      QTC_CHECK(args.out != DType::kF16, "FP4 GEMM does not support FP16 output (TE_FORMATS.md §7.4)");
      if (gating::query(Feature::kGemmMxfp4, ctx.capability())) {
        QTC_CHECK(r.a.plane->scale_layout == ScaleLayout::kSwizzled && r.b.plane->scale_layout == ScaleLayout::kSwizzled,
                  "MXFP4 cuBLASLt GEMM needs swizzled scales (TE_FORMATS.md §7.4)");
        QTC_CHECK(k % 32 == 0, "MXFP4 cuBLASLt GEMM needs k % 32 == 0, got ", k);
        c.a_type = c.b_type = CUDA_R_4F_E2M1;
        c.a_scale = r.a.plane->scale.data();
        c.b_scale = r.b.plane->scale.data();
        c.a_scale_mode = c.b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
        run_lt(ctx, c);
        return;
      }
      require(ctx, Feature::kGemmMxfp4Emulated);
      auto scale_of = [&](const DeviceQuantized& q, const Operand& o) {
        const PlaneSpec spec = describe_plane(q.recipe, o.kind, q.rows, q.cols);
        return detail::ScaleOutHost{.p = o.plane->scale.as<uint8_t>(), .geom = spec.geometry(o.plane->scale_layout)};
      };
      void* a16 = ctx.scratch(1, static_cast<size_t>(m * k) * 2);
      void* b16 = ctx.scratch(2, static_cast<size_t>(n * k) * 2);
      detail::launch_mxfp4_to_bf16(r.a.plane->data.as<uint8_t>(), scale_of(A, r.a), m, k, a16, ctx.stream());
      detail::launch_mxfp4_to_bf16(r.b.plane->data.as<uint8_t>(), scale_of(B, r.b), n, k, b16, ctx.stream());
      c.a_type = c.b_type = CUDA_R_16BF;
      c.a = a16;
      c.b = b16;
      run_lt(ctx, c);
      return;
    }
    case RecipeKind::kNVFP4:
      if (!gating::query(Feature::kGemmNvfp4, ctx.capability()) &&
          !gating::query(Feature::kGemmNvfp4Emulated, ctx.capability()))
        require(ctx, Feature::kGemmNvfp4);
      gemm_nvfp4(ctx, A, B, r, args, d, /*neutralised=*/false);
      return;
  }
}

void gemm_nvfp4_row_scaled(GemmContext& ctx, const DeviceQuantized& A, const DeviceQuantized& B,
                           const DeviceGemmArgs& args, void* d) {
  require(ctx, Feature::kGemmNvfp4RowScaled);
  QTC_CHECK(A.recipe.kind() == RecipeKind::kNVFP4 && B.recipe.kind() == RecipeKind::kNVFP4,
            "row-scaled GEMM needs NVFP4 operands, got ", A.recipe.name(), " and ", B.recipe.name());
  QTC_CHECK(args.alpha == 1.0f, "row-scaled NVFP4 GEMM takes alpha = 1 (TE_FORMATS.md §7.5), got ", args.alpha);
  QTC_CHECK(args.beta == 0.0f || (args.beta == 1.0f && args.c != nullptr),
            "row-scaled NVFP4 GEMM supports no explicit beta: only accumulate (beta = 1 with C, added in the output "
            "dtype) or beta = 0 (TE_FORMATS.md §7.5); got beta = ", args.beta);
  const Resolved r = resolve(A, B, args, /*row_scaled_ok=*/true);
  const int64_t m = r.a.rows, n = r.b.rows;
  const int64_t n_col = r.a.plane->amax_count, n_row = r.b.plane->amax_count;
  QTC_CHECK(n_col == 1 || n_col == m, "A's amax has ", n_col, " values for ", m, " output columns");
  QTC_CHECK(n_row == 1 || n_row == n, "B's amax has ", n_row, " values for ", n, " output rows");
  auto* scratch = static_cast<float*>(ctx.scratch(3, static_cast<size_t>(n * m) * sizeof(float)));
  DeviceGemmArgs inner;
  inner.transa = args.transa;
  inner.transb = args.transb;
  inner.out = DType::kF32;
  gemm_nvfp4(ctx, A, B, r, inner, scratch, /*neutralised=*/true);
  detail::launch_row_scaled_epilogue(scratch, n, m, r.b.plane->amax.as<float>(), n_row, r.a.plane->amax.as<float>(),
                                     n_col, args.bias, args.beta != 0.0f ? args.c : nullptr, args.out, d, ctx.stream());
}

namespace {
/// A BF16 TN cuBLASLt call D[m, n] = A[m, k] · B[n, k]^T (scalars left to the caller).
LtCall bf16_call(const void* a, const void* b, int64_t m, int64_t n, int64_t k, DType out, void* d) {
  LtCall c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.lda = c.ldb = k;
  c.a = a;
  c.b = b;
  c.d = d;
  c.d_type = cuda_type(out);
  return c;
}
}  // namespace

void gemm_bf16(GemmContext& ctx, const void* a, const void* b, int64_t m, int64_t n, int64_t k, DType out, void* d,
               const float* alpha_device, float alpha_host) {
  static const float kZero = 0.0f;
  LtCall c = bf16_call(a, b, m, n, k, out, d);
  if (alpha_device != nullptr) {
    auto* scalars = static_cast<float*>(ctx.scratch(4, 2 * sizeof(float)));
    QTC_CUDA_CHECK(cudaMemcpyAsync(scalars, alpha_device, sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream()));
    QTC_CUDA_CHECK(cudaMemsetAsync(scalars + 1, 0, sizeof(float), ctx.stream()));
    c.alpha = scalars;
    c.beta = scalars + 1;
    c.device_scalars = true;
    run_lt(ctx, c);
    return;
  }
  c.alpha = &alpha_host;
  c.beta = &kZero;
  run_lt(ctx, c);
}

namespace detail {

int gemm_lanes(GemmContext& ctx, int want) {
  GemmContext::Impl& im = ctx.impl();
  if (im.fork == nullptr) QTC_CUDA_CHECK(cudaEventCreateWithFlags(&im.fork, cudaEventDisableTiming));
  while (static_cast<int>(im.lane_streams.size()) < want) {
    cudaStream_t s = nullptr;
    QTC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    im.lane_streams.push_back(s);
    cudaEvent_t e = nullptr;
    QTC_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    im.lane_done.push_back(e);
    // made on the context's stream: the fork orders its allocation before the lane's first use
    im.lane_ws.emplace_back(GemmContext::Impl::kWorkspace, im.stream);
  }
  return std::max(1, std::min(want, static_cast<int>(im.lane_streams.size())));
}

cudaStream_t lane_stream(GemmContext& ctx, int lane) { return ctx.impl().lane_streams.at(static_cast<size_t>(lane)); }

void lanes_fork(GemmContext& ctx, int lanes) {
  GemmContext::Impl& im = ctx.impl();
  QTC_CUDA_CHECK(cudaEventRecord(im.fork, im.stream));
  for (int i = 0; i < lanes; ++i) QTC_CUDA_CHECK(cudaStreamWaitEvent(im.lane_streams[static_cast<size_t>(i)], im.fork, 0));
}

void lanes_join(GemmContext& ctx, int lanes) {
  GemmContext::Impl& im = ctx.impl();
  for (int i = 0; i < lanes; ++i) {
    QTC_CUDA_CHECK(cudaEventRecord(im.lane_done[static_cast<size_t>(i)], im.lane_streams[static_cast<size_t>(i)]));
    QTC_CUDA_CHECK(cudaStreamWaitEvent(im.stream, im.lane_done[static_cast<size_t>(i)], 0));
  }
}

void gemm_bf16_lane(GemmContext& ctx, int lane, const void* a, const void* b, int64_t m, int64_t n, int64_t k,
                    DType out, void* d, float alpha) {
  static const float kZero = 0.0f;
  LtCall c = bf16_call(a, b, m, n, k, out, d);
  c.alpha = &alpha;
  c.beta = &kZero;
  c.lane = lane;
  run_lt(ctx, c);
}

}  // namespace detail

void nvfp4_plane_to_bf16(const DevicePlane& p, int64_t rows, int64_t k, void* out_bf16, cudaStream_t stream) {
  detail::launch_nvfp4_to_bf16(p.data.as<uint8_t>(), p.scale.as<uint8_t>(), rows, k, detail::nvfp4_scale_geometry(p, rows, k),
                               out_bf16, stream);
}

}  // namespace qtc::cuda
