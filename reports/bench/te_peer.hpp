/// \file te_peer.hpp
/// \brief TransformerEngine's CUDA quantizers as a peer of bench_quantize_cuda, loaded at run time: when the
///        environment variable QTC_TE_LIB names TE's core library (libtransformer_engine.so of the PyPI wheel
///        transformer-engine-cu13), its C API (nvte_*) is resolved with dlopen/dlsym; no TE header or library
///        is needed to build. The calls are the ones TE's PyTorch layer makes (transformer_engine/pytorch/csrc/
///        quantizer.cpp): FP8 per-tensor current scaling = nvte_compute_amax_with_config,
///        nvte_compute_scale_from_amax, nvte_quantize_v2 (the amax-given variant skips the first); FP8 block
///        scaling (1x128, 128x128) = nvte_quantize_v2 with TE's GEMM-ready scale layout.
///
/// TE leaves the nvrtc* symbols undefined (its PyTorch package loads NVRTC first), so the loader opens NVRTC
/// with RTLD_GLOBAL before TE: QTC_NVRTC_LIB, else libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so. TE itself is opened
/// with lazy binding (te_peer.cpp says why).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "qtc/cuda/quantize.hpp"

namespace qtc::bench {

/// Output buffers of one TE quantization, shaped as TE's PyTorch layer allocates them (Hopper: columnwise data
/// transposed, [K, M]).
struct TeOutput {
  cuda::DeviceBuffer row_data, col_data;            ///< FP8 bytes, [M, K] and [K, M]
  cuda::DeviceBuffer row_scale_inv, col_scale_inv;  ///< float: per tensor 1; block: TE's GEMM-ready shapes
  cuda::DeviceBuffer amax, scale;                   ///< per tensor: one float each
  int64_t row_scale_rows = 0, row_scale_cols = 0, col_scale_rows = 0, col_scale_cols = 0;
};

class TePeer {
 public:
  /// The process-wide peer: nullptr when QTC_TE_LIB is unset; otherwise loaded once (load_error() says why
  /// it failed, and quantize refuses).
  static TePeer* instance();
  const std::string& load_error() const { return error_; }
  bool loaded() const { return error_.empty(); }
  /// The library path.
  const std::string& description() const { return description_; }

  /// Empty when TE has a kernel for (recipe, input) on this device that this peer drives; else the reason
  /// (e.g. "TE's MXFP8 and NVFP4 quantizers need sm_100 (this card is sm_90)").
  std::string unsupported_reason(const Recipe& r, DType input) const;

  /// Allocates TE's outputs for an M x K input of recipe r.
  TeOutput allocate(const Recipe& r, int64_t M, int64_t K, cudaStream_t s) const;
  /// FP8 per tensor: puts a producer's amax into o (for quantize with amax_given). Synchronizes the stream.
  static void store_amax(TeOutput& o, float amax, cudaStream_t s);
  /// One quantization of x (device, row-major [M, K]) into o, stream-ordered. amax_given (FP8 per tensor): the
  /// amax in o.amax is used as it is (TE's quantize_with_amax path: no amax pass). Throws qtc::Error with TE's
  /// message on failure.
  void quantize(const Recipe& r, const void* x, DType input, int64_t M, int64_t K, TeOutput& o, bool amax_given,
                cudaStream_t s) const;

  TePeer(const TePeer&) = delete;
  TePeer& operator=(const TePeer&) = delete;

  struct Api;  ///< the resolved nvte_* entry points (te_peer.cpp)

 private:
  TePeer();
  Api* api_ = nullptr;
  std::string error_;
  std::string description_;
};

/// Byte-for-byte comparison of qtc's result (scales in TE's GEMM-ready layout: ScaleLayout::kPadded) with TE's:
/// data planes, scale planes, and for FP8 per tensor the scale_inv. Returns "" when equal, else where the first
/// difference is.
std::string compare_with_te(const cuda::DeviceQuantized& q, const TeOutput& o, cudaStream_t s);

}  // namespace qtc::bench
