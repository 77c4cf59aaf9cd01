/// \file test_cli.cpp
/// \brief The `qtc` binary end to end: verify's output lines and exit codes (0 pass, 1 fail, 2 error), and a
///        small `qtc conform` run whose last stdout line is the report folder.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "qtc/safetensors.hpp"
#include "qtc/test_fixtures.hpp"

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

using qtc::test::TempDir;  // qtc/test_fixtures.hpp

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
  CmdResult r = qtc("quantize --recipe nvfp4 --param tile=16x16 --shape 144x208 --layout swizzled_128x4 --pad-byte 171 -o '" + te + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("layout swizzled_128x4"), std::string::npos) << r.out;
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
  r = qtc("convert '" + kDir + "' --layout swizzled_128x4 -o '" + out.string() + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("135 converted to layout swizzled_128x4, 0 errors"), std::string::npos) << r.out;
  EXPECT_EQ(qtc("verify --strict-padding '" + out.string() + "'").out, "135 passed, 0 failed\n");
  // The same folder into FlashInfer's 8x4 layout (FP8 block / tensor written as te, with a note): every file verifies.
  const fs::path out8 = d.path / "fi_dir";
  r = qtc("convert '" + kDir + "' --layout swizzled_8x4 -o '" + out8.string() + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("135 converted to layout swizzled_8x4, 0 errors"), std::string::npos) << r.out;
  EXPECT_EQ(qtc("verify --strict-padding '" + out8.string() + "'").out, "135 passed, 0 failed\n");
  const std::string nv8 = (d.path / "nv_8x4.safetensors").string();
  r = qtc("quantize --recipe nvfp4 --shape 48x80 --layout swizzled_8x4 -o '" + nv8 + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(qtc::io::read_file(nv8).metadata.at("layout"), "swizzled_8x4");
  EXPECT_EQ(qtc::io::read_file(nv8).at("rowwise_scale_inv").shape, (std::vector<int64_t>{48, 8}));  // [48, ceil(5/4)*4]
  EXPECT_EQ(qtc("verify '" + nv8 + "'").out, "1 passed, 0 failed\n");

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
  EXPECT_EQ(qtc("quantize --recipe fp8_block --shape 16x16 --layout swizzled_128x4 -o '" + o + "'").code, 2);
  EXPECT_EQ(qtc("quantize --recipe fp8_block --shape 16x16 --layout swizzled_8x4 -o '" + o + "'").code, 2);
  EXPECT_EQ(qtc("quantize --recipe mxfp8 --shape 32x32 --swizzled -o '" + o + "'").code, 2);  // no such flag: --layout
  EXPECT_EQ(qtc("quantize --recipe mxfp8 -o '" + o + "'").code, 2);                            // no input
  EXPECT_FALSE(fs::exists(o));
}

}  // namespace

