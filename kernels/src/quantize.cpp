/// \file quantize.cpp
/// \brief Host side of the CUDA quantizers: output allocation (the reference's plane shapes), the amax passes,
///        kernel dispatch, and copies between host and device. Nothing here synchronizes with the host except
///        to_host / from_host.
#include <cfloat>
#include <cstring>
#include <vector>

#include "launch.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/gating.hpp"
#include "qtc/layouts.hpp"
#include "qtc/profile.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::cuda {

// ------------------------------------------------------------------------------------------------------
// DeviceBuffer

DeviceBuffer::DeviceBuffer(size_t bytes, cudaStream_t stream) : bytes_(bytes), stream_(stream) {
  if (bytes > 0) QTC_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream));
}
DeviceBuffer::~DeviceBuffer() { reset(); }
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_), stream_(o.stream_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    stream_ = o.stream_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
void DeviceBuffer::reset() noexcept {
  if (ptr_ != nullptr) (void)cudaFreeAsync(ptr_, stream_);
  ptr_ = nullptr;
  bytes_ = 0;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

namespace {

/// Where compact entry (r, c) of a plane's scales lives in the plane's layout (the kernel-facing ScaleOutHost,
/// filled from the recipe policy's description of the plane).
detail::ScaleOutHost scale_out(const DevicePlane& pl, const PlaneSpec& spec) {
  return detail::ScaleOutHost{.p = pl.scale.as<uint8_t>(), .geom = spec.geometry(pl.scale_layout)};
}

DevicePlane make_plane(const PlaneSpec& spec, ScaleLayout layout, cudaStream_t s) {
  DevicePlane p;
  p.data_rows = spec.data_rows;
  p.data_cols = spec.data_cols;
  p.amax_count = spec.amax_count;
  p.scale_type = spec.scale_type;
  p.scale_layout = spec.per_tensor ? ScaleLayout::kCompact : layout;
  const ScaleShape sh = spec.scale_shape(p.scale_layout);
  p.scale_rows = sh.rows;
  p.scale_cols = sh.cols;
  p.data = DeviceBuffer(static_cast<size_t>(spec.data_bytes()), s);
  p.scale = DeviceBuffer(static_cast<size_t>(spec.scale_bytes(p.scale_layout)), s);
  p.amax = DeviceBuffer(sizeof(float) * static_cast<size_t>(p.amax_count), s);
  return p;
}

/// The operation orders the kernels implement (profile.hpp): te's, and torchao's for NVFP4 and MXFP8.
constexpr ImplementedOrders kKernelOrders{.nvfp4_torchao = true, .mx_torchao = true};

/// Throws qtc::Error naming the profile rule the kernels do not implement (no silent run of another rule).
void check_orders(const Recipe& r, const char* what) {
  const std::string rule = unimplemented_order(r, kKernelOrders);
  QTC_CHECK(rule.empty(), what, ": the CUDA kernels do not implement ", rule, "; recipe ", r.name(), " runs on the CPU reference");
}

void check_input(const DeviceMatrixView& x, const DeviceQuantized& out) {
  QTC_CHECK(x.dtype == out.input_dtype && x.rows == out.rows && x.cols == out.cols, "quantize_into: input [", x.rows,
            ", ", x.cols, "] ", dtype_name(x.dtype), " does not match the allocated output [", out.rows, ", ", out.cols,
            "] ", dtype_name(out.input_dtype));
  QTC_CHECK(x.data != nullptr || x.rows * x.cols == 0, "quantize_into: input has no data");
}

void copy_f32(float* dst, const float* src, cudaStream_t s) {
  if (dst != src) QTC_CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float), cudaMemcpyDeviceToDevice, s));
}

