/// \file cases.cpp
/// \brief Generated cases of `qtc conform`: input families, recipe variants, vector files, error bounds.
#include "cases.hpp"

#include "qtc/error_bound.hpp"
#include "qtc/kind.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <optional>

#include "qtc/codec.hpp"
#include "qtc/error.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/recipe_policy.hpp"
#include "qtc/rng.hpp"

namespace qtc::conformance {

namespace {

/// Uniform in [0, 1) from the counter-based source: element `idx` of stream `stream` under `seed`.
double uniform(uint64_t seed, uint32_t stream, uint64_t idx, uint32_t lane = 0) {
  uint32_t ctr[4] = {static_cast<uint32_t>(idx), static_cast<uint32_t>(idx >> 32), stream, 0xC0DE0000u + lane};
  philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(ctr[0]) << 21) ^ ctr[1];
  return static_cast<double>(bits & ((1ull << 53) - 1)) * 0x1p-53;
}

/// Standard normal (Box-Muller on two uniforms of the same counter).
double normal(uint64_t seed, uint32_t stream, uint64_t idx) {
  const double u1 = std::max(uniform(seed, stream, idx, 1), 0x1p-53);
  const double u2 = uniform(seed, stream, idx, 2);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

float value_of(InputClass c, int64_t i, int64_t j, int64_t K, uint64_t seed) {
  const uint64_t idx = static_cast<uint64_t>(i * K + j);
  const auto stream = static_cast<uint32_t>(c);
  const double n = normal(seed, stream, idx);
  switch (c) {
    case InputClass::kNormal: return static_cast<float>(n);
    case InputClass::kHeavy: {
      // Log-normal magnitudes over ~8 binades, and one outlier in 64 a thousand times larger.
      double v = n * std::exp(1.5 * normal(seed, stream + 100, idx));
      if (uniform(seed, stream, idx, 3) < 1.0 / 64) v *= 1000.0;
      return static_cast<float>(v);
    }
    case InputClass::kZeroBlocks: {
      if (i % 7 == 3) return 0.0f;                       // zero rows
      if (j == 5) return 0.0f;                           // a zero column
      if (i % 4 == 0 && j >= 32 && j < 64) return 0.0f;  // zero 16- and 32-blocks along rows
      if (i >= 16 && i < 32 && j >= 16 && j < 32) return 0.0f;  // a zero 16x16 tile
      return static_cast<float>(n);
    }
    case InputClass::kTiny: {
      // Tiny normals and subnormals (2^-120 .. 2^-149), and the smallest subnormal itself.
      if (idx % 29 == 7) return (idx & 1) ? -0x1p-149f : 0x1p-149f;
      const double e = -120.0 - 29.0 * uniform(seed, stream, idx, 3);
      return static_cast<float>(n * std::exp2(e));
    }
    case InputClass::kHuge: {
      // Magnitudes 2^100 .. FLT_MAX: scale computations near overflow.
      const double v = n * std::exp2(100.0 + 27.0 * uniform(seed, stream, idx, 3));
      if (idx % 31 == 0) return (idx & 2) ? -FLT_MAX : FLT_MAX;
      return static_cast<float>(std::clamp(v, -3.0e38, 3.0e38));
    }
    case InputClass::kTies: {
      // Per 16-element block: 6*s first (the block amax), then E2M1 tie points *s, exact or one ulp off.
      static constexpr float kTies[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
      const float s = std::ldexp(1.0f, static_cast<int>((i + j / 16) % 9) - 4);
      if (j % 16 == 0) return 6.0f * s;
      float t = kTies[(idx / 3) % 7] * s;
      if (idx % 3 == 1) t = std::nextafter(t, INFINITY);
      if (idx % 3 == 2) t = std::nextafter(t, 0.0f);
      return (idx / 21) % 2 ? -t : t;
    }
    case InputClass::kSpecial: {
      if (i == 2) return -0.0f;  // an all -0.0 row
      if (idx % 97 == 11) return std::numeric_limits<float>::quiet_NaN();
      if (idx % 89 == 1) return INFINITY;
      if (idx % 83 == 2) return -INFINITY;
      if (idx % 13 == 5) return -0.0f;
      return static_cast<float>(n);
    }
  }
  return 0.0f;
}

std::string_view dtype_tag(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kU8: return "u8";
  }
  return "?";
}

io::Tensor bytes_tensor(std::string name, const std::string& dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  return io::Tensor{std::move(name), dtype, std::move(shape), std::move(bytes)};
}

/// The quantization block of a plane that holds (i, j) of x: the recipe policy's block geometry.
using Block = XRegion;

}  // namespace

const std::vector<InputClass>& all_input_classes() {
  static const std::vector<InputClass> kAll = {InputClass::kNormal, InputClass::kHeavy, InputClass::kZeroBlocks,
                                               InputClass::kTiny,   InputClass::kHuge,  InputClass::kTies,
                                               InputClass::kSpecial};
  return kAll;
}

std::string_view input_class_name(InputClass c) {
  switch (c) {
    case InputClass::kNormal: return "normal";
    case InputClass::kHeavy: return "heavy";
    case InputClass::kZeroBlocks: return "zero_blocks";
    case InputClass::kTiny: return "tiny";
    case InputClass::kHuge: return "huge";
    case InputClass::kTies: return "ties";
    case InputClass::kSpecial: return "special";
  }
  return "?";
}

std::string_view input_class_comment(InputClass c) {
  switch (c) {
    case InputClass::kNormal: return "standard normal values: the common case";
    case InputClass::kHeavy: return "log-normal magnitudes with 1-in-64 outliers x1000: blocks far below the tensor amax";
    case InputClass::kZeroBlocks: return "all-zero rows, a zero column, zero 16/32-blocks and a zero 16x16 tile: amax 0 paths";
    case InputClass::kTiny: return "magnitudes 2^-120..2^-149 incl. subnormals: scale clamping and no flush-to-zero";
    case InputClass::kHuge: return "magnitudes 2^100..FLT_MAX: scale overflow and saturation";
    case InputClass::kTies: return "E2M1 tie points (exact and one ulp off) in blocks whose amax is 6*2^k";
    case InputClass::kSpecial: return "NaN, +Inf, -Inf and -0.0 among normal values, and an all -0.0 row";
  }
  return "";
}

std::string_view input_class_flags(InputClass c) {
  switch (c) {
    case InputClass::kNormal: return "Normal";
    case InputClass::kHeavy: return "HeavyTail,SmallBlockScale";
    case InputClass::kZeroBlocks: return "ZeroBlock,ZeroRow";
    case InputClass::kTiny: return "ScaleUnderflow,Subnormal";
    case InputClass::kHuge: return "ScaleOverflow,Saturation";
    case InputClass::kTies: return "TieToEven";
    case InputClass::kSpecial: return "NanPropagation,Infinity,NegativeZero";
  }
  return "";
}

HostMatrix make_input(InputClass c, DType dtype, int64_t rows, int64_t cols, uint64_t seed) {
  HostMatrix m(dtype, rows, cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m.set(i, j, value_of(c, i, j, cols, seed));
  return m;
}

std::vector<Recipe> all_recipe_variants() {
  std::vector<Recipe> out;
  auto add = [&](Recipe r) {
    try {
      r.validate();
    } catch (const Error&) {
      // Row-scaled 4over6 exists for the rowwise plane only (TE_FORMATS.md §1.12).
      if (!(r.nvfp4_row_scaled() && r.nvfp4().fourover6)) return;
      r.columnwise = false;
      try {
        r.validate();
      } catch (const Error&) {
        return;
      }
    }
    out.push_back(r);
  };
  // Every profile's record says which recipe kinds and MXFP8 scale rules it defines (profile.hpp); the
  // options it does not define are dropped by validate() in add(). The error bounds of check_error_bound are
  // derived for TE's operation orders: a profile with another order (torchao's) has its own vectors instead.
  for (const ProfileRules& pr : all_profiles()) {
    if (pr.nvfp4_order != Nvfp4Order::kTE || pr.mx_order != MxOrder::kTE) continue;
    if (pr.fp8_form != Fp8Form::kTE || pr.fp8_tensor_form != Fp8Form::kTE) continue;  // the FP8 toolkit profiles: their vectors
    // Each kind's module says which variants it has under this profile (kinds/<kind>_kind.cpp).
    for (const KindInfo* kind : kind_table()) {
      std::vector<Recipe> candidates;
      kind->conform_variants(pr, candidates);
      for (Recipe& r : candidates) add(std::move(r));
    }
  }
  return out;
}

std::vector<Case> generated_cases(const std::vector<Recipe>& recipes) {
  struct Input {
    InputClass c;
    DType t;
    int64_t m, k;
  };
  std::vector<Case> out;
  for (const Recipe& r : recipes) {
    std::vector<Input> inputs;
    for (InputClass c : all_input_classes()) {
      if (r.nvfp4_rht()) {
        inputs.push_back({c, DType::kBF16, 32, 128});  // TE defines RHT for bf16 input only
        continue;
      }
      inputs.push_back({c, DType::kF32, 32, 128});
      if (c == InputClass::kNormal || c == InputClass::kTies || c == InputClass::kSpecial)
        inputs.push_back({c, DType::kBF16, 32, 128});
      if (c == InputClass::kNormal) inputs.push_back({c, DType::kF16, 32, 128});
    }
    // Shapes that are not multiples of the 32/128 blocks (partial blocks).
    inputs.push_back({InputClass::kNormal, r.nvfp4_rht() ? DType::kBF16 : DType::kF32, 48, 80});
    inputs.push_back({InputClass::kSpecial, r.nvfp4_rht() ? DType::kBF16 : DType::kF32, 48, 80});
    if (kind_info(r).conform_odd_shapes) {  // any shape: odd K and M (a half-filled last byte), partial blocks both ways
      inputs.push_back({InputClass::kNormal, DType::kF32, 33, 45});
      inputs.push_back({InputClass::kTies, DType::kBF16, 37, 70});
    }
    for (const Input& in : inputs) {
      try {
        r.validate_input(in.t, in.m, in.k);
      } catch (const Error&) {
        continue;  // e.g. NVFP4 needs M and K multiples of 16
      }
      Case c;
      c.recipe = r;
      c.input = in.c;
      c.dtype = in.t;
      c.rows = in.m;
      c.cols = in.k;
      c.id = ::fmt::format("{}_{}_{}_{}x{}", r.name(), input_class_name(in.c), dtype_tag(in.t), in.m, in.k);
      out.push_back(std::move(c));
    }
  }
  return out;
}

io::File make_vector(const Case& c, const HostMatrix& x, const QuantizedTensor& q, QuantizeBackend& cpu, uint64_t seed) {
  io::File f;
  f.metadata = c.recipe.to_metadata();
  f.metadata["qtc.schema"] = "1";
  f.metadata["source"] = "qtc " QTC_VERSION " CPU reference (qtc conform)";
  f.metadata["case"] = c.id;
  f.metadata["comment"] = std::string(input_class_comment(c.input));
  f.metadata["flags"] = std::string(input_class_flags(c.input));
  f.metadata["case_seed"] = std::to_string(seed);
  f.put(io::from_matrix("x", x));
  const Recipe& r = c.recipe;
  // Which tensors a vector holds: the recipe policy's table (VECTORS.md, Tensors). FP8 tensor's columnwise plane
  // is columnwise_data [K, M] alone (x^T cast with the same scale); its scale_inv and amax go with the rowwise one.
  auto has = [&](const std::string& name) { return describe_tensor(r, name, x.rows, x.cols).has_value(); };
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    const std::optional<Plane>& p = pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise;
    if (!p) continue;
    const std::string pre = pk == PlaneKind::kRowwise ? "rowwise" : "columnwise";
    f.put(bytes_tensor(pre + "_data", "U8", {p->data_rows, p->data_cols}, p->data));
    if (has(pre + "_scale_inv"))
      f.put(bytes_tensor(pre + "_scale_inv", p->scale.type == ScaleType::kF32 ? "F32" : "U8", {p->scale.rows, p->scale.cols},
                         p->scale.bytes));
    if (has("amax_" + pre)) f.put(io::from_f32("amax_" + pre, p->amax));
    if (pk == PlaneKind::kRowwise && has("scale_inv")) {
      const float si = q.scale_inv;
      f.put(io::from_f32("scale_inv", std::span<const float>(&si, 1)));
      f.put(io::from_f32("amax", std::span<const float>(p->amax.data(), std::min<size_t>(1, p->amax.size()))));
    }
    if (has("dequantized_" + pre)) f.put(io::from_matrix("dequantized_" + pre, cpu.dequantize(q, pk, DType::kF32)));
  }
  return f;
}

// ---------------------------------------------------------------------------------------------------
// The round trip dequantize(quantize(x)) against x, per element, under the one bound of error_bound.hpp (what
// qtc::testing's within_error_bound checks too), with the scales of the quantization that was dequantized. The
// plane's domain is x, or RHT(x^T)^T for RHT columnwise planes. Planes whose domain holds NaN or Inf are not
// checked: a non-finite amax changes every block's scale (the vectors pin those cases bit for bit instead).

BoundResult check_error_bound(const QuantizedTensor& q, PlaneKind p, const MatrixView& x, const HostMatrix& deq) {
  BoundResult res;
  const Recipe& r = q.recipe;
  const int64_t M = x.rows, K = x.cols;
  QTC_CHECK(deq.rows == M && deq.cols == K && deq.dtype == DType::kF32, "dequantized plane has the wrong shape or type");
  std::optional<HostMatrix> rht;  // an RHT columnwise plane's domain, RHT(x^T)^T; every other plane's is x itself
  if (r.nvfp4_rht() && p == PlaneKind::kColumnwise) {
    const HostMatrix t = ref::rht_transform(x, r.nvfp4().rht_sign_mask);  // (K, M)
    rht.emplace(DType::kF32, M, K);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < K; ++j) rht->set(i, j, t.get(j, i));
  }
  const MatrixView domain = rht ? rht->view() : x;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j)
      if (!std::isfinite(domain.at(i, j))) {
        res.not_checked = "the input holds NaN or Inf (a non-finite amax changes every scale; the vectors pin it bit for bit)";
        return res;
      }
  const ErrorBoundResult b = qtc::check_error_bound(q, p, domain, deq.view());
  res.checked = b.checked;
  res.violations = b.outside;
  if (b.outside > 0)
    res.first = ::fmt::format("at [{}, {}]: x = {}, dequantized = {}, |error| = {:.6g} > bound {:.6g} (block scale {:g})", b.i,
                              b.j, b.x, b.got, std::fabs(b.got - b.x), b.bound, b.scale);
  if (b.exempt > 0) res.not_checked = ::fmt::format("{} elements: {}", b.exempt, b.exempt_reason);
  return res;
}

}  // namespace qtc::conformance
