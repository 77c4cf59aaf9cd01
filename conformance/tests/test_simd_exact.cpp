/// \file test_simd_exact.cpp
/// \brief The vectorized CPU reference (reference/src/simd) gives the bits of the scalar one (cpu_path.hpp):
///        quantize, quantize_with_amax and dequantize (F32, BF16, F16) of every generated case of `qtc conform`,
///        of extra shapes that cross strip and block boundaries, and of every bundled vector's input, compared
///        byte for byte (data, scales, amax, scale_inv, dequantized planes) on every instruction set compiled in
///        that this machine runs (e.g. AVX2 and the portable fallback); a dequantized NaN matches any NaN, as in
///        `qtc verify` (see diff_dequantized). Also: the dispatch predicate falls back
///        for what the vectorized path does not implement, and QTC_SCALAR is honoured.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cases.hpp"
#include "qtc/cpu_path.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/verify.hpp"

namespace {

using namespace qtc;

/// First differing element of two dequantized matrices (F32, BF16 or F16 bits), as text; "" when equal. A NaN
/// matches a NaN, as in `qtc verify`: the sign and payload of a NaN made by 0 * Inf in a block scale product are
/// not defined by the scalar oracle either (the compiler may rewrite (-0) * s as -(0 * s)).
std::string diff_dequantized(const std::string& what, const HostMatrix& a, const HostMatrix& b) {
  if (a.bytes.size() != b.bytes.size() || a.dtype != b.dtype) return what + ": sizes or types differ";
  const size_t es = dtype_size(a.dtype);
  for (size_t i = 0; i < a.bytes.size() / es; ++i) {
    uint32_t u = 0, v = 0;
    std::memcpy(&u, a.bytes.data() + i * es, es);
    std::memcpy(&v, b.bytes.data() + i * es, es);
    if (u == v) continue;
    auto is_nan = [&](uint32_t w) {
      if (a.dtype == DType::kF32) return (w & 0x7FFFFFFFu) > 0x7F800000u;
      if (a.dtype == DType::kBF16) return (w & 0x7FFFu) > 0x7F80u;
      return (w & 0x7FFFu) > 0x7C00u;
    };
    if (is_nan(u) && is_nan(v)) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, ": first difference at element %zu (scalar 0x%X, simd 0x%X)", i, u, v);
    return what + buf;
  }
  return "";
}

/// First differing byte of two buffers, as text; "" when equal.
std::string diff_bytes(const std::string& what, const uint8_t* a, size_t na, const uint8_t* b, size_t nb) {
  if (na != nb) return what + ": sizes differ (scalar " + std::to_string(na) + ", simd " + std::to_string(nb) + ")";
  for (size_t i = 0; i < na; ++i)
    if (a[i] != b[i]) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ": first difference at byte %zu of %zu (scalar 0x%02X, simd 0x%02X)", i, na, a[i], b[i]);
      return what + buf;
    }
  return "";
}

std::string diff_plane(const std::string& what, const std::optional<Plane>& a, const std::optional<Plane>& b) {
  if (a.has_value() != b.has_value()) return what + ": present on one path only";
  if (!a) return "";
  if (a->data_rows != b->data_rows || a->data_cols != b->data_cols) return what + ": data shapes differ";
  if (auto d = diff_bytes(what + " data", a->data.data(), a->data.size(), b->data.data(), b->data.size()); !d.empty()) return d;
  if (a->scale.rows != b->scale.rows || a->scale.cols != b->scale.cols || a->scale.type != b->scale.type ||
      a->scale.layout != b->scale.layout)
    return what + ": scale shapes or types differ";
  if (auto d = diff_bytes(what + " scales", a->scale.bytes.data(), a->scale.bytes.size(), b->scale.bytes.data(), b->scale.bytes.size());
      !d.empty())
    return d;
  return diff_bytes(what + " amax", reinterpret_cast<const uint8_t*>(a->amax.data()), a->amax.size() * 4,
                    reinterpret_cast<const uint8_t*>(b->amax.data()), b->amax.size() * 4);
}

std::string diff_tensor(const QuantizedTensor& a, const QuantizedTensor& b) {
  if (auto d = diff_plane("rowwise", a.rowwise, b.rowwise); !d.empty()) return d;
  if (auto d = diff_plane("columnwise", a.columnwise, b.columnwise); !d.empty()) return d;
  if (std::memcmp(&a.scale_inv, &b.scale_inv, 4) != 0) return "scale_inv differs";
  return "";
}

template <typename F>
auto on_path(ref::CpuPath p, F&& f) {
  ref::set_cpu_path(p);
  auto r = f();
  ref::set_cpu_path(ref::CpuPath::kSimd);
  return r;
}

