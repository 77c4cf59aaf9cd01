/// \file test_verify.cpp
/// \brief `qtc verify`'s logic on planted mismatches and malformed vectors, and the generated-case machinery.
///
/// Covers:
///   | area                | cases                                                                        |
///   |---------------------|------------------------------------------------------------------------------|
///   | planted mismatches  | one flipped element in each tensor kind (E2M1 nibble, FP8 byte, E4M3/E8M0    |
///   |                     | scale, F32 scale, amax, scale_inv, dequantized): fail, count 1, coordinates, |
///   |                     | both values, the block's inputs                                              |
///   | NaN                 | any NaN equals any NaN in F32 tensors                                        |
///   | malformed vectors   | unknown recipe / parameter value / key, missing x, no expected output, wrong |
///   |                     | shape / dtype, tensor of another recipe, unreadable file: error naming it    |
///   | backends            | cuda without CUDA: skipped with the reason                                   |
///   | files               | directory recursion, missing path, empty directory                           |
///   | generated cases     | every recipe variant x family writes a vector that verifies and reads back   |
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <filesystem>
#include <string>

#include "cases.hpp"
#include "qtc/codec.hpp"
#include "backends.hpp"
#include "qtc/verify.hpp"
#include "qtc/cuda/backend.hpp"
#include "qtc/test_fixtures.hpp"

namespace {

namespace fs = std::filesystem;
using qtc::conformance::FileResult;
using qtc::conformance::Verdict;
using qtc::conformance::ElementCode;
using qtc::conformance::TensorMismatch;
using qtc::conformance::detail_lines;

const std::string kDir = QTC_BUNDLED_VECTORS_DIR;

qtc::io::File load(const std::string& name) { return qtc::io::read_file(kDir + "/" + name); }

FileResult run(const qtc::io::File& f, const std::string& source = "planted.safetensors") {
  auto cpu = qtc::make_cpu_backend();
  return qtc::conformance::verify_vector(f, source, *cpu);
}

qtc::io::Tensor& tensor(qtc::io::File& f, const std::string& name) {
  for (auto& t : f.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "message: " << text << "\nexpected to contain: " << part;
}

// ---------------------------------------------------------------------------------------------------
// Planted mismatches

TEST(VerifyPlanted, UnmodifiedVectorsPass) {
  for (const char* n : {"nvfp4_1x16_normal_16x48.safetensors", "fp8block_1x128_e4m3_normal_16x48.safetensors",
                        "mxfp8rceil_e4m3_normal_f32_65x80.safetensors", "fp8tensor_e4m3_normal_16x48.safetensors",
                        "mxfp8ocp_e4m3_normal_32x64.safetensors"}) {
    const FileResult r = run(load(n), n);
    EXPECT_EQ(r.verdict, Verdict::kPass) << n << ": " << r.message;
  }
}

TEST(VerifyPlanted, Nvfp4RowwiseNibble) {
  auto f = load("nvfp4_1x16_normal_16x48.safetensors");
  tensor(f, "rowwise_data").bytes[3 * 24 + 5] ^= 0x10;  // high nibble of byte 5 in row 3: element (3, 11)
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail) << r.message;
  expect_contains(r.message, "rowwise_data: 1 of 768 elements differ; first at [3, 11]: expected 0x");
  expect_contains(r.message, "(e2m1 ");
  expect_contains(r.message, "block x[3, 0:16] = {");
  const std::string line = qtc::conformance::result_line(r);
  EXPECT_EQ(line.rfind("FAIL planted.safetensors [cpu]: rowwise_data", 0), 0u) << line;
}

TEST(VerifyPlanted, Nvfp4ColumnwiseNibbleNamesTheColumnBlock) {
  auto f = load("nvfp4_1x16_normal_16x48.safetensors");
  tensor(f, "columnwise_data").bytes[7 * 8 + 2] ^= 0x01;  // row k=7, low nibble of byte 2: element (7, 4) = x(4, 7)
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail);
  expect_contains(r.message, "columnwise_data: 1 of 768 elements differ; first at [7, 4]");
  expect_contains(r.message, "block x[0:16, 7]");
}

