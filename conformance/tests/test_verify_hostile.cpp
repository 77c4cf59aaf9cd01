/// \file test_verify_hostile.cpp
/// \brief Regression tests of issue 14's defects in `qtc verify`, one or more per defect, each failing before
///        its fix:
///
/// | defect | input                                                    | expected now                                |
/// |--------|----------------------------------------------------------|---------------------------------------------|
/// | 3      | x declared [2^40, 0] / [2^34, 0] / [0, 2^40], any recipe | empty outputs pass at once; outputs that    |
/// |        |                                                          | would not fit in memory: error, no bad_alloc |
/// | 4      | a dimension of 2^63 - 1                                  | expected shapes without overflow            |
/// | 6      | unreadable subdirectory, dangling *.safetensors symlink, | an error line naming each path; a loop       |
/// |        | symlink loops (inside a folder and given directly)       | given directly says loop                     |
/// | 7      | tensor names with escapes, 100,000 characters; eps 1e309 | escaped, shortened; "out of the float range" |
/// |        | and 1e-50                                                |                                             |
/// The empty-shape test has a ctest TIMEOUT (120 s): before the fix it looped over 2^35 row strips per recipe.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "qtc/safetensors.hpp"
#include "qtc/verify.hpp"
#include "qtc/test_fixtures.hpp"