/// Quantizes (and dequantizes both planes to every output type) on both paths; "" when every byte agrees.
std::string compare_paths(const MatrixView& x, const Recipe& r, const float* amax_pair = nullptr) {
  auto quant = [&] {
    return amax_pair != nullptr ? ref::quantize_with_amax(x, r, amax_pair[0], amax_pair[1]) : ref::quantize(x, r);
  };
  QuantizedTensor qs, qv;
  std::string err_s, err_v;
  try {
    qs = on_path(ref::CpuPath::kScalar, quant);
  } catch (const std::exception& e) {
    err_s = e.what();
  }
  try {
    qv = on_path(ref::CpuPath::kSimd, quant);
  } catch (const std::exception& e) {
    err_v = e.what();
  }
  if (err_s != err_v) return "errors differ: scalar '" + err_s + "', simd '" + err_v + "'";
  if (!err_s.empty()) return "";
  if (auto d = diff_tensor(qs, qv); !d.empty()) return "quantize: " + d;
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
    if (!(pk == PlaneKind::kRowwise ? qs.rowwise : qs.columnwise)) continue;
    for (DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
      const HostMatrix ds = on_path(ref::CpuPath::kScalar, [&] { return ref::dequantize(qs, pk, out); });
      const HostMatrix dv = on_path(ref::CpuPath::kSimd, [&] { return ref::dequantize(qs, pk, out); });
      const std::string what = std::string("dequantize ") + (pk == PlaneKind::kRowwise ? "rowwise" : "columnwise") + " to " +
                               std::string(dtype_name(out));
      if (auto d = diff_dequantized(what, ds, dv); !d.empty()) return d;
    }
  }
  return "";
}

class SimdExact : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ref::simd_force_target(GetParam());
    ASSERT_EQ(ref::simd_target(), GetParam()) << "dynamic dispatch did not switch to the forced instruction set";
  }
  void TearDown() override { ref::simd_force_target(""); }
};

TEST_P(SimdExact, GeneratedCases) {
  const auto recipes = conformance::all_recipe_variants();
  const auto cases = conformance::generated_cases(recipes);
  ASSERT_GT(cases.size(), 500u);
  int64_t compared = 0, vectorized = 0;
  for (const auto& c : cases) {
    const HostMatrix x = conformance::make_input(c.input, c.dtype, c.rows, c.cols, 20261129);
    if (ref::simd_supports(c.recipe, c.dtype)) ++vectorized;
    const std::string d = compare_paths(x.view(), c.recipe);
    EXPECT_EQ(d, "") << c.id;
    ++compared;
    // quantize_with_amax with different rowwise / columnwise amaxes (NVFP4 per-tensor, FP8 tensor).
    const bool nv = c.recipe.kind() == RecipeKind::kNVFP4 && !c.recipe.nvfp4_row_scaled();
    if (nv || c.recipe.kind() == RecipeKind::kFP8Tensor) {
      const float a = ref::amax(x.view());
      for (const auto& pair : {std::pair<float, float>{a, a * 2.0f}, {a * 0.5f, a}, {0.0f, a}}) {
        const float ap[2] = {pair.first, pair.second};
        EXPECT_EQ(compare_paths(x.view(), c.recipe, ap), "") << c.id << " quantize_with_amax(" << ap[0] << ", " << ap[1] << ")";
        ++compared;
      }
    }
  }
  std::printf("[%s] %lld comparisons of %zu generated cases (%lld on the vectorized path)\n", GetParam().c_str(),
              static_cast<long long>(compared), cases.size(), static_cast<long long>(vectorized));
}

/// Shapes beyond the generated 32x128 / 48x80: several strips of every recipe, partial blocks, K not a multiple
/// of the vector width, and every input family. QTC_SIMD_SWEEP=sanitizer (the CI sanitizer stage, where each
/// comparison costs ~20x more) keeps the raggedest shape of each kind and the special and tiny input families:
/// every tail and edge path under ASan/UBSan; the whole sweep runs in the default stage.
TEST_P(SimdExact, LargerShapes) {
  const auto recipes = conformance::all_recipe_variants();
  const char* sweep = std::getenv("QTC_SIMD_SWEEP");
  const bool subset = sweep != nullptr && std::string(sweep) == "sanitizer";
  using conformance::InputClass;
  const std::vector<InputClass> classes = subset ? std::vector<InputClass>{InputClass::kSpecial, InputClass::kTiny}
                                                 : std::vector<InputClass>{InputClass::kNormal, InputClass::kSpecial, InputClass::kTiny};
  int64_t compared = 0;
  for (const Recipe& r : recipes) {
    const bool nv = r.kind() == RecipeKind::kNVFP4;
    struct S {
      int64_t m, k;
    };
    std::vector<S> shapes = nv ? std::vector<S>{{272, 160}, {48, 528}} : std::vector<S>{{300, 262}, {129, 37}};
    if (subset) shapes.erase(shapes.begin());
    for (const S& s : shapes)
      for (auto ic : classes) {
        const DType t = r.nvfp4_rht() || ic != conformance::InputClass::kNormal ? DType::kBF16 : DType::kF16;
        const HostMatrix x = conformance::make_input(ic, t, s.m, s.k, 7);
        EXPECT_EQ(compare_paths(x.view(), r), "") << r.name() << " " << s.m << "x" << s.k << " "
                                                   << conformance::input_class_name(ic);
        ++compared;
      }
  }
  std::printf("[%s] %lld comparisons on larger shapes\n", GetParam().c_str(), static_cast<long long>(compared));
}