TEST(VerifyPlanted, Nvfp4E4m3ScaleAndAmax) {
  auto f = load("nvfp4_1x16_normal_16x48.safetensors");
  tensor(f, "rowwise_scale_inv").bytes[2 * 3 + 1] ^= 0x01;
  tensor(f, "amax_rowwise").bytes[0] ^= 0x01;
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail);
  ASSERT_EQ(r.mismatches.size(), 2u);
  const std::vector<std::string> lines = detail_lines(r);
  ASSERT_EQ(lines.size(), 2u);
  expect_contains(lines[0], "rowwise_scale_inv: 1 of 48 elements differ; first at [2, 1]");
  expect_contains(lines[0], "(e4m3 ");
  expect_contains(lines[0], "block x[2, 16:32]");
  expect_contains(lines[1], "amax_rowwise: 1 of 1 elements differ; first at [0]: expected 0x");
  expect_contains(r.message, "(also differ: amax_rowwise)");
  // The verdict is data: the records hold what the lines say.
  const TensorMismatch& s = r.mismatches[0];
  EXPECT_EQ(s.tensor, "rowwise_scale_inv");
  EXPECT_TRUE(s.compared());
  EXPECT_EQ(s.count, 1);
  EXPECT_EQ(s.total, 48);
  EXPECT_EQ(s.first, 2 * 3 + 1);
  EXPECT_EQ(s.at, (std::vector<int64_t>{2, 1}));
  EXPECT_TRUE(s.file_at.empty());
  EXPECT_EQ(s.want ^ s.got, 0x01u);
  EXPECT_EQ(s.elem, ElementCode::kE4M3);
  expect_contains(s.block_inputs, "x[2, 16:32] = {");
  EXPECT_EQ(r.mismatches[1].tensor, "amax_rowwise");
  EXPECT_EQ(r.mismatches[1].elem, ElementCode::kF32);
  EXPECT_EQ(r.mismatching_elements(), 2);
}

TEST(VerifyPlanted, Fp8BlockF32ScaleAndData) {
  auto f = load("fp8block_1x128_e4m3_normal_16x48.safetensors");
  tensor(f, "columnwise_scale_inv").bytes[4 * 10 + 3] ^= 0x80;  // sign of the scale of row k=10
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail);
  expect_contains(r.message, "columnwise_scale_inv: 1 of 48 elements differ; first at [10, 0]: expected 0x");
  expect_contains(r.message, "block x[0:16, 10]");

  auto g = load("fp8block_1x128_e4m3_normal_16x48.safetensors");
  tensor(g, "rowwise_data").bytes[5 * 48 + 40] ^= 0x02;
  const FileResult s = run(g);
  ASSERT_EQ(s.verdict, Verdict::kFail);
  expect_contains(s.message, "rowwise_data: 1 of 768 elements differ; first at [5, 40]");
  expect_contains(s.message, "(e4m3 ");
}

TEST(VerifyPlanted, Mxfp8E8m0Scale) {
  auto f = load("mxfp8rceil_e4m3_normal_f32_65x80.safetensors");
  tensor(f, "columnwise_scale_inv").bytes[2 * 80 + 79] ^= 0x01;  // the partial block: rows 64..65
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail);
  expect_contains(r.message, "columnwise_scale_inv: 1 of 240 elements differ; first at [2, 79]");
  expect_contains(r.message, "(e8m0 2^");
  expect_contains(r.message, "block x[64, 79]");
}

TEST(VerifyPlanted, Fp8TensorScaleInvAndAmax) {
  auto f = load("fp8tensor_e4m3_normal_16x48.safetensors");
  tensor(f, "scale_inv").bytes[1] ^= 0x01;
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail);
  expect_contains(r.message, "scale_inv: 1 of 1 elements differ; first at [0]");
}

TEST(VerifyPlanted, ScalarAmaxStandsForShapeOne) {
  auto f = load("fp8tensor_e4m3_normal_16x48.safetensors");
  tensor(f, "amax").shape = {};
  tensor(f, "scale_inv").shape = {};
  EXPECT_EQ(run(f).verdict, Verdict::kPass);
  tensor(f, "amax").bytes[0] ^= 1;
  EXPECT_EQ(run(f).verdict, Verdict::kFail);
}

TEST(VerifyPlanted, DequantizedF32) {
  auto f = load("mxfp8ocp_e4m3_normal_32x64.safetensors");
  auto& t = tensor(f, "dequantized_columnwise");
  t.bytes[4 * (9 * 64 + 33)] ^= 0x01;
  t.bytes[4 * (20 * 64 + 1)] ^= 0x01;
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kFail);
  expect_contains(r.message, "dequantized_columnwise: 2 of 2048 elements differ; first at [9, 33]");
  expect_contains(r.message, "block x[0:32, 33]");
}

