/// \file device_verify_hybrid.cpp
/// \brief verify_on_device (qtc/cuda/verify.hpp) for recipe=hybrid: verify_hybrid_vector's steps (conformance/src/
///        verify_hybrid.cpp) on device memory. The tensors are split into one vector per plane, each verified by
///        verify_plain_on_device; the columnwise vector's input is x or, under rowwise_dequantized, the rowwise plane
///        quantized and dequantized by the kernels on the device (as the CUDA backend composes them on the host
///        path), which the file's columnwise_source, when present, is compared with there. Same checks, order and
///        texts as the host (the shared ones from qtc/verify.hpp).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "device_verify.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/compare.hpp"
#include "qtc/cuda/quantize.hpp"
#include "qtc/footprint.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/untrusted.hpp"

namespace qtc::cuda::detail {

namespace {

namespace cv = qtc::conformance;

DeviceElem float_elem(DType d) { return d == DType::kF32 ? DeviceElem::kF32 : d == DType::kBF16 ? DeviceElem::kBF16 : DeviceElem::kF16; }

}  // namespace

cv::FileResult verify_hybrid_on_device(const std::vector<DeviceTensor>& tensors, const std::map<std::string, std::string>& md,
                                       const std::string& source, const cv::VerifyOptions& opts, cudaStream_t s, int device) {
  cv::FileResult res;
  res.path = source;
  res.backend = "cuda";
  auto finish = [&](cv::Verdict v, const std::string& msg) {
    res.verdict = v;
    res.message = printable_text(clean_message(msg));
    return res;
  };
  auto error = [&](const std::string& msg) { return finish(cv::Verdict::kError, msg); };
  try {
    HybridRecipe h;
    if (std::string why = cv::read_hybrid_recipe(md, h, res); !why.empty()) return error(why);

    const DeviceTensor* xt = nullptr;
    for (const DeviceTensor& t : tensors)
      if (t.name == "x") xt = &t;
    if (xt == nullptr) return error("missing required tensor 'x' (the input)");
    std::vector<DeviceTensor> part[2] = {{*xt}, {*xt}};
    const DeviceTensor* src_t = nullptr;
    for (const DeviceTensor& t : tensors) {
      if (t.name == "x") continue;
      if (t.name == "columnwise_source") {
        if (h.source != ColumnwiseSource::kRowwiseDequantized)
          return error("tensor 'columnwise_source' is the dequantized rowwise plane; this file has columnwise_source=original");
        src_t = &t;
        continue;
      }
      const auto where = cv::hybrid_tensor_plane(t.name);
      if (!where) return error(cv::not_a_hybrid_output_text(t.name));
      DeviceTensor copy = t;
      copy.name = where->second;
      part[where->first == PlaneKind::kRowwise ? 0 : 1].push_back(std::move(copy));
    }
    const bool any_row = part[0].size() > 1, any_col = part[1].size() > 1 || src_t != nullptr;
    if (!any_row && !any_col) return error("no expected output (the file holds only the input; VECTORS.md, Tensors)");
    if (xt->shape.size() != 2)
      return error("tensor 'x' has shape of rank " + std::to_string(xt->shape.size()) + "; VECTORS.md needs 2-D [M, K]");
    if (xt->dtype != "F32" && xt->dtype != "BF16" && xt->dtype != "F16")
      return error("tensor 'x' has dtype " + xt->dtype + "; VECTORS.md allows F32, BF16 or F16");
    const DType xd = xt->dtype == "BF16" ? DType::kBF16 : xt->dtype == "F16" ? DType::kF16 : DType::kF32;
    const int64_t M = xt->shape[0], K = xt->shape[1];
    try {
      h.validate_input(xd, M, K);
    } catch (const Error& e) {
      return error(e.what());
    }
    std::map<std::string, std::string> part_md[2] = {cv::hybrid_part_metadata(h, PlaneKind::kRowwise, md),
                                                     cv::hybrid_part_metadata(h, PlaneKind::kColumnwise, md)};

    std::optional<DeviceGuard> guard;  // declared before the buffers: they are freed on the tensors' device
    DeviceBuffer src;                  // the columnwise source (rowwise_dequantized)
    DeviceBuffer scales;               // grouped columnwise scales, compact
    auto use_device = [&]() -> std::optional<std::string> {
      if (guard) return std::nullopt;
      try {
        guard.emplace(device);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::nullopt;
    };

    std::vector<cv::FileResult> results;
    std::vector<PlaneKind> plane_of;
    if (any_row) {
      results.push_back(verify_plain_on_device(part[0], part_md[0], source, opts, s, device));
      plane_of.push_back(PlaneKind::kRowwise);
    }
    if (any_col && h.source == ColumnwiseSource::kRowwiseDequantized) {
      // The columnwise input: the rowwise plane quantized and dequantized by the kernels, on the device.
      if (auto why = use_device()) return error(*why);
      const Recipe rr = h.plane_recipe(PlaneKind::kRowwise);
      const DType sd = h.source_dtype_for(xd);
      try {
        check_quantize_resources(rr, xd, M, K, true);
      } catch (const Error& e) {
        return error(e.what());
      }
      if (const std::string why = unsupported_reason(rr, xd, M, K); !why.empty())
        return finish(cv::Verdict::kSkipped, "rowwise plane (the columnwise source): " + why);
      try {
        const DeviceQuantized q = quantize({xt->data, xd, M, K}, rr, s, Layout::kCompact);
        src = DeviceBuffer(static_cast<size_t>(M * K) * dtype_size(sd), s);
        if (M * K > 0) dequantize(q, PlaneKind::kRowwise, sd, src.data(), s);
        QTC_CUDA_CHECK(cudaStreamSynchronize(s));  // q's buffers are freed (stream-ordered) when it goes out of scope
      } catch (const Error& e) {
        return error(std::string("columnwise source: ") + e.what());
      }
      if (src_t != nullptr) {
        res.checked.push_back("columnwise_source");
        if (src_t->dtype != dtype_name(sd) || src_t->shape != std::vector<int64_t>{M, K})
          return error(cv::columnwise_source_shape_text(sd, M, K, src_t->dtype, src_t->shape.size()));
        const DeviceMismatch m = compare_on_device(float_elem(sd), src.data(), src_t->data, M, K, nullptr, true, s);
        if (m.count > 0) {
          uint8_t v[4] = {0, 0, 0, 0};
          const size_t es = dtype_size(sd);
          QTC_CUDA_CHECK(cudaMemcpyAsync(v, static_cast<const uint8_t*>(src.data()) + m.first * static_cast<int64_t>(es), es,
                                         cudaMemcpyDeviceToHost, s));
          QTC_CUDA_CHECK(cudaStreamSynchronize(s));
          finish(cv::Verdict::kFail, cv::columnwise_source_mismatch_text(m.count, M * K, m.first / K, m.first % K,
                                                                          MatrixView{v, sd, 1, 1}.at(0, 0), "cuda"));
          res.details.push_back(res.message);
          return res;
        }
      }
      part[1][0] = DeviceTensor{"x", std::string(dtype_name(sd)), {M, K}, src.data(), src.bytes()};
    }
    // A grouped vector in TE's layout: each group's columnwise scales swizzled on their own; the columnwise vector
    // gets them compact. The conversion is the reference's (a permutation of the scale bytes, 1/32 of the data's
    // size), so those bytes make one round trip through the host.
    if (!h.group_rows.empty()) {
      try {
        const Layout lo = ref::layout_from_metadata(md);
        if (lo != Layout::kCompact) {
          ref::check_grouped_layout(h, M, K, lo);
          for (DeviceTensor& t : part[1])
            if (t.name == "columnwise_scale_inv") {
              if (!io::is_byte_dtype(t.dtype)) return error("tensor 'columnwise_scale_inv' has dtype " + t.dtype + ", expected a byte type");
              if (auto why = use_device()) return error(*why);
              std::vector<uint8_t> bytes(t.nbytes);
              if (!bytes.empty()) QTC_CUDA_CHECK(cudaMemcpyAsync(bytes.data(), t.data, t.nbytes, cudaMemcpyDeviceToHost, s));
              QTC_CUDA_CHECK(cudaStreamSynchronize(s));
              const std::vector<uint8_t> compact = ref::grouped_columnwise_scales_to_compact(h, M, K, lo, bytes);
              scales = DeviceBuffer(compact.size(), s);
              if (!compact.empty())
                QTC_CUDA_CHECK(cudaMemcpyAsync(scales.data(), compact.data(), compact.size(), cudaMemcpyHostToDevice, s));
              QTC_CUDA_CHECK(cudaStreamSynchronize(s));  // `compact` goes out of scope
              t.data = scales.data();
              t.nbytes = compact.size();
              t.shape = {M / 32, K};
            }
          part_md[1].erase("layout");
          part_md[1].erase("swizzled");
        }
      } catch (const Error& e) {
        return error(e.what());
      }
    }
    if (part[1].size() > 1) {
      results.push_back(verify_plain_on_device(part[1], part_md[1], source, opts, s, device));
      plane_of.push_back(PlaneKind::kColumnwise);
    }
    cv::join_hybrid_results(res, h, results, plane_of);
    return res;
  } catch (const std::exception& e) {
    return error(std::string("internal error: ") + e.what());
  }
}

}  // namespace qtc::cuda::detail
