/// \file quantize.cpp
/// \brief Entry points of the reference quantizers, shared scale formulas, dequantization.
#include "qtc/quantize.hpp"

#include <sched.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "internal.hpp"
#include "kind_module.hpp"
#include "qtc/mxfp4_codec.hpp"
#include "qtc/profile.hpp"
#include "simd/simd.hpp"

namespace qtc::ref {

namespace detail {

int64_t cpu_threads() {
  // The CPUs this process may run on (taskset, cgroup cpusets), not every CPU of the machine.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max<int64_t>(1, CPU_COUNT(&set));
  return std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
}

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t hw = cpu_threads();
  const int64_t threads = std::min<int64_t>(hw, n);
  if (threads == 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  std::exception_ptr err;
  std::mutex mu;
  const int64_t chunk = ceil_div(n, threads);
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b >= e) break;
    pool.emplace_back([&, b, e] {
      try {
        fn(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!err) err = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  if (err) std::rethrow_exception(err);
}

void load_rows(const MatrixView& x, int64_t r0, int64_t count, float* out) {
  const int64_t n = count * x.cols;
  const int64_t base = r0 * x.cols;
  switch (x.dtype) {
    case DType::kF32: std::copy_n(static_cast<const float*>(x.data) + base, n, out); break;
    case DType::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(x.data) + base;
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
    case DType::kF16: {
      const uint16_t* p = static_cast<const uint16_t*>(x.data) + base;
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(p[i]);
      break;
    }
    default: QTC_FAIL("input must be F32, BF16 or F16, got ", dtype_name(x.dtype));
  }
}

}  // namespace detail

float amax(const MatrixView& x, bool propagate_nan) {
  if (x.rows == 0 || x.cols == 0) return 0.0f;  // no element (and no per-strip buffer for a [2^40, 0] tensor)
  if (simd::enabled_any()) return simd::amax(x, propagate_nan);
  const int64_t kStrip = 64;
  std::vector<float> partial(static_cast<size_t>(std::max<int64_t>(detail::ceil_div(x.rows, kStrip), 1)), 0.0f);
  detail::for_each_row_strip(x, kStrip, [&](int64_t g, int64_t, int64_t n, const float* s) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n * x.cols; ++i) acc = detail::amax_step(acc, s[i], propagate_nan);
    partial[static_cast<size_t>(g)] = acc;
  });
  float acc = 0.0f;
  for (float p : partial) acc = detail::amax_step(acc, p, propagate_nan);
  return acc;
}

float nvfp4_global_encode_scale(float global_amax, int e4m3_max, Profile profile) {
  return qtc::nvfp4_global_encode_scale(global_amax, static_cast<float>(e4m3_max), profile_rules(profile).nvfp4_nan_scale);
}

float fp8_scale_from_amax(float amax_in, float max_fp8, bool pow2, float eps, float value_for_inf, Profile profile) {
  const ProfileRules& pr = profile_rules(profile);
  return qtc::fp8_scale_from_amax(amax_in, max_fp8, pow2, eps, value_for_inf, pr.fp8_inf_amax_scale_zero,
                                  pr.fp8_scale_reciprocal);
}

HostMatrix rht_transform(const MatrixView& x, uint16_t sign_mask) {
  if (x.rows != 0 && x.cols != 0 && simd::enabled_any()) return simd::rht_transform(x, sign_mask);
  QTC_CHECK(x.rows % 16 == 0, "RHT needs M % 16 == 0, got M = ", x.rows, " (TE_FORMATS.md §1.9)");
  HostMatrix y(DType::kBF16, x.cols, x.rows);  // (K, M)
  double t[16][16];                            // s_r * H[r][c]
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      const double h = (std::popcount(static_cast<unsigned>(r & c)) & 1) ? -0.25 : 0.25;
      t[r][c] = ((sign_mask >> r) & 1u) ? -h : h;
    }
  uint16_t* out = y.as<uint16_t>();
  const int64_t groups = x.rows / 16;
  detail::parallel_for(groups, [&](int64_t b, int64_t e) {
    std::vector<float> buf(static_cast<size_t>(16 * x.cols));
    for (int64_t g = b; g < e; ++g) {
      detail::load_rows(x, g * 16, 16, buf.data());
      for (int64_t k = 0; k < x.cols; ++k) {
        for (int c = 0; c < 16; ++c) {
          double acc = 0.0;  // exact: 16 products of a bf16 value and ±0.25
          for (int r = 0; r < 16; ++r) acc += static_cast<double>(buf[static_cast<size_t>(r * x.cols + k)]) * t[r][c];
          out[k * x.rows + g * 16 + c] = f64_to_bf16(acc);
        }
      }
    }
  });
  return y;
}