void quantize_impl(const DeviceMatrixView& x, DeviceQuantized& out, const float* host_amax, cudaStream_t s) {
  check_input(x, out);
  const Recipe& r = out.recipe;
  check_orders(r, "quantize");
  const int64_t M = x.rows, K = x.cols;
  DevicePlane* rp = out.rowwise ? &*out.rowwise : nullptr;
  DevicePlane* cp = out.columnwise ? &*out.columnwise : nullptr;
  for (DevicePlane* p : {rp, cp})
    if (p != nullptr && p->scale_layout != ScaleLayout::kCompact && p->scale.bytes() > 0)
      QTC_CUDA_CHECK(cudaMemsetAsync(p->scale.data(), 0, p->scale.bytes(), s));  // padding reads as zero
  float* ws = out.workspace.as<float>();
  const ProfileRules& pr = profile_rules(r.profile);  // every profile rule the launchers need comes from here
  const RecipeOptions opts = r.options();             // the recipe's alternative: its kind's options only
  const bool pyref = pr.nvfp4_neg_zero_positive;      // te_pyref's NVFP4/FP8 rule set (-0 -> 0x0, NaN amax, ...)
  auto so = [&](DevicePlane* p, PlaneKind pk) { return p ? scale_out(*p, describe_plane(r, pk, M, K)) : detail::ScaleOutHost{}; };
  // The fields every launcher's parameters share (Nvfp4/Mxfp8/Fp8Block/Fp8TensorParams, AmaxParams).
  auto input_and_planes = [&](auto& p) {
    p.x = x.data;
    p.dtype = x.dtype;
    p.M = M;
    p.K = K;
    p.rowwise = rp != nullptr;
    p.columnwise = cp != nullptr;
  };
  auto outputs = [&](auto& p) {
    p.row_data = rp ? rp->data.as<uint8_t>() : nullptr;
    p.col_data = cp ? cp->data.as<uint8_t>() : nullptr;
  };
  auto outputs_with_scales = [&](auto& p) {
    outputs(p);
    p.row_scale = so(rp, PlaneKind::kRowwise);
    p.col_scale = so(cp, PlaneKind::kColumnwise);
  };
  auto amax_params = [&] {
    detail::AmaxParams a;
    a.x = x.data;
    a.dtype = x.dtype;
    a.rows = M;
    a.cols = K;
    a.propagate_nan = pr.nan_amax;
    return a;
  };

  switch (r.kind()) {
    case RecipeKind::kNVFP4: {
      QTC_CHECK(M % 16 == 0, "quantize: the CUDA NVFP4 kernels need M % 16 == 0, got M = ", M,
                " (torchao's rowwise-only plane of a ragged M runs on the CPU reference)");
      float* ar = rp ? rp->amax.as<float>() : ws;
      float* ac = cp ? cp->amax.as<float>() : ws + 1;
      if (r.nvfp4_row_scaled()) {
        QTC_CHECK(host_amax == nullptr, "quantize_with_amax: row-scaled NVFP4 computes its own per-row amax (§1.11)");
        detail::AmaxParams a = amax_params();
        a.per_row = ar;
        a.per_col = cp ? ac : nullptr;
        detail::launch_amax(a, s);
      } else if (host_amax != nullptr) {
        detail::launch_fill(ar, 1, host_amax[0], s);
        detail::launch_fill(ac, 1, host_amax[1], s);
      } else {
        detail::AmaxParams a = amax_params();
        a.global = ar;
        const bool rht_col = r.nvfp4_rht() && cp != nullptr;
        a.rht_global = rht_col ? ac : nullptr;
        a.rht_sign_mask = r.nvfp4().rht_sign_mask;
        detail::launch_amax(a, s);
        if (M * K == 0 && rht_col) detail::launch_fill(ac, 1, 0.0f, s);
        if (!rht_col) copy_f32(ac, ar, s);
      }
      // The kernel-facing parameters, filled from the recipe's NVFP4 alternative and the profile record.
      const Nvfp4Options& o = std::get<Nvfp4Options>(opts);
      detail::Nvfp4Params p;
      input_and_planes(p);
      p.tile2d = o.tile_2d;
      p.row_scaled = o.row_scaled;
      p.fourover6 = o.fourover6;
      p.mse = o.fourover6_err == ErrMode::kMSE;
      p.stochastic = o.stochastic;
      p.rht = o.rht;
      p.pyref = pyref;
      p.torchao = pr.nvfp4_order == Nvfp4Order::kTorchAO;
      p.torchao_two_level = o.per_tensor_scale;
      p.e4m3_max = static_cast<float>(o.e4m3_max);
      p.seed = o.seed;
      p.rht_sign_mask = o.rht_sign_mask;
      p.amax_row = ar;
      p.amax_col = ac;
      p.amax_from_host = host_amax != nullptr;
      outputs_with_scales(p);
      detail::launch_nvfp4(p, s);
      break;
    }
    case RecipeKind::kMXFP8: {
      const Mxfp8Options& o = std::get<Mxfp8Options>(opts);
      detail::Mxfp8Params p;
      input_and_planes(p);
      p.e5m2 = o.fp8 == Fp8Type::kE5M2;
      p.floor_rule = o.scale_rule == MxScaleRule::kOcpFloor;
      p.tile2d = o.tile_2d;
      p.ocp = pr.mx_nonfinite == MxNonFinite::kNaN;
      p.torchao = pr.mx_order == MxOrder::kTorchAO;
      p.scale_rule = static_cast<int>(o.scale_rule);
      outputs_with_scales(p);
      detail::launch_mxfp8(p, s);
      break;
    }
    case RecipeKind::kFP8Block: {
      const Fp8BlockOptions& o = std::get<Fp8BlockOptions>(opts);
      detail::Fp8BlockParams p;
      input_and_planes(p);
      p.e5m2 = o.fp8 == Fp8Type::kE5M2;
      p.tile2d = o.tile_2d;
      p.pow2 = o.pow2_scales;
      p.pyref = pr.fp8_inf_amax_scale_zero;
      p.eps = o.eps;
      p.value_for_inf = dtype_max(x.dtype);
      p.ue8m0 = o.ue8m0_scales;
      outputs_with_scales(p);
      detail::launch_fp8_block(p, s);
      break;
    }
    case RecipeKind::kMXFP4: {
      const Mxfp4Options& o = std::get<Mxfp4Options>(opts);
      detail::Mxfp4Params p;
      input_and_planes(p);
      p.ocp = pr.mx_nonfinite == MxNonFinite::kNaN;
      p.torchao = pr.mx_order == MxOrder::kTorchAO;
      p.scale_rule = static_cast<int>(o.scale_rule);
      QTC_CHECK(p.torchao || o.scale_rule == MxScaleRule::kRceil || o.scale_rule == MxScaleRule::kOcpFloor, "MXFP4 scale_rule ",
                mx_scale_rule_name(o.scale_rule), " is defined by torchao's to_mx only (profile torchao)");
      outputs_with_scales(p);
      detail::launch_mxfp4(p, s);
      break;
    }
    case RecipeKind::kFP8Tensor: {
      float* a0 = rp ? rp->amax.as<float>() : cp->amax.as<float>();
      if (host_amax != nullptr) {
        detail::launch_fill(a0, 1, host_amax[0], s);
      } else {
        detail::AmaxParams a = amax_params();
        a.global = a0;
        detail::launch_amax(a, s);
      }
      if (rp && cp) copy_f32(cp->amax.as<float>(), a0, s);
      const Fp8TensorOptions& o = std::get<Fp8TensorOptions>(opts);
      detail::Fp8TensorParams p;
      input_and_planes(p);
      p.e5m2 = o.fp8 == Fp8Type::kE5M2;
      p.pow2 = o.pow2_scales;
      p.pyref = pr.fp8_inf_amax_scale_zero;
      p.eps = o.eps;
      p.amax = a0;
      p.scale_inv = out.scale_inv.as<float>();
      outputs(p);
      if (M * K == 0) {  // no tile runs: the scale still follows from amax = 0
        detail::launch_fill(p.scale_inv, 1, 1.0f, s);
      }
      detail::launch_fp8_tensor(p, s);
      for (DevicePlane* pl : {rp, cp})
        if (pl) copy_f32(pl->scale.as<float>(), p.scale_inv, s);
      break;
    }
  }
}

}  // namespace

