/// \file check.cpp
/// \brief The test-side oracles of check.hpp.
#include "check.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/test_support.hpp"

namespace qtc::prop {

namespace {
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t rup(int64_t a, int64_t b) { return cdiv(a, b) * b; }

}  // namespace

// The reporting is the verdict library's (qtc/test_support.hpp: the first mismatch as `qtc verify` prints it); what
// is compared (every bit, NaN payloads included) stays this file's.
namespace {
std::string text(const ::testing::AssertionResult& r) { return r ? std::string() : std::string(r.message()); }
}  // namespace

std::string diff_scales(const ScaleMatrix& a, const ScaleMatrix& b, const char* what) {
  return text(qtc::testing::scales_equal(std::string(what) + " scales", a, b));
}

std::string diff_plane(const Plane& a, const Plane& b, const char* what) {
  if (a.data_rows != b.data_rows || a.data_cols != b.data_cols || a.data.size() != b.data.size())
    return std::string(what) + " data shape differs: " + std::to_string(a.data_rows) + " x " + std::to_string(a.data_cols) + " vs " +
           std::to_string(b.data_rows) + " x " + std::to_string(b.data_cols);
  // The plane alone does not say its element format: data bytes are shown as bytes.
  std::string d = text(qtc::testing::buffers_equal(std::string(what) + " data", qtc::testing::ElementCode::kU8, a.data, b.data,
                                                   a.data_rows, a.data_cols));
  if (!d.empty()) return d;
  d = diff_scales(a.scale, b.scale, what);
  if (!d.empty()) return d;
  return text(qtc::testing::f32_equal(std::string(what) + " amax", a.amax, b.amax, 1, static_cast<int64_t>(a.amax.size())));
}

std::string diff_quantized(const QuantizedTensor& a, const QuantizedTensor& b) {
  if (a.rows != b.rows || a.cols != b.cols)
    return "shape [" + std::to_string(a.rows) + ", " + std::to_string(a.cols) + "] vs [" + std::to_string(b.rows) + ", " +
           std::to_string(b.cols) + "]";
  return text(qtc::testing::outputs_equal(a, b));
}

// ---------------------------------------------------------------------------------------------------
// TE_FORMATS.md §5, one line per table row.

Shape2 te_padded_scale_shape(const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  const bool row = p == PlaneKind::kRowwise;
  switch (r.kind()) {
    case RecipeKind::kNVFP4:  // (roundup(M,128), roundup(K/16,4)) / (roundup(K,128), roundup(M/16,4))
      return row ? Shape2{rup(M, 128), rup(K / 16, 4)} : Shape2{rup(K, 128), rup(M / 16, 4)};
    case RecipeKind::kMXFP8:  // (roundup(M,128), roundup(ceil(K/32),4)) / (roundup(ceil(M/32),4), roundup(K,128))
      return row ? Shape2{rup(M, 128), rup(cdiv(K, 32), 4)} : Shape2{rup(cdiv(M, 32), 4), rup(K, 128)};
    case RecipeKind::kFP8Block:
      if (!r.is_2d())  // (ceil(K/128), roundup(M,4)) / (ceil(M/128), roundup(K,4))
        return row ? Shape2{cdiv(K, 128), rup(M, 4)} : Shape2{cdiv(M, 128), rup(K, 4)};
      // (ceil(M/128), roundup(ceil(K/128),4)) / (ceil(K/128), roundup(ceil(M/128),4))
      return row ? Shape2{cdiv(M, 128), rup(cdiv(K, 128), 4)} : Shape2{cdiv(K, 128), rup(cdiv(M, 128), 4)};
    case RecipeKind::kFP8Tensor: return {1, 1};
    case RecipeKind::kMXFP4:  // qtc's choice (conformance/README.md): NVFP4's with blocks of 32, both planes [rows, blocks]
      return row ? Shape2{rup(M, 128), rup(cdiv(K, 32), 4)} : Shape2{rup(K, 128), rup(cdiv(M, 32), 4)};
  }
  return {};
}

bool te_padded_valid(const Recipe& r, PlaneKind p, int64_t M, int64_t K, int64_t row, int64_t col, int64_t* crow,
                     int64_t* ccol) {
  const bool rw = p == PlaneKind::kRowwise;
  int64_t vr = 0, vc = 0;  // valid extent of the padded matrix
  bool transposed = false;
  switch (r.kind()) {
    case RecipeKind::kNVFP4: vr = rw ? M : K; vc = rw ? K / 16 : M / 16; break;
    case RecipeKind::kMXFP8: vr = rw ? M : cdiv(M, 32); vc = rw ? cdiv(K, 32) : K; break;
    case RecipeKind::kFP8Block:
      if (r.is_2d()) {
        vr = rw ? cdiv(M, 128) : cdiv(K, 128);
        vc = rw ? cdiv(K, 128) : cdiv(M, 128);
      } else {  // padded [kb][i]: row = block index, col = row of the plane
        vr = rw ? cdiv(K, 128) : cdiv(M, 128);
        vc = rw ? M : K;
        transposed = true;
      }
      break;
    case RecipeKind::kFP8Tensor: vr = vc = 1; break;
    case RecipeKind::kMXFP4: vr = rw ? M : K; vc = rw ? cdiv(K, 32) : cdiv(M, 32); break;
  }
  if (row >= vr || col >= vc) return false;
  *crow = transposed ? col : row;
  *ccol = transposed ? row : col;
  return true;
}

// ---------------------------------------------------------------------------------------------------

std::vector<uint8_t> te_swizzle(const ScaleMatrix& padded, const Recipe& r, PlaneKind p, int64_t M, int64_t K) {
  QTC_CHECK(padded.elem_size() == 1, "te_swizzle: byte scales only");
  const bool mx_col = r.kind() == RecipeKind::kMXFP8 && p == PlaneKind::kColumnwise;
  // S: [R, C] with R the outer (non-reduction) index; MXFP8 columnwise is the transposed padded matrix.
  const int64_t R = mx_col ? padded.cols : padded.rows, C = mx_col ? padded.rows : padded.cols;
  QTC_CHECK(R % 128 == 0 && C % 4 == 0, "te_swizzle: padded shape [", R, ", ", C, "] is not a multiple of 128 x 4");
  auto S = [&](int64_t i, int64_t j) -> uint8_t {
    const int64_t pr = mx_col ? j : i, pc = mx_col ? i : j;
    int64_t cr = 0, cc = 0;
    if (!te_padded_valid(r, p, M, K, pr, pc, &cr, &cc)) return 0;
    return padded.bytes[static_cast<size_t>(pr * padded.cols + pc)];
  };
  std::vector<uint8_t> out(static_cast<size_t>(R * C));
  // view(R/128, 4, 32, C/4, 4) -> indices (a, b, c, d, e) with i = a*128 + b*32 + c, j = d*4 + e;
  // permute(0, 3, 2, 1, 4) -> output order (a, d, c, b, e).
  size_t o = 0;
  for (int64_t a = 0; a < R / 128; ++a)
    for (int64_t d = 0; d < C / 4; ++d)
      for (int64_t c = 0; c < 32; ++c)
        for (int64_t b = 0; b < 4; ++b)
          for (int64_t e = 0; e < 4; ++e) out[o++] = S(a * 128 + b * 32 + c, d * 4 + e);
  return out;
}

// ---------------------------------------------------------------------------------------------------

Plane derive_columnwise_oracle(const QuantizedTensor& q, bool force) {
  const Recipe& r = q.recipe;
  const bool ok = (r.kind() == RecipeKind::kNVFP4 && r.is_2d() && !r.nvfp4_rht() && !r.nvfp4_row_scaled() && !r.nvfp4().stochastic) ||
                  (r.kind() == RecipeKind::kFP8Block && r.is_2d()) || (r.kind() == RecipeKind::kMXFP8 && r.is_2d()) ||
                  r.kind() == RecipeKind::kFP8Tensor;
  QTC_CHECK(ok || force, "derive_columnwise_oracle: ", r.name(), " quantizes its columnwise plane with other blocks than its rowwise one");
  QTC_CHECK(q.rowwise.has_value(), "derive_columnwise_oracle: no rowwise plane");
  QTC_CHECK(q.rowwise->scale.layout == ScaleLayout::kCompact || r.kind() == RecipeKind::kFP8Tensor,
            "derive_columnwise_oracle: compact scales only");
  const Plane& rw = *q.rowwise;
  const int64_t M = q.rows, K = q.cols;
  Plane cw;
  cw.amax = rw.amax;
  cw.scale.type = rw.scale.type;
  cw.scale.layout = rw.scale.layout;
  switch (r.kind()) {
    case RecipeKind::kNVFP4: {
      cw.data_rows = K;
      cw.data_cols = M / 2;
      cw.data.assign(static_cast<size_t>(K * M / 2), 0);
      auto nib = [&](int64_t i, int64_t k) -> uint8_t {
        const uint8_t b = rw.data[static_cast<size_t>(i * (K / 2) + k / 2)];
        return (k & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0xF);
      };
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < M / 2; ++j)
          cw.data[static_cast<size_t>(k * (M / 2) + j)] = static_cast<uint8_t>(nib(2 * j, k) | (nib(2 * j + 1, k) << 4));
      cw.scale.rows = K;
      cw.scale.cols = M / 16;
      cw.scale.bytes.resize(static_cast<size_t>(K * (M / 16)));
      for (int64_t k = 0; k < K; ++k)
        for (int64_t b = 0; b < M / 16; ++b) cw.scale.bytes[static_cast<size_t>(k * (M / 16) + b)] = rw.scale.byte(b * 16, k / 16);
      break;
    }
    case RecipeKind::kMXFP8: {
      cw.data_rows = M;
      cw.data_cols = K;
      cw.data = rw.data;
      const int64_t mb = cdiv(M, 32);
      cw.scale.rows = mb;
      cw.scale.cols = K;
      cw.scale.bytes.resize(static_cast<size_t>(mb * K));
      for (int64_t b = 0; b < mb; ++b)
        for (int64_t j = 0; j < K; ++j) cw.scale.bytes[static_cast<size_t>(b * K + j)] = rw.scale.byte(b * 32, j / 32);
      break;
    }
    case RecipeKind::kFP8Block:
    case RecipeKind::kFP8Tensor: {
      cw.data_rows = K;
      cw.data_cols = M;
      cw.data.resize(static_cast<size_t>(M * K));
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) cw.data[static_cast<size_t>(k * M + i)] = rw.data[static_cast<size_t>(i * K + k)];
      if (r.kind() == RecipeKind::kFP8Tensor) {
        cw.scale = rw.scale;
        break;
      }
      cw.scale.rows = rw.scale.cols;
      cw.scale.cols = rw.scale.rows;
      cw.scale.bytes.resize(rw.scale.bytes.size());
      for (int64_t a = 0; a < rw.scale.rows; ++a)
        for (int64_t b = 0; b < rw.scale.cols; ++b)
          std::memcpy(cw.scale.bytes.data() + static_cast<size_t>(b * rw.scale.rows + a) * 4,
                      rw.scale.bytes.data() + static_cast<size_t>(a * rw.scale.cols + b) * 4, 4);
      break;
    }
  }
  return cw;
}

