/// \file test_checkpoint_conventions.cpp
/// \brief Model checkpoints (issue 26): the committed fixtures exported by ModelOpt, compressed-tensors and in
///        DeepSeek-V3's layout pass; hostile copies of them (planted here) give the problem the convention's words
///        name, or an error, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "qtc/checkpoint_conventions.hpp"
#include "qtc/safetensors.hpp"

namespace qtc::conformance {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = fs::path(QTC_CHECKPOINT_FIXTURES);

std::string all_problems(const CheckpointReport& r) {
  std::string s;
  for (const auto& e : r.errors) s += "error: " + e + "\n";
  for (const auto& t : r.tensors)
    for (const auto& p : t.problems) s += t.name + ": " + p + "\n";
  return s;
}

struct Loaded {
  std::vector<io::Tensor> tensors, reference;
  std::string config;
  io::Tensor& at(const std::string& name) {
    auto it = std::find_if(tensors.begin(), tensors.end(), [&](const io::Tensor& t) { return t.name == name; });
    if (it == tensors.end()) throw std::runtime_error("fixture lacks " + name);
    return *it;
  }
  CheckpointReport check(const CheckpointOptions& o = {}) const {
    return check_checkpoint_tensors(tensors, config, reference, o, "planted");
  }
};

Loaded load(const std::string& name, const std::string& ref = "reference_bf16") {
  Loaded l;
  l.tensors = read_checkpoint_tensors(kDir / name, &l.config);
  if (!ref.empty()) l.reference = read_checkpoint_tensors(kDir / ref, nullptr);
  return l;
}

void set_f32(io::Tensor& t, float v) {
  t.dtype = "F32";
  t.bytes.resize(4);
  std::memcpy(t.bytes.data(), &v, 4);
}
float get_f32(const io::Tensor& t) {
  float v;
  std::memcpy(&v, t.bytes.data(), 4);
  return v;
}

const std::string kQ = "model.layers.0.self_attn.q_proj";
const std::string kK = "model.layers.0.self_attn.k_proj";
const std::string kUp = "model.layers.0.mlp.up_proj";

struct Fixture {
  const char* dir;
  const char* ref;
  const char* convention;
  size_t tensors;
};

TEST(CheckpointFixtures, EachExportedCheckpointPassesWithItsReference) {
  for (const Fixture f : {Fixture{"modelopt_nvfp4", "reference_bf16", "modelopt nvfp4", 7},
                          Fixture{"modelopt_fp8", "reference_bf16", "modelopt fp8", 7},
                          Fixture{"ct_nvfp4", "reference_bf16", "compressed-tensors nvfp4", 7},
                          Fixture{"ct_fp8_block", "reference_bf16", "compressed-tensors fp8 block", 7},
                          Fixture{"ct_fp8_channel", "reference_bf16", "compressed-tensors fp8", 7},
                          Fixture{"ct_mxfp4", "reference_bf16", "compressed-tensors mxfp4", 6},
                          Fixture{"deepseek_v3_fp8", "deepseek_v3_reference_bf16", "deepseek-v3 fp8", 6}}) {
    SCOPED_TRACE(f.dir);
    CheckpointOptions o;
    o.reference = (kDir / f.ref).string();
    const CheckpointReport r = check_checkpoint(kDir / f.dir, o);
    EXPECT_EQ(r.exit_code(), 0) << r.text(true);
    EXPECT_EQ(r.tensors.size(), f.tensors) << r.text(true);
    for (const auto& t : r.tensors) EXPECT_EQ(t.convention, f.convention) << t.name;
    // Each decoded weight was compared with its reference.
    for (const auto& t : r.tensors)
      EXPECT_TRUE(std::any_of(t.notes.begin(), t.notes.end(), [](const std::string& n) {
        return n.find("rounding bound") != std::string::npos || n.find("rounded twice") != std::string::npos;
      })) << t.name << "\n" << r.text(true);
  }
}

TEST(CheckpointFixtures, ModelOptNvfp4IsBitForBitProfileTe) {
  // ModelOpt's NVFP4 weight export gives TE's codes and scales on these weights: a required profile passes.
  CheckpointOptions o;
  o.reference = (kDir / "reference_bf16").string();
  o.profile = "te";
  o.profile_required = true;
  const CheckpointReport r = check_checkpoint(kDir / "modelopt_nvfp4", o);
  EXPECT_EQ(r.exit_code(), 0) << r.text(true);
}

TEST(CheckpointFixtures, DeepSeekScaleAmaxOver448IsNotTeBitForBit) {
  // DeepSeek's scale = amax / 448; TE's scale_inv = 1 / (448 / amax): one ulp apart on some blocks. With the profile
  // required that is a problem naming the first such block.
  CheckpointOptions o;
  o.reference = (kDir / "deepseek_v3_reference_bf16").string();
  o.profile_required = true;
  const CheckpointReport r = check_checkpoint(kDir / "deepseek_v3_fp8", o);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_NE(all_problems(r).find("not bit for bit qtc fp8block_128x128"), std::string::npos) << all_problems(r);
}

TEST(CheckpointPlanted, ModelOptNvfp4) {
  {  // a zero block scale (ModelOpt never writes one)
    Loaded l = load("modelopt_nvfp4");
    l.at(kQ + ".weight_scale").bytes[5] = 0x00;
    const auto r = l.check();
    EXPECT_EQ(r.exit_code(), 1);
    EXPECT_NE(all_problems(r).find("block scales are zero (first at block [1, 1]"), std::string::npos) << all_problems(r);
    EXPECT_NE(all_problems(r).find("ModelOpt clamps block scales"), std::string::npos);
  }
  {  // NaN and negative block scales
    Loaded l = load("modelopt_nvfp4");
    l.at(kQ + ".weight_scale").bytes[0] = 0x7F;
    l.at(kQ + ".weight_scale").bytes[1] = 0xB0;
    const std::string p = all_problems(l.check());
    EXPECT_NE(p.find("are NaN (E4M3 0x7F/0xFF); first at block [0, 0]"), std::string::npos) << p;
    EXPECT_NE(p.find("negative (sign bit set); first at block [0, 1] = 0xb0"), std::string::npos) << p;
  }
  {  // nibbles written high-first: found against the reference
    Loaded l = load("modelopt_nvfp4");
    for (auto& b : l.at(kQ + ".weight").bytes) b = static_cast<uint8_t>((b >> 4) | (b << 4));
    const std::string p = all_problems(l.check());
    EXPECT_NE(p.find(kQ + ": "), std::string::npos) << p;
    EXPECT_NE(p.find("holds element 2j in the high nibble"), std::string::npos) << p;
  }
  {  // weight_scale_2 stored as a reciprocal, and the fused siblings no longer share it
    Loaded l = load("modelopt_nvfp4");
    io::Tensor& ws2 = l.at(kK + ".weight_scale_2");
    set_f32(ws2, 1.0f / get_f32(ws2));
    const std::string p = all_problems(l.check());
    EXPECT_NE(p.find("looks like a reciprocal"), std::string::npos) << p;
    EXPECT_NE(p.find("fused projections model.layers.0.self_attn.{q_proj,k_proj,v_proj}: weight_scale_2 differ"), std::string::npos) << p;
  }
  {  // a global scale that is not amax / 2688 of the group: the largest block scale is no longer 448
    Loaded l = load("modelopt_nvfp4", "");
    for (const char* m : {"q_proj", "k_proj", "v_proj"}) {
      io::Tensor& s = l.at(std::string("model.layers.0.self_attn.") + m + ".weight_scale");
      for (auto& b : s.bytes) b = static_cast<uint8_t>(std::min<int>(b, 0x70));
    }
    const std::string p = all_problems(l.check());
    EXPECT_NE(p.find("the largest block scale of its fused group is 128 (0x70), not 448"), std::string::npos) << p;
  }
  {  // weight_scale_2 missing; weight_scale of another dtype; wrong scale shape
    Loaded l = load("modelopt_nvfp4", "");
    l.tensors.erase(std::remove_if(l.tensors.begin(), l.tensors.end(), [](const io::Tensor& t) { return t.name == kQ + ".weight_scale_2"; }),
                    l.tensors.end());
    io::Tensor& s = l.at(kK + ".weight_scale");
    std::vector<float> f(s.bytes.size(), 500.0f);
    s.dtype = "F32";
    s.bytes.resize(f.size() * 4);
    std::memcpy(s.bytes.data(), f.data(), s.bytes.size());
    l.at(kUp + ".weight_scale").shape = {24, 8};
    const std::string p = all_problems(l.check());
    EXPECT_NE(p.find(kQ + ": weight_scale_2 (the per-tensor scale, amax / (6 * 448)) is missing"), std::string::npos) << p;
    EXPECT_NE(p.find(kK + ": weight_scale is F32; the convention writes F8_E4M3"), std::string::npos) << p;
    EXPECT_NE(p.find("block scales are not E4M3 values (out of E4M3's range"), std::string::npos) << p;
    EXPECT_NE(p.find(kUp + ": weight_scale has shape [24, 8]; weight [48, 32] needs [48, 4]"), std::string::npos) << p;
  }
}

TEST(CheckpointPlanted, CompressedTensorsNvfp4GlobalScaleTheModelOptWay) {
  // vLLM #51946-like: a global scale stored as amax / 2688 instead of 2688 / amax decodes every weight ~1e7 too large.
  Loaded l = load("ct_nvfp4", "");
  io::Tensor& gs = l.at(kUp + ".weight_global_scale");
  set_f32(gs, 1.0f / get_f32(gs));
  const std::string p = all_problems(l.check());
  EXPECT_NE(p.find("looks like ModelOpt's weight_scale_2 (amax / 2688), not the reciprocal compressed-tensors stores"), std::string::npos) << p;
  gs.shape = {};  // and a scalar instead of [1]
  EXPECT_NE(all_problems(l.check()).find("weight_global_scale has shape []; compressed-tensors writes [1]"), std::string::npos);
}

TEST(CheckpointPlanted, CompressedTensorsFp8Channel) {
  // compressed-tensors' FP8_DYNAMIC preset (weights strategy channel): weight_scale [N, 1] = row amax / 448.
  const Loaded l = load("ct_fp8_channel");
  const std::string o = "model.layers.0.self_attn.o_proj";
  {  // one row's scale doubled: its decoded values are twice the reference's
    Loaded u = l;
    io::Tensor& su = u.at(kUp + ".weight_scale");
    float v;
    std::memcpy(&v, su.bytes.data() + 3 * 4, 4);
    v *= 2.0f;
    std::memcpy(su.bytes.data() + 3 * 4, &v, 4);
    const std::string p = all_problems(u.check());
    EXPECT_NE(p.find(kUp + ": 64 of 3072 decoded elements are farther from the reference than the format's rounding allows; first at [3, 0]"),
              std::string::npos) << p;
  }
  {  // one row's codes halved (exponent field - 1): its largest code is 224 under a scale of amax / 448. up_proj is a
     // fused projection, which shares no scale under strategy channel: the check applies to it.
    Loaded u = l;
    io::Tensor& w = u.at(kUp + ".weight");
    for (size_t c = 0; c < 64; ++c) {
      uint8_t& b = w.bytes[3 * 64 + c];
      if ((b & 0x78u) >= 0x10u) b = static_cast<uint8_t>(b - 0x08u);
    }
    const std::string p = all_problems(u.check());
    EXPECT_NE(p.find(kUp + ": 1 of 48 scales do not put their block's largest code at 448 (scale = amax / 448 does); first: channel 3 has "
                           "largest |code| 224"),
              std::string::npos) << p;
  }
  {  // a per-tensor scale where the config says strategy channel
    Loaded m = l;
    io::Tensor& s = m.at(o + ".weight_scale");
    s.shape = {1};
    s.bytes.resize(4);
    const std::string p = all_problems(m.check());
    EXPECT_NE(p.find(o + ": weight_scale has shape [1] (one scale per tensor); the quantization_config's strategy channel writes [64, 1]"),
              std::string::npos) << p;
  }
  {  // a zero and a NaN row scale
    Loaded m = l;
    io::Tensor& s = m.at(o + ".weight_scale");
    const float z = 0.0f, nan = std::nanf("");
    std::memcpy(s.bytes.data() + 5 * 4, &z, 4);
    std::memcpy(s.bytes.data() + 9 * 4, &nan, 4);
    const std::string p = all_problems(m.check());
    EXPECT_NE(p.find(o + ": 1 of 64 weight_scale values are NaN, infinite or negative; first: channel 9"), std::string::npos) << p;
    EXPECT_NE(p.find(o + ": 1 weight_scale values are zero (first: channel 5)"), std::string::npos) << p;
  }
}

TEST(CheckpointPlanted, DeepSeekScales) {
  Loaded l = load("deepseek_v3_fp8", "");
  io::Tensor& s = l.at("model.layers.0.mlp.gate_proj.weight_scale_inv");
  float z = 0.0f, nan = std::nanf("");
  std::memcpy(s.bytes.data() + 4, &z, 4);
  std::memcpy(s.bytes.data() + 8, &nan, 4);
  l.at("model.layers.0.self_attn.k_proj.weight").bytes[3] = 0x7F;
  const std::string p = all_problems(l.check());
  EXPECT_NE(p.find("1 of 4 weight_scale_inv values are NaN, infinite or negative; first: block [1, 0]"), std::string::npos) << p;
  EXPECT_NE(p.find("1 weight_scale_inv values are zero (first: block [0, 1])"), std::string::npos) << p;
  EXPECT_NE(p.find("1 weight codes are E4M3 NaN (0x7F/0xFF); first at [0, 3]"), std::string::npos) << p;
  s.shape = {1, 4};
  EXPECT_NE(all_problems(l.check()).find("weight_scale_inv has shape [1, 4]; weight [200, 136] needs [2, 2]"), std::string::npos);
}

TEST(CheckpointFixtures, DeepSeekV4) {
  CheckpointOptions o;
  o.reference = (kDir / "deepseek_v4_reference_bf16").string();
  o.profile_required = true;  // E8M0 = 2^ceil(log2(amax / 448)): qtc's FP8 block pow2 scale_inv, bit for bit
  const CheckpointReport r = check_checkpoint(kDir / "deepseek_v4", o);
  EXPECT_EQ(r.exit_code(), 0) << r.text(true);
  ASSERT_EQ(r.tensors.size(), 8u);
  int experts = 0;
  for (const auto& t : r.tensors) experts += t.convention == "deepseek-v4 mxfp4 expert";
  EXPECT_EQ(experts, 6);
}

TEST(CheckpointPlanted, DeepSeekV4Scales) {
  Loaded l = load("deepseek_v4", "deepseek_v4_reference_bf16");
  {  // vLLM #51946: E8M0 exponent bytes taken as numbers (120 for 2^-7)
    Loaded m = l;
    io::Tensor& s = m.at("layers.0.ffn.experts.0.w1.scale");
    std::vector<float> f(s.bytes.begin(), s.bytes.end());
    s.dtype = "F32";
    s.bytes.resize(f.size() * 4);
    std::memcpy(s.bytes.data(), f.data(), s.bytes.size());
    const std::string p = all_problems(m.check());
    EXPECT_NE(p.find("scale is F32; DeepSeek-V4 writes F8_E8M0 (value 2^(byte - 127)) (these values are whole numbers"), std::string::npos) << p;
  }
  {
    Loaded m = l;
    m.at("layers.0.attn.wq_a.scale").bytes[1] = 0xFF;
    m.at("layers.0.attn.wo_a.scale").bytes[0] += 2;  // a scale 4x too large: found against the reference
    for (auto& b : m.at("layers.0.attn.wo_a.weight").bytes) b = static_cast<uint8_t>(b & 0x80u) | 0x38u;  // |codes| 1.0 < 224
    m.at("layers.0.ffn.experts.1.w3.scale").bytes[3] = 0xFF;
    const std::string p = all_problems(m.check());
    EXPECT_NE(p.find("layers.0.attn.wq_a: 1 of 4 scale values are NaN"), std::string::npos) << p;
    EXPECT_NE(p.find("layers.0.attn.wo_a: 2 of 2 E8M0 scales are more than amax / 448 rounded up"), std::string::npos) << p;
    EXPECT_NE(p.find("layers.0.attn.wo_a: 32683 of 32768 decoded elements are farther from the reference"), std::string::npos) << p;
    EXPECT_NE(p.find("layers.0.ffn.experts.1.w3: 1 block exponents are 0xFF (E8M0 NaN)"), std::string::npos) << p;
  }
  {  // nibbles swapped in an expert
    Loaded m = l;
    for (auto& b : m.at("layers.0.ffn.experts.0.w2.weight").bytes) b = static_cast<uint8_t>((b >> 4) | (b << 4));
    EXPECT_NE(all_problems(m.check()).find("holds element 2j in the high nibble"), std::string::npos) << all_problems(m.check());
  }
}

// Hostile checkpoint folders: a clear error (exit code 2), never a crash.
class HostileCheckpoint : public ::testing::Test {
 protected:
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() / ("qtc_ckpt_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::copy(kDir / "deepseek_v3_fp8", dir, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
  }
  CheckpointReport run() { return check_checkpoint(dir); }
};

TEST_F(HostileCheckpoint, TruncatedShard) {
  const fs::path shard = dir / "model-00002-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 100);
  const auto r = run();
  EXPECT_EQ(r.exit_code(), 2);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("model-00002-of-00002.safetensors"), std::string::npos) << r.errors[0];
}

