/// \file cases.cpp
/// \brief Generated cases of `qtc conform`: input families, recipe variants, vector files, error bounds.
#include "cases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>

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
    const Profile prof = pr.id;
    // NVFP4: tile x row_scaled x rht x 4over6 (off, mae/mse x 448/256) x stochastic rounding.
    if (pr.nvfp4)
    for (bool t2 : {false, true})
      for (bool rs : {false, true})
        for (bool rht : {false, true})
          for (int f46 = 0; f46 < 5; ++f46)
            for (bool sr : {false, true}) {
              add(Recipe::of(Nvfp4Options{.tile_2d = t2,
                                          .row_scaled = rs,
                                          .rht = rht,
                                          .fourover6 = f46 > 0,
                                          .fourover6_err = (f46 == 2 || f46 == 4) ? ErrMode::kMSE : ErrMode::kMAE,
                                          .e4m3_max = f46 >= 3 ? 256 : 448,
                                          .stochastic = sr,
                                          .seed = sr ? 0x5EEDull : 0},
                             prof));
            }
    // MXFP8: element type x scale rule x 32x32 blocks.
    for (Fp8Type t : {Fp8Type::kE4M3, Fp8Type::kE5M2})
      for (MxScaleRule rule : pr.mx_scale_rules)
        for (bool b2 : {false, true}) {
          add(Recipe::of(Mxfp8Options{.fp8 = t, .scale_rule = rule, .tile_2d = b2}, prof));
        }
    // FP8 block and FP8 tensor: tile x element type x pow2 x eps.
    for (RecipeKind k : {RecipeKind::kFP8Block, RecipeKind::kFP8Tensor})
      for (bool b2 : {false, true})
        if (k == RecipeKind::kFP8Block ? pr.fp8_block : pr.fp8_tensor)
        for (Fp8Type t : {Fp8Type::kE4M3, Fp8Type::kE5M2})
          for (bool p2 : {false, true})
            for (float eps : {0.0f, 0.5f}) {
              if (k == RecipeKind::kFP8Tensor && b2) continue;
              if (k == RecipeKind::kFP8Block)
                add(Recipe::of(Fp8BlockOptions{.fp8 = t, .tile_2d = b2, .pow2_scales = p2, .eps = eps}, prof));
              else
                add(Recipe::of(Fp8TensorOptions{.fp8 = t, .pow2_scales = p2, .eps = eps}, prof));
            }
    // MXFP4: every scale rule the profile defines for it.
    if (pr.mxfp4)
      for (MxScaleRule rule : pr.mxfp4_scale_rules) add(Recipe::of(Mxfp4Options{.scale_rule = rule}, prof));
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
    if (r.is(RecipeKind::kMXFP4)) {  // any shape: odd K and M (a half-filled last byte), partial blocks both ways
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
// Error bounds of dequantize(quantize(x)), per element, from the block amax b (finite values of the block in
// the plane's domain) and, for NVFP4, the amax A that sets the global scale (tensor, or row/column when
// row-scaled):
//  * NVFP4: the block decode scale is about b/6 (E4M3-rounded: relative error <= 2^-4), the largest E2M1 gap is
//    2 (between 4 and 6), so RN errs by at most 1 * (b/6) * (1 + 2^-4) plus saturation of elements beyond
//    6 after the scale rounded down (0.375 * b/6): |err| <= 0.1875 b. Stochastic rounding moves by up to a
//    whole gap: 0.375 b. 4over6 picks the candidate with the smaller *block* error, and its map-to-4 candidate
//    saturates its scale at 448 when b > 2A/3 (TE_FORMATS.md §11.5), so one element may lose up to b/3:
//    0.35 b. Blocks whose scale underflows E4M3 (b*S_enc/6 <= 2^-10) decode to 0: |err| <= b <= A * 2^-18.8,
//    and E4M3-subnormal scales are coarse: both are covered by A * 2^-12.
//    TE's dequantization, (sf * A) * (1 / (6 * E4M3_MAX)) (§1.14), is not the inverse of quantization when
//    S_enc = 6 * E4M3_MAX / A was clamped to FLT_MAX (A < 6 * E4M3_MAX / FLT_MAX, §11.3) or when sf * A
//    overflows (A > FLT_MAX / 448): elements whose A lies there are not checked (the vectors pin them).
//  * MXFP8: RN of an element with m mantissa bits errs by 2^-(m+1) |x| for normals; below the element's
//    smallest normal by half its smallest subnormal times the decode scale (<= 2 b / max, at least 2^-127).
//    Under ocp_floor b/scale lies in [2^emax, 2^(emax+1)) and elements above max saturate: up to 0.125 b.
//  * FP8 block / tensor: as MXFP8 with decode scale <= 2 max(b, eps) / max (pow2 rounds the scale down),
//    at least 1/FLT_MAX (the clamp of an overflowing scale); no saturation.
// Every bound also allows 2^-22 |x| for the float arithmetic of the dequantization and 2^-140 absolute, and
// an infinite result of the right sign where the exact dequantized value may exceed FLT_MAX.
// Planes whose domain holds NaN or Inf are not checked: a non-finite amax changes every block's scale
// (the vectors pin those cases bit for bit instead).

BoundResult check_error_bound(const Recipe& r, PlaneKind p, const MatrixView& x, const HostMatrix& deq) {
  BoundResult res;
  const int64_t M = x.rows, K = x.cols;
  QTC_CHECK(deq.rows == M && deq.cols == K && deq.dtype == DType::kF32, "dequantized plane has the wrong shape or type");
  // The plane's reference domain in x's orientation: x, or RHT(x^T)^T for RHT columnwise planes.
  std::vector<double> ref(static_cast<size_t>(M * K));
  if (r.nvfp4_rht() && p == PlaneKind::kColumnwise) {
    const HostMatrix t = ref::rht_transform(x, r.nvfp4().rht_sign_mask);  // (K, M)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < K; ++j) ref[static_cast<size_t>(i * K + j)] = t.get(j, i);
  } else {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < K; ++j) ref[static_cast<size_t>(i * K + j)] = x.at(i, j);
  }
  for (double v : ref)
    if (!std::isfinite(v)) {
      res.not_checked = "the input holds NaN or Inf (a non-finite amax changes every scale; the vectors pin it bit for bit)";
      return res;
    }
  auto at = [&](int64_t i, int64_t j) { return ref[static_cast<size_t>(i * K + j)]; };

  // A: the amax that sets NVFP4's global scale.
  std::vector<double> amax_scope(static_cast<size_t>(std::max(M, K)), 0.0);
  double amax_all = 0.0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const double a = std::fabs(at(i, j));
      amax_all = std::max(amax_all, a);
      size_t s = static_cast<size_t>(p == PlaneKind::kRowwise ? i : j);
      amax_scope[s] = std::max(amax_scope[s], a);
    }
  std::map<std::pair<int64_t, int64_t>, double> block_amax;
  auto bamax = [&](const Block& g) {
    auto key = std::pair(g.r0, g.c0);
    auto it = block_amax.find(key);
    if (it != block_amax.end()) return it->second;
    double b = 0.0;
    for (int64_t i = g.r0; i < g.r1; ++i)
      for (int64_t j = g.c0; j < g.c1; ++j) b = std::max(b, std::fabs(at(i, j)));
    block_amax.emplace(key, b);
    return b;
  };

  const bool nvfp4 = r.kind() == RecipeKind::kNVFP4 || r.kind() == RecipeKind::kMXFP4;  // E2M1 data
  const bool e4m3 = nvfp4 || r.fp8_type() == Fp8Type::kE4M3;  // NVFP4, MXFP4: not read below
  const double rel = nvfp4 ? 0.0 : (e4m3 ? 0x1p-4 : 0x1p-3);
  const double fmax = fp8_max(e4m3 ? Fp8Type::kE4M3 : Fp8Type::kE5M2);
  const double eps = r.is(RecipeKind::kFP8Block) || r.is(RecipeKind::kFP8Tensor) ? static_cast<double>(r.eps()) : 0.0;
  const double min_sub = e4m3 ? 0x1p-9 : 0x1p-16;
  int64_t skipped = 0;
  const PlaneSpec spec = describe_plane(r, p, M, K);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const double v = at(i, j);
      const double d = deq.get(i, j);
      const Block g = spec.block_of(i, j);
      const double b = bamax(g);
      double tol = 0x1p-22 * std::fabs(v) + 0x1p-140;
      switch (r.kind()) {
        case RecipeKind::kNVFP4: {
          const double a = r.nvfp4_row_scaled() ? amax_scope[static_cast<size_t>(p == PlaneKind::kRowwise ? i : j)] : amax_all;
          const double s6 = 6.0 * r.nvfp4().e4m3_max;
          if (a > 0.0 && (a < s6 / FLT_MAX || a > FLT_MAX / 448.0)) {
            ++skipped;
            continue;
          }
          tol += (r.nvfp4().stochastic ? 0.375 : r.nvfp4().fourover6 ? 0.35 : 0.1875) * b + 0x1p-12 * a;
          break;
        }
        case RecipeKind::kMXFP8:
          tol += rel * std::fabs(v) + 0.5 * min_sub * std::max(2.0 * b / fmax, 0x1p-127);
          if (r.mxfp8().scale_rule == MxScaleRule::kOcpFloor) tol += 0.125 * b;
          break;
        case RecipeKind::kMXFP4:
          // rceil: scale 2^(e-127) in [b/6, b/3) (RN(1/6) rounds up), |x / scale| <= 6, so the error is at most half
          // of E2M1's widest step, 2 * scale / 2 <= b/3; ocp_floor: scale in (b/8, b/4], elements above 6 * scale
          // saturate: at most 2 * scale <= b/2. Blocks below 2^-127 * 6: scale 2^-127, error <= 2^-128.
          tol += (r.mxfp4().scale_rule == MxScaleRule::kOcpFloor ? 0.5 : 0.34) * b + 0x1p-128;
          break;
        case RecipeKind::kFP8Block:
        case RecipeKind::kFP8Tensor: {
          const double bb = std::max(b, eps);
          // 2/FLT_MAX: the clamp of an overflowing scale to FLT_MAX, rounded down to 2^127 by pow2.
          tol += rel * std::fabs(v) + 0.5 * min_sub * std::max(2.0 * bb / fmax, 2.0 / FLT_MAX);
          break;
        }
      }
      ++res.checked;
      const double err = std::fabs(d - v);
      // The exact dequantized value may lie beyond FLT_MAX (e.g. MXFP8 rounds FLT_MAX up to 256 * 2^120 =
      // 2^128): the F32 output is then Inf of the right sign, which is the correct rounding.
      const bool overflow_ok = std::isinf(d) && std::signbit(d) == std::signbit(v) && std::fabs(v) + tol > FLT_MAX;
      if (!(err <= tol) && !overflow_ok) {
        if (res.violations++ == 0)
          res.first = ::fmt::format("at [{}, {}]: x = {}, dequantized = {}, |error| = {:.6g} > bound {:.6g} (block [{}:{}, {}:{}] amax {})",
                                    i, j, v, d, err, tol, g.r0, g.r1, g.c0, g.c1, b);
      }
    }
  if (skipped > 0)
    res.not_checked = ::fmt::format("{} elements whose NVFP4 amax lies outside [6*E4M3_MAX/FLT_MAX, FLT_MAX/448], where TE's "
                                    "dequantization is not the inverse of its quantization (TE_FORMATS.md §1.14, §11.2-3)",
                                    skipped);
  return res;
}

}  // namespace qtc::conformance