// ---------------------------------------------------------------------------------------------------

float grid_value(const Recipe& r, uint8_t code) {
  if (r.kind() == RecipeKind::kNVFP4) return decode_e2m1(code);
  return r.fp8_type() == Fp8Type::kE4M3 ? decode_e4m3(code) : decode_e5m2(code);
}

double grid_max(const Recipe& r) { return r.kind() == RecipeKind::kNVFP4 ? 6.0 : (r.fp8_type() == Fp8Type::kE4M3 ? 448.0 : 57344.0); }

double nearest_bound(const Recipe& r, double a) {
  const double mx = grid_max(r);
  if (a > mx) return a - mx;
  if (r.kind() == RecipeKind::kNVFP4) return a < 2.0 ? 0.25 : (a < 4.0 ? 0.5 : 1.0);
  // FP8: half an ulp of the binade of a (subnormal spacing below the smallest normal).
  const int man = r.fp8_type() == Fp8Type::kE4M3 ? 3 : 2;
  const int emin = r.fp8_type() == Fp8Type::kE4M3 ? -6 : -14;
  int e = a > 0 ? static_cast<int>(std::floor(std::log2(a))) : emin;
  if (e < emin) e = emin;
  // At a binade boundary the spacing above is the larger one: a point just below 2^e rounds within the lower half-ulp.
  return std::ldexp(1.0, e - man - 1);
}

}  // namespace qtc::prop

