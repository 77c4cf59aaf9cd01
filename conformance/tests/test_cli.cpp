/// \file test_cli.cpp
/// \brief The `qtc` binary end to end: verify's output lines and exit codes (0 pass, 1 fail, 2 error), and a
///        small `qtc conform` run whose last stdout line is the report folder.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "qtc/safetensors.hpp"

namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int code = -1;
  std::string out;
};

CmdResult qtc(const std::string& args) {
  const std::string cmd = std::string("'") + QTC_BINARY + "' " + args + " 2>/dev/null";
  CmdResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("qtc_cli_test_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

const std::string kDir = QTC_BUNDLED_VECTORS_DIR;
const std::string kVec = kDir + "/nvfp4_1x16_normal_16x48.safetensors";

TEST(QtcVerifyCli, PassingFileExitsZero) {
  const CmdResult r = qtc("verify '" + kVec + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "1 passed, 0 failed\n");
}

TEST(QtcVerifyCli, PlantedMismatchExitsOne) {
  TempDir d;
  auto f = qtc::io::read_file(kVec);
  for (auto& t : f.tensors)
    if (t.name == "rowwise_data") t.bytes[0] ^= 0x01;
  const fs::path bad = d.path / "bad.safetensors";
  qtc::io::write_file(bad, f);
  const CmdResult r = qtc("verify '" + bad.string() + "' '" + kVec + "'");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL " + bad.string() + " [cpu]: rowwise_data: 1 of 768 elements differ; first at [0, 0]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n1 passed, 1 failed\n"), std::string::npos) << r.out;
}

TEST(QtcVerifyCli, ErrorsExitTwoEvenWithFailures) {
  TempDir d;
  const fs::path trunc = d.path / "trunc.safetensors";
  {
    std::ifstream in(kVec, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(trunc, std::ios::binary) << all.substr(0, all.size() - 10);
  }
  auto f = qtc::io::read_file(kVec);
  f.metadata["recipe"] = "nvfp9";
  qtc::io::write_file(d.path / "badrecipe.safetensors", f);
  const CmdResult r = qtc("verify '" + d.path.string() + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("ERROR " + (d.path / "badrecipe.safetensors").string() + " [cpu]: metadata key 'recipe'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ERROR " + trunc.string() + ": invalid safetensors file:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 passed, 0 failed, 2 errors\n"), std::string::npos) << r.out;
}

TEST(QtcVerifyCli, MissingPathAndUsageErrorsExitTwo) {
  EXPECT_EQ(qtc("verify /nonexistent/qtc.safetensors").code, 2);
  EXPECT_EQ(qtc("verify").code, 2);
  EXPECT_EQ(qtc("verify --backend tpu '" + kVec + "'").code, 2);
  const CmdResult h = qtc("verify --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("Exit status"), std::string::npos) << h.out;
}

TEST(QtcVerifyCli, CudaBackendSkipsWithoutCuda) {
  const CmdResult r = qtc("verify --backend all '" + kVec + "'");
  if (r.out.find("SKIPPED") == std::string::npos) GTEST_SKIP() << "the CUDA backend ran here";
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 passed, 0 failed, 1 skipped"), std::string::npos) << r.out;
}

TEST(QtcConformCli, SmallRunWritesReportAndPrintsItsFolderLast) {
  TempDir d;
  const fs::path out = d.path / "report";
  const CmdResult r = qtc("conform --backend cpu --out '" + out.string() + "' --recipe-filter nvfp4_1x16_rht");
  EXPECT_EQ(r.code, 0) << r.out;
  ASSERT_FALSE(r.out.empty());
  std::string last = r.out.substr(0, r.out.size() - 1);
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_EQ(fs::path(last), fs::absolute(out)) << r.out;
  EXPECT_TRUE(fs::exists(out / "report.md"));
  EXPECT_TRUE(fs::exists(out / "report.json"));
  EXPECT_TRUE(fs::exists(out / "vectors" / "nvfp4_1x16_rht_normal_bf16_32x128.safetensors"));
  // The vectors it writes verify with the standalone command.
  const CmdResult v = qtc("verify '" + (out / "vectors").string() + "'");
  EXPECT_EQ(v.code, 0) << v.out;
}

// Foreign vectors: a dump whose claimed rule is not the one it follows (OTHER, attributed to the profiles that
// reproduce it), one that no profile reproduces (NONE, closest profile and first mismatch), one that conforms (OK).
TEST(QtcConformCli, ForeignVectorsFillTheDivergenceTable) {
  TempDir d;
  const fs::path foreign = d.path / "foreign";
  fs::create_directories(foreign);
  const std::string special = kDir + "/mxfp8rceil_e4m3_special_bf16_32x32.safetensors";
  qtc::io::File relabelled = qtc::io::read_file(special);  // RCEIL scales claimed as OCP floor
  relabelled.metadata["scale_rule"] = "ocp_floor";
  relabelled.metadata["source"] = "planted: claims the floor rule";
  qtc::io::write_file(foreign / "claims_floor.safetensors", relabelled);
  qtc::io::File broken = qtc::io::read_file(kVec);  // one data byte changed
  broken.metadata["source"] = "planted: one byte off";
  qtc::io::Tensor t = broken.at("rowwise_data");
  t.bytes[5] ^= 0x11;
  broken.put(t);
  qtc::io::write_file(foreign / "one_byte_off.safetensors", broken);
  fs::copy_file(kVec, foreign / "conforming.safetensors");

  const fs::path out = d.path / "report";
  const CmdResult r = qtc("conform --backend cpu --no-generated --no-bundled --foreign '" + foreign.string() + "' --out '" +
                          out.string() + "'");
  EXPECT_EQ(r.code, 1) << r.out;  // the two planted dumps fail against the profile they claim
  std::ifstream in(out / "report.json");
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(json.find("\"divergences\""), std::string::npos);
  EXPECT_NE(json.find("\"result\": \"OTHER\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"reproduced by\": \"te+rceil, te_pyref+rceil\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"result\": \"NONE\""), std::string::npos) << json;
  EXPECT_NE(json.find("closest te"), std::string::npos) << json;
  EXPECT_NE(json.find("\"result\": \"OK\""), std::string::npos) << json;
  std::ifstream md_in(out / "report.md");
  const std::string md((std::istreambuf_iterator<char>(md_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("## Divergences"), std::string::npos);
  EXPECT_NE(md.find("planted: claims the floor rule"), std::string::npos) << md;
  // report.md opens with qtc's own verdict, then the foreign dumps' verdict apart (matrix, failures), then
  // divergences, then details. The dumps are not counted in qtc's verdict.
  EXPECT_EQ(md.find("## "), md.find("## Verdict\n\n**")) << md;
  const size_t foreign_block = md.find("## Foreign dumps (`--foreign`): 1 passed, 2 failed, 0 skipped, 0 errors");
  ASSERT_NE(foreign_block, std::string::npos) << md;
  EXPECT_LT(md.find("## Verdict"), foreign_block);
  EXPECT_LT(foreign_block, md.find("## Divergences"));
  EXPECT_LT(md.find("## Divergences"), md.find("## Details"));
  EXPECT_EQ(md.find("Failures and errors, first 2 of 2"), std::string::npos) << md;
  EXPECT_LT(md.find("* **fail** `" + (foreign / "one_byte_off.safetensors").string() + "` [cpu]: "), md.find("## Divergences"))
      << md;
  EXPECT_NE(json.find("\"foreign\": {"), std::string::npos) << json;
  // Divergence cells stay short: the first mismatch without the block's input dump (report.json keeps it).
  const std::string div = md.substr(md.find("## Divergences"), md.find("## Details") - md.find("## Divergences"));
  EXPECT_EQ(div.find("; block x["), std::string::npos) << div;
  EXPECT_NE(json.find("; block x["), std::string::npos);
  // The project report carries the same table.
  std::ifstream rep_in(out / "qtc_report.md");
  const std::string rep((std::istreambuf_iterator<char>(rep_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(rep.find("planted: one byte off"), std::string::npos) << rep;
}

// Writing vectors: `qtc quantize` in TE's layout (swizzled), `qtc convert` back to compact and a folder into te;
// what they write verifies, and --strict-padding sees the padding byte asked for.
TEST(QtcWriteCli, QuantizeConvertVerify) {
  TempDir d;
  const std::string te = (d.path / "nv_te.safetensors").string();
  CmdResult r = qtc("quantize --recipe nvfp4 --param tile=16x16 --shape 144x208 --layout te --swizzled --pad-byte 171 -o '" + te + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("layout te+swizzled"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rowwise_scale_inv U8 [256, 16]"), std::string::npos) << r.out;
  const auto f = qtc::io::read_file(te);
  EXPECT_EQ(f.metadata.at("layout"), "te");
  EXPECT_EQ(f.metadata.at("swizzled"), "1");
  EXPECT_EQ(qtc("verify '" + te + "'").out, "1 passed, 0 failed\n");
  r = qtc("verify --strict-padding '" + te + "'");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("rowwise_scale_inv: padding not zero (--strict-padding)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": 0xab"), std::string::npos) << r.out;
  EXPECT_EQ(qtc("identify '" + te + "'").code, 0);

  const std::string back = (d.path / "nv_compact.safetensors").string();
  r = qtc("convert '" + te + "' --layout compact -o '" + back + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(qtc::io::read_file(back).at("rowwise_scale_inv").shape, (std::vector<int64_t>{144, 13}));
  EXPECT_EQ(qtc("verify --strict-padding '" + back + "'").out, "1 passed, 0 failed\n");

  // A folder of compact vectors (every recipe) into TE's layout; FP8 block / tensor are not swizzled.
  const fs::path out = d.path / "te_dir";
  r = qtc("convert '" + kDir + "' --layout te --swizzled -o '" + out.string() + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("135 converted to layout te+swizzled, 0 errors"), std::string::npos) << r.out;
  EXPECT_EQ(qtc("verify --strict-padding '" + out.string() + "'").out, "135 passed, 0 failed\n");

  // Generated fp8_tensor: the transposed columnwise plane is written and checked.
  const std::string ft = (d.path / "ft.safetensors").string();
  r = qtc("quantize --recipe fp8_tensor --param fp8_dtype=e5m2 --shape 7x13 --layout te -o '" + ft + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(qtc::io::read_file(ft).at("columnwise_data").shape, (std::vector<int64_t>{13, 7}));
  EXPECT_EQ(qtc("verify '" + ft + "'").out, "1 passed, 0 failed\n");
}

TEST(QtcWriteCli, BadArgumentsExitTwo) {
  TempDir d;
  const std::string o = (d.path / "x.safetensors").string();
  EXPECT_EQ(qtc("quantize --recipe nvfp5 --shape 16x16 -o '" + o + "'").code, 2);
  EXPECT_EQ(qtc("quantize --recipe nvfp4 --param tile=3x3 --shape 16x16 -o '" + o + "'").code, 2);
  EXPECT_EQ(qtc("quantize --recipe nvfp4 --shape 15x16 -o '" + o + "'").code, 2);   // NVFP4 needs multiples of 16
  EXPECT_EQ(qtc("quantize --recipe fp8_block --shape 16x16 --layout te --swizzled -o '" + o + "'").code, 2);
  EXPECT_EQ(qtc("quantize --recipe mxfp8 --shape 32x32 --swizzled -o '" + o + "'").code, 2);  // swizzled needs te
  EXPECT_EQ(qtc("quantize --recipe mxfp8 -o '" + o + "'").code, 2);                            // no input
  EXPECT_FALSE(fs::exists(o));
}

}  // namespace

namespace {

// `qtc profiles` prints every profile of profile.hpp with its version and rules.
TEST(QtcProfilesCli, PrintsEveryProfileWithItsRules) {
  const CmdResult r = qtc("profiles");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* line : {"te (version 1): ", "te_pyref (version 1): ", "ocp (version 1): ", "torchao (version 2): torchao 0.18.0"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("te (version 1): ", 0), 0u) << r.out;
  for (const char* rule : {"nvfp4.zero_and_tiny_block_scale", "mxfp8.order", "fp8.inf_amax_scale", "nan_amax"})
    EXPECT_NE(r.out.find(rule), std::string::npos) << rule;
  EXPECT_NE(r.out.find("mxfp8.scale_rules                  rceil, ocp_floor, ceil, even"), std::string::npos) << r.out;
}

}  // namespace
