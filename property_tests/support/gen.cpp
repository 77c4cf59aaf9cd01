/// \file gen.cpp
/// \brief The edge-reaching generators of gen.hpp.
#include "gen.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "qtc/codec.hpp"

namespace qtc {

void showValue(const Recipe& r, std::ostream& os) {
  os << r.name() << " {";
  for (const auto& [k, v] : r.to_metadata()) os << k << "=" << v << " ";
  os << "}";
}

void showValue(DType t, std::ostream& os) { os << dtype_name(t); }

}  // namespace qtc

namespace qtc::prop {

namespace {

uint64_t splitmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A small deterministic stream keyed by (seed, index), for the values of one element.
struct Stream {
  uint64_t seed, index;
  uint64_t n = 0;
  uint64_t next() { return hash64(seed, index * 64 + n++); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  int range(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<uint64_t>(hi - lo + 1)); }
  bool pct(int p) { return static_cast<int>(next() % 100) < p; }
};

/// Bits of float v in dtype t (v must be representable), and back.
uint32_t to_bits(float v, DType t) { return float_to_dtype_bits(v, t); }
float from_bits(uint32_t b, DType t) {
  switch (t) {
    case DType::kBF16: return bf16_to_f32(static_cast<uint16_t>(b));
    case DType::kF16: return f16_to_f32(static_cast<uint16_t>(b));
    default: return bits_f32(b);
  }
}
/// v rounded to t, then moved by `ulps` units in the last place of t (away from zero for ulps > 0).
float in_dtype(float v, DType t, int ulps = 0) {
  const uint32_t b = to_bits(v, t);
  if (ulps == 0) return from_bits(b, t);
  const uint32_t sign = t == DType::kF32 ? 0x80000000u : 0x8000u;
  const uint32_t mag = b & ~sign;
  const uint32_t m2 = ulps > 0 ? mag + static_cast<uint32_t>(ulps) : (mag >= static_cast<uint32_t>(-ulps) ? mag - static_cast<uint32_t>(-ulps) : 0);
  return from_bits((b & sign) | m2, t);
}

float dtype_min_sub(DType t) { return t == DType::kF16 ? 0x1p-24f : 0x1p-149f; }

/// Largest exponent k such that elem_max*2^k still fits the input type comfortably.
int max_exp(DType t) { return t == DType::kF16 ? 3 : 100; }
int min_exp(DType t) { return t == DType::kF16 ? -14 : -110; }

float fp8_mid(Stream& s, Fp8Type t) {
  // Midpoint between two neighbouring positive codes of the FP8 type (subnormal ones included).
  const int max_code = t == Fp8Type::kE4M3 ? 0x7E : 0x7B;
  const int c = s.range(0, max_code - 1);
  const auto dec = [&](int code) { return t == Fp8Type::kE4M3 ? decode_e4m3(static_cast<uint8_t>(code)) : decode_e5m2(static_cast<uint8_t>(code)); };
  return 0.5f * (dec(c) + dec(c + 1));
}

constexpr float kE2M1Ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
constexpr float kE2M1Grid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/// Rows and columns of the tile the anchors and zero blocks of a recipe use.
std::pair<int64_t, int64_t> anchor_tile(const Recipe& r) {
  switch (r.kind()) {
    case RecipeKind::kNVFP4: return {16, 16};
    case RecipeKind::kMXFP8: return {32, 32};
    case RecipeKind::kFP8Block: return {r.is_2d() ? 128 : 1, 128};
    case RecipeKind::kFP8Tensor: return {16, 16};
    case RecipeKind::kMXFP4: return {32, 32};
  }
  return {16, 16};
}

float elem_max_of(const Recipe& r) {
  switch (r.kind()) {
    case RecipeKind::kNVFP4:
    case RecipeKind::kMXFP4: return 6.0f;
    default: return fp8_max(r.fp8_type());
  }
}

}  // namespace

rc::Gen<int> pick(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return rc::gen::elementOf(v);
}

uint64_t hash64(uint64_t seed, uint64_t index) { return splitmix(splitmix(seed) ^ splitmix(index + 0x632BE59BD9B4E019ull)); }

// ---------------------------------------------------------------------------------------------------

rc::Gen<Recipe> gen_recipe(const RecipeSpace& s) {
  return rc::gen::exec([s]() {
    std::vector<RecipeKind> kinds;
    if (s.nvfp4) kinds.push_back(RecipeKind::kNVFP4);
    if (s.mxfp8) kinds.push_back(RecipeKind::kMXFP8);
    if (s.fp8_block) kinds.push_back(RecipeKind::kFP8Block);
    if (s.fp8_tensor) kinds.push_back(RecipeKind::kFP8Tensor);
    RC_PRE(!kinds.empty());
    Recipe r;
    r.set_options(Recipe::default_options(*rc::gen::elementOf(kinds)));
    if (s.plane_subsets) {
      const int planes = *pick(4);  // both planes twice as often
      r.rowwise = planes != 2;
      r.columnwise = planes != 3;
    }
    const bool pyref = s.te_pyref && *pick(4) == 0;
    switch (r.kind()) {
      case RecipeKind::kNVFP4: {
        std::vector<int> variants;  // 0 plain 1x16, 1 2D, 2 row-scaled, 3 RHT, 4 4over6, 5 SR
        if (s.nvfp4_1d) variants.push_back(0);
        if (s.nvfp4_2d) variants.push_back(1);
        if (s.nvfp4_1d && s.row_scaled) variants.push_back(2);
        if (s.nvfp4_1d && s.rht) variants.push_back(3);
        if (s.fourover6) variants.push_back(4);
        if (s.stochastic) variants.push_back(5);
        RC_PRE(!variants.empty());
        const int v = *rc::gen::elementOf(variants);
        r.profile = pyref ? Profile::kTEPyRef : Profile::kTE;
        switch (v) {
          case 1: r.nvfp4().tile_2d = true; break;
          case 2:
            r.nvfp4().row_scaled = true;
            r.rowwise = true;
            break;
          case 3: r.nvfp4().rht = true; r.nvfp4().rht_sign_mask = *rc::gen::element<uint16_t>(0xD7E8, 0, 0xFFFF, 0x0001); break;
          case 4:
            r.nvfp4().fourover6 = true;
            r.nvfp4().tile_2d = s.nvfp4_2d && (!s.nvfp4_1d || *rc::gen::arbitrary<bool>());
            r.nvfp4().fourover6_err = *rc::gen::element(ErrMode::kMAE, ErrMode::kMSE);
            r.nvfp4().e4m3_max = *rc::gen::element(448, 256);
            break;
          case 5:
            r.nvfp4().stochastic = true;
            r.profile = Profile::kTE;
            r.nvfp4().tile_2d = s.nvfp4_2d && (!s.nvfp4_1d || *rc::gen::arbitrary<bool>());
            r.nvfp4().seed = *rc::gen::inRange<uint64_t>(0, 1u << 20);
            break;
          default: break;
        }
        if (r.nvfp4().fourover6 && r.nvfp4_row_scaled()) r.columnwise = false;
        break;
      }
      case RecipeKind::kMXFP8: {
        r.set_fp8_type(*rc::gen::element(Fp8Type::kE4M3, Fp8Type::kE5M2));
        if (s.mx_1d && s.mx_2d) r.mxfp8().tile_2d = *rc::gen::arbitrary<bool>();
        else r.mxfp8().tile_2d = s.mx_2d;
        if (pyref) {
          r.profile = Profile::kOCP;
          r.mxfp8().scale_rule = MxScaleRule::kOcpFloor;
        } else {
          r.mxfp8().scale_rule = *rc::gen::element(MxScaleRule::kRceil, MxScaleRule::kRceil, MxScaleRule::kOcpFloor);
        }
        break;
      }
      case RecipeKind::kFP8Block:
        if (s.block_1d && s.block_2d) r.fp8_block().tile_2d = *rc::gen::arbitrary<bool>();
        else r.fp8_block().tile_2d = s.block_2d;
        [[fallthrough]];
      case RecipeKind::kFP8Tensor:
        r.profile = pyref ? Profile::kTEPyRef : Profile::kTE;
        r.set_fp8_type(*rc::gen::element(Fp8Type::kE4M3, Fp8Type::kE5M2));
        r.set_pow2_scales(*rc::gen::arbitrary<bool>());
        if (s.eps && *pick(4) == 0) r.set_eps(*rc::gen::element(1.0f, 0x1p-20f, 0x1p-126f));
        break;
    }
    r.validate();
    return r;
  });
}

// ---------------------------------------------------------------------------------------------------

rc::Gen<int64_t> gen_dim(RecipeKind k, int64_t max_dim) {
  if (k == RecipeKind::kNVFP4) {
    return rc::gen::map(rc::gen::weightedOneOf<int64_t>({
                            {6, rc::gen::element<int64_t>(1, 2, 3, 4, 7, 8, 9, 15, 16, 17)},
                            {2, rc::gen::inRange<int64_t>(1, max_dim / 16 + 1)},
                        }),
                        [max_dim](int64_t n) { return std::min(n, max_dim / 16) * 16; });
  }
  return rc::gen::map(rc::gen::weightedOneOf<int64_t>({
                          {6, rc::gen::element<int64_t>(1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 96, 127, 128, 129, 160,
                                                        255, 256, 257)},
                          {2, rc::gen::inRange<int64_t>(1, max_dim + 1)},
                      }),
                      [max_dim](int64_t n) { return std::min(n, max_dim); });
}

rc::Gen<int64_t> gen_multiple(int64_t mult, int64_t max_tiles) {
  return rc::gen::map(rc::gen::inRange<int64_t>(1, max_tiles + 1), [mult](int64_t n) { return n * mult; });
}

// ---------------------------------------------------------------------------------------------------

void showValue(const DataSpec& d, std::ostream& os) {
  static const char* kAnchors[] = {"none", "ties", "amax_edge"};
  os << "DataSpec{seed=" << d.seed << " dtype=" << dtype_name(d.dtype) << " anchor=" << kAnchors[static_cast<int>(d.anchor)]
     << " base_exp=" << d.base_exp << " spread=" << d.spread << " zero_block%=" << d.zero_block_pct
     << " zero_row%=" << d.zero_row_pct << " special%=" << d.special_pct << " specials=0x" << std::hex << d.specials
     << std::dec << " negative_only=" << d.negative_only << "}";
}

rc::Gen<DataSpec> gen_data(const Recipe& r, uint32_t allow_specials) {
  return rc::gen::exec([r, allow_specials]() {
    DataSpec d;
    d.seed = *rc::gen::inRange<uint64_t>(1, 1ull << 40);
    if (r.nvfp4_rht()) d.dtype = DType::kBF16;
    else d.dtype = *rc::gen::element(DType::kF32, DType::kF32, DType::kBF16, DType::kF16);
    d.anchor = *rc::gen::element(Anchor::kNone, Anchor::kTies, Anchor::kTies, Anchor::kAmaxEdge, Anchor::kAmaxEdge);
    const int lo = d.dtype == DType::kF16 ? -10 : -100, hi = d.dtype == DType::kF16 ? 3 : 100;
    d.base_exp = *rc::gen::weightedOneOf<int>({{4, rc::gen::inRange(-8, 9)}, {1, rc::gen::inRange(lo, hi + 1)}});
    d.spread = *rc::gen::element(0, 1, 3, 8, 20, 40);
    d.zero_block_pct = *rc::gen::element(0, 0, 10, 50);
    d.zero_row_pct = *rc::gen::element(0, 0, 0, 10, 30);
    if (allow_specials != 0 && *pick(3) == 0) {
      d.special_pct = *rc::gen::element(1, 5, 20);
      d.specials = static_cast<uint32_t>(1 + *pick(63)) & allow_specials;
      if (d.specials == 0) d.special_pct = 0;
    }
    d.negative_only = *pick(8) == 0;
    return d;
  });
}

HostMatrix build(const DataSpec& d, const Recipe& r, int64_t M, int64_t K) {
  HostMatrix x(d.dtype, M, K);
  const DType t = d.dtype;
  const auto [tr, tc] = anchor_tile(r);
  const float emax = elem_max_of(r);
  // Global anchor of per-tensor recipes: the tensor amax (NVFP4: 2688*2^k so that S_enc = 2^-k exactly).
  const bool nv = r.kind() == RecipeKind::kNVFP4;
  const float global_base = nv ? 6.0f * static_cast<float>(r.nvfp4().e4m3_max) : emax;
  // k is clamped so that every anchor (up to global_base*2^k and 2^(k+12)) is finite in the input type.
  const int kfit = static_cast<int>(std::floor(std::log2(dtype_max(t) / std::max(global_base, 4096.0f))));
  const int kexp = std::clamp(d.base_exp, min_exp(t), std::min(max_exp(t), kfit));
  const float big = std::ldexp(global_base, kexp);
  Stream g{d.seed, 0xFFFFFFFFull};
  const int global_ulp = g.range(-1, 1);
  const bool global_pow2 = g.pct(30);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < K; ++j) {
      Stream s{d.seed, static_cast<uint64_t>(i * K + j) + 1};
      Stream tile{d.seed, 0x100000000ull + static_cast<uint64_t>((i / tr) * 4096 + j / tc)};
      Stream rowblk{d.seed, 0x200000000ull + static_cast<uint64_t>(i * 4096 + j / tc)};
      float v = 0.0f;
      const float sign = (d.negative_only || s.pct(50)) ? -1.0f : 1.0f;
      switch (d.anchor) {
        case Anchor::kNone: {
          const int e = d.base_exp - s.range(0, d.spread);
          v = sign * std::ldexp(static_cast<float>(1.0 + s.unit()), e);
          v = in_dtype(v, t);
          break;
        }
        case Anchor::kTies: {
          // A tile-wide exponent m: the tile's (and each of its row blocks') amax is elem_max * 2^(k+m), so the
          // block scale is a power of two and x * scale is exact: elements on tie points stay on them.
          // FP8 tensor: m <= 0 keeps the tensor anchor the amax. F16: the anchor must stay finite.
          int m = nv ? tile.range(-9, 8) : (r.kind() == RecipeKind::kFP8Tensor ? tile.range(-12, 0) : tile.range(-12, 12));
          const int mfit = static_cast<int>(std::floor(std::log2(dtype_max(t) / emax))) - kexp;
          m = std::min(m, mfit);
          const int64_t anchor_col = (j / tc) * tc + static_cast<int64_t>(rowblk.next() % static_cast<uint64_t>(tc));
          const float unitv = std::ldexp(1.0f, kexp + m);
          if (j == std::min(anchor_col, K - 1)) {
            v = sign * emax * unitv;
          } else if (nv) {
            const float tv = s.pct(70) ? kE2M1Ties[s.range(0, 6)] : kE2M1Grid[s.range(0, 7)];
            v = in_dtype(sign * tv * unitv, t, s.pct(50) ? s.range(-1, 1) : 0);
          } else {
            v = in_dtype(sign * fp8_mid(s, r.fp8_type()) * unitv, t, s.pct(50) ? s.range(-1, 1) : 0);
          }
          if (std::fabs(v) > emax * unitv) v = std::copysign(emax * unitv, v);
          break;
        }
        case Anchor::kAmaxEdge: {
          // Block amax at elem_max*2^(k-d) or 2^(k-d), exactly or one ulp either side; the rest below it.
          const int dd = tile.range(1, 24);
          const float base = tile.pct(50) ? emax : 1.0f;
          const float banchor = in_dtype(std::ldexp(base, kexp - dd), t, tile.range(-1, 1));
          const int64_t anchor_col = (j / tc) * tc + static_cast<int64_t>(rowblk.next() % static_cast<uint64_t>(tc));
          if (j == std::min(anchor_col, K - 1)) v = sign * banchor;
          else v = in_dtype(sign * banchor * static_cast<float>(s.unit()), t);
          break;
        }
      }
      // Zero rows and zero tiles.
      Stream zr{d.seed, 0x300000000ull + static_cast<uint64_t>(i)};
      if (zr.pct(d.zero_row_pct)) v = 0.0f;
      if (tile.pct(d.zero_block_pct)) v = 0.0f;
      if (d.special_pct > 0 && d.specials != 0 && s.pct(d.special_pct)) {
        std::vector<uint32_t> kinds;
        for (uint32_t b = 1; b <= kHuge; b <<= 1)
          if (d.specials & b) kinds.push_back(b);
        const uint32_t kind = kinds[s.next() % kinds.size()];
        const uint32_t sbit = t == DType::kF32 ? 0x80000000u : 0x8000u;
        const uint32_t neg = s.pct(50) ? sbit : 0u;
        switch (kind) {
          case kNaN: v = std::numeric_limits<float>::quiet_NaN(); if (neg) v = -v; break;
          case kInf: v = neg ? -INFINITY : INFINITY; break;
          case kNegZero: v = -0.0f; break;
          case kPosZero: v = 0.0f; break;
          case kSubnormal: {
            const uint32_t maxsub = t == DType::kF32 ? 0x7FFFFFu : (t == DType::kBF16 ? 0x7Fu : 0x3FFu);
            v = from_bits(neg | (1u + static_cast<uint32_t>(s.next() % maxsub)), t);
            break;
          }
          case kHuge: {
            const uint32_t maxfin = t == DType::kF32 ? 0x7F7FFFFFu : (t == DType::kBF16 ? 0x7F7Fu : 0x7BFFu);
            v = from_bits(neg | (maxfin - static_cast<uint32_t>(s.next() % 4)), t);
            break;
          }
          default: break;
        }
      }
      x.set(i, j, v);
    }
  }
  // The tensor amax anchor (per row for row-scaled NVFP4), written last so it is the maximum.
  if (d.anchor != Anchor::kNone && M > 0 && K > 0) {
    float ga = (global_pow2 && d.anchor == Anchor::kAmaxEdge) ? std::ldexp(1.0f, kexp + 12) : big;
    ga = in_dtype(ga, t, d.anchor == Anchor::kAmaxEdge ? global_ulp : 0);
    if (std::isinf(ga)) ga = in_dtype(big, t);
    const int64_t rows_with_anchor = (nv && r.nvfp4_row_scaled()) ? M : 1;
    for (int64_t i = 0; i < rows_with_anchor; ++i) {
      Stream s{d.seed, 0x400000000ull + static_cast<uint64_t>(i)};
      const int64_t j = static_cast<int64_t>(s.next() % static_cast<uint64_t>(K));
      const int64_t ii = rows_with_anchor == 1 ? static_cast<int64_t>(s.next() % static_cast<uint64_t>(M)) : i;
      x.set(ii, j, (d.negative_only || s.pct(50)) ? -ga : ga);
    }
  }
  (void)dtype_min_sub;
  return x;
}