TEST_P(SimdExact, BundledVectorInputs) {
  std::vector<conformance::FileResult> problems;
  // vectors/te and vectors/te_layout (the same inputs in TransformerEngine's scale layouts).
  const std::string te_layout = std::string(QTC_BUNDLED_VECTORS_DIR) + "/../te_layout";
  const auto files = conformance::collect_vector_files({QTC_BUNDLED_VECTORS_DIR, te_layout}, problems);
  ASSERT_TRUE(problems.empty());
  ASSERT_FALSE(files.empty());
  int64_t compared = 0;
  for (const auto& f : files) {
    const io::File file = io::read_file(f);
    Recipe r;
    try {
      auto md = file.metadata;
      md.erase("layout");  // the scale layout of the file's outputs: not part of the recipe
      md.erase("swizzled");
      r = Recipe::from_metadata(md);
    } catch (const std::exception& e) {
      ADD_FAILURE() << f << ": " << e.what();
      continue;
    }
    const io::Tensor* xt = file.find("x");
    ASSERT_NE(xt, nullptr) << f;
    ASSERT_EQ(xt->shape.size(), 2u) << f;
    const DType t = xt->dtype == "BF16" ? DType::kBF16 : xt->dtype == "F16" ? DType::kF16 : DType::kF32;
    const MatrixView x{xt->bytes.data(), t, xt->shape[0], xt->shape[1]};
    // Both planes where the recipe allows them (the file may check one only).
    for (int planes = 0; planes < 3; ++planes) {
      Recipe rp = r;
      rp.rowwise = planes != 1;
      rp.columnwise = planes != 0;
      try {
        rp.validate_input(t, x.rows, x.cols);
      } catch (const Error&) {
        continue;
      }
      EXPECT_EQ(compare_paths(x, rp), "") << f << " (" << rp.name() << ")";
      ++compared;
    }
  }
  std::printf("[%s] %lld comparisons on %zu bundled vector inputs\n", GetParam().c_str(), static_cast<long long>(compared),
              files.size());
}

/// MXFP4 under every profile that defines it and every scale rule it names (the generated cases cover te's order
/// only): the orders mxfp4_simd.cpp implements give the scalar bits, on ragged shapes, both planes, every input
/// family and type; the others (torchao, compressed_tensors, fbgemm, quark, te_pyref) are refused by the rule's name and
/// take the scalar path.
TEST_P(SimdExact, Mxfp4EveryProfileAndRule) {
  const char* sweep = std::getenv("QTC_SIMD_SWEEP");
  const bool subset = sweep != nullptr && std::string(sweep) == "sanitizer";
  struct S {
    int64_t m, k;
  };
  const std::vector<S> shapes = subset ? std::vector<S>{{129, 37}, {33, 1}} : std::vector<S>{{300, 262}, {129, 37}, {64, 96}, {33, 1}};
  using conformance::InputClass;
  int64_t compared = 0, vectorized = 0;
  for (const ProfileRules& pr : all_profiles()) {
    if (!pr.mxfp4) continue;
    const bool implemented = !pr.mxfp4_te_reference && (pr.mx_order == MxOrder::kTE || pr.mx_order == MxOrder::kTritonKernels ||
                                                        pr.mx_order == MxOrder::kVllmCutlass);
    for (MxScaleRule rule : pr.mxfp4_scale_rules) {
      const Recipe r = Recipe::of(Mxfp4Options{.scale_rule = rule}, pr.id);
      std::string why;
      EXPECT_EQ(ref::simd_supports(r, DType::kBF16, &why), implemented) << r.name() << ": " << why;
      if (!implemented) {
        EXPECT_NE(why.find("rule mxfp4.order "), std::string::npos) << why;
      }
      int t = 0;
      for (const S& s : shapes)
        for (InputClass ic : {InputClass::kNormal, InputClass::kSpecial, InputClass::kTiny}) {
          const DType dt = (t++ % 3) == 0 ? DType::kF32 : (t % 3 == 1 ? DType::kBF16 : DType::kF16);
          const HostMatrix x = conformance::make_input(ic, dt, s.m, s.k, 24 + t);
          EXPECT_EQ(compare_paths(x.view(), r), "") << r.name() << " " << s.m << "x" << s.k << " "
                                                     << conformance::input_class_name(ic) << " " << dtype_name(dt);
          ++compared;
          vectorized += implemented ? 1 : 0;
        }
    }
  }
  EXPECT_GT(vectorized, 0);
  std::printf("[%s] %lld MXFP4 comparisons (%lld on the vectorized path)\n", GetParam().c_str(), static_cast<long long>(compared),
              static_cast<long long>(vectorized));
}