QuantizedTensor quantize(const MatrixView& x, const Recipe& recipe) {
  recipe.validate_input(x.dtype, x.rows, x.cols);
  QTC_CHECK(x.data != nullptr || x.rows * x.cols == 0, "quantize: input has no data");
  // An empty tensor takes the scalar path, whose loops cost nothing however long the other extent (issue 14).
  const bool empty = x.rows == 0 || x.cols == 0;
  const detail::KindModule& kind = detail::kind_module(recipe.kind());
  // The vectorized path (simd/), same bits, where the kind has one and cpu_path.hpp says it runs.
  if (!empty && kind.quantize_simd != nullptr && simd::enabled(recipe, x.dtype)) return kind.quantize_simd(x, recipe);
  return kind.quantize(x, recipe);
}

QuantizedTensor quantize_with_amax(const MatrixView& x, const Recipe& recipe, float amax_rowwise, float amax_columnwise) {
  recipe.validate_input(x.dtype, x.rows, x.cols);
  const float a[2] = {amax_rowwise, amax_columnwise};
  const bool vec = x.rows != 0 && x.cols != 0 && simd::enabled(recipe, x.dtype);  // empty: the scalar path
  const detail::KindModule& kind = detail::kind_module(recipe.kind());
  QTC_CHECK(kind.quantize_amax != nullptr, "quantize_with_amax: recipe ", recipe.name(),
            " has no global amax (NVFP4 and FP8 tensor only)");
  QTC_CHECK(!recipe.nvfp4_row_scaled(), "quantize_with_amax: row-scaled NVFP4 computes its own per-row amax (§1.11)");
  return vec && kind.quantize_amax_simd != nullptr ? kind.quantize_amax_simd(x, recipe, a) : kind.quantize_amax(x, recipe, a);
}

Nvfp4BlockDequant::Nvfp4BlockDequant(const Recipe& r)
    : torchao_(profile_rules(r.profile).nvfp4_order != Nvfp4Order::kTE),  // torchao, modelopt: (amax / 2688) * sf
      two_level_(r.nvfp4().per_tensor_scale),
      factor_(1.0f / (6.0f * static_cast<float>(r.nvfp4().e4m3_max))) {}

float Nvfp4BlockDequant::operator()(float amax, uint8_t scale_byte) const {
  const float sf = decode_e4m3(scale_byte);
  if (torchao_) return two_level_ ? (amax / kTorchAOPerTensorDivisor) * sf : sf;  // per_tensor_scale * sf, or sf alone
  return (sf * amax) * factor_;
}