TEST(VerifyNan, AnyNanEqualsAnyNan) {
  // A generated vector of the NaN family: flip the payload of every NaN in the expected dequantized output.
  const qtc::conformance::Case c{"nan", [] {
                                   return qtc::Recipe::of(qtc::Mxfp8Options{});
                                 }(),
                                 qtc::conformance::InputClass::kSpecial, qtc::DType::kF32, 32, 64};
  auto cpu = qtc::make_cpu_backend();
  const qtc::HostMatrix x = qtc::conformance::make_input(c.input, c.dtype, c.rows, c.cols, 1);
  const auto q = cpu->quantize(x.view(), c.recipe);
  auto f = qtc::conformance::make_vector(c, x, q, *cpu, 1);
  int nans = 0;
  for (auto& t : f.tensors) {
    if (t.name != "dequantized_rowwise") continue;
    for (size_t i = 0; i < t.bytes.size(); i += 4) {
      uint32_t u;
      std::memcpy(&u, &t.bytes[i], 4);
      if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        u ^= 0x80000001u;  // another NaN: other sign, other payload
        std::memcpy(&t.bytes[i], &u, 4);
        ++nans;
      }
    }
  }
  ASSERT_GT(nans, 0);
  const FileResult r = run(f);
  EXPECT_EQ(r.verdict, Verdict::kPass) << r.message;
}

// ---------------------------------------------------------------------------------------------------
// Malformed vectors: each an error naming the key or tensor

struct MalformedCase {
  std::string name;
  std::function<void(qtc::io::File&)> edit;
  std::string expected;
};

std::vector<MalformedCase> malformed_cases() {
  return {
      {"UnknownRecipe", [](qtc::io::File& f) { f.metadata["recipe"] = "nvfp5"; }, "metadata key 'recipe': unknown value 'nvfp5'"},
      {"MissingRecipe", [](qtc::io::File& f) { f.metadata.erase("recipe"); }, "metadata key 'recipe' is missing"},
      {"UnknownTile", [](qtc::io::File& f) { f.metadata["tile"] = "2x16"; }, "metadata key 'tile': unknown value '2x16'"},
      {"BadFlag", [](qtc::io::File& f) { f.metadata["rht"] = "yes"; }, "metadata key 'rht'"},
      {"UnknownKey", [](qtc::io::File& f) { f.metadata["fp8_dtype"] = "e4m3"; }, "metadata key 'fp8_dtype'"},
      {"UnknownProfile", [](qtc::io::File& f) { f.metadata["profile"] = "torchao2"; }, "metadata key 'profile'"},
      {"WrongSchema", [](qtc::io::File& f) { f.metadata["qtc.schema"] = "2"; }, "metadata key 'qtc.schema'"},
      {"MissingX",
       [](qtc::io::File& f) {
         std::erase_if(f.tensors, [](const qtc::io::Tensor& t) { return t.name == "x"; });
       },
       "missing required tensor 'x'"},
      {"NoExpectedOutput",
       [](qtc::io::File& f) {
         std::erase_if(f.tensors, [](const qtc::io::Tensor& t) { return t.name != "x"; });
       },
       "no expected output"},
      {"WrongShape",
       [](qtc::io::File& f) {
         tensor(f, "rowwise_data").shape = {24, 16};
       },
       "tensor 'rowwise_data' has shape [24, 16], expected [16, 24]"},
      {"WrongScaleShape",
       [](qtc::io::File& f) {
         auto& t = tensor(f, "rowwise_scale_inv");
         t.shape = {16, 2};
         t.bytes.resize(32);
       },
       "tensor 'rowwise_scale_inv' has shape [16, 2], expected [16, 3]"},
      {"WrongDtype", [](qtc::io::File& f) { tensor(f, "amax_rowwise").dtype = "I32"; }, "tensor 'amax_rowwise' has dtype I32, expected F32"},
      {"ByteTensorAsF32",
       [](qtc::io::File& f) {
         auto& t = tensor(f, "rowwise_scale_inv");
         t.dtype = "F16";
       },
       "tensor 'rowwise_scale_inv' has dtype F16, expected a byte type"},
      {"XNot2D", [](qtc::io::File& f) { tensor(f, "x").shape = {768}; }, "tensor 'x' has shape [768]"},
      {"XIntegers", [](qtc::io::File& f) { tensor(f, "x").dtype = "I32"; }, "tensor 'x' has dtype I32"},
      {"OtherRecipesTensor",
       [](qtc::io::File& f) {
         f.put(qtc::io::Tensor{"scale_inv", "F32", {1}, {0, 0, 0x80, 0x3F}});
       },
       "tensor 'scale_inv' is not an output of recipe nvfp4"},
      {"UnknownTensor", [](qtc::io::File& f) { f.put(qtc::io::Tensor{"rowwise_scale", "U8", {1}, {0}}); }, "tensor 'rowwise_scale'"},
      {"InputShapeIllegal",
       [](qtc::io::File& f) {
         // 16x48 -> 12x64: the expected shapes follow, but NVFP4 needs M % 16 == 0.
         tensor(f, "x").shape = {12, 64};
         std::erase_if(f.tensors, [](const qtc::io::Tensor& t) { return t.name != "x" && t.name != "amax_rowwise"; });
       },
       "NVFP4 needs M % 16 == 0"},
  };
}