std::string unsupported_reason(const Recipe& r, DType input, int64_t rows, int64_t cols) {
  try {
    r.validate_input(input, rows, cols);
  } catch (const Error& e) {
    return e.what();
  }
  if (const std::string rule = unimplemented_order(r, kKernelOrders); !rule.empty())
    return "the CUDA kernels do not implement " + rule + " (it runs on the CPU reference)";
  if (r.kind() == RecipeKind::kNVFP4 && rows % 16 != 0)
    return "the CUDA NVFP4 kernels need M % 16 == 0 (torchao's rowwise-only plane of a ragged M runs on the CPU reference)";
  if (r.is(RecipeKind::kFP8Block) || r.is(RecipeKind::kFP8Tensor)) {
    const ProfileRules& pr = profile_rules(r.profile);
    if ((r.is(RecipeKind::kFP8Tensor) ? pr.fp8_tensor_form : pr.fp8_form) != Fp8Form::kTE)
      return "rule 'fp8.form': the CUDA FP8 kernels implement fp8.form te only, not profile '" + pr.name + "' (" +
             std::string(fp8_form_name(pr.fp8_form)) + "); its vectors run on the CPU reference";
  }
  if (device_count() == 0) return "";  // the recipe is legal; whether a device is there is the backend's question
  // The capability table (gating.hpp) for the current device.
  gating::Capability cap;
  int dev = 0, rt = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&cap.cc_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&cap.cc_minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return "cannot read the compute capability of the current CUDA device";
  }
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) cap.cuda_runtime = (rt / 1000) * 10000 + ((rt % 1000) / 10) * 100;
  std::vector<gating::Feature> features;
  switch (r.kind()) {
    case RecipeKind::kFP8Tensor: features.push_back(gating::Feature::kQuantizeFp8Tensor); break;
    case RecipeKind::kFP8Block: features.push_back(gating::Feature::kQuantizeFp8Block); break;
    case RecipeKind::kMXFP8: features.push_back(gating::Feature::kQuantizeMxfp8); break;
    case RecipeKind::kMXFP4: features.push_back(gating::Feature::kQuantizeMxfp4); break;
    case RecipeKind::kNVFP4:
      features.push_back(gating::Feature::kQuantizeNvfp4);
      if (r.nvfp4_row_scaled()) features.push_back(gating::Feature::kQuantizeNvfp4RowScaled);
      if (r.nvfp4_rht()) features.push_back(gating::Feature::kQuantizeNvfp4Rht);
      break;
  }
  for (gating::Feature f : features) {
    const gating::Support s = gating::query(f, cap);
    if (!s.supported) return s.reason;
  }
  return "";
}

