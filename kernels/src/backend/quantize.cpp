/// \file quantize.cpp
/// \brief Host side of the CUDA quantizers: output allocation (the reference's plane shapes), the amax passes,
///        kernel dispatch, and copies between host and device. Nothing here synchronizes with the host except
///        to_host / from_host.
#include <cfloat>
#include <cstring>
#include <vector>

#include "kind_launch.hpp"
#include "launch.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/gating.hpp"
#include "qtc/kind.hpp"
#include "qtc/layouts.hpp"
#include "qtc/path_rules.hpp"
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

void detail::copy_f32(float* dst, const float* src, cudaStream_t s) {
  if (dst != src) QTC_CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float), cudaMemcpyDeviceToDevice, s));
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

/// Where compact entry (r, c) of a plane's scales lives in the plane's layout (the kernel-facing ScaleOut,
/// filled from the recipe policy's description of the plane).
detail::ScaleOut scale_out(const DevicePlane& pl, const PlaneSpec& spec) {
  return detail::ScaleOut{.p = pl.scale.as<uint8_t>(), .geom = spec.geometry(pl.scale_layout)};
}

/// The recipe's FP8 data type (MXFP8, FP8 block, FP8 tensor); E4M3 for the kinds whose data is E2M1 (unused there).
Fp8Type fp8_type_of(const Recipe& r) { return kind_info(r).e2m1_data ? Fp8Type::kE4M3 : r.fp8_type(); }

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

/// The profile rules the CUDA kernels implement besides te's values (path_rules.hpp): the one check the vectorized
/// CPU path makes too, with its own PathRules. The kernels read each rule under its name (detail::KernelRules).
constexpr PathRules kCudaRules{
    .path = "the CUDA kernels", .nvfp4_order_torchao = true, .mx_order_torchao = true, .mx_order_triton_kernels = true,
    .mx_order_fbgemm = true, .mx_order_quark = true};

/// Throws qtc::Error naming the profile rule the kernels do not implement (no silent run of another rule).
void check_rules(const Recipe& r, const char* what) {
  const std::string rule = unimplemented_rule(r, kCudaRules);
  QTC_CHECK(rule.empty(), what, ": ", rule, "; recipe ", r.name(), " runs on the CPU reference");
}

/// The profile's rules the kernels read, by name.
detail::KernelRules kernel_rules(const ProfileRules& pr) {
  return {.nan_amax = pr.nan_amax,
          .nvfp4_order = pr.nvfp4_order,
          .nvfp4_neg_zero_positive = pr.nvfp4_neg_zero_positive,
          .nvfp4_nan_scale = pr.nvfp4_nan_scale,
          .nvfp4_tiny_block_floor = pr.nvfp4_tiny_block_floor,
          .mx_order = pr.mx_order,
          .mx_nonfinite = pr.mx_nonfinite,
          .fp8_inf_amax_scale_zero = pr.fp8_inf_amax_scale_zero,
          .fp8_scale_reciprocal = pr.fp8_scale_reciprocal};
}

/// The options of kind T when the recipe's alternative is T, else T's defaults.
template <typename T>
T alternative(const RecipeOptions& o) {
  const T* p = std::get_if<T>(&o);
  return p != nullptr ? *p : T{};
}

/// The one place a quantize call's arguments are built: the input, the two plane descriptions (describe_plane), the
/// recipe's options alternative, the profile's rules and the launch choices.
detail::QuantizeArgs make_quantize_args(const DeviceMatrixView& x, DeviceQuantized& out, const LaunchOptions& launch) {
  const Recipe& r = out.recipe;
  const int64_t M = x.rows, K = x.cols;
  DevicePlane* rp = out.rowwise ? &*out.rowwise : nullptr;
  DevicePlane* cp = out.columnwise ? &*out.columnwise : nullptr;
  const PlaneSpec rs = describe_plane(r, PlaneKind::kRowwise, M, K), cs = describe_plane(r, PlaneKind::kColumnwise, M, K);
  const RecipeOptions opts = r.options();
  float* ws = out.workspace.as<float>();  // the amaxes no plane holds
  // NVFP4: rowwise amax [1] or [M], columnwise [1] or [K]; FP8 tensor: the global amax in the first plane's buffer.
  float* ar = rp ? rp->amax.as<float>() : (kind_info(r).per_tensor_scale && cp ? cp->amax.as<float>() : ws);
  float* ac = cp ? cp->amax.as<float>() : ws + 1;
  return {.x = x.data,
          .dtype = x.dtype,
          .M = M,
          .K = K,
          .vec_ok = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && (K * static_cast<int64_t>(dtype_size(x.dtype))) % 16 == 0,
          .kind = r.kind(),
          .fp8 = fp8_type_of(r),
          .per_tensor = kind_info(r).per_tensor_scale,
          .nvfp4 = alternative<Nvfp4Options>(opts),
          .mxfp8 = alternative<Mxfp8Options>(opts),
          .fp8_block = alternative<Fp8BlockOptions>(opts),
          .fp8_tensor = alternative<Fp8TensorOptions>(opts),
          .mxfp4 = alternative<Mxfp4Options>(opts),
          .rules = kernel_rules(profile_rules(r.profile)),
          .rowwise = rp != nullptr,
          .columnwise = cp != nullptr,
          .row_data = rp ? rp->data.as<uint8_t>() : nullptr,
          .row_scale = rp && !rs.per_tensor ? scale_out(*rp, rs) : detail::ScaleOut{},
          .col_data = cp ? cp->data.as<uint8_t>() : nullptr,
          .col_scale = cp && !cs.per_tensor ? scale_out(*cp, cs) : detail::ScaleOut{},
          .amax_row = ar,
          .amax_col = ac,
          .scale_inv = out.scale_inv.as<float>(),
          .value_for_inf = dtype_max(x.dtype),
          .launch = launch};
}

