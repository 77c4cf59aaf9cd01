/// \file te_peer.cpp
/// \brief TransformerEngine's C API driven through dlopen (te_peer.hpp). The declarations below are written
///        from the public API of transformer_engine/common/include/transformer_engine/{transformer_engine,cast,
///        recipe}.h (TE 2.x): enum values, the shape and basic-tensor structs, the function signatures.
#include "te_peer.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <type_traits>
#include <sstream>
#include <vector>

#include "qtc/cuda/check.hpp"
#include "qtc/error.hpp"

namespace qtc::bench {

namespace {

// ---- TE's C API, as declared by its public headers -------------------------------------------------------
using NVTETensor = void*;
using NVTEQuantizationConfig = void*;
struct NVTEShape {
  size_t data[15];
  size_t ndim;
};
enum NVTEDType : int { kNVTEFloat32 = 4, kNVTEFloat16 = 5, kNVTEBFloat16 = 6, kNVTEFloat8E4M3 = 7, kNVTEFloat8E5M2 = 8 };
struct NVTEBasicTensor {
  void* data_ptr;
  NVTEDType dtype;
  NVTEShape shape;
};
enum NVTETensorParam : int {
  kNVTERowwiseData = 0,
  kNVTEColumnwiseData = 1,
  kNVTEScale = 2,
  kNVTEAmax = 3,
  kNVTERowwiseScaleInv = 4,
  kNVTEColumnwiseScaleInv = 5,
};
enum NVTEScalingMode : int { NVTE_DELAYED_TENSOR_SCALING = 0, NVTE_BLOCK_SCALING_1D = 2, NVTE_BLOCK_SCALING_2D = 3 };
enum NVTEQuantizationConfigAttribute : int {
  kNVTEQuantizationConfigForcePow2Scales = 0,  // uint8_t
  kNVTEQuantizationConfigAmaxEpsilon = 1,      // float
};

NVTEShape shape(std::initializer_list<size_t> dims) {
  NVTEShape s{};
  for (size_t d : dims) s.data[s.ndim++] = d;
  return s;
}

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The recipe facts the peer needs (one place reads qtc::Recipe).
struct TeRecipe {
  bool tensor = false;  ///< FP8 per tensor (else FP8 block)
  bool block_2d = false;
  bool rowwise = true, columnwise = true;
  bool e5m2 = false, pow2 = false;
  float eps = 0.0f;
};

}  // namespace

struct TePeer::Api {
  void* nvrtc = nullptr;
  void* lib = nullptr;
  NVTETensor (*create_tensor)(NVTEScalingMode) = nullptr;
  void (*destroy_tensor)(NVTETensor) = nullptr;
  void (*set_tensor_param_v2)(NVTETensor, NVTETensorParam, const void*, size_t) = nullptr;
  NVTEQuantizationConfig (*create_config)() = nullptr;
  void (*set_config_attribute)(NVTEQuantizationConfig, NVTEQuantizationConfigAttribute, const void*, size_t) = nullptr;
  void (*destroy_config)(NVTEQuantizationConfig) = nullptr;
  void (*quantize_v2)(NVTETensor, NVTETensor, NVTEQuantizationConfig, cudaStream_t) = nullptr;
  void (*compute_amax_with_config)(NVTETensor, NVTETensor, NVTEQuantizationConfig, cudaStream_t) = nullptr;
  void (*compute_scale_from_amax)(NVTETensor, NVTEQuantizationConfig, cudaStream_t) = nullptr;
};

namespace {

TeRecipe te_recipe(const Recipe& r) {
  TeRecipe t;
  t.tensor = r.kind() == RecipeKind::kFP8Tensor;
  t.block_2d = r.kind() == RecipeKind::kFP8Block && r.is_2d();
  t.rowwise = r.rowwise;
  t.columnwise = r.columnwise;
  t.e5m2 = r.fp8_type() == Fp8Type::kE5M2;
  t.pow2 = r.pow2_scales();
  t.eps = r.eps();
  return t;
}

/// RAII holders of TE objects for one call.
struct Tensor {
  const TePeer::Api* api;
  NVTETensor t;
  Tensor(const TePeer::Api* a, NVTEScalingMode mode) : api(a), t(a->create_tensor(mode)) {}
  ~Tensor() { api->destroy_tensor(t); }
  void set(NVTETensorParam p, void* ptr, NVTEDType dt, NVTEShape sh) const {
    const NVTEBasicTensor b{ptr, dt, sh};
    api->set_tensor_param_v2(t, p, &b, sizeof(b));
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
};
struct Config {
  const TePeer::Api* api;
  NVTEQuantizationConfig c;
  explicit Config(const TePeer::Api* a) : api(a), c(a->create_config()) {}
  ~Config() { api->destroy_config(c); }
  Config(const Config&) = delete;
  Config& operator=(const Config&) = delete;
};

}  // namespace

TePeer* TePeer::instance() {
  static TePeer* peer = [] {
    const char* path = std::getenv("QTC_TE_LIB");
    return (path != nullptr && *path) ? new TePeer() : nullptr;
  }();
  return peer;
}

TePeer::TePeer() {
  const std::string path = std::getenv("QTC_TE_LIB");
  description_ = path;
  api_ = new Api();
  // NVRTC first, global: TE's undefined nvrtc* symbols bind to it.
  std::vector<std::string> nvrtc_names;
  if (const char* n = std::getenv("QTC_NVRTC_LIB"); n != nullptr && *n) nvrtc_names.emplace_back(n);
  for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) nvrtc_names.emplace_back(n);
  std::string nvrtc_err;
  for (const std::string& n : nvrtc_names) {
    api_->nvrtc = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (api_->nvrtc != nullptr) break;
    nvrtc_err += std::string(" ") + dlerror();
  }
  if (api_->nvrtc == nullptr) {
    error_ = "QTC_TE_LIB: NVRTC, which TE needs, could not be loaded (set QTC_NVRTC_LIB or LD_LIBRARY_PATH):" + nvrtc_err;
    return;
  }
  // Lazy binding: TE 2.20.2 also references cuBLASLt entry points newer than the cuBLAS 13.1 of the H200's image
  // (cublasLtGroupedMatrixLayoutInit_internal, for its grouped GEMM), which RTLD_NOW would refuse although the
  // quantizers never call them. The nvte_* symbols below are resolved (and checked) by dlsym.
  api_->lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (api_->lib == nullptr) {
    error_ = "QTC_TE_LIB=" + path + " could not be loaded: " + dlerror() +
             " (it needs cuDNN 9, cuBLAS, NCCL and the CUDA runtime on LD_LIBRARY_PATH)";
    return;
  }
  auto sym = [&](const char* name, auto& fn, bool required = true) {
    void* p = dlsym(api_->lib, name);
    if (p == nullptr && required && error_.empty()) error_ = "QTC_TE_LIB=" + path + " lacks " + name + " (not TE 2.x?)";
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  sym("nvte_create_tensor", api_->create_tensor);
  sym("nvte_destroy_tensor", api_->destroy_tensor);
  sym("nvte_set_tensor_param_v2", api_->set_tensor_param_v2);
  sym("nvte_create_quantization_config", api_->create_config);
  sym("nvte_set_quantization_config_attribute", api_->set_config_attribute);
  sym("nvte_destroy_quantization_config", api_->destroy_config);
  sym("nvte_quantize_v2", api_->quantize_v2);
  sym("nvte_compute_amax_with_config", api_->compute_amax_with_config);
  sym("nvte_compute_scale_from_amax", api_->compute_scale_from_amax);
}

std::string TePeer::unsupported_reason(const Recipe& r, DType input) const {
  if (!loaded()) return error_;
  if (input != DType::kBF16 && input != DType::kF16 && input != DType::kF32) return "input type not supported by TE";
  if (r.kind() == RecipeKind::kMXFP8 || r.kind() == RecipeKind::kNVFP4) {
    int dev = 0, major = 0, minor = 0;
    (void)cudaGetDevice(&dev);
    (void)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    (void)cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (major < 10)
      return "not supported on sm_" + std::to_string(10 * major + minor) +
             ": TE's MXFP8 and NVFP4 quantize kernels need sm_100 (on sm_90 its MXFP8 kernel writes nothing and "
             "its NVFP4 kernel fails or writes zero codes)";
    return "this peer drives TE's FP8 per-tensor and FP8 block quantizers only";
  }
  if (r.kind() != RecipeKind::kFP8Tensor && r.kind() != RecipeKind::kFP8Block) return "recipe not driven by this peer";
  if (r.profile != Profile::kTE) return "TE's kernels implement profile te only";
  if (r.kind() == RecipeKind::kFP8Block && !(r.rowwise || r.columnwise)) return "no plane requested";
  return {};
}

TeOutput TePeer::allocate(const Recipe& r, int64_t M, int64_t K, cudaStream_t s) const {
  const TeRecipe t = te_recipe(r);
  TeOutput o;
  const size_t n = static_cast<size_t>(M * K);
  if (t.rowwise) o.row_data = cuda::DeviceBuffer(n, s);
  if (t.columnwise) o.col_data = cuda::DeviceBuffer(n, s);
  if (t.tensor) {
    o.row_scale_rows = o.row_scale_cols = 1;
    o.col_scale_rows = o.col_scale_cols = 1;
    o.amax = cuda::DeviceBuffer(sizeof(float), s);
    o.scale = cuda::DeviceBuffer(sizeof(float), s);
  } else if (t.block_2d) {  // Float8BlockQuantizer::get_scale_shape, GEMM_READY
    o.row_scale_rows = ceil_div(M, 128);
    o.row_scale_cols = round_up(ceil_div(K, 128), 4);
    o.col_scale_rows = ceil_div(K, 128);
    o.col_scale_cols = round_up(ceil_div(M, 128), 4);
  } else {
    o.row_scale_rows = ceil_div(K, 128);
    o.row_scale_cols = round_up(M, 4);
    o.col_scale_rows = ceil_div(M, 128);
    o.col_scale_cols = round_up(K, 4);
  }
  if (t.rowwise || t.tensor)
    o.row_scale_inv = cuda::DeviceBuffer(static_cast<size_t>(o.row_scale_rows * o.row_scale_cols) * sizeof(float), s);
  if (t.columnwise && !t.tensor)
    o.col_scale_inv = cuda::DeviceBuffer(static_cast<size_t>(o.col_scale_rows * o.col_scale_cols) * sizeof(float), s);
  return o;
}

void TePeer::store_amax(TeOutput& o, float amax, cudaStream_t s) {
  QTC_CHECK(o.amax.bytes() == sizeof(float), "TE peer: this output has no per-tensor amax");
  QTC_CUDA_CHECK(cudaMemcpyAsync(o.amax.data(), &amax, sizeof(float), cudaMemcpyHostToDevice, s));
  QTC_CUDA_CHECK(cudaStreamSynchronize(s));
}

void TePeer::quantize(const Recipe& r, const void* x, DType input, int64_t M, int64_t K, TeOutput& o, bool amax_given,
                      cudaStream_t s) const {
  QTC_CHECK(loaded(), error_);
  const std::string why = unsupported_reason(r, input);
  QTC_CHECK(why.empty(), "TE peer: ", why);
  const TeRecipe t = te_recipe(r);
  const size_t m = static_cast<size_t>(M), k = static_cast<size_t>(K);
  const NVTEDType in_dt = input == DType::kBF16 ? kNVTEBFloat16 : (input == DType::kF16 ? kNVTEFloat16 : kNVTEFloat32);
  const NVTEDType out_dt = t.e5m2 ? kNVTEFloat8E5M2 : kNVTEFloat8E4M3;
  try {
    Tensor in(api_, NVTE_DELAYED_TENSOR_SCALING);
    in.set(kNVTERowwiseData, const_cast<void*>(x), in_dt, shape({m, k}));
    Config cfg(api_);
    const uint8_t pow2 = t.pow2 ? 1 : 0;
    api_->set_config_attribute(cfg.c, kNVTEQuantizationConfigForcePow2Scales, &pow2, sizeof(pow2));
    api_->set_config_attribute(cfg.c, kNVTEQuantizationConfigAmaxEpsilon, &t.eps, sizeof(t.eps));
    if (t.tensor) {
      // Float8CurrentScalingQuantizer: data [M, K] and its transpose [K, M], one scale_inv for both.
      Tensor out(api_, NVTE_DELAYED_TENSOR_SCALING);
      if (t.rowwise) {
        out.set(kNVTERowwiseData, o.row_data.data(), out_dt, shape({m, k}));
        out.set(kNVTERowwiseScaleInv, o.row_scale_inv.data(), kNVTEFloat32, shape({1}));
      }
      if (t.columnwise) {
        out.set(kNVTEColumnwiseData, o.col_data.data(), out_dt, shape({k, m}));
        out.set(kNVTEColumnwiseScaleInv, o.row_scale_inv.data(), kNVTEFloat32, shape({1}));
      }
      out.set(kNVTEScale, o.scale.data(), kNVTEFloat32, shape({1}));
      out.set(kNVTEAmax, o.amax.data(), kNVTEFloat32, shape({1}));
      if (!amax_given)  // quantize_with_amax: the producer left the amax in o.amax (store_amax)
        api_->compute_amax_with_config(in.t, out.t, cfg.c, s);
      api_->compute_scale_from_amax(out.t, cfg.c, s);
      out.set(kNVTEAmax, nullptr, kNVTEFloat32, shape({1}));  // no atomic amax update in the cast
      api_->quantize_v2(in.t, out.t, cfg.c, s);
    } else {
      // Float8BlockQuantizer (GEMM_READY): data [M, K] and [K, M], F32 scale_inv in TE's GEMM-ready shapes.
      Tensor out(api_, t.block_2d ? NVTE_BLOCK_SCALING_2D : NVTE_BLOCK_SCALING_1D);
      if (t.rowwise) {
        out.set(kNVTERowwiseData, o.row_data.data(), out_dt, shape({m, k}));
        out.set(kNVTERowwiseScaleInv, o.row_scale_inv.data(), kNVTEFloat32,
                shape({static_cast<size_t>(o.row_scale_rows), static_cast<size_t>(o.row_scale_cols)}));
      }
      if (t.columnwise) {
        out.set(kNVTEColumnwiseData, o.col_data.data(), out_dt, shape({k, m}));
        out.set(kNVTEColumnwiseScaleInv, o.col_scale_inv.data(), kNVTEFloat32,
                shape({static_cast<size_t>(o.col_scale_rows), static_cast<size_t>(o.col_scale_cols)}));
      }
      api_->quantize_v2(in.t, out.t, cfg.c, s);
    }
  } catch (const std::exception& e) {
    throw Error(std::string("TransformerEngine: ") + e.what());
  }
}

namespace {

std::vector<uint8_t> to_host(const void* p, size_t n, cudaStream_t s) {
  std::vector<uint8_t> h(n);
  if (n > 0) QTC_CUDA_CHECK(cudaMemcpyAsync(h.data(), p, n, cudaMemcpyDeviceToHost, s));
  return h;
}

std::string first_diff(const char* what, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) {
    std::ostringstream os;
    os << what << ": qtc has " << a.size() << " bytes, TE " << b.size();
    return os.str();
  }
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) {
      std::ostringstream os;
      os << what << ": first difference at byte " << i << " (qtc 0x" << std::hex << int{a[i]} << ", TE 0x" << int{b[i]}
         << ")";
      return os.str();
    }
  return {};
}

}  // namespace