class VerifyMalformed : public testing::TestWithParam<MalformedCase> {};

TEST_P(VerifyMalformed, IsAnErrorNamingTheProblem) {
  auto f = load("nvfp4_1x16_normal_16x48.safetensors");
  GetParam().edit(f);
  const FileResult r = run(f, "bad_vector.safetensors");
  EXPECT_EQ(r.verdict, Verdict::kError) << r.message;
  expect_contains(r.message, GetParam().expected);
  const std::string line = qtc::conformance::result_line(r);
  EXPECT_EQ(line.rfind("ERROR bad_vector.safetensors [cpu]: ", 0), 0u) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find("[check `"), std::string::npos) << "internal check text leaked: " << line;
}

INSTANTIATE_TEST_SUITE_P(Table, VerifyMalformed, testing::ValuesIn(malformed_cases()),
                         [](const testing::TestParamInfo<MalformedCase>& i) { return i.param.name; });

// ---------------------------------------------------------------------------------------------------
// Files, backends, summary

using qtc::test::TempDir;  // qtc/test_fixtures.hpp

TEST(VerifyFiles, UnreadableAndTruncatedFilesAreErrors) {
  TempDir d;
  {
    std::ofstream(d.path / "trunc.safetensors", std::ios::binary) << std::string("\x40\x00\x00\x00\x00\x00\x00\x00{\"x\"", 12);
  }
  auto cpu = qtc::make_cpu_backend();
  const FileResult r = qtc::conformance::verify_file(d.path / "trunc.safetensors", *cpu);
  EXPECT_EQ(r.verdict, Verdict::kError);
  const std::string line = qtc::conformance::result_line(r);
  expect_contains(line, "ERROR " + (d.path / "trunc.safetensors").string() + ": invalid safetensors file: header length 64");
}

TEST(VerifyFiles, DirectoriesRecurseAndMissingPathsAreErrors) {
  TempDir d;
  fs::create_directories(d.path / "a" / "b");
  fs::create_directories(d.path / "empty");
  fs::copy_file(kDir + "/nvfp4_1x16_normal_16x48.safetensors", d.path / "a" / "b" / "v1.safetensors");
  fs::copy_file(kDir + "/fp8tensor_e4m3_normal_16x48.safetensors", d.path / "a" / "v0.safetensors");
  { std::ofstream(d.path / "a" / "notes.txt") << "not a vector"; }
  std::vector<FileResult> problems;
  const auto files = qtc::conformance::collect_vector_files(
      {(d.path / "a").string(), (d.path / "missing").string(), (d.path / "empty").string()}, problems);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].filename(), "v1.safetensors");  // a/b/v1 sorts before a/v0
  ASSERT_EQ(problems.size(), 2u);
  expect_contains(problems[0].message, "no such file or directory");
  expect_contains(problems[1].message, "no *.safetensors");
}

TEST(VerifyBackends, CudaWithoutCudaIsSkippedWithReason) {
  auto cuda = qtc::make_cuda_backend();
  if (cuda->unavailable_reason().empty()) GTEST_SKIP() << "a CUDA backend is available here";
  const FileResult r = qtc::conformance::verify_vector(load("nvfp4_1x16_normal_16x48.safetensors"), "v", *cuda);
  EXPECT_EQ(r.verdict, Verdict::kSkipped);
  EXPECT_EQ(r.message, cuda->unavailable_reason());
  EXPECT_THROW(qtc::conformance::make_backends("tpu"), qtc::Error);
  EXPECT_EQ(qtc::conformance::make_backends("all").size(), 2u);
}

