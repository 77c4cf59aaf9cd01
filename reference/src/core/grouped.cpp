/// \file grouped.cpp
/// \brief Grouped tensors, grouped quantization and the grouped row-scaled NVFP4 GEMM (grouped.hpp).
#include "qtc/grouped.hpp"

#include <cstring>

#include "qtc/quantize.hpp"

namespace qtc::ref {

int64_t GroupedRows::row_offset(int64_t g) const {
  if (tensor_offsets.empty()) {
    int64_t r = 0;
    for (int64_t i = 0; i < g; ++i) r += first_dims[static_cast<size_t>(i)];
    return r;
  }
  return tensor_offsets[static_cast<size_t>(g)] / last_dim;
}

void GroupedRows::validate() const {
  QTC_CHECK(last_dim > 0, "grouped tensor: last_dim must be positive, got ", last_dim);
  QTC_CHECK(tensor_offsets.empty() || tensor_offsets.size() == first_dims.size(), "grouped tensor: ",
            tensor_offsets.size(), " tensor_offsets for ", first_dims.size(), " groups");
  int64_t prev_end = 0;
  for (int64_t g = 0; g < groups(); ++g) {
    const int64_t n = first_dims[static_cast<size_t>(g)];
    QTC_CHECK(n >= 0, "grouped tensor: group ", g, " has ", n, " rows");
    if (!tensor_offsets.empty())
      QTC_CHECK(tensor_offsets[static_cast<size_t>(g)] % last_dim == 0, "grouped tensor: tensor_offsets[", g, "] = ",
                tensor_offsets[static_cast<size_t>(g)], " is not a multiple of last_dim ", last_dim);
    const int64_t off = row_offset(g);
    QTC_CHECK(off >= prev_end, "grouped tensor: group ", g, " starts at row ", off, ", inside group ", g - 1,
              " (ends at ", prev_end, ")");
    QTC_CHECK(off + n <= capacity, "grouped tensor: group ", g, " rows [", off, ", ", off + n, ") exceed capacity ",
              capacity);
    prev_end = off + n;
  }
}

GroupedRows GroupedRows::packed(std::vector<int64_t> sizes, int64_t last_dim, int64_t capacity) {
  GroupedRows r;
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  r.first_dims = std::move(sizes);
  r.last_dim = last_dim;
  r.capacity = capacity < 0 ? total : capacity;
  return r;
}

std::vector<QuantizedTensor> quantize_grouped(const MatrixView& x, const GroupedRows& rows, const Recipe& r) {
  rows.validate();
  QTC_CHECK(x.cols == rows.last_dim && x.rows == rows.capacity, "grouped quantize: input is ", x.rows, "x", x.cols,
            ", the grouped layout is ", rows.capacity, "x", rows.last_dim);
  std::vector<QuantizedTensor> out;
  out.reserve(static_cast<size_t>(rows.groups()));
  for (int64_t g = 0; g < rows.groups(); ++g) {
    const int64_t n = rows.first_dims[static_cast<size_t>(g)];
    if (n == 0) {  // zero-token split: nothing to quantize (TE allows them, §1.13)
      QuantizedTensor q;
      q.recipe = r;
      q.input_dtype = x.dtype;
      q.cols = x.cols;
      out.push_back(std::move(q));
      continue;
    }
    MatrixView part = x;
    part.data = static_cast<const uint8_t*>(x.data) + rows.row_offset(g) * x.cols * static_cast<int64_t>(dtype_size(x.dtype));
    part.rows = n;
    out.push_back(quantize(part, r));
  }
  return out;
}

void gemm_nvfp4_row_scaled_grouped_fprop(std::span<const QuantizedTensor> w, std::span<const QuantizedTensor> x,
                                         const GroupedRows& rows, const GemmArgs& args, HostMatrix& out) {
  rows.validate();
  QTC_CHECK(w.size() == x.size() && static_cast<int64_t>(x.size()) == rows.groups(), "grouped GEMM: ", w.size(),
            " weights and ", x.size(), " inputs for ", rows.groups(), " groups");
  QTC_CHECK(args.beta == 0.0f, "grouped row-scaled NVFP4 GEMM: an explicit beta (", args.beta,
            ") is not supported; the output is written, not accumulated");
  QTC_CHECK(args.transa && !args.transb, "grouped row-scaled NVFP4 fprop is TN (transa = T, transb = N)");
  QTC_CHECK(out.rows == rows.capacity, "grouped GEMM: output has ", out.rows, " rows, the groups span ", rows.capacity);
  // Every check before any GEMM: output widths and per-group shapes.
  for (size_t g = 0; g < w.size(); ++g) {
    if (rows.first_dims[g] == 0) continue;
    QTC_CHECK(w[g].rows == out.cols, "grouped GEMM: group ", g, " has output width ", w[g].rows,
              ", the grouped output has ", out.cols, " columns (groups whose output widths differ are rejected)");
    QTC_CHECK(x[g].rows == rows.first_dims[g], "grouped GEMM: group ", g, " input has ", x[g].rows, " rows, first_dims says ",
              rows.first_dims[g]);
  }
  const size_t es = dtype_size(out.dtype);
  QTC_CHECK(out.dtype == args.out, "grouped GEMM: output buffer is ", dtype_name(out.dtype), ", args.out ",
            dtype_name(args.out));
  for (size_t g = 0; g < w.size(); ++g) {
    const int64_t n = rows.first_dims[g];
    if (n == 0) continue;  // zero-token groups are skipped (TE general_grouped_gemm)
    const HostMatrix d = gemm_nvfp4_row_scaled(w[g], x[g], args);
    std::memcpy(out.bytes.data() + static_cast<size_t>(rows.row_offset(static_cast<int64_t>(g)) * out.cols) * es,
                d.bytes.data(), d.bytes.size());
  }
}

std::vector<HostMatrix> gemm_nvfp4_row_scaled_grouped_wgrad(std::span<const QuantizedTensor> x,
                                                            std::span<const QuantizedTensor> dy, DType out) {
  QTC_CHECK(x.size() == dy.size(), "grouped wgrad: ", x.size(), " inputs and ", dy.size(), " gradients");
  std::vector<HostMatrix> res;
  for (size_t g = 0; g < x.size(); ++g) {
    if (x[g].rows == 0) {
      res.emplace_back(out, dy[g].cols, x[g].cols);  // zero-initialised: no token contributes
      continue;
    }
    res.push_back(gemm_nvfp4_row_scaled(x[g], dy[g], GemmArgs::of(GemmKind::kWgrad, out)));
  }
  return res;
}

}  // namespace qtc::ref