std::string compare_with_te(const cuda::DeviceQuantized& q, const TeOutput& o, cudaStream_t s) {
  std::vector<std::pair<const char*, std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>> parts;
  const bool tensor = q.recipe.kind() == RecipeKind::kFP8Tensor;
  if (q.rowwise) {
    parts.push_back({"rowwise data", {to_host(q.rowwise->data.data(), q.rowwise->data.bytes(), s),
                                      to_host(o.row_data.data(), o.row_data.bytes(), s)}});
    if (!tensor)
      parts.push_back({"rowwise scale_inv", {to_host(q.rowwise->scale.data(), q.rowwise->scale.bytes(), s),
                                             to_host(o.row_scale_inv.data(), o.row_scale_inv.bytes(), s)}});
  }
  if (q.columnwise) {
    parts.push_back({"columnwise data", {to_host(q.columnwise->data.data(), q.columnwise->data.bytes(), s),
                                         to_host(o.col_data.data(), o.col_data.bytes(), s)}});
    if (!tensor)
      parts.push_back({"columnwise scale_inv", {to_host(q.columnwise->scale.data(), q.columnwise->scale.bytes(), s),
                                                to_host(o.col_scale_inv.data(), o.col_scale_inv.bytes(), s)}});
  }
  if (tensor)
    parts.push_back({"scale_inv", {to_host(q.scale_inv.data(), q.scale_inv.bytes(), s),
                                   to_host(o.row_scale_inv.data(), o.row_scale_inv.bytes(), s)}});
  QTC_CUDA_CHECK(cudaStreamSynchronize(s));
  for (const auto& [what, ab] : parts)
    if (std::string d = first_diff(what, ab.first, ab.second); !d.empty()) return d;
  return {};
}

}  // namespace qtc::bench