namespace qtc::prop {

namespace {
/// Columns [c0, c1) of a row-major byte matrix with `es`-byte elements.
std::vector<uint8_t> cut_cols(const std::vector<uint8_t>& src, int64_t rows, int64_t cols, size_t es, int64_t c0, int64_t c1) {
  std::vector<uint8_t> out;
  for (int64_t i = 0; i < rows; ++i)
    out.insert(out.end(), src.begin() + static_cast<ptrdiff_t>((i * cols + c0) * static_cast<int64_t>(es)),
               src.begin() + static_cast<ptrdiff_t>((i * cols + c1) * static_cast<int64_t>(es)));
  return out;
}
std::vector<uint8_t> cut_rows(const std::vector<uint8_t>& src, int64_t cols, size_t es, int64_t r0, int64_t r1) {
  const auto rb = static_cast<ptrdiff_t>(cols * static_cast<int64_t>(es));
  return {src.begin() + r0 * rb, src.begin() + r1 * rb};
}
}  // namespace

QuantizedTensor slice_oracle(const QuantizedTensor& q, int64_t r0, int64_t r1) {
  const Recipe& r = q.recipe;
  QuantizedTensor out = q;
  out.rows = r1 - r0;
  const int64_t K = q.cols;
  auto scale_rows_of = [&](int64_t blk) { return std::pair<int64_t, int64_t>{r0 / blk, cdiv(r1, blk)}; };
  if (q.rowwise) {
    Plane& p = *out.rowwise;
    const Plane& s = *q.rowwise;
    p.data = cut_rows(s.data, s.data_cols, 1, r0, r1);
    p.data_rows = r1 - r0;
    const size_t es = s.scale.elem_size();
    if (r.kind() != RecipeKind::kFP8Tensor) {
      const auto [a, b] = (r.kind() == RecipeKind::kFP8Block && r.is_2d()) ? scale_rows_of(128) : std::pair<int64_t, int64_t>{r0, r1};
      p.scale.bytes = cut_rows(s.scale.bytes, s.scale.cols, es, a, b);
      p.scale.rows = b - a;
    }
    if (r.kind() == RecipeKind::kNVFP4 && r.nvfp4_row_scaled()) p.amax.assign(s.amax.begin() + r0, s.amax.begin() + r1);
  }
  if (q.columnwise) {
    Plane& p = *out.columnwise;
    const Plane& s = *q.columnwise;
    const size_t es = s.scale.elem_size();
    switch (r.kind()) {
      case RecipeKind::kNVFP4:
        p.data = cut_cols(s.data, K, s.data_cols, 1, r0 / 2, r1 / 2);
        p.data_cols = (r1 - r0) / 2;
        p.scale.bytes = cut_cols(s.scale.bytes, K, s.scale.cols, 1, r0 / 16, r1 / 16);
        p.scale.cols = (r1 - r0) / 16;
        break;
      case RecipeKind::kMXFP8: {
        p.data = cut_rows(s.data, s.data_cols, 1, r0, r1);
        p.data_rows = r1 - r0;
        const auto [a, b] = scale_rows_of(32);
        p.scale.bytes = cut_rows(s.scale.bytes, s.scale.cols, es, a, b);
        p.scale.rows = b - a;
        break;
      }
      case RecipeKind::kFP8Block: {
        p.data = cut_cols(s.data, K, s.data_cols, 1, r0, r1);
        p.data_cols = r1 - r0;
        const auto [a, b] = scale_rows_of(128);
        p.scale.bytes = cut_cols(s.scale.bytes, s.scale.rows, s.scale.cols, es, a, b);
        p.scale.cols = b - a;
        break;
      }
      case RecipeKind::kFP8Tensor:
        p.data = cut_cols(s.data, K, s.data_cols, 1, r0, r1);
        p.data_cols = r1 - r0;
        break;
    }
  }
  return out;
}

}  // namespace qtc::prop
