/// \file device_verify_test.cpp
/// \brief verify_on_device (qtc/cuda/verify.hpp) against the host's verify_vector with the CUDA backend, field by
///        field (verdict, message, checked tensors, every mismatch record, details): every bundled vector
///        (conformance/vectors, te_hybrid's hybrid vectors included) uploaded to the device as it is, then each of
///        its tensors corrupted at one byte, then each data tensor with a +0 code turned into -0 (bytes differ,
///        decoded values equal: the host's EQUIVALENT, which the device must reach through its value-equivalence
///        tier with the host's message). Part of test_quantize_cuda (label gpu): skips without a device, fails under
///        QTC_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "qtc/cuda/backend.hpp"
#include "qtc/cuda/check.hpp"
#include "qtc/cuda/verify.hpp"
#include "qtc/hybrid.hpp"
#include "qtc/verify.hpp"

namespace qtc::test {
namespace {

namespace cv = conformance;

/// A file's tensors in device memory.
struct OnDevice {
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<cuda::DeviceTensor> tensors;
};

OnDevice upload(const io::File& f) {
  OnDevice d;
  for (const io::Tensor& t : f.tensors) {
    d.buffers.emplace_back(t.bytes.size(), nullptr);
    if (!t.bytes.empty()) QTC_CUDA_CHECK(cudaMemcpy(d.buffers.back().data(), t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice));
    d.tensors.push_back({t.name, t.dtype, t.shape, d.buffers.back().data(), t.bytes.size()});
  }
  QTC_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

/// Every field of a verdict, one per line (a failing EXPECT_EQ shows which differs).
std::string fields(const cv::FileResult& r) {
  std::ostringstream os;
  os << "verdict " << cv::verdict_name(r.verdict) << "\nbackend " << r.backend << "\nrecipe " << r.recipe << "\nprofile "
     << r.profile << "\nmessage " << r.message << "\nchecked";
  for (const std::string& c : r.checked) os << " " << c;
  for (const cv::TensorMismatch& m : r.mismatches) {
    os << "\nrecord " << m.tensor << " problem=" << m.problem << " elem=" << static_cast<int>(m.elem) << " count=" << m.count
       << " total=" << m.total << " first=" << m.first << " want=" << m.want << " got=" << m.got << " at=";
    for (int64_t a : m.at) os << a << ",";
    os << " file_at=";
    for (int64_t a : m.file_at) os << a << ",";
    os << " block=" << m.block_inputs;
  }
  for (const std::string& d : r.details) os << "\ndetail " << d;
  return os.str();
}

/// The bundled vectors: $QTC_VECTORS_DIR, else the source tree this test was built from, else ./conformance/vectors
/// (a GPU machine runs the staged executable from a copy of the repository); empty when none exists.
std::string vectors_dir() {
  if (const char* e = std::getenv("QTC_VECTORS_DIR"); e != nullptr && *e != '\0') return e;
  for (const char* d : {QTC_VECTORS_DIR, "conformance/vectors"})
    if (std::filesystem::is_directory(d)) return d;
  return {};
}

class DeviceVerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_ = make_cuda_backend();
    const std::string dir = vectors_dir();
    if (dir.empty()) {
      problems_.push_back(cv::error_result(QTC_VECTORS_DIR, "the bundled vectors are not there, nor in ./conformance/vectors "
                                                            "(set QTC_VECTORS_DIR)"));
      return;
    }
    files_ = cv::collect_vector_files({dir}, problems_);
  }

  /// Verifies `f` on the host (CUDA backend) and on the device and expects the same fields; returns the verdict.
  /// A vector in a combined layout (FBGEMM's MX4 rows: scales inside the data tensor) is refused on the device by
  /// rule name (the host unpacks it); its host verdict is still returned.
  cv::Verdict same(const io::File& f, const std::string& what, bool strict = false) {
    cv::VerifyOptions opts;
    opts.strict_padding = strict;
    const cv::FileResult host = cv::verify_vector(f, what, *cuda_, opts);
    const OnDevice d = upload(f);
    const cv::FileResult dev = cuda::verify_on_device(d.tensors, f.metadata, what, opts, nullptr);
    const auto layout = f.metadata.find("layout");
    const std::optional<Layout> lo = layout == f.metadata.end() ? std::nullopt : layout_from_name(layout->second);
    if (lo && layout_is_combined(*lo)) {
      ++combined_;
      EXPECT_EQ(dev.verdict, cv::Verdict::kError) << what;
      EXPECT_NE(dev.message.find("rule 'layout-" + std::string(layout_name(*lo)) + "'"), std::string::npos)
          << what << ": " << dev.message;
      return host.verdict;
    }
    EXPECT_EQ(fields(dev), fields(host)) << what;
    return host.verdict;
  }
  int combined_ = 0;  ///< vectors in a combined layout seen by same()