namespace {

namespace fs = std::filesystem;
using qtc::conformance::FileResult;
using qtc::conformance::Verdict;

FileResult run(const qtc::io::File& f) {
  auto cpu = qtc::make_cpu_backend();
  return qtc::conformance::verify_vector(f, "hostile.safetensors", *cpu);
}

qtc::io::Tensor empty_tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape) {
  qtc::io::Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

using qtc::test::TempDir;  // qtc/test_fixtures.hpp

// ---- Defect 3: huge empty shapes -----------------------------------------------------------------------

struct EmptyCase {
  std::map<std::string, std::string> md;
  const char* output;  // an output whose shape is empty for x [M, 0]
};

std::vector<EmptyCase> empty_cases() {
  return {
      {{{"recipe", "nvfp4"}}, "rowwise_data"},
      {{{"recipe", "nvfp4"}, {"row_scaled", "true"}}, "rowwise_data"},
      {{{"recipe", "mxfp8"}, {"scale_rule", "rceil"}}, "columnwise_scale_inv"},
      {{{"recipe", "mxfp8"}, {"scale_rule", "rceil"}}, "rowwise_data"},
      {{{"recipe", "fp8_block"}, {"tile", "1x128"}}, "columnwise_data"},
      {{{"recipe", "fp8_block"}, {"tile", "128x128"}}, "rowwise_data"},
      {{{"recipe", "fp8_tensor"}}, "rowwise_data"},
  };
}

TEST(HugeEmptyShapes, CostNoTimeAndNeverFailWithBadAlloc) {
  for (const int64_t M : {int64_t{1} << 40, int64_t{1} << 34}) {
    for (const EmptyCase& c : empty_cases()) {
      qtc::io::File f;
      f.metadata = c.md;
      f.put(empty_tensor("x", "F32", {M, 0}));
      const bool col = std::string(c.output).rfind("columnwise", 0) == 0;
      std::vector<int64_t> shape;
      const std::string rec = c.md.at("recipe");
      const std::string o = c.output;
      if (o == "rowwise_data") shape = {M, 0};
      else if (o == "columnwise_data") shape = {0, M};
      else shape = {(M + 31) / 32, 0};  // MXFP8 columnwise scales [cdiv(M, 32), K]
      f.put(empty_tensor(o, "U8", shape));
      (void)col;
      const FileResult r = run(f);
      SCOPED_TRACE(rec + " " + o + " M=" + std::to_string(M) + ": " + r.message);
      EXPECT_NE(r.verdict, Verdict::kFail) << "an impossible or too large shape is not a wrong answer";
      EXPECT_EQ(r.message.find("bad_alloc"), std::string::npos);
      const bool row_scaled = c.md.count("row_scaled") != 0;
      if (row_scaled && M == (int64_t{1} << 40)) {
        // One amax per row: 4 TiB / 64 GiB of outputs.
        EXPECT_EQ(r.verdict, Verdict::kError);
        EXPECT_NE(r.message.find("resource limit"), std::string::npos);
      } else if (!row_scaled) {
        EXPECT_EQ(r.verdict, Verdict::kPass);
      }  // row-scaled at 2^34 rows: 64 GiB of amax, an error on a smaller machine, a pass on a larger one
    }
  }
}

TEST(HugeEmptyShapes, WideEmptyTensorsToo) {
  for (const EmptyCase& c : empty_cases()) {
    qtc::io::File f;
    f.metadata = c.md;
    const int64_t K = int64_t{1} << 40;
    f.put(empty_tensor("x", "BF16", {0, K}));
    f.put(empty_tensor("rowwise_data", "U8", {0, c.md.at("recipe") == "nvfp4" ? K / 2 : K}));
    const FileResult r = run(f);
    SCOPED_TRACE(c.md.at("recipe") + ": " + r.message);
    EXPECT_NE(r.verdict, Verdict::kFail);
    EXPECT_EQ(r.message.find("bad_alloc"), std::string::npos);
  }
}

// ---- Defect 4: cdiv at 2^63 - 1 ---------------------------------------------------------------------------

// verify's expected shapes and the native-layout description both use a ceil division without overflow.
TEST(ExpectedShapes, NoOverflowAtTheLargestDimension) {
  qtc::io::File f;
  f.metadata = {{"recipe", "mxfp8"}, {"scale_rule", "rceil"}};
  const int64_t K = INT64_MAX;
  f.put(empty_tensor("x", "F32", {0, K}));
  f.put(empty_tensor("rowwise_scale_inv", "U8", {0, 5}));
  const FileResult r = run(f);
  EXPECT_EQ(r.verdict, Verdict::kError);
  // cdiv(2^63 - 1, 32) = 2^58; before, (a + b - 1) / b overflowed (UBSan abort; a negative shape in release).
  EXPECT_NE(r.message.find("expected [0, 288230376151711744]"), std::string::npos) << r.message;
}

// ---- Defect 6: directory scans --------------------------------------------------------------------------

void write_vector(const fs::path& p) {
  qtc::io::File f;
  f.metadata = {{"recipe", "fp8_tensor"}};
  f.put(empty_tensor("x", "F32", {0, 0}));
  f.put(empty_tensor("rowwise_data", "U8", {0, 0}));
  qtc::io::write_file(p, f);
}

std::string problems_text(const std::vector<FileResult>& ps) {
  std::string s;
  for (const auto& p : ps) s += qtc::conformance::result_line(p) + "\n";
  return s;
}

TEST(DirectoryScan, DanglingSymlinkAndLoopsAreErrorsNamingThePath) {
  TempDir d("scan");
  write_vector(d.path / "good.safetensors");
  fs::create_symlink(d.path / "missing.safetensors", d.path / "dangling.safetensors");
  fs::create_symlink(d.path / "loop_b.safetensors", d.path / "loop_a.safetensors");
  fs::create_symlink(d.path / "loop_a.safetensors", d.path / "loop_b.safetensors");
  fs::create_directories(d.path / "sub");
  fs::create_directory_symlink(d.path, d.path / "sub" / "up");  // a directory loop
  std::vector<FileResult> problems;
  const auto files = qtc::conformance::collect_vector_files({d.path.string()}, problems);
  ASSERT_EQ(files.size(), 1u) << problems_text(problems);
  const std::string t = problems_text(problems);
  EXPECT_NE(t.find("ERROR " + (d.path / "dangling.safetensors").string() + ": dangling symlink to "), std::string::npos) << t;
  EXPECT_NE(t.find("ERROR " + (d.path / "loop_a.safetensors").string() + ": symlink loop"), std::string::npos) << t;
  EXPECT_NE(t.find("ERROR " + (d.path / "loop_b.safetensors").string() + ": symlink loop"), std::string::npos) << t;
  EXPECT_NE(t.find("ERROR " + (d.path / "sub" / "up").string() + ": symlink loop"), std::string::npos) << t;
  for (const auto& p : problems) EXPECT_EQ(p.verdict, Verdict::kError);
  qtc::conformance::Summary s;
  for (const auto& p : problems) s.add(p.verdict);
  EXPECT_EQ(s.exit_code(), 2);
}

TEST(DirectoryScan, ALoopGivenDirectlySaysLoop) {
  TempDir d("loop");
  fs::create_symlink(d.path / "b.safetensors", d.path / "a.safetensors");
  fs::create_symlink(d.path / "a.safetensors", d.path / "b.safetensors");
  std::vector<FileResult> problems;
  (void)qtc::conformance::collect_vector_files({(d.path / "a.safetensors").string()}, problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("symlink loop"), std::string::npos) << problems[0].message;
  // And a dangling link given directly says so.
  fs::create_symlink(d.path / "nowhere", d.path / "c.safetensors");
  problems.clear();
  (void)qtc::conformance::collect_vector_files({(d.path / "c.safetensors").string()}, problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("dangling symlink"), std::string::npos) << problems[0].message;
}

// An unreadable subdirectory (and the vector in it) was skipped silently. Root reads any directory, so as root
// the scan runs in a child process that has dropped to an unprivileged user.
TEST(DirectoryScan, UnreadableSubdirectoryIsAnError) {
  TempDir d("perm");
  write_vector(d.path / "good.safetensors");
  fs::create_directories(d.path / "locked");
  write_vector(d.path / "locked" / "hidden.safetensors");
  fs::permissions(d.path, fs::perms::all, fs::perm_options::add);
  fs::permissions(d.path / "locked", fs::perms::none, fs::perm_options::replace);
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    std::vector<FileResult> problems;
    const auto files = qtc::conformance::collect_vector_files({d.path.string()}, problems);
    std::string out = std::to_string(files.size()) + "\n" + problems_text(problems);
    if (::write(pipefd[1], out.data(), out.size()) < 0) ::_exit(4);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  EXPECT_EQ(out.rfind("1\n", 0), 0u) << out;
  EXPECT_NE(out.find("ERROR " + (d.path / "locked").string() + ": cannot list directory: Permission denied"), std::string::npos) << out;
}

// ---- Defect 7: messages ------------------------------------------------------------------------------------

TEST(Messages, TensorNamesAreEscapedAndShortened) {
  qtc::io::File f;
  f.metadata = {{"recipe", "fp8_tensor"}};
  f.put(empty_tensor("x", "F32", {0, 0}));
  f.put(empty_tensor("\x1b]0;pwned\x07\x1b[2J" + std::string(100000, 'z'), "U8", {0}));
  const FileResult r = run(f);
  ASSERT_EQ(r.verdict, Verdict::kError);
  const std::string line = qtc::conformance::result_line(r);
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_EQ(line.find('\x07'), std::string::npos);
  EXPECT_LT(line.size(), 400u) << line.size();
  EXPECT_NE(line.find("\\x1b]0;pwned\\x07"), std::string::npos) << line;
}

TEST(Messages, EpsOutOfTheFloatRangeSaysSo) {
  for (const auto& [eps, why] : std::vector<std::pair<std::string, std::string>>{
           {"1e309", "exceeds the largest float"}, {"1e-50", "below the smallest float"}, {"-1e39", "exceeds the largest float"}}) {
    qtc::io::File f;
    f.metadata = {{"recipe", "fp8_tensor"}, {"eps", eps}};
    f.put(empty_tensor("x", "F32", {0, 0}));
    f.put(empty_tensor("rowwise_data", "U8", {0, 0}));
    const FileResult r = run(f);
    ASSERT_EQ(r.verdict, Verdict::kError) << eps;
    EXPECT_NE(r.message.find("'" + eps + "' is out of the float range"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(why), std::string::npos) << r.message;
  }
  // Not a number at all is still called that.
  qtc::io::File f;
  f.metadata = {{"recipe", "fp8_tensor"}, {"eps", "1e3x"}};
  f.put(empty_tensor("x", "F32", {0, 0}));
  f.put(empty_tensor("rowwise_data", "U8", {0, 0}));
  EXPECT_NE(run(f).message.find("is not a decimal number"), std::string::npos);
}

}  // namespace
