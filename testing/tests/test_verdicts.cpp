/// \file test_verdicts.cpp
/// \brief The verdict library (qtc/test_support.hpp) and the verdicts of `qtc verify`:
///   * quantized_equal() prints, for a flipped data byte / scale / amax, the very line `qtc verify` prints for the
///     same tensors (shared formatter), with the block's inputs; bit-exact vs any-NaN-equal rules; shape and plane
///     presence differences are named; every further mismatching tensor follows on its own line;
///   * a backend that throws a CUDA-style BackendError gives verdict error with CUDA's message, a refused launch
///     gives skipped with the reason, a backend that answers wrong gives fail; the gating table's refusal is a skip;
///     the CUDA backend without a device refuses (BackendError kNotSupported), it does not fail;
///   * the GPU gate's one rule (no device: skip, or fail under QTC_REQUIRE_GPU; table refusal: skip even then);
///   * QTC_SEED and the input families (each family has what its name says, and is a function of the seed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "qtc/backend.hpp"
#include "qtc/codec.hpp"
#include "qtc/cuda/backend.hpp"
#include "qtc/quantize.hpp"
#include "qtc/test_support.hpp"
#include "qtc/verify.hpp"

namespace {

using namespace qtc;
using qtc::testing::Family;
using qtc::testing::make_input;

std::string message(const ::testing::AssertionResult& r) { return r.message(); }

/// Puts an env var for the scope of one test.
struct EnvVar {
  std::string name;
  std::string old;
  bool had;
  EnvVar(const char* n, const char* v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    if (v) setenv(n, v, 1); else unsetenv(n);
  }
  ~EnvVar() {
    if (had) setenv(name.c_str(), old.c_str(), 1); else unsetenv(name.c_str());
  }
};

/// The vector of (x, want): what qtc verify would read from a file holding the reference's outputs.
io::File vector_of(const HostMatrix& x, const QuantizedTensor& q) {
  io::File f;
  f.metadata = q.recipe.to_metadata();
  f.put(io::Tensor{"x", "F32", {x.rows, x.cols}, x.bytes});
  const char* p[] = {"rowwise", "columnwise"};
  for (int k = 0; k < 2; ++k) {
    const std::optional<Plane>& pl = k == 0 ? q.rowwise : q.columnwise;
    if (!pl) continue;
    f.put(io::Tensor{std::string(p[k]) + "_data", "U8", {pl->data_rows, pl->data_cols}, pl->data});
    const bool f32 = pl->scale.type == ScaleType::kF32;
    f.put(io::Tensor{std::string(p[k]) + "_scale_inv", f32 ? "F32" : "U8", {pl->scale.rows, pl->scale.cols}, pl->scale.bytes});
    if (q.recipe.kind() == RecipeKind::kNVFP4) {
      std::vector<uint8_t> a(pl->amax.size() * 4);
      std::memcpy(a.data(), pl->amax.data(), a.size());
      f.put(io::Tensor{std::string("amax_") + p[k], "F32", {static_cast<int64_t>(pl->amax.size())}, a});
    }
  }
  return f;
}

/// A backend that returns a fixed answer, or throws what it is told to.
class FakeBackend final : public QuantizeBackend {
 public:
  QuantizedTensor answer;
  std::string refuse;                       ///< unsupported_reason
  std::optional<BackendError::Kind> throws;  ///< quantize throws a BackendError of this kind
  std::string name() const override { return "fake"; }
  std::string unavailable_reason() const override { return ""; }
  std::string unsupported_reason(const Recipe&, DType, int64_t, int64_t) const override { return refuse; }
  QuantizedTensor quantize(const MatrixView&, const Recipe&) override {
    if (throws)
      throw BackendError(*throws, *throws == BackendError::Kind::kError
                                      ? "cuda backend: quantizing: CUDA error 700 (cudaErrorIllegalAddress: an illegal memory "
                                        "access was encountered) in `cudaStreamSynchronize(s)`"
                                      : "cuda backend: gating table: NVFP4 needs SM >= 9.0, found SM 8.0");
    return answer;
  }
  HostMatrix dequantize(const QuantizedTensor& q, PlaneKind p, DType t) override { return make_cpu_backend()->dequantize(q, p, t); }
};

Recipe nvfp4() {
  Recipe r = Recipe::of(Nvfp4Options{});
  return r;
}

TEST(FirstMismatch, QuantizedEqualPrintsTheLineOfQtcVerify) {
  const HostMatrix x = make_input(Family::kNormal, DType::kF32, 32, 48, 7);
  const MatrixView xv = x.view();
  const Recipe r = nvfp4();
  const QuantizedTensor want = ref::quantize(x.view(), r);
  EXPECT_TRUE(qtc::testing::quantized_equal(want, want, &xv));
  QuantizedTensor got = want;
  got.rowwise->data[5 * 24 + 7] ^= 0x30;  // element [5, 15] (high nibble of byte 7 of row 5)
  const ::testing::AssertionResult lib = qtc::testing::quantized_equal(want, got, &xv);
  ASSERT_FALSE(lib);
  // What qtc verify prints for the same tensors: the file holds `want`, the backend answers `got`.
  FakeBackend be;
  be.answer = got;
  const conformance::FileResult v = conformance::verify_vector(vector_of(x, want), "v", be);
  ASSERT_EQ(v.verdict, conformance::Verdict::kFail);
  ASSERT_FALSE(v.mismatches.empty());
  const std::string line = conformance::mismatch_text(v.mismatches.front());
  EXPECT_EQ(message(lib), line);
  EXPECT_NE(message(lib).find("rowwise_data: 1 of 1536 elements differ; first at [5, 15]: expected 0x"), std::string::npos) << message(lib);
  EXPECT_NE(message(lib).find("; block x[5, 0:16] = {"), std::string::npos) << message(lib);
  // Without x: the same line without the block.
  const std::string no_x = message(qtc::testing::quantized_equal(want, got));
  EXPECT_EQ(no_x, line.substr(0, line.find("; block")));
}

TEST(FirstMismatch, EveryMismatchingTensorOnItsOwnLine) {
  const HostMatrix x = make_input(Family::kHeavy, DType::kF32, 48, 80, 9);
  const MatrixView xv = x.view();
  const QuantizedTensor want = ref::quantize(x.view(), nvfp4());
  QuantizedTensor got = want;
  got.columnwise->scale.bytes[3] ^= 1;
  got.rowwise->amax[0] = -got.rowwise->amax[0];
  const std::string m = message(qtc::testing::quantized_equal(want, got, &xv));
  EXPECT_EQ(m.rfind("columnwise_scale_inv: 1 of ", 0), std::string::npos) << "rowwise comes first: " << m;
  EXPECT_NE(m.find("amax_rowwise: 1 of 1 elements differ; first at [0]: expected 0x"), std::string::npos) << m;
  EXPECT_NE(m.find("\n  columnwise_scale_inv: 1 of "), std::string::npos) << m;
  EXPECT_NE(m.find("(e4m3 "), std::string::npos) << m;
  got = want;
  got.columnwise.reset();
  EXPECT_EQ(message(qtc::testing::quantized_equal(want, got)), "columnwise plane: absent, expected present");
}

TEST(FirstMismatch, NanRules) {
  std::vector<float> a = {1.0f, std::nanf("1"), 3.0f}, b = {1.0f, std::nanf("2"), 3.0f};
  EXPECT_TRUE(qtc::testing::f32_equal("amax", a, b, 1, 3, qtc::testing::NanRule::kAnyNanEqual));
  const ::testing::AssertionResult strict = qtc::testing::f32_equal("amax", a, b, 1, 3);
  ASSERT_FALSE(strict);
  EXPECT_NE(message(strict).find("amax: 1 of 3 elements differ; first at [1]: expected 0x7fc00001 (nan), got 0x7fc00002 (nan)"),
            std::string::npos) << message(strict);
  HostMatrix m(DType::kBF16, 2, 3), n(DType::kBF16, 2, 3);
  n.set(1, 2, 1.5f);
  EXPECT_NE(message(qtc::testing::matrices_equal("y", m, n)).find("y: 1 of 6 elements differ; first at [1, 2]: expected 0x0000 (bf16 0), got 0x3fc0 (bf16 1.5)"),
            std::string::npos) << message(qtc::testing::matrices_equal("y", m, n));
  EXPECT_NE(message(qtc::testing::matrices_equal("y", m, HostMatrix(DType::kF32, 2, 3))).find("y: F32 [2, 3], expected BF16 [2, 3]"),
            std::string::npos);
}

TEST(Verdicts, CudaErrorIsAnErrorNotAFailure) {
  const HostMatrix x = make_input(Family::kNormal, DType::kF32, 16, 32, 3);
  const QuantizedTensor want = ref::quantize(x.view(), nvfp4());
  FakeBackend be;
  be.throws = BackendError::Kind::kError;
  const conformance::FileResult v = conformance::verify_vector(vector_of(x, want), "v", be);
  EXPECT_EQ(v.verdict, conformance::Verdict::kError);
  EXPECT_NE(v.message.find("CUDA error 700 (cudaErrorIllegalAddress"), std::string::npos) << v.message;
  conformance::Summary s;
  s.add(v.verdict);
  EXPECT_EQ(s.exit_code(), 2);
}

TEST(Verdicts, RefusedLaunchIsSkippedWithTheReason) {
  const HostMatrix x = make_input(Family::kNormal, DType::kF32, 16, 32, 3);
  const QuantizedTensor want = ref::quantize(x.view(), nvfp4());
  FakeBackend be;
  be.throws = BackendError::Kind::kNotSupported;
  conformance::FileResult v = conformance::verify_vector(vector_of(x, want), "v", be);
  EXPECT_EQ(v.verdict, conformance::Verdict::kSkipped);
  EXPECT_EQ(v.message, "cuda backend: gating table: NVFP4 needs SM >= 9.0, found SM 8.0");
  // Refused up front (unsupported_reason: the gating table's verdict): skipped with the reason, nothing run.
  be.throws.reset();
  be.refuse = "quantize.nvfp4 needs SM >= 9.0, found SM 8.0";
  v = conformance::verify_vector(vector_of(x, want), "v", be);
  EXPECT_EQ(v.verdict, conformance::Verdict::kSkipped);
  EXPECT_EQ(v.message, be.refuse);
  // A wrong answer is a failure.
  be.refuse.clear();
  be.answer = want;
  be.answer.rowwise->scale.bytes[0] ^= 0x08;
  v = conformance::verify_vector(vector_of(x, want), "v", be);
  EXPECT_EQ(v.verdict, conformance::Verdict::kFail);
  EXPECT_EQ(v.message.rfind("rowwise_scale_inv: 1 of 32 elements differ; first at [0, 0]: expected 0x", 0), 0u) << v.message;
}

TEST(Verdicts, CudaBackendWithoutDeviceRefusesNotFails) {
  auto cuda = make_cuda_backend();
  if (cuda->unavailable_reason().empty()) GTEST_SKIP() << "a CUDA device is here: nothing to refuse";
  const HostMatrix x = make_input(Family::kNormal, DType::kF32, 16, 32, 3);
  try {
    (void)cuda->quantize(x.view(), nvfp4());
    FAIL() << "quantize ran without a device";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.kind, BackendError::Kind::kNotSupported);
    EXPECT_NE(std::string(e.what()).find(cuda->unavailable_reason()), std::string::npos) << e.what();
  }
}