// ---------------------------------------------------------------------------------------------------

std::string classify_amax(float a, float elem_max) {
  if (std::isnan(a)) return "nan";
  if (std::isinf(a)) return "inf";
  if (a == 0.0f) return "zero";
  auto pow2 = [](float v) {
    int e = 0;
    return std::frexp(v, &e) == 0.5f;
  };
  auto near = [&](float v, auto pred) { return pred(std::nextafter(v, 0.0f)) || pred(std::nextafter(v, INFINITY)); };
  auto em = [&](float v) {
    const float q = v / elem_max;
    return q * elem_max == v && pow2(q);
  };
  if (pow2(a)) return "pow2";
  if (em(a)) return "elem_max_pow2";
  // one ulp of float or of bf16/f16 either side
  for (int u : {1, 2, 4, 8, 16, 32, 64, 128, 1 << 13, 1 << 16}) {
    const float dn = bits_f32(f32_bits(a) - static_cast<uint32_t>(u)), up = bits_f32(f32_bits(a) + static_cast<uint32_t>(u));
    if (pow2(dn) || pow2(up)) return "pow2_pm1ulp";
    if (em(dn) || em(up)) return "elem_max_pow2_pm1ulp";
  }
  (void)near;
  return "";
}

std::vector<std::string> classify_input(const HostMatrix& x, const Recipe& r) {
  bool nan = false, inf = false, nz = false, sub = false, huge = false;
  const float maxfin = dtype_max(x.dtype);
  const float minnorm = x.dtype == DType::kF16 ? 0x1p-14f : FLT_MIN;
  std::vector<char> row_zero(static_cast<size_t>(x.rows), 1);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t j = 0; j < x.cols; ++j) {
      const float v = x.get(i, j);
      nan |= std::isnan(v);
      inf |= std::isinf(v);
      nz |= v == 0.0f && std::signbit(v);
      sub |= v != 0.0f && std::fabs(v) < minnorm;
      huge |= std::isfinite(v) && std::fabs(v) >= maxfin * 0.99f;
      if (v != 0.0f) row_zero[static_cast<size_t>(i)] = 0;
    }
  std::vector<std::string> out;
  if (nan) out.push_back("input_nan");
  if (inf) out.push_back("input_inf");
  if (nz) out.push_back("input_neg_zero");
  if (sub) out.push_back("input_subnormal");
  if (huge) out.push_back("input_huge");
  if (std::find(row_zero.begin(), row_zero.end(), 1) != row_zero.end() && x.cols > 0) out.push_back("zero_row");
  // An all-zero block of the recipe's row block size.
  const int64_t bc = r.block_cols() > 0 ? r.block_cols() : 16;
  bool zb = false;
  for (int64_t i = 0; i < x.rows && !zb; ++i)
    for (int64_t j0 = 0; j0 < x.cols && !zb; j0 += bc) {
      bool all = true;
      for (int64_t j = j0; j < std::min(x.cols, j0 + bc) && all; ++j) all = x.get(i, j) == 0.0f;
      zb = all && row_zero[static_cast<size_t>(i)] == 0;
    }
  if (zb) out.push_back("zero_block");
  return out;
}

}  // namespace qtc::prop