INSTANTIATE_TEST_SUITE_P(Targets, SimdExact, testing::ValuesIn(ref::simd_available_targets()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(SimdDispatch, PredicateFallsBackForWhatItDoesNotImplement) {
  Recipe nv;
  EXPECT_TRUE(ref::simd_supports(nv, DType::kBF16));
  Recipe ao = nv;
  ao.profile = Profile::kTorchAO;
  std::string why;
  EXPECT_FALSE(ref::simd_supports(ao, DType::kBF16, &why));
  EXPECT_NE(why.find("nvfp4.order te only"), std::string::npos) << why;  // the rule, read from the profile record
  Recipe mx = Recipe::of(Mxfp8Options{});
  EXPECT_TRUE(ref::simd_supports(mx, DType::kF32));
  mx.profile = Profile::kTorchAO;
  EXPECT_FALSE(ref::simd_supports(mx, DType::kF32));
  EXPECT_FALSE(ref::simd_supports(nv, DType::kU8));
  EXPECT_FALSE(ref::simd_supports_dequantize(nv, DType::kF16, &why));
  EXPECT_TRUE(ref::simd_supports_dequantize(nv, DType::kBF16));
  EXPECT_FALSE(ref::simd_supports_dequantize(ao, DType::kF32));
  // A fallback recipe gives the scalar bits on the default path (the path is chosen per call).
  const HostMatrix x = conformance::make_input(conformance::InputClass::kSpecial, DType::kBF16, 32, 64, 3);
  EXPECT_EQ(compare_paths(x.view(), ao), "");
  // The predicate reads rules, not profile names: a variant of te with a rule the vector code has (the FP8
  // scale as fp8_max * RN(1 / amax)) stays vectorized and gives the scalar bits; one whose NVFP4 rules the
  // vector code does not combine (-0.0 -> 0x0 alone) falls back, naming the rule.
  ProfileRules recip = profile_rules(Profile::kTE);
  recip.name = "te+simd_test_scale_reciprocal";
  recip.fp8_scale_reciprocal = true;
  for (RecipeKind k : {RecipeKind::kFP8Tensor, RecipeKind::kFP8Block}) {
    Recipe t;
    t.set_options(Recipe::default_options(k));
    t.profile = register_profile_variant(recip);
    EXPECT_TRUE(ref::simd_supports(t, DType::kF32)) << t.name();
    const HostMatrix xf = conformance::make_input(conformance::InputClass::kSpecial, DType::kF32, 40, 136, 5);
    EXPECT_EQ(compare_paths(xf.view(), t), "") << t.name();
  }
  ProfileRules half = profile_rules(Profile::kTE);
  half.name = "te+simd_test_neg_zero";
  half.nvfp4_neg_zero_positive = true;
  Recipe hv;
  hv.profile = register_profile_variant(half);
  EXPECT_FALSE(ref::simd_supports(hv, DType::kBF16, &why));
  EXPECT_NE(why.find("rule nvfp4.neg_zero on"), std::string::npos) << why;  // the shared check (path_rules.hpp)
  EXPECT_EQ(compare_paths(x.view(), hv), "");
}

TEST(SimdDispatch, TargetsAndPathControls) {
  const auto targets = ref::simd_available_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(ref::simd_target(), targets.front());
  EXPECT_THROW(ref::simd_force_target("NO_SUCH_TARGET"), Error);
  ref::simd_force_target("");
  std::printf("vectorized path: %s (compiled and supported here:", ref::simd_target().c_str());
  for (const auto& t : targets) std::printf(" %s", t.c_str());
  std::printf(")\n");
}

/// Run by ctest in a process of its own, with and without QTC_SCALAR=1 (tests.cmake): the environment decides
/// the path at the first call.
TEST(SimdEnv, QtcScalarChoosesThePath) {
  const char* env = std::getenv("QTC_SCALAR");
  const bool scalar_env = env != nullptr && *env != '\0' && std::string(env) != "0";
  EXPECT_EQ(ref::cpu_path(), scalar_env ? ref::CpuPath::kScalar : ref::CpuPath::kSimd) << "QTC_SCALAR=" << (env ? env : "(unset)");
}

}  // namespace