namespace {

// `qtc profiles` prints every profile of profile.hpp with its version and rules.
TEST(QtcProfilesCli, PrintsEveryProfileWithItsRules) {
  const CmdResult r = qtc("profiles");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* line : {"te (version 1): ", "te_pyref (version 2): ", "ocp (version 1): ", "torchao (version 2): torchao 0.18.0"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("te (version 1): ", 0), 0u) << r.out;
  for (const char* rule : {"nvfp4.zero_and_tiny_block_scale", "mxfp8.order", "fp8.inf_amax_scale", "nan_amax"})
    EXPECT_NE(r.out.find(rule), std::string::npos) << rule;
  EXPECT_NE(r.out.find("mxfp8.scale_rules                  rceil, ocp_floor, ceil, even"), std::string::npos) << r.out;
}

// ---- Hostile inputs (issue 21): each test failed before its fix ----------------------------------

/// stdout and stderr together.
CmdResult qtc_all(const std::string& args, const std::string& prefix = "") {
  const std::string cmd = prefix + "'" + QTC_BINARY + "' " + args + " 2>&1";
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

std::vector<std::string> dir_names(const fs::path& d) {
  std::vector<std::string> n;
  for (const auto& e : fs::directory_iterator(d)) n.push_back(e.path().filename().string());
  std::sort(n.begin(), n.end());
  return n;
}

/// The metadata of a bundled vector replaced (the tensors kept).
void write_with_metadata(const fs::path& to, const std::map<std::string, std::string>& md) {
  auto f = qtc::io::read_file(kVec);
  for (const auto& [k, v] : md) f.metadata[k] = v;
  qtc::io::write_file(to, f);
}

// Before: M * K wrapped and quantize crashed with SIGSEGV (or filled 16 GiB).
TEST(QtcHostileCli, HugeShapesEndWithTheRule) {
  TempDir d;
  for (const char* shape : {"4294967296x4294967296", "4294967296x4294967297", "9223372036854775807x2"}) {
    const CmdResult r = qtc_all("quantize --recipe nvfp4 --shape " + std::string(shape) + " -o '" + (d.path / "o.st").string() + "'");
    EXPECT_EQ(r.code, 2) << shape << ": " << r.out;
    EXPECT_NE(r.out.find("rule 'size-overflow'"), std::string::npos) << r.out;
  }
  const CmdResult big = qtc_all("quantize --recipe mxfp8 --shape 1048576x1048576 -o '" + (d.path / "o.st").string() + "'");
  EXPECT_EQ(big.code, 2) << big.out;
  EXPECT_NE(big.out.find("rule 'memory'"), std::string::npos) << big.out;
  for (const char* shape : {"-5x3", "64x64x", "64 x64", "0x64", "+64x64", "99999999999999999999x1"}) {
    const CmdResult r = qtc_all("quantize --recipe mxfp8 --shape '" + std::string(shape) + "' -o '" + (d.path / "o.st").string() + "'");
    EXPECT_EQ(r.code, 2) << shape << ": " << r.out;
    EXPECT_NE(r.out.find("expected MxK"), std::string::npos) << r.out;
  }
  EXPECT_EQ(dir_names(d.path), std::vector<std::string>{}) << "nothing is written";
}

// Before: verify refused the [2^62, 0] vector that quantize wrote.
TEST(QtcHostileCli, QuantizeAndVerifyAgreeOnEmptyHugeShapes) {
  TempDir d;
  qtc::io::File in;
  qtc::io::Tensor x;
  x.name = "x";
  x.dtype = "F32";
  x.shape = {int64_t{1} << 62, 0};
  in.tensors.push_back(x);
  qtc::io::write_file(d.path / "x.st", in);
  for (const char* recipe : {"mxfp8", "nvfp4", "fp8_block", "fp8_tensor"}) {
    const fs::path out = d.path / (std::string(recipe) + ".st");
    const CmdResult q = qtc_all("quantize --recipe " + std::string(recipe) + " --input '" + (d.path / "x.st").string() + "' -o '" + out.string() + "'");
    ASSERT_EQ(q.code, 0) << q.out;
    const CmdResult v = qtc_all("verify '" + out.string() + "'");
    EXPECT_EQ(v.code, 0) << recipe << ": " << v.out;
  }
}

// Before: the output was renamed over a FIFO or a symlink (exit 0), and a failed write left OUT.tmp.
TEST(QtcHostileCli, OutputsAreRegularFilesOnly) {
  TempDir d;
  const fs::path fifo = d.path / "fifo", link = d.path / "link", target = d.path / "target";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::create_symlink(target, link);
  for (const fs::path& out : {fifo, link}) {
    const CmdResult q = qtc_all("quantize --recipe mxfp8 --shape 64x64 -o '" + out.string() + "'");
    EXPECT_EQ(q.code, 2) << q.out;
    EXPECT_NE(q.out.find("rule 'output-regular-file'"), std::string::npos) << q.out;
    const CmdResult c = qtc_all("convert '" + kVec + "' --layout te -o '" + out.string() + "'");
    EXPECT_EQ(c.code, 2) << c.out;
  }
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_FALSE(fs::exists(target));
  // A write that fails (the file size limit, as a full disk would) leaves nothing behind.
  const CmdResult f = qtc_all("quantize --recipe mxfp8 --shape 512x512 -o '" + (d.path / "big.st").string() + "'",
                              "trap '' XFSZ; ulimit -f 8; ");
  EXPECT_EQ(f.code, 2) << f.out;
  EXPECT_EQ(dir_names(d.path), (std::vector<std::string>{"fifo", "link"})) << f.out;
}

// Before: two inputs named v.safetensors reported "2 converted" and wrote one file.
TEST(QtcHostileCli, ConvertKeepsInputsApart) {
  TempDir d;
  fs::create_directories(d.path / "a");
  fs::create_directories(d.path / "b");
  fs::copy_file(kVec, d.path / "a" / "v.safetensors");
  fs::copy_file(kVec, d.path / "b" / "v.safetensors");
  const CmdResult r = qtc_all("convert '" + (d.path / "a" / "v.safetensors").string() + "' '" + (d.path / "b" / "v.safetensors").string() +
                              "' --layout te -o '" + (d.path / "out").string() + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("1 converted to layout te, 1 errors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rule 'distinct-outputs'"), std::string::npos) << r.out;
  EXPECT_EQ(dir_names(d.path / "out"), std::vector<std::string>{"v.safetensors"});
  // Folders keep their files' relative paths.
  fs::create_directories(d.path / "tree" / "x");
  fs::copy_file(kVec, d.path / "tree" / "x" / "v.safetensors");
  fs::copy_file(kVec, d.path / "tree" / "v.safetensors");
  const CmdResult t = qtc_all("convert '" + (d.path / "tree").string() + "' --layout te -o '" + (d.path / "out2").string() + "'");
  EXPECT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("2 converted"), std::string::npos) << t.out;
  EXPECT_TRUE(fs::exists(d.path / "out2" / "x" / "v.safetensors"));
  EXPECT_TRUE(fs::exists(d.path / "out2" / "v.safetensors"));
}

// Before: identify printed an empty reason and exited 0; swizzled=true was taken for 1; metadata was printed raw.
TEST(QtcHostileCli, SmallerOnes) {
  TempDir d;
  write_with_metadata(d.path / "unknown.st", {{"profile", "nosuch"}});
  const CmdResult id = qtc_all("identify '" + (d.path / "unknown.st").string() + "'");
  EXPECT_EQ(id.code, 2) << id.out;
  EXPECT_NE(id.out.find("rule 'known-profile'"), std::string::npos) << id.out;
  for (const char* v : {"true", "01", "yes"}) {
    write_with_metadata(d.path / "swz.st", {{"layout", "te"}, {"swizzled", v}});
    const CmdResult r = qtc_all("verify '" + (d.path / "swz.st").string() + "'");
    EXPECT_EQ(r.code, 2) << v << ": " << r.out;
    EXPECT_NE(r.out.find("metadata key 'swizzled': expected 0 or 1"), std::string::npos) << r.out;
  }
  write_with_metadata(d.path / "ctl.st", {{"x\x1b[31mkey\a", "v"}, {"profile", "p\r\n\x1b]0;t\a"}});
  for (const char* cmd : {"verify -v", "identify"}) {
    const CmdResult r = qtc_all(std::string(cmd) + " '" + (d.path / "ctl.st").string() + "'");
    EXPECT_EQ(r.code, 2) << r.out;
    for (char c : {'\x1b', '\a', '\r'}) EXPECT_EQ(r.out.find(c), std::string::npos) << cmd << ": raw control character in " << r.out;
  }
  const std::string o = " --shape 64x64 -o '" + (d.path / "p.st").string() + "'";
  const CmdResult conflict = qtc_all("quantize --recipe mxfp8 --param recipe=nvfp4" + o);
  EXPECT_EQ(conflict.code, 2) << conflict.out;
  EXPECT_NE(conflict.out.find("conflicts with --recipe"), std::string::npos) << conflict.out;
  const CmdResult layout = qtc_all("quantize --recipe mxfp8 --param layout=te" + o);
  EXPECT_EQ(layout.code, 2) << layout.out;
  EXPECT_NE(layout.out.find("use --layout"), std::string::npos) << layout.out;
  EXPECT_EQ(qtc_all("quantize --recipe mxfp8 --param recipe=mxfp8" + o).code, 0) << "the same recipe twice is no conflict";
}

// Before: one file whose header is not UTF-8 made `conform --foreign` exit without a report for any vector.
TEST(QtcHostileCli, ConformForeignReportsEveryFile) {
  TempDir d;
  const fs::path foreign = d.path / "foreign";
  fs::create_directories(foreign);
  fs::copy_file(kVec, foreign / "good.safetensors");
  {
    const std::string h = "{\"x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},\"__metadata__\":{\"recipe\":\"\xff\xfe\"}}   ";
    std::string b(8, '\0');
    const uint64_t n = h.size();
    std::memcpy(b.data(), &n, 8);
    std::ofstream(foreign / "bad\xff.safetensors", std::ios::binary) << b << h;
  }
  const fs::path out = d.path / "report";
  const CmdResult r = qtc_all("conform --backend cpu --no-generated --no-bundled --foreign '" + foreign.string() + "' --out '" + out.string() + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  ASSERT_TRUE(fs::exists(out / "report.json")) << r.out;
  std::ifstream in(out / "report.json");
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("good.safetensors"), std::string::npos);
  EXPECT_NE(text.find("\"pass\""), std::string::npos);
  EXPECT_NE(text.find("bad"), std::string::npos);
  EXPECT_NE(text.find("\"error\""), std::string::npos);
  EXPECT_TRUE(fs::exists(out / "qtc_report.html"));
}

}  // namespace