  std::unique_ptr<QuantizeBackend> cuda_;
  std::vector<cv::FileResult> problems_;
  std::vector<std::filesystem::path> files_;
};

TEST_F(DeviceVerifyTest, EveryBundledVectorGivesTheHostVerdict) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  ASSERT_TRUE(problems_.empty()) << problems_.front().message;
  ASSERT_GT(files_.size(), 900u);
  int passed = 0, hybrid = 0;
  for (const auto& p : files_) {
    const io::File f = io::read_file(p);
    const cv::Verdict v = same(f, p.string());
    passed += v == cv::Verdict::kPass;
    hybrid += v == cv::Verdict::kPass && HybridRecipe::is_hybrid(f.metadata);
    if (f.metadata.count("layout") != 0) same(f, p.string() + " (strict padding)", true);
  }
  // The CPU passes all of them; the kernels about 530 (the peer sets whose rules they lack are skipped, as by
  // `qtc verify --backend cuda`: reports/h200/run_2026-12-07T1934Z_a29fbebf291f).
  EXPECT_GT(passed, static_cast<int>(files_.size()) / 3) << "of " << files_.size();
  EXPECT_GT(hybrid, 5);  // te_hybrid's vectors pass on the device path too
  EXPECT_GT(combined_, 10);  // fbgemm_mx4's vectors: refused on the device by rule name
}

TEST_F(DeviceVerifyTest, ACorruptedByteOfAnyTensorGivesTheHostVerdictAndMessage) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  ASSERT_TRUE(problems_.empty()) << problems_.front().message;
  int failed = 0, equivalent = 0;
  for (const auto& p : files_) {
    const io::File f = io::read_file(p);
    for (const io::Tensor& t : f.tensors) {
      if (t.name == "x" || t.bytes.empty()) continue;
      io::File bad = f;
      for (io::Tensor& u : bad.tensors)
        if (u.name == t.name) u.bytes[std::min<size_t>(37, u.bytes.size() - 1)] ^= 0x11;
      const cv::Verdict v = same(bad, p.string() + " with " + t.name + " corrupted");
      failed += v == cv::Verdict::kFail;
      equivalent += v == cv::Verdict::kEquivalent;
    }
  }
  // On the CPU 3347 of the 4012 corrupted vectors fail and 491 are equivalent (e.g. a scale of an all-zero block).
  EXPECT_GT(failed, static_cast<int>(files_.size()));
  EXPECT_GT(equivalent, 100);
}

TEST_F(DeviceVerifyTest, NegativeZeroCodesAreEquivalentOnTheDeviceAsOnTheHost) {
  QTC_GPU_GATE(gpu_unavailable_reason());
  ASSERT_TRUE(problems_.empty()) << problems_.front().message;
  int equivalent = 0, tried = 0, skipped = 0;
  for (const auto& p : files_) {
    const io::File f = io::read_file(p);
    for (const io::Tensor& t : f.tensors) {
      if (t.name != "rowwise_data" && t.name != "columnwise_data") continue;
      // A byte 0x00 holds +0 codes (one FP8 code, two E2M1 nibbles); 0x80 is -0 in E4M3, E5M2 and, as the high
      // nibble 0x8, in E2M1: the decoded values are the same.
      const auto at = std::find(t.bytes.begin(), t.bytes.end(), uint8_t{0});
      if (at == t.bytes.end()) continue;
      io::File neg = f;
      for (io::Tensor& u : neg.tensors)
        if (u.name == t.name) u.bytes[static_cast<size_t>(at - t.bytes.begin())] = 0x80;
      ++tried;
      const cv::Verdict v = same(neg, p.string() + " with a -0 code in " + t.name);
      equivalent += v == cv::Verdict::kEquivalent;
      skipped += v == cv::Verdict::kSkipped;
    }
  }
  // On the CPU every one of them (1090) is equivalent; here those the kernels run must be reached through the tier.
  EXPECT_GT(tried - skipped, 200) << "of " << tried;
  EXPECT_GT(equivalent, (tried - skipped) / 2) << "of " << tried - skipped;
}

}  // namespace
}  // namespace qtc::test