DeviceQuantized allocate_quantized(const Recipe& r, DType input, int64_t rows, int64_t cols, ScaleLayout layout,
                                   cudaStream_t stream) {
  r.validate_input(input, rows, cols);
  const PlaneSpec rs = describe_plane(r, PlaneKind::kRowwise, rows, cols), cs = describe_plane(r, PlaneKind::kColumnwise, rows, cols);
  QTC_CHECK(rs.per_tensor || rs.has_layout(layout), r.name(), ": ", rs.layout_refusal(layout));
  DeviceQuantized q;
  q.recipe = r;
  q.input_dtype = input;
  q.rows = rows;
  q.cols = cols;
  if (rs.requested) q.rowwise = make_plane(rs, layout, stream);
  if (cs.requested) q.columnwise = make_plane(cs, layout, stream);
  q.workspace = DeviceBuffer(2 * sizeof(float), stream);
  if (rs.per_tensor) q.scale_inv = DeviceBuffer(sizeof(float), stream);
  return q;
}

void quantize_into(const DeviceMatrixView& x, DeviceQuantized& out, cudaStream_t stream) {
  quantize_impl(x, out, nullptr, stream);
}

void quantize_with_amax_into(const DeviceMatrixView& x, DeviceQuantized& out, float amax_rowwise,
                             float amax_columnwise, cudaStream_t stream) {
  const Recipe& r = out.recipe;
  QTC_CHECK(r.kind() == RecipeKind::kNVFP4 || r.kind() == RecipeKind::kFP8Tensor, "quantize_with_amax: recipe ", r.name(),
            " has no global amax (NVFP4 and FP8 tensor only)");
  const float a[2] = {amax_rowwise, amax_columnwise};
  quantize_impl(x, out, a, stream);
}