HostMatrix dequantize(const QuantizedTensor& q, PlaneKind pk, DType out) {
  QTC_CHECK(out == DType::kF32 || out == DType::kBF16 || out == DType::kF16, "dequantize: output must be F32, BF16 or F16");
  const Plane& p = q.plane(pk);
  const Recipe& r = q.recipe;
  QTC_CHECK(p.scale.layout == ScaleLayout::kCompact || kind_info(r).per_tensor_scale,
            "dequantize: scales must be in the compact layout (convert with ref::convert_layout)");
  if (q.rows != 0 && q.cols != 0 && simd::enabled_dequantize(r, out))
    return detail::kind_module(r.kind()).dequantize_simd(q, pk, out);
  const int64_t M = q.rows, K = q.cols;
  HostMatrix y(out, M, K);
  if (M == 0 || K == 0) return y;  // nothing to decode, however long the other extent
  // The kind's module says how the plane's rows decode (kinds/<kind>_kind.cpp) and whether a plane row is a row or a
  // column of x.
  const PlaneSpec spec = describe_plane(r, pk, M, K);
  const detail::PlaneRows rows = detail::kind_module(r.kind()).plane_rows({q, p, spec, pk});
  const bool col = rows.transposed;
  // Plane rows are decoded in groups of kGroup into a float buffer, then stored at rows a (rowwise) or
  // columns a (columnwise) of the output, rounded once to the output type. Grouping keeps the columnwise
  // stores contiguous: kGroup consecutive output elements per output row.
  const int64_t len = col ? M : K;
  constexpr int64_t kGroup = 16;
  auto store_group = [&](int64_t a0, int64_t n, const float* v) {  // v: n rows of len
    if (!col) {
      for (int64_t t = 0; t < n; ++t) {
        const float* src = v + t * len;
        const int64_t base = (a0 + t) * K;
        switch (out) {
          case DType::kF32: std::copy_n(src, len, y.as<float>() + base); break;
          case DType::kBF16: for (int64_t b = 0; b < len; ++b) y.as<uint16_t>()[base + b] = f32_to_bf16(src[b]); break;
          default: for (int64_t b = 0; b < len; ++b) y.as<uint16_t>()[base + b] = f32_to_f16(src[b]); break;
        }
      }
      return;
    }
    for (int64_t b = 0; b < len; ++b) {
      const int64_t base = b * K + a0;
      for (int64_t t = 0; t < n; ++t) {
        const float val = v[t * len + b];
        switch (out) {
          case DType::kF32: y.as<float>()[base + t] = val; break;
          case DType::kBF16: y.as<uint16_t>()[base + t] = f32_to_bf16(val); break;
          default: y.as<uint16_t>()[base + t] = f32_to_f16(val); break;
        }
      }
    }
  };
  // Runs decode(a, row_buffer) for every plane row, kGroup rows at a time, on both threads.
  auto for_plane_rows = [&](int64_t nrows, const auto& decode) {
    detail::parallel_for(detail::ceil_div(nrows, kGroup), [&](int64_t g0, int64_t g1) {
      std::vector<float> v(static_cast<size_t>(kGroup * len));
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t a0 = g * kGroup, n = std::min(kGroup, nrows - a0);
        for (int64_t t = 0; t < n; ++t) decode(a0 + t, v.data() + t * len);
        store_group(a0, n, v.data());
      }
    });
  };
  for_plane_rows(rows.rows, rows.decode);
  return y;
}

void delayed_scaling_update(DelayedScalingState& st, float fp8_max_v, float margin, AmaxComputeAlgo algo) {
  auto& h = st.amax_history;
  QTC_CHECK(!h.empty(), "delayed scaling: the amax history is empty");
  const size_t L = h.size();
  const float last = h[0];
  if (last == 0.0f) return;  // bulk kernel: nothing recorded -> no roll, previous scale kept
  float a = algo == AmaxComputeAlgo::kMostRecent ? last : 0.0f;
  if (algo == AmaxComputeAlgo::kMax)
    for (float v : h) a = std::fmax(a, v);
  std::vector<float> next(L, 0.0f);
  for (size_t i = 1; i + 1 < L; ++i) next[i] = h[i + 1];
  if (L > 1) next[L - 1] = last;
  next[0] = 0.0f;
  if (L == 1) next[0] = 0.0f;
  h = std::move(next);
  const float scaled_max = fp8_max_v * std::pow(2.0f, -margin);
  if (std::isfinite(a) && a > 0.0f) {
    float s = scaled_max / a;
    if (std::isinf(s)) s = FLT_MAX;
    st.scale = s;
  }
}

}  // namespace qtc::ref