void check_input(const DeviceMatrixView& x, const DeviceQuantized& out) {
  QTC_CHECK(x.dtype == out.input_dtype && x.rows == out.rows && x.cols == out.cols, "quantize_into: input [", x.rows,
            ", ", x.cols, "] ", dtype_name(x.dtype), " does not match the allocated output [", out.rows, ", ", out.cols,
            "] ", dtype_name(out.input_dtype));
  QTC_CHECK(x.data != nullptr || x.rows * x.cols == 0, "quantize_into: input has no data");
}

void check_launch(const LaunchOptions& l) {
  QTC_CHECK(l.nvfp4_stages == 0 || l.nvfp4_stages == 2 || l.nvfp4_stages == 3,
            "LaunchOptions.nvfp4_stages: the fast NVFP4 kernel has 2 or 3 shared-memory stages (0: the default), got ", l.nvfp4_stages);
  QTC_CHECK(l.nvfp4_strip >= 0 && l.nvfp4_strip <= 64,
            "LaunchOptions.nvfp4_strip: strips of 1..64 tiles (0: the default), got ", l.nvfp4_strip);
}


void quantize_impl(const DeviceMatrixView& x, DeviceQuantized& out, const float* host_amax, cudaStream_t s,
                   const LaunchOptions& launch) {
  check_input(x, out);
  check_launch(launch);
  const Recipe& r = out.recipe;
  check_rules(r, "quantize");
  const detail::QuantizeArgs a = make_quantize_args(x, out, launch);
  for (const std::optional<DevicePlane>* p : {&out.rowwise, &out.columnwise})
    if (p->has_value() && (*p)->scale_layout != ScaleLayout::kCompact && (*p)->scale.bytes() > 0)
      QTC_CUDA_CHECK(cudaMemsetAsync((*p)->scale.data(), 0, (*p)->scale.bytes(), s));  // padding reads as zero
  detail::cuda_kind_module(a.kind).quantize(a, out, host_amax, s);  // the kind's amax passes and kernels
}

}  // namespace

std::string unsupported_reason(const Recipe& r, DType input, int64_t rows, int64_t cols) {
  try {
    r.validate_input(input, rows, cols);
  } catch (const Error& e) {
    return e.what();
  }
  if (const std::string rule = unimplemented_rule(r, kCudaRules); !rule.empty()) return rule + " (it runs on the CPU reference)";
  const detail::CudaKindModule& kind = detail::cuda_kind_module(r.kind());
  if (const std::string why = kind.unsupported(r, rows); !why.empty()) return why;
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
  kind.gating_features(r, features);
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

void quantize_into(const DeviceMatrixView& x, DeviceQuantized& out, cudaStream_t stream, const LaunchOptions& launch) {
  quantize_impl(x, out, nullptr, stream, launch);
}

void quantize_with_amax_into(const DeviceMatrixView& x, DeviceQuantized& out, float amax_rowwise,
                             float amax_columnwise, cudaStream_t stream, const LaunchOptions& launch) {
  const Recipe& r = out.recipe;
  QTC_CHECK(kind_info(r).global_amax, "quantize_with_amax: recipe ", r.name(),
            " has no global amax (NVFP4 and FP8 tensor only)");
  const float a[2] = {amax_rowwise, amax_columnwise};
  quantize_impl(x, out, a, stream, launch);
}

DeviceQuantized quantize(const DeviceMatrixView& x, const Recipe& r, cudaStream_t stream, ScaleLayout layout,
                         const LaunchOptions& launch) {
  DeviceQuantized q = allocate_quantized(r, x.dtype, x.rows, x.cols, layout, stream);
  quantize_into(x, q, stream, launch);
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
  check_rules(r, "dequantize");
  const PlaneSpec spec = describe_plane(r, pk, q.rows, q.cols);
  const RecipeOptions opts = r.options();
  const detail::DequantizeArgs p{.kind = r.kind(),
                                 .fp8 = fp8_type_of(r),
                                 .columnwise = col,
                                 .M = q.rows,
                                 .K = q.cols,
                                 .data = pl->data.as<uint8_t>(),
                                 .scale = pl->scale.as<uint8_t>(),
                                 .scale_layout = spec.per_tensor ? detail::ScaleOut{} : scale_out(*pl, spec),
                                 .amax = spec.per_tensor ? q.scale_inv.as<float>() : pl->amax.as<float>(),
                                 .per_row_amax = spec.amax_per_line && pl->amax_count > 1,
                                 .nvfp4 = alternative<Nvfp4Options>(opts),
                                 .mxfp8 = alternative<Mxfp8Options>(opts),
                                 .fp8_block = alternative<Fp8BlockOptions>(opts),
                                 .fp8_tensor = alternative<Fp8TensorOptions>(opts),
                                 .nvfp4_order = profile_rules(r.profile).nvfp4_order,
                                 .out = out,
                                 .y = y};
  detail::cuda_kind_module(r.kind()).dequantize(p, stream);
}

}  // namespace qtc::cuda