DeviceQuantized quantize(const DeviceMatrixView& x, const Recipe& r, cudaStream_t stream, ScaleLayout layout) {
  DeviceQuantized q = allocate_quantized(r, x.dtype, x.rows, x.cols, layout, stream);
  quantize_into(x, q, stream);
  return q;
}

namespace {

Plane plane_to_host(const DevicePlane& d, cudaStream_t s) {
  Plane p;
  p.data_rows = d.data_rows;
  p.data_cols = d.data_cols;
  p.data.resize(d.data.bytes());
  if (!p.data.empty()) QTC_CUDA_CHECK(cudaMemcpyAsync(p.data.data(), d.data.data(), d.data.bytes(), cudaMemcpyDeviceToHost, s));
  p.scale.type = d.scale_type;
  p.scale.layout = d.scale_layout;
  p.scale.rows = d.scale_rows;
  p.scale.cols = d.scale_cols;
  p.scale.bytes.resize(d.scale.bytes());
  if (!p.scale.bytes.empty())
    QTC_CUDA_CHECK(cudaMemcpyAsync(p.scale.bytes.data(), d.scale.data(), d.scale.bytes(), cudaMemcpyDeviceToHost, s));
  p.amax.resize(static_cast<size_t>(d.amax_count));
  if (!p.amax.empty())
    QTC_CUDA_CHECK(cudaMemcpyAsync(p.amax.data(), d.amax.data(), d.amax.bytes(), cudaMemcpyDeviceToHost, s));
  return p;
}

DevicePlane plane_from_host(const Plane& h, cudaStream_t s) {
  DevicePlane d;
  d.data_rows = h.data_rows;
  d.data_cols = h.data_cols;
  d.data = DeviceBuffer(h.data.size(), s);
  if (!h.data.empty()) QTC_CUDA_CHECK(cudaMemcpyAsync(d.data.data(), h.data.data(), h.data.size(), cudaMemcpyHostToDevice, s));
  d.scale_type = h.scale.type;
  d.scale_layout = h.scale.layout;
  d.scale_rows = h.scale.rows;
  d.scale_cols = h.scale.cols;
  d.scale = DeviceBuffer(h.scale.bytes.size(), s);
  if (!h.scale.bytes.empty())
    QTC_CUDA_CHECK(cudaMemcpyAsync(d.scale.data(), h.scale.bytes.data(), h.scale.bytes.size(), cudaMemcpyHostToDevice, s));
  d.amax_count = static_cast<int64_t>(h.amax.size());
  d.amax = DeviceBuffer(h.amax.size() * sizeof(float), s);
  if (!h.amax.empty())
    QTC_CUDA_CHECK(cudaMemcpyAsync(d.amax.data(), h.amax.data(), h.amax.size() * sizeof(float), cudaMemcpyHostToDevice, s));
  return d;
}

}  // namespace