TEST_F(HostileCheckpoint, MissingShardAndMissingIndexEntry) {
  fs::remove(dir / "model-00001-of-00002.safetensors");
  auto r = run();
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(all_problems(r).find("names shard model-00001-of-00002.safetensors, which does not exist"), std::string::npos) << all_problems(r);
  SetUp();
  write("model.safetensors.index.json",
        R"({"weight_map": {"model.layers.0.mlp.gate_proj.weight": "model-00001-of-00002.safetensors", "model.x.weight": "model-00001-of-00002.safetensors"}})");
  r = run();
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(all_problems(r).find("lists 'model.x.weight' in model-00001-of-00002.safetensors, which does not hold it"), std::string::npos)
      << all_problems(r);
}

TEST_F(HostileCheckpoint, IndexNotJsonOrEscapingTheFolder) {
  write("model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_NE(all_problems(run()).find("not valid JSON"), std::string::npos);
  write("model.safetensors.index.json", R"({"weight_map": {"a.weight": "../../etc/passwd"}})");
  EXPECT_NE(all_problems(run()).find("is not a file name in the checkpoint folder"), std::string::npos) << all_problems(run());
  write("model.safetensors.index.json", R"({"weight_map": {"a.weight": 7}})");
  EXPECT_NE(all_problems(run()).find("is not a file name"), std::string::npos);
  write("model.safetensors.index.json", R"([1, 2])");
  EXPECT_NE(all_problems(run()).find("needs an object 'weight_map'"), std::string::npos);
  write("config.json", "{not json");
  write("model.safetensors.index.json", R"({"weight_map": {"model.layers.0.mlp.gate_proj.weight": "model-00001-of-00002.safetensors"}})");
  EXPECT_NE(all_problems(run()).find("config.json is not valid JSON"), std::string::npos) << all_problems(run());
}

TEST_F(HostileCheckpoint, AbsurdShapeAndWrongDtypes) {
  // An absurd shape in a shard's header: the safetensors reader refuses it (bytes do not match the shape).
  io::File f = io::read_file(dir / "model-00001-of-00002.safetensors");
  std::vector<uint8_t> bytes = io::serialize(f);
  std::string s(bytes.begin(), bytes.end());
  const auto pos = s.find("[136,200]");
  ASSERT_NE(pos, std::string::npos);
  s.replace(pos, 9, "[1099511627776,200]");
  write("model-00001-of-00002.safetensors", s);
  EXPECT_EQ(run().exit_code(), 2);
  // Weights and scales of the wrong dtype: problems, no crash.
  SetUp();
  io::File g = io::read_file(dir / "model-00002-of-00002.safetensors");
  for (auto& t : g.tensors) {
    if (t.name.ends_with("weight_scale_inv")) t.dtype = "U8", t.shape = {static_cast<int64_t>(t.bytes.size())};
    else if (t.name.ends_with(".weight") && t.bytes.size() % 4 == 0) t.dtype = "F32", t.shape = {static_cast<int64_t>(t.bytes.size() / 4)};
  }
  io::write_file(dir / "model-00002-of-00002.safetensors", g);
  const auto r = run();
  EXPECT_EQ(r.exit_code(), 1) << r.text(true);
  EXPECT_NE(all_problems(r).find("the convention writes F8_E4M3 [N, K]"), std::string::npos) << all_problems(r);
}

TEST(CheckpointPlanted, EveryTensorReshapedOrRetypedNeverCrashes) {
  // Each tensor of each fixture in turn: other shapes of the same bytes, other dtypes of the same size, and emptied.
  // Every outcome is a report (problems or errors); the byte count must always be checked.
  for (const char* dir : {"modelopt_nvfp4", "modelopt_fp8", "ct_nvfp4", "ct_fp8_block", "ct_fp8_channel", "ct_mxfp4", "deepseek_v3_fp8", "deepseek_v4"}) {
    const Loaded base = load(dir, "");
    for (size_t i = 0; i < base.tensors.size(); ++i) {
      const int64_t n = static_cast<int64_t>(base.tensors[i].bytes.size());
      std::vector<std::pair<std::string, std::vector<int64_t>>> variants = {
          {"U8", {n}}, {"U8", {1, n}}, {"U8", {n, 1}}, {"U8", {1, 1, n}}, {"F8_E4M3", {n}}, {"F8_E8M0", {n, 1}}};
      if (n % 4 == 0) variants.push_back({"F32", {n / 4}});
      if (n % 2 == 0) variants.push_back({"BF16", {2, n / 4 > 0 ? n / 4 : 1}});
      variants.push_back({"U8", {0}});
      for (const auto& [dtype, shape] : variants) {
        Loaded l = base;
        io::Tensor& t = l.tensors[i];
        t.dtype = dtype;
        t.shape = shape;
        int64_t want = 1;
        for (int64_t d : shape) want *= d;
        t.bytes.resize(static_cast<size_t>(want * static_cast<int64_t>(*io::dtype_size(dtype))));
        const CheckpointReport r = l.check();
        EXPECT_TRUE(r.exit_code() == 0 || r.exit_code() == 1 || r.exit_code() == 2);
      }
    }
  }
  Loaded l = load("ct_nvfp4", "");
  l.tensors[0].bytes.pop_back();  // bytes that do not match the shape: an error, not a read past the end
  EXPECT_EQ(l.check().exit_code(), 2);
}

TEST(CheckpointDetection, VectorsAreNotCheckpoints) {
  EXPECT_TRUE(is_model_checkpoint(kDir / "ct_nvfp4"));
  EXPECT_TRUE(is_model_checkpoint(kDir / "ct_nvfp4" / "model.safetensors"));
  EXPECT_FALSE(is_model_checkpoint(kDir / "reference_bf16" / "model.safetensors"));
  EXPECT_FALSE(is_model_checkpoint(kDir / "no_such"));
  EXPECT_FALSE(is_model_checkpoint(kDir / "make_fixtures.py"));
}

TEST(CheckpointFixtures, CompressedTensorsMxfp4IsBitForBitTorchaoEven) {
  // compressed-tensors' MXFP4 scale (round_to_power_2 at E2M1's mantissa, minus 2) is torchao's EVEN rule: with
  // --profile torchao the codes and E8M0 bytes are qtc's mxfp4 even, bit for bit; profile te defines no EVEN rule (a
  // note, or a problem when the profile is required).
  CheckpointOptions o;
  o.reference = (kDir / "reference_bf16").string();
  o.profile = "torchao";
  o.profile_required = true;
  CheckpointReport r = check_checkpoint(kDir / "ct_mxfp4", o);
  EXPECT_EQ(r.exit_code(), 0) << r.text(true);
  ASSERT_EQ(r.tensors.size(), 6u);
  for (const auto& t : r.tensors)
    EXPECT_TRUE(std::any_of(t.notes.begin(), t.notes.end(), [](const std::string& n) {
      return n.find("codes and scales are bit for bit those of qtc mxfp4_even_torchao_rowonly profile torchao") != std::string::npos;
    })) << t.name << "\n" << r.text(true);
  o.profile = "te";
  r = check_checkpoint(kDir / "ct_mxfp4", o);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_NE(all_problems(r).find("compressed-tensors mxfp4 takes MXFP4 scale_rule even; profile te defines rceil, ocp_floor: bit "
                                 "comparison not run"),
            std::string::npos) << all_problems(r);
  o.profile_required = false;
  EXPECT_EQ(check_checkpoint(kDir / "ct_mxfp4", o).exit_code(), 0);
}

TEST(CheckpointPlanted, CompressedTensorsMxfp4NotTorchaoEven) {
  // A scale one binade up with the codes halved where that is exact, and one changed code: both are found as bits that
  // are not compressed-tensors' (torchao EVEN) quantization, with the first difference named.
  Loaded l = load("ct_mxfp4");
  CheckpointOptions o;
  o.profile = "torchao";
  o.profile_required = true;
  const std::string name = "model.layers.0.mlp.up_proj";
  EXPECT_EQ(l.check(o).exit_code(), 0) << all_problems(l.check(o));
  Loaded m = l;
  m.at(name + ".weight_packed").bytes[5] ^= 0x01;
  const std::string p = all_problems(m.check(o));
  EXPECT_NE(p.find(name + ": not bit for bit qtc mxfp4_even_torchao_rowonly profile torchao: 1 of "), std::string::npos) << p;
  EXPECT_NE(p.find("first data byte 5: stored 0x"), std::string::npos) << p;
  Loaded s = l;
  s.at(name + ".weight_scale").bytes[0] += 1;
  const std::string q = all_problems(s.check(o));
  EXPECT_NE(q.find("first scale block [0, 0]: stored 0x"), std::string::npos) << q;
  // Hostile copies: an E8M0 NaN exponent, exponents stored as F32 numbers, nibbles the other way round.
  Loaded n = l;
  n.at(name + ".weight_scale").bytes[2] = 0xFF;
  EXPECT_NE(all_problems(n.check()).find(name + ": 1 block exponents are 0xFF (E8M0 NaN); first at block [1, 0]"), std::string::npos)
      << all_problems(n.check());
  Loaded f = l;
  io::Tensor& ws = f.at(name + ".weight_scale");
  std::vector<float> v(ws.bytes.begin(), ws.bytes.end());
  ws.dtype = "F32";
  ws.bytes.resize(v.size() * 4);
  std::memcpy(ws.bytes.data(), v.data(), ws.bytes.size());
  EXPECT_NE(all_problems(f.check()).find("weight_scale is F32; compressed-tensors writes U8 E8M0 exponents"), std::string::npos)
      << all_problems(f.check());
  Loaded w = l;
  for (auto& b : w.at(name + ".weight_packed").bytes) b = static_cast<uint8_t>((b >> 4) | (b << 4));
  EXPECT_NE(all_problems(w.check()).find("holds element 2j in the high nibble"), std::string::npos) << all_problems(w.check());
}

TEST(CheckpointFixtures, DeepSeekV4ExpertsAreBitForBitMxfp4Rceil) {
  CheckpointOptions o;
  o.reference = (kDir / "deepseek_v4_reference_bf16").string();
  o.profile_required = true;
  const CheckpointReport r = check_checkpoint(kDir / "deepseek_v4", o);
  int bit_exact = 0;
  for (const auto& t : r.tensors)
    for (const auto& n : t.notes) bit_exact += n.find("bit for bit those of qtc mxfp4_rceil_rowonly profile te") != std::string::npos;
  EXPECT_EQ(bit_exact, 6) << r.text(true);
}

TEST(CheckpointDetection, WhichRuleDecided) {
  EXPECT_EQ(checkpoint_rule(kDir / "ct_nvfp4"), "config.json has a quantization_config (quant_method compressed-tensors)");
  EXPECT_EQ(checkpoint_rule(kDir / "deepseek_v3_fp8"), "the folder has model.safetensors.index.json");
  // A high-precision model (config.json without quantization_config) is not a checkpoint to check.
  EXPECT_EQ(checkpoint_rule(kDir / "reference_bf16"), "");
  EXPECT_FALSE(is_model_checkpoint(kDir / "reference_bf16"));
  EXPECT_EQ(checkpoint_rule(kDir / "ct_nvfp4" / "model.safetensors"),
            "the file holds quantized-weight tensors (model.layers.0.mlp.down_proj.weight_global_scale) and no VECTORS.md recipe");
  const fs::path dir = fs::temp_directory_path() / ("qtc_detect_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // config.json without quantization_config, but quantized tensor names in model.safetensors: the names decide.
  fs::copy_file(kDir / "ct_nvfp4" / "model.safetensors", dir / "model.safetensors");
  std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"]})";
  EXPECT_EQ(checkpoint_rule(dir), "model.safetensors holds quantized-weight tensors (model.layers.0.mlp.down_proj.weight_global_scale)");
  // Only the header is read: a shard cut short after its header (as a multi-GB shard being copied) is still told
  // apart by its names; reading it whole would fail.
  {
    std::ifstream in(kDir / "ct_nvfp4" / "model.safetensors", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
    std::ofstream(dir / "cut.safetensors", std::ios::binary) << bytes.substr(0, static_cast<size_t>(8 + n + 10));
    EXPECT_THROW(io::read_file(dir / "cut.safetensors"), std::exception);
    EXPECT_TRUE(is_model_checkpoint(dir / "cut.safetensors"));
    // A header length past the end of the file, or a header that is not JSON: not a checkpoint, no exception.
    std::ofstream(dir / "bad.safetensors", std::ios::binary) << bytes.substr(0, 8) << "{";
    EXPECT_FALSE(is_model_checkpoint(dir / "bad.safetensors"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace qtc::conformance
