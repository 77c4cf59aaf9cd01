/// \file test_identify.cpp
/// \brief The rule-level `identify` on planted dumps: a file made by a known profile with one rule changed is
///        attributed to no profile, the closest profile is named, and the changed rule is named as the one that
///        explains the mismatch; a file whose bytes no single rule explains says so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "qtc/identify.hpp"
#include "qtc/profile.hpp"
#include "qtc/quantize.hpp"
#include "qtc/safetensors.hpp"

namespace {

namespace fs = std::filesystem;
using namespace qtc;

io::Tensor bytes_tensor(const std::string& name, const std::vector<uint8_t>& b, std::vector<int64_t> shape) {
  return io::Tensor{name, "U8", std::move(shape), b};
}

/// A torchao-style NVFP4 dump of a 32x32 F32 input whose expected outputs come from `p`'s rules.
io::File planted_nvfp4(Profile p, bool with_nan = false, float scale = 1.0f) {
  std::vector<float> x(32 * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = scale * (static_cast<float>((i * 7919) % 23) / 7.0f - 1.5f + 0.01f);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(5 * 32 + j)] = 1e-6f * static_cast<float>(j + 1);  // tiny blocks
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(7 * 32 + j)] = 0.0f;  // zero blocks
  x[0] = 1000.0f;
  if (with_nan) x[11 * 32 + 4] = NAN;
  Recipe r = Recipe::of(Nvfp4Options{});
  r.profile = p;
  r.columnwise = false;
  const QuantizedTensor q = ref::quantize(MatrixView{x.data(), DType::kF32, 32, 32}, r);
  io::File f;
  f.metadata = {{"qtc.schema", "1"}, {"recipe", "nvfp4"}, {"profile", "torchao"}, {"columnwise", "0"},
                {"source", "planted"}};
  io::Tensor xt{"x", "F32", {32, 32}, std::vector<uint8_t>(x.size() * 4)};
  std::memcpy(xt.bytes.data(), x.data(), xt.bytes.size());
  f.put(xt);
  f.put(bytes_tensor("rowwise_data", q.rowwise->data, {32, 16}));
  f.put(bytes_tensor("rowwise_scale_inv", q.rowwise->scale.bytes, {32, 2}));
  return f;
}