QuantizedTensor to_host(const DeviceQuantized& q, cudaStream_t stream) {
  QuantizedTensor h;
  h.recipe = q.recipe;
  h.input_dtype = q.input_dtype;
  h.rows = q.rows;
  h.cols = q.cols;
  if (q.rowwise) h.rowwise = plane_to_host(*q.rowwise, stream);
  if (q.columnwise) h.columnwise = plane_to_host(*q.columnwise, stream);
  if (q.scale_inv.bytes() == sizeof(float))
    QTC_CUDA_CHECK(cudaMemcpyAsync(&h.scale_inv, q.scale_inv.data(), sizeof(float), cudaMemcpyDeviceToHost, stream));
  QTC_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h;
}

DeviceQuantized from_host(const QuantizedTensor& h, cudaStream_t stream) {
  DeviceQuantized q;
  q.recipe = h.recipe;
  q.input_dtype = h.input_dtype;
  q.rows = h.rows;
  q.cols = h.cols;
  if (h.rowwise) q.rowwise = plane_from_host(*h.rowwise, stream);
  if (h.columnwise) q.columnwise = plane_from_host(*h.columnwise, stream);
  q.workspace = DeviceBuffer(2 * sizeof(float), stream);
  if (describe_plane(h.recipe, PlaneKind::kRowwise, h.rows, h.cols).per_tensor) {
    q.scale_inv = DeviceBuffer(sizeof(float), stream);
    detail::launch_fill(q.scale_inv.as<float>(), 1, h.scale_inv, stream);
  }
  QTC_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host buffers may go away after return
  return q;
}

void dequantize(const DeviceQuantized& q, PlaneKind pk, DType out, void* y, cudaStream_t stream) {
  const Recipe& r = q.recipe;
  const bool col = pk == PlaneKind::kColumnwise;
  const std::optional<DevicePlane>& pl = col ? q.columnwise : q.rowwise;
  QTC_CHECK(pl.has_value(), r.name(), ": the ", col ? "columnwise" : "rowwise", " plane was not produced");
  check_orders(r, "dequantize");
  detail::DequantParams p;
  switch (r.kind()) {
    case RecipeKind::kNVFP4: p.kind = 0; break;
    case RecipeKind::kMXFP8: p.kind = 1; break;
    case RecipeKind::kFP8Block: p.kind = 2; break;
    case RecipeKind::kFP8Tensor: p.kind = 3; break;
    case RecipeKind::kMXFP4: p.kind = 4; break;
  }
  p.columnwise = col;
  p.M = q.rows;
  p.K = q.cols;
  p.data = pl->data.as<uint8_t>();
  p.scale = pl->scale.as<uint8_t>();
  const PlaneSpec spec = describe_plane(r, pk, q.rows, q.cols);
  if (!spec.per_tensor) p.scale_layout = scale_out(*pl, spec);
  p.amax = spec.per_tensor ? q.scale_inv.as<float>() : pl->amax.as<float>();
  p.per_row_amax = spec.amax_per_line && pl->amax_count > 1;
  if (r.is(RecipeKind::kMXFP4)) {
    // E2M1 data, E8M0 scales: nothing else to pass
  } else if (const Nvfp4Options* nv = r.nvfp4_or_null()) {
    p.nvfp4_factor = 1.0f / (6.0f * static_cast<float>(nv->e4m3_max));
    p.torchao = profile_rules(r.profile).nvfp4_order == Nvfp4Order::kTorchAO;
    p.torchao_two_level = nv->per_tensor_scale;
  } else {
    p.e5m2 = r.fp8_type() == Fp8Type::kE5M2;
  }
  if (const Fp8BlockOptions* fb = r.fp8_block_or_null()) {
    p.tile2d = fb->tile_2d;
    p.ue8m0 = fb->ue8m0_scales;
  }
  p.out = out;
  p.y = y;
  detail::launch_dequantize(p, stream);
}

}  // namespace qtc::cuda