TEST(GpuGate, OneRule) {
  using qtc::testing::GateDecision;
  using qtc::testing::gpu_gate;
  const gating::Support refused{false, "MXFP8 GEMM needs SM 10.x-11.x (TE_FORMATS.md §7.7), found SM 9.0"};
  {
    EnvVar e("QTC_REQUIRE_GPU", nullptr);
    const GateDecision d = gpu_gate("no CUDA device");
    EXPECT_EQ(d.kind, GateDecision::kSkip);
    EXPECT_EQ(d.message, "no CUDA device");
    EXPECT_EQ(gpu_gate("", [&] { return refused; }).kind, GateDecision::kSkip);
    EXPECT_EQ(gpu_gate("").kind, GateDecision::kRun);
  }
  {
    EnvVar e("QTC_REQUIRE_GPU", "1");
    bool asked = false;
    const GateDecision d = gpu_gate("no CUDA device", [&] { asked = true; return refused; });
    EXPECT_EQ(d.kind, GateDecision::kFail);
    EXPECT_EQ(d.message, "QTC_REQUIRE_GPU=1 but no CUDA device");
    EXPECT_FALSE(asked) << "the table is asked only when a device is there";
    const GateDecision t = gpu_gate("", [&] { return refused; });
    EXPECT_EQ(t.kind, GateDecision::kSkip) << "the table's refusal is not a missing device";
    EXPECT_EQ(t.message, "gating table: " + refused.reason);
    EXPECT_EQ(gpu_gate("", [] { return gating::Support{true, {}}; }).kind, GateDecision::kRun);
  }
  {
    EnvVar e("QTC_REQUIRE_GPU", "0");
    EXPECT_EQ(gpu_gate("no CUDA device").kind, GateDecision::kSkip);
  }
}