struct TempFile {
  fs::path path;
  explicit TempFile(const io::File& f) {
    path = fs::temp_directory_path() / ("qtc_identify_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name() + ".safetensors");
    io::write_file(path, f);
  }
  ~TempFile() { fs::remove(path); }
};

TEST(IdentifyRule, ClaimedProfileMatches) {
  TempFile t(planted_nvfp4(Profile::kTorchAO));
  auto cpu = make_cpu_backend();
  const auto id = conformance::identify_vector(t.path, *cpu);
  EXPECT_EQ(id.verdict, conformance::IdentityVerdict::kClaimed) << id.closest_mismatch;
}

TEST(IdentifyRule, OneChangedRuleIsNamed) {
  // torchao's rules with the 2^-6 floor of the block scale removed: no profile reproduces it, torchao is the
  // closest, and flipping that one rule of torchao reproduces it.
  ProfileRules v = profile_rules(Profile::kTorchAO);
  v.name = "planted_torchao_no_floor";
  v.nvfp4_tiny_block_floor = false;
  TempFile t(planted_nvfp4(register_profile_variant(v)));
  auto cpu = make_cpu_backend();
  const auto id = conformance::identify_vector(t.path, *cpu);
  EXPECT_EQ(id.verdict, conformance::IdentityVerdict::kNone);
  EXPECT_GT(id.closest_count, 0);
  EXPECT_EQ(id.explaining_profile, "torchao");
  EXPECT_EQ(id.explaining_rule, "nvfp4.zero_and_tiny_block_scale");
  EXPECT_NE(conformance::rule_explanation(id).find("rule nvfp4.zero_and_tiny_block_scale of torchao explains it"),
            std::string::npos)
      << conformance::rule_explanation(id);
}

TEST(IdentifyRule, NanAmaxRuleIsNamed) {
  // torchao's rules with NaN ignored by the amaxes (maxNum). Two single changes reproduce it: torchao with
  // nan_amax flipped, and te with torchao's NVFP4 order (te ignores NaN); the nearer profile is tried first.
  ProfileRules v = profile_rules(Profile::kTorchAO);
  v.name = "planted_torchao_nan_ignored";
  v.nan_amax = false;
  TempFile t(planted_nvfp4(register_profile_variant(v), true));
  auto cpu = make_cpu_backend();
  const auto id = conformance::identify_vector(t.path, *cpu);
  EXPECT_EQ(id.verdict, conformance::IdentityVerdict::kNone);
  const std::string got = id.explaining_profile + ":" + id.explaining_rule;
  EXPECT_TRUE(got == "torchao:nan_amax" || got == "te:nvfp4.order") << got;
}

TEST(IdentifyRule, NoSingleRuleSaysSo) {
  io::File f = planted_nvfp4(Profile::kTorchAO);
  for (auto& t : f.tensors)
    if (t.name == "rowwise_data") t.bytes[3] ^= 0x11;  // a wrong output, not a rule
  TempFile t(f);
  auto cpu = make_cpu_backend();
  const auto id = conformance::identify_vector(t.path, *cpu);
  EXPECT_EQ(id.verdict, conformance::IdentityVerdict::kNone);
  EXPECT_EQ(id.closest, "torchao");
  EXPECT_GE(id.closest_count, 1);
  EXPECT_LE(id.closest_count, 2);
  EXPECT_TRUE(id.explaining_rule.empty());
  EXPECT_EQ(conformance::rule_explanation(id), "no single rule of any profile explains it");
}

TEST(ImplementationVerdict, NamesTheImplementation) {
  EXPECT_EQ(conformance::implementation_of("nvidia-modelopt 0.47.0 (torch 2.11.0, CPU): NVFP4QTensor.quantize"),
            "nvidia-modelopt 0.47.0");
  EXPECT_EQ(conformance::implementation_of("torchao 0.18.0 (torch 2.11.0, CPU): to_mx"), "torchao 0.18.0");
  EXPECT_EQ(conformance::implementation_of("vLLM 0.33.0: ref_nvfp4_quant"), "vLLM 0.33.0");
  // A device path is an implementation of its own: the CPU and the CUDA path of one package get a verdict each.
  EXPECT_EQ(conformance::implementation_of("compressed-tensors 0.20.0 on CUDA (Triton kernels): preset NVFP4"),
            "compressed-tensors 0.20.0 on CUDA");
  EXPECT_EQ(conformance::implementation_of("compressed-tensors 0.20.0 preset NVFP4 weights: generate_gparam"),
            "compressed-tensors 0.20.0");
  EXPECT_EQ(conformance::implementation_of("planted"), "planted");
  EXPECT_EQ(conformance::implementation_of(""), "(no source)");
}

TEST(ImplementationVerdict, OneRuleExplainsEveryFile) {
  // Two files of one implementation, both made with torchao's rules minus the block-scale floor: the verdict names
  // that rule, because it reproduces both.
  ProfileRules v = profile_rules(Profile::kTorchAO);
  v.name = "planted_impl_no_floor";
  v.nvfp4_tiny_block_floor = false;
  const Profile p = register_profile_variant(v);
  TempFile a(planted_nvfp4(p));
  io::File fb = planted_nvfp4(p, false, 3.0f);  // other data, the same tiny blocks
  const fs::path pb = a.path.string() + ".b.safetensors";
  io::write_file(pb, fb);
  auto cpu = make_cpu_backend();
  const std::vector<fs::path> paths = {a.path, pb};
  const std::vector<conformance::VectorIdentity> ids = {conformance::identify_vector(a.path, *cpu),
                                                        conformance::identify_vector(pb, *cpu)};
  const auto verdict = conformance::implementation_verdict("planted", paths, ids, *cpu);
  fs::remove(pb);
  EXPECT_EQ(verdict.files, 2);
  EXPECT_EQ(verdict.differing, 2);
  EXPECT_EQ(verdict.base, "torchao");
  EXPECT_EQ(verdict.rule, "nvfp4.zero_and_tiny_block_scale") << conformance::implementation_line(verdict);
  EXPECT_NE(conformance::implementation_line(verdict).find("explains all 2"), std::string::npos)
      << conformance::implementation_line(verdict);
}

TEST(ImplementationVerdict, NoRuleFromOneFileByCoincidence) {
  // One file that a changed rule reproduces, one that no rule does (a corrupted byte): the files' own lines may
  // name the rule for the first, the implementation's verdict names none.
  ProfileRules v = profile_rules(Profile::kTorchAO);
  v.name = "planted_impl_no_floor2";
  v.nvfp4_tiny_block_floor = false;
  TempFile a(planted_nvfp4(register_profile_variant(v)));
  io::File fb = planted_nvfp4(Profile::kTorchAO);
  for (auto& t : fb.tensors)
    if (t.name == "rowwise_data") t.bytes[3] ^= 0x11;
  const fs::path pb = a.path.string() + ".b.safetensors";
  io::write_file(pb, fb);
  auto cpu = make_cpu_backend();
  const std::vector<fs::path> paths = {a.path, pb};
  const std::vector<conformance::VectorIdentity> ids = {conformance::identify_vector(a.path, *cpu),
                                                        conformance::identify_vector(pb, *cpu)};
  const auto verdict = conformance::implementation_verdict("planted", paths, ids, *cpu);
  fs::remove(pb);
  EXPECT_EQ(ids[0].explaining_rule, "nvfp4.zero_and_tiny_block_scale");
  EXPECT_EQ(verdict.differing, 2);
  EXPECT_TRUE(verdict.rule.empty()) << conformance::implementation_line(verdict);
  EXPECT_NE(conformance::implementation_line(verdict).find("no single rule of "), std::string::npos)
      << conformance::implementation_line(verdict);
  EXPECT_NE(conformance::implementation_line(verdict).find("explains all 2"), std::string::npos)
      << conformance::implementation_line(verdict);
}

TEST(ImplementationVerdict, CountsWhatEachProfileReproduces) {
  TempFile a(planted_nvfp4(Profile::kTorchAO));
  auto cpu = make_cpu_backend();
  const std::vector<fs::path> paths = {a.path};
  const std::vector<conformance::VectorIdentity> ids = {conformance::identify_vector(a.path, *cpu)};
  const auto verdict = conformance::implementation_verdict("planted", paths, ids, *cpu);
  EXPECT_EQ(verdict.best, "torchao");
  EXPECT_EQ(verdict.best_count, 1);
  EXPECT_EQ(verdict.differing, 0);
  EXPECT_EQ(conformance::implementation_line(verdict).rfind("IMPL  planted: 1 files; torchao reproduces 1 of 1", 0), 0u)
      << conformance::implementation_line(verdict);
}

}  // namespace