TEST(VerifySummary, ClosingLineAndExitCode) {
  qtc::conformance::Summary s;
  EXPECT_EQ(s.closing_line(), "0 passed, 0 failed");
  EXPECT_EQ(s.exit_code(), 0);
  s.add(Verdict::kPass);
  s.add(Verdict::kSkipped);
  EXPECT_EQ(s.closing_line(), "1 passed, 0 failed, 1 skipped");
  EXPECT_EQ(s.exit_code(), 0);
  s.add(Verdict::kFail);
  EXPECT_EQ(s.exit_code(), 1);
  s.add(Verdict::kError);
  EXPECT_EQ(s.closing_line(), "1 passed, 1 failed, 1 skipped, 1 errors");
  EXPECT_EQ(s.exit_code(), 2);
}

// ---------------------------------------------------------------------------------------------------
// Generated cases

TEST(GeneratedCases, EveryRecipeKindAndProfileIsCovered) {
  const auto recipes = qtc::conformance::all_recipe_variants();
  std::set<std::string> kinds, profiles;
  for (const auto& r : recipes) {
    kinds.insert(std::string(qtc::recipe_kind_name(r.kind())));
    profiles.insert(std::string(qtc::profile_name(r.profile)));
  }
  EXPECT_EQ(kinds.size(), 5u);  // nvfp4, mxfp8, fp8_block, fp8_tensor, mxfp4
  EXPECT_EQ(profiles.size(), 3u);
  const auto cases = qtc::conformance::generated_cases(recipes);
  std::set<std::string> ids;
  for (const auto& c : cases) EXPECT_TRUE(ids.insert(c.id).second) << "duplicate case id " << c.id;
}

TEST(GeneratedCases, InputsAreDeterministicAndSeeded) {
  using qtc::conformance::InputClass;
  for (InputClass c : qtc::conformance::all_input_classes()) {
    const auto a = qtc::conformance::make_input(c, qtc::DType::kF32, 16, 32, 7);
    const auto b = qtc::conformance::make_input(c, qtc::DType::kF32, 16, 32, 7);
    EXPECT_EQ(a.bytes, b.bytes) << qtc::conformance::input_class_name(c);
  }
  EXPECT_NE(qtc::conformance::make_input(InputClass::kNormal, qtc::DType::kF32, 16, 32, 7).bytes,
            qtc::conformance::make_input(InputClass::kNormal, qtc::DType::kF32, 16, 32, 8).bytes);
}

// One case per recipe variant (the normal family): the vector verifies, survives a write/read, and stays in bounds.
TEST(GeneratedCases, OneVectorPerRecipeVerifies) {
  auto cpu = qtc::make_cpu_backend();
  TempDir d;
  for (const auto& c : qtc::conformance::generated_cases(qtc::conformance::all_recipe_variants())) {
    if (c.input != qtc::conformance::InputClass::kNormal || c.rows != 32) continue;
    SCOPED_TRACE(c.id);
    const auto x = qtc::conformance::make_input(c.input, c.dtype, c.rows, c.cols, 3);
    const auto q = cpu->quantize(x.view(), c.recipe);
    const auto f = qtc::conformance::make_vector(c, x, q, *cpu, 3);
    const auto path = d.path / (c.id + ".safetensors");
    qtc::io::write_file(path, f);
    const FileResult r = qtc::conformance::verify_file(path, *cpu);
    EXPECT_EQ(r.verdict, Verdict::kPass) << r.message;
    for (auto pk : {qtc::PlaneKind::kRowwise, qtc::PlaneKind::kColumnwise}) {
      if (!(pk == qtc::PlaneKind::kRowwise ? q.rowwise : q.columnwise)) continue;
      const auto b = qtc::conformance::check_error_bound(q, pk, x.view(), cpu->dequantize(q, pk, qtc::DType::kF32));
      EXPECT_GT(b.checked, 0);
      EXPECT_EQ(b.violations, 0) << b.first;
    }
  }
}

// The bound check is not vacuous: a dequantized plane off by one E2M1 step somewhere is caught.
TEST(GeneratedCases, ErrorBoundCatchesAWrongElement) {
  qtc::Recipe r;
  auto cpu = qtc::make_cpu_backend();
  const auto x = qtc::conformance::make_input(qtc::conformance::InputClass::kNormal, qtc::DType::kF32, 32, 64, 5);
  const auto q = cpu->quantize(x.view(), r);
  auto deq = cpu->dequantize(q, qtc::PlaneKind::kRowwise, qtc::DType::kF32);
  deq.set(4, 9, -deq.get(4, 9) + (x.view().at(4, 9) >= 0 ? -1.0f : 1.0f));  // wrong sign and magnitude
  const auto b = qtc::conformance::check_error_bound(q, qtc::PlaneKind::kRowwise, x.view(), deq);
  EXPECT_EQ(b.violations, 1);
  expect_contains(b.first, "at [4, 9]");
}

}  // namespace
