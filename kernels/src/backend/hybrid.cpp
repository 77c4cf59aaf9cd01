/// \file hybrid.cpp
/// \brief Hybrid planes on the device (qtc/cuda/hybrid.hpp): quantize rowwise, dequantize on the device, quantize
///        columnwise, with the kernels every other recipe uses.
#include "qtc/cuda/hybrid.hpp"

#include "qtc/cuda/check.hpp"

namespace qtc::cuda {

std::string unsupported_reason(const HybridRecipe& h, DType input, int64_t rows, int64_t cols) {
  try {
    h.validate_input(input, rows, cols);
  } catch (const Error& e) {
    return e.what();
  }
  if (std::string why = unsupported_reason(h.plane_recipe(PlaneKind::kRowwise), input, rows, cols); !why.empty())
    return "rowwise plane: " + why;
  if (std::string why = unsupported_reason(h.plane_recipe(PlaneKind::kColumnwise), h.source_dtype_for(input), rows, cols);
      !why.empty())
    return "columnwise plane: " + why;
  return {};
}

DeviceHybrid quantize_hybrid(const DeviceMatrixView& x, const HybridRecipe& h, cudaStream_t stream, ScaleLayout layout) {
  HybridRecipe one = h;
  one.group_rows.clear();
  one.validate_input(x.dtype, x.rows, x.cols);
  DeviceHybrid d;
  d.rowwise = quantize(x, h.plane_recipe(PlaneKind::kRowwise), stream, layout);
  if (h.source == ColumnwiseSource::kOriginal) {
    d.columnwise = quantize(x, h.plane_recipe(PlaneKind::kColumnwise), stream, layout);
    d.source_dtype = x.dtype;
    return d;
  }
  // The dequantize kernels read compact scales: dequantize from a compact rowwise plane when the caller asked for
  // another layout (the bits of the plane do not depend on the layout of its scales).
  d.source_dtype = h.source_dtype_for(x.dtype);
  d.source = DeviceBuffer(static_cast<size_t>(x.rows * x.cols) * dtype_size(d.source_dtype), stream);
  if (layout == ScaleLayout::kCompact) {
    dequantize(d.rowwise, PlaneKind::kRowwise, d.source_dtype, d.source.data(), stream);
  } else {
    const DeviceQuantized compact = quantize(x, h.plane_recipe(PlaneKind::kRowwise), stream, ScaleLayout::kCompact);
    dequantize(compact, PlaneKind::kRowwise, d.source_dtype, d.source.data(), stream);
    QTC_CUDA_CHECK(cudaStreamSynchronize(stream));  // `compact` is freed (stream-ordered) when it goes out of scope
  }
  d.columnwise = quantize({d.source.data(), d.source_dtype, x.rows, x.cols}, h.plane_recipe(PlaneKind::kColumnwise),
                          stream, layout);
  return d;
}

std::vector<DeviceHybrid> quantize_hybrid_grouped(const DeviceMatrixView& x, const HybridRecipe& h, cudaStream_t stream,
                                                  ScaleLayout layout) {
  h.validate_input(x.dtype, x.rows, x.cols);
  std::vector<DeviceHybrid> out;
  int64_t row = 0;
  for (int64_t n : h.group_rows.empty() ? std::vector<int64_t>{x.rows} : h.group_rows) {
    if (n == 0) {
      DeviceHybrid e;
      e.rowwise.recipe = h.plane_recipe(PlaneKind::kRowwise);
      e.columnwise.recipe = h.plane_recipe(PlaneKind::kColumnwise);
      e.rowwise.input_dtype = e.columnwise.input_dtype = x.dtype;
      e.rowwise.cols = e.columnwise.cols = x.cols;
      out.push_back(std::move(e));
      continue;
    }
    const DeviceMatrixView part{static_cast<const uint8_t*>(x.data) + row * x.cols * static_cast<int64_t>(dtype_size(x.dtype)),
                                x.dtype, n, x.cols};
    out.push_back(quantize_hybrid(part, h, stream, layout));
    row += n;
  }
  return out;
}

HybridQuantized to_host(const DeviceHybrid& d, cudaStream_t stream) {
  HybridQuantized h;
  if (d.rowwise.rows == 0) {  // a zero-row group: no planes
    for (QuantizedTensor* q : {&h.rowwise, &h.columnwise}) {
      const DeviceQuantized& dq = q == &h.rowwise ? d.rowwise : d.columnwise;
      q->recipe = dq.recipe;
      q->input_dtype = dq.input_dtype;
      q->cols = dq.cols;
    }
    return h;
  }
  h.rowwise = to_host(d.rowwise, stream);
  h.columnwise = to_host(d.columnwise, stream);
  if (d.source.data() != nullptr) {
    HostMatrix s(d.source_dtype, d.rowwise.rows, d.rowwise.cols);
    if (!s.bytes.empty())
      QTC_CUDA_CHECK(cudaMemcpyAsync(s.bytes.data(), d.source.data(), s.bytes.size(), cudaMemcpyDeviceToHost, stream));
    QTC_CUDA_CHECK(cudaStreamSynchronize(stream));
    h.source = std::move(s);
  }
  return h;
}

}  // namespace qtc::cuda