TEST(Seeds, QtcSeedOverridesAndIsPrinted) {
  {
    EnvVar e("QTC_SEED", nullptr);
    EXPECT_EQ(qtc::testing::test_seed(42), 42u);
  }
  EnvVar e("QTC_SEED", "0x1F");
  EXPECT_EQ(qtc::testing::test_seed(42), 31u);
  EXPECT_EQ(qtc::testing::seed_note(31), "seed 0x000000000000001f (QTC_SEED=0x1f reproduces this run)");
}

TEST(InputFamilies, EachHoldsWhatItsNameSays) {
  for (Family f : qtc::testing::kAllFamilies)
    for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(std::string(qtc::testing::family_name(f)) + " " + std::string(dtype_name(t)));
      const HostMatrix a = make_input(f, t, 65, 80, 1), b = make_input(f, t, 65, 80, 1), c = make_input(f, t, 65, 80, 2);
      EXPECT_TRUE(qtc::testing::matrices_equal("x", a, b)) << "a function of the seed";
      EXPECT_FALSE(qtc::testing::matrices_equal("x", a, c)) << "another seed, other values";
      int64_t nan = 0, inf = 0, negzero = 0, zero = 0, sub = 0;
      for (int64_t i = 0; i < a.rows; ++i)
        for (int64_t j = 0; j < a.cols; ++j) {
          const float v = a.get(i, j);
          nan += std::isnan(v);
          inf += std::isinf(v);
          negzero += v == 0.0f && std::signbit(v);
          zero += v == 0.0f;
          sub += v != 0.0f && std::fabs(v) < (t == DType::kF16 ? 0x1p-14f : 0x1p-126f);
        }
      if (f == Family::kSpecial) {
        EXPECT_GT(nan, 0);
        EXPECT_GT(inf, 0);
        EXPECT_GT(negzero, 0);
      } else {
        EXPECT_EQ(nan, 0);
      }
      if (f == Family::kZeros) {
        EXPECT_GT(zero, a.rows * a.cols / 4);
        for (int64_t j = 0; j < a.cols; ++j) EXPECT_EQ(a.get(3, j), 0.0f) << "row 3 is a zero row";
      }
      if (f == Family::kTiny) {
        EXPECT_GT(sub, 0);
      }
      if (f == Family::kHuge) {
        EXPECT_EQ(inf, 0) << "the largest finite values, not infinity";
      }
    }
}

}  // namespace
