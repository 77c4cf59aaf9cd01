/// \file internal.hpp
/// \brief Helpers shared by the reference quantizers: strips of input rows as float, a parallel loop,
///        and the scale formulas every recipe uses.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "qtc/numeric.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe_policy.hpp"

namespace qtc::ref::detail {

/// The number of CPUs this process may run on (its affinity mask; hardware_concurrency when unknown).
int64_t cpu_threads();

/// Runs fn(begin, end) over [0, n) split into contiguous chunks on up to cpu_threads() threads.
/// Each index is processed by exactly one call, so results do not depend on the thread count.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

/// Rows [r0, r0 + count) of x as float, row-major, `count * x.cols` values.
void load_rows(const MatrixView& x, int64_t r0, int64_t count, float* out);

inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // a >= 0, b > 0; no overflow

/// Runs fn(g, i0, n, s) for every strip g of `strip_rows` rows of x (rows [i0, i0 + n), the last strip may be
/// shorter), with s the strip's n x K values as float. Strips are spread over the threads; each thread loads
/// into its own buffer.
template <typename Fn>
void for_each_row_strip(const MatrixView& x, int64_t strip_rows, Fn&& fn) {
  if (x.rows == 0 || x.cols == 0) return;  // no element: an empty tensor costs no time, whatever its other extent
  parallel_for(ceil_div(x.rows, strip_rows), [&](int64_t b, int64_t e) {
    std::vector<float> strip(static_cast<size_t>(strip_rows * x.cols));
    for (int64_t g = b; g < e; ++g) {
      const int64_t i0 = g * strip_rows, n = std::min(strip_rows, x.rows - i0);
      load_rows(x, i0, n, strip.data());
      fn(g, i0, n, static_cast<const float*>(strip.data()));
    }
  });
}

/// NaN-ignoring (maxNum) or NaN-propagating absolute maximum step. `acc` starts at 0; in the ignoring mode
/// it never becomes NaN, so a plain comparison (false for a NaN operand) is maxNum.
inline float amax_step(float acc, float v, bool propagate_nan) {
  const float a = std::fabs(v);
  if (propagate_nan) return (acc != acc || a != a) ? NAN : (a > acc ? a : acc);
  return a > acc ? a : acc;
}

/// IEEE minNum (C fminf) without the libm call: a NaN operand is ignored (numeric.hpp's min_num).
inline float fmin_num(float a, float b) { return min_num(a, b); }

inline constexpr float kInv6 = kNvfp4Rcp6;  // RN(1/6), TE fp4_max_inv

inline uint8_t encode_fp8(float v, Fp8Type t, Overflow ov = Overflow::kSatFinite) {
  return t == Fp8Type::kE4M3 ? encode_e4m3(v, ov) : encode_e5m2(v, ov);
}
inline float decode_fp8(uint8_t c, Fp8Type t) { return t == Fp8Type::kE4M3 ? decode_e4m3(c) : decode_e5m2(c); }


/// Packs FP4 codes (one per byte, low 4 bits) two per byte: element 2j in the low nibble of byte j.
inline void pack_fp4(const uint8_t* codes, int64_t n, uint8_t* out) {
  for (int64_t j = 0; j < n / 2; ++j) out[j] = static_cast<uint8_t>((codes[2 * j] & 0xF) | ((codes[2 * j + 1] & 0xF) << 4));
}

/// An empty plane: data_rows x data_cols data bytes and an srows x scols compact scale matrix, all zero.
inline Plane make_plane(int64_t data_rows, int64_t data_cols, ScaleType st, int64_t srows, int64_t scols) {
  Plane p;
  p.data_rows = data_rows;
  p.data_cols = data_cols;
  p.data.assign(static_cast<size_t>(data_rows * data_cols), 0);
  p.scale.type = st;
  p.scale.layout = ScaleLayout::kCompact;
  p.scale.rows = srows;
  p.scale.cols = scols;
  p.scale.bytes.assign(static_cast<size_t>(srows * scols) * p.scale.elem_size(), 0);
  return p;
}

/// An empty plane as describe_plane says: its data bytes, compact scales and amax values, all zero.
inline Plane make_plane(const PlaneSpec& s) {
  Plane p = make_plane(s.data_rows, s.data_cols, s.scale_type, s.compact.rows, s.compact.cols);
  p.amax.assign(static_cast<size_t>(s.amax_count), 0.0f);
  return p;
}

/// q's rows, cols, recipe and input type, and an empty plane for each plane the recipe requests.
inline void start_output(QuantizedTensor& q, const Recipe& r, DType input, int64_t M, int64_t K) {
  q.recipe = r;
  q.input_dtype = input;
  q.rows = M;
  q.cols = K;
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const PlaneSpec s = describe_plane(r, pk, M, K);
    if (s.requested) (pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise) = make_plane(s);
  }
}

/// An NVFP4 plane's amax values (as many as describe_plane counted): one per line when row-scaled, else the
/// plane's global amax. Shared by the scalar and the vectorized quantizer.
template <typename G>
void fill_amax(Plane& p, const Recipe& r, const std::vector<G>& lines, const G& global) {
  QTC_CHECK(!r.nvfp4_row_scaled() || lines.size() == p.amax.size(), "NVFP4: ", lines.size(), " line amaxes for ", p.amax.size(), " lines");
  for (size_t i = 0; i < p.amax.size(); ++i) p.amax[i] = r.nvfp4_row_scaled() ? lines[i].amax : global.amax;
}

// Quantizers of each recipe family (nvfp4.cpp, mxfp8.cpp, fp8.cpp).
QuantizedTensor quantize_nvfp4(const MatrixView& x, const Recipe& r, const float* amax_override);
QuantizedTensor quantize_mxfp8(const MatrixView& x, const Recipe& r);
QuantizedTensor quantize_fp8_block(const MatrixView& x, const Recipe& r);
QuantizedTensor quantize_fp8_tensor(const MatrixView& x, const Recipe& r, const float* amax_override);
QuantizedTensor quantize_mxfp4(const MatrixView& x, const Recipe& r);  // mxfp4.cpp (scalar only: cpu_path.hpp)
// FP8 block / tensor under a profile whose fp8.form stores s = f(amax) (fp8_peers.cpp; scalar path only).
bool fp8_peer_form(const Recipe& r);
QuantizedTensor quantize_fp8_block_peer(const MatrixView& x, const Recipe& r);
QuantizedTensor quantize_fp8_tensor_peer(const MatrixView& x, const Recipe& r, const float* amax_override);
// compressed-tensors' NVFP4 / MXFP8 / MXFP4 (ct_peers.cpp): orders Nvfp4Order / MxOrder::kCompressedTensors (CPU) and
// kCompressedTensorsTriton (its CUDA path)
QuantizedTensor quantize_nvfp4_ct(const MatrixView& x, const Recipe& r, const float* amax_override);
QuantizedTensor quantize_mx_ct(const MatrixView& x, const Recipe& r);

}  // namespace qtc::ref::detail
