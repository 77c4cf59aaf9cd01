/// \file sharding_test.cpp
/// \brief The FSDP2 protocol as pure functions, world sizes simulated in one process.
///
/// | what                                   | NVFP4 1x16 | NVFP4 16x16 | MXFP8 | FP8 128x128 | FP8 tensor |
/// |----------------------------------------|------------|-------------|-------|-------------|------------|
/// | gather == quantize(full), world 1/2/4  | x          | x           | x     | x           | x          |
/// | wire bytes = quantized size, < BF16    | x          | x           | x     | x           | x          |
/// | padded output (zero re-padding)        | x          | x           | x     | x           | x          |
/// | in-place post-all-gather               | x          | x           | x     | x           | x          |
/// | without amax reduction: wrong, by how much | x      | x           |       |             | x          |
/// | Adam on shards == Adam on full         | x          | x           | x     | x           | x          |
/// | columnwise derivation / refusal        | refused    | x           | 2D x  | x / 1D refused | x       |
/// | refusals: swizzled, shard_M, views     | x          |             | x     | x           |            |
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "qtc/sharding.hpp"
#include "qtc/checkpoint.hpp"
#include "sharding_fixtures.hpp"

namespace qtc {
namespace {

using ref::GatherBuffer;
using ref::ShardPayload;
using testing::FsdpCase;

constexpr int64_t kK = 256;

/// Quantizes the shards of x (world ranks), with or without the MAX all-reduce of the amax, all in this
/// process: the "reduction" is the max over every shard's local amaxes.
std::vector<QuantizedTensor> quantize_shards(const HostMatrix& x, const Recipe& r, int world, bool reduce) {
  const int64_t shard = x.rows / world;
  std::vector<HostMatrix> parts;
  float g[2] = {0.0f, 0.0f};
  for (int k = 0; k < world; ++k) {
    HostMatrix p(x.dtype, shard, x.cols);
    std::memcpy(p.bytes.data(), x.bytes.data() + static_cast<size_t>(k * shard * x.cols) * dtype_size(x.dtype), p.bytes.size());
    auto [a, c] = ref::local_amaxes(p.view(), r);
    g[0] = std::fmax(g[0], a);
    g[1] = std::fmax(g[1], c);
    parts.push_back(std::move(p));
  }
  ref::AmaxAllReduce red = [&](std::span<float> v) {
    v[0] = std::fmax(v[0], g[0]);
    v[1] = std::fmax(v[1], g[1]);
  };
  std::vector<QuantizedTensor> out;
  for (auto& p : parts) out.push_back(ref::quantize_shard(p.view(), r, reduce ? red : ref::AmaxAllReduce{}));
  return out;
}

/// Bit-for-bit equality; a failure prints the first mismatching tensor as `qtc verify` does (test_support.hpp).
#define EXPECT_BITWISE_EQ(a, b) EXPECT_TRUE(qtc::testing::quantized_equal((b), (a)))

class FsdpGather : public ::testing::TestWithParam<std::tuple<FsdpCase, int>> {};

TEST_P(FsdpGather, GatheredEqualsQuantizedFullTensor) {
  const auto& [c, world] = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << c.name << " world " << world << " seed " << seed);
  const int64_t M = testing::kShardRows * world;
  const HostMatrix x = testing::weight_rows(seed, 0, M, kK);
  const QuantizedTensor full = ref::quantize(x.view(), c.recipe);
  const std::vector<QuantizedTensor> shards = quantize_shards(x, c.recipe, world, /*reduce=*/true);

  std::vector<ShardPayload> payloads;
  for (const auto& s : shards) payloads.push_back(ref::fsdp_pre_all_gather(s));
  // Bytes on the wire: quantized data + scales, as TE_FORMATS.md gives them, far below BF16.
  for (const auto& p : payloads) {
    EXPECT_EQ(p.wire_bytes(), testing::expected_wire_bytes(c.recipe, testing::kShardRows, kK));
    // MXFP8 gathers its columnwise plane too: compare with BF16 per gathered plane.
    const int64_t planes = p.meta.columnwise_gathered ? 2 : 1;
    EXPECT_LT(p.wire_bytes(), planes * testing::kShardRows * kK * 2) << "a quantized all-gather must move fewer bytes than BF16";
  }
  // The simulated all-gather, and the same through the packed wire format.
  const std::vector<GatherBuffer> gathered = ref::concat_gathered(payloads);
  std::vector<uint8_t> wire;
  for (const auto& p : payloads) {
    const auto b = ref::pack_payload(p);
    wire.insert(wire.end(), b.begin(), b.end());
  }
  EXPECT_EQ(ref::unpack_gathered(wire, world, payloads[0].meta), gathered);

  const QuantizedTensor q = ref::fsdp_post_all_gather(gathered, payloads[0].meta);
  EXPECT_BITWISE_EQ(q, full);

  // Padded output: scales zero-padded to the full tensor's padded shape.
  ref::FsdpOptions po;
  po.out_layout = ScaleLayout::kPadded;
  std::vector<ShardPayload> pp;
  for (const auto& s : shards) pp.push_back(ref::fsdp_pre_all_gather(s, po));
  const QuantizedTensor qp = ref::fsdp_post_all_gather(ref::concat_gathered(pp), pp[0].meta);
  QuantizedTensor fullp = full;
  if (c.recipe.kind() != RecipeKind::kFP8Tensor) ref::convert_layout(fullp, ScaleLayout::kPadded);
  EXPECT_BITWISE_EQ(qp, fullp);

  // Every rank's reassembly is the same (each uses its own metadata).
  for (int k = 1; k < world; ++k) EXPECT_BITWISE_EQ(ref::fsdp_post_all_gather(gathered, payloads[static_cast<size_t>(k)].meta), full);
}

TEST_P(FsdpGather, InPlaceUpdateReusesBuffers) {
  const auto& [c, world] = GetParam();
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << c.name << " world " << world << " seed " << seed);
  const int64_t M = testing::kShardRows * world;
  QuantizedTensor out;
  const uint8_t* data_ptr = nullptr;
  for (int step = 0; step < 2; ++step) {
    const HostMatrix x = testing::weight_rows(seed + static_cast<uint64_t>(step), 0, M, kK);
    std::vector<ShardPayload> payloads;
    for (const auto& s : quantize_shards(x, c.recipe, world, true)) payloads.push_back(ref::fsdp_pre_all_gather(s));
    const auto gathered = ref::concat_gathered(payloads);
    if (step == 0) {
      out = ref::fsdp_post_all_gather(gathered, payloads[0].meta);
      data_ptr = out.rowwise->data.data();
    } else {
      ref::fsdp_post_all_gather(gathered, payloads[0].meta, out);
      EXPECT_EQ(out.rowwise->data.data(), data_ptr) << "the in-place update must not reallocate";
    }
    EXPECT_BITWISE_EQ(out, ref::quantize(x.view(), c.recipe));
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, FsdpGather, ::testing::Combine(::testing::ValuesIn(testing::fsdp_cases()), ::testing::Values(1, 2, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "World" + std::to_string(std::get<1>(info.param));
                         });

// ---- The bug the amax reduction fixes ------------------------------------------------------------

class AmaxReduction : public ::testing::TestWithParam<FsdpCase> {};

TEST_P(AmaxReduction, WithoutItTheGatherIsWrongWithItExact) {
  const FsdpCase& c = GetParam();
  const int world = 4;
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << c.name << " world " << world << " seed " << seed);
  const int64_t M = testing::kShardRows * world;
  // Shards with clearly different magnitudes: rank k's rows are scaled by 4^k.
  HostMatrix x = testing::weight_rows(seed, 0, M, kK);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < kK; ++j) x.set(i, j, x.get(i, j) * std::ldexp(1.0f, 2 * static_cast<int>(i / testing::kShardRows)));
  const QuantizedTensor full = ref::quantize(x.view(), c.recipe);
  const HostMatrix dq_full = ref::dequantize(full, PlaneKind::kRowwise);

  for (bool reduce : {true, false}) {
    std::vector<ShardPayload> payloads;
    for (const auto& s : quantize_shards(x, c.recipe, world, reduce)) payloads.push_back(ref::fsdp_pre_all_gather(s));
    // Rank 0 reassembles with its own metadata (its local amax when there was no reduction).
    const QuantizedTensor q = ref::fsdp_post_all_gather(ref::concat_gathered(payloads), payloads[0].meta);
    const HostMatrix dq = ref::dequantize(q, PlaneKind::kRowwise);
    double max_abs = 0, max_rel_to_ref = 0;
    int64_t wrong = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < kK; ++j) {
        const double d = std::fabs(static_cast<double>(dq.get(i, j)) - dq_full.get(i, j));
        if (d != 0) ++wrong;
        max_abs = std::max(max_abs, d);
        if (dq_full.get(i, j) != 0) max_rel_to_ref = std::max(max_rel_to_ref, d / std::fabs(dq_full.get(i, j)));
      }
    std::printf("[%s] %s amax reduction: %lld of %lld dequantized elements differ from quantize(full); max |diff| %.6g, "
                "max relative %.6g\n",
                c.name.c_str(), reduce ? "with" : "WITHOUT", static_cast<long long>(wrong), static_cast<long long>(M * kK), max_abs,
                max_rel_to_ref);
    if (reduce) {
      EXPECT_BITWISE_EQ(q, full);
      EXPECT_EQ(wrong, 0);
    } else {
      EXPECT_FALSE(ref::bitwise_equal(q, full)) << "without the reduction the shards use different global scales";
      // Rank k's rows come back scaled by about amax_0 / amax_k: off by far more than one quantization step.
      EXPECT_GT(wrong, M * kK / 2);
      EXPECT_GT(max_rel_to_ref, 0.5);
      // And the shards cannot even be joined as one tensor.
      EXPECT_THROW(ref::concat_rows(quantize_shards(x, c.recipe, world, false)), Error);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PerTensorScale, AmaxReduction,
                         ::testing::Values(FsdpCase{"Nvfp4x1x16", testing::make_nvfp4(false, false)},
                                           FsdpCase{"Nvfp4x16x16", testing::make_nvfp4(true, true)},
                                           FsdpCase{"Fp8Tensor", testing::make_fp8_tensor(true)}),
                         [](const auto& info) { return info.param.name; });

// ---- Adam on shards ----------------------------------------------------------------------------

class AdamOnShards : public ::testing::TestWithParam<FsdpCase> {};

TEST_P(AdamOnShards, RequantizedShardsEqualQuantizedUpdatedFullTensor) {
  const FsdpCase& c = GetParam();
  const int world = 4;
  const uint64_t seed = testing::test_seed();
  SCOPED_TRACE(::testing::Message() << c.name << " seed " << seed);
  const int64_t M = testing::kShardRows * world, shard = testing::kShardRows;
  HostMatrix master = testing::weight_rows(seed, 0, M, kK);
  std::vector<float> m(static_cast<size_t>(M * kK), 0.0f), v(m.size(), 0.0f);
  // Quantized parameter shards, from the initial master weights.
  std::vector<QuantizedTensor> params = quantize_shards(master, c.recipe, world, true);
  ref::AdamConfig cfg;
  cfg.lr = 0.01f;
  cfg.weight_decay = 0.01f;
  for (int step = 1; step <= 3; ++step) {
    const HostMatrix grad = testing::weight_rows(seed * 31 + static_cast<uint64_t>(step), 0, M, kK);
    // Reference: Adam on the full tensor.
    HostMatrix full = master;
    std::vector<float> mf = m, vf = v;
    ref::adam_step({full.as<float>(), static_cast<size_t>(M * kK)}, {grad.as<float>(), static_cast<size_t>(M * kK)}, mf, vf, cfg, step);
    // Shards: each rank updates its rows of the master weights, then re-quantizes its parameter shard in place.
    std::vector<std::pair<float, float>> local(world);
    for (int k = 0; k < world; ++k) {
      const size_t o = static_cast<size_t>(k * shard * kK), n = static_cast<size_t>(shard * kK);
      ref::adam_step({master.as<float>() + o, n}, {grad.as<float>() + o, n}, {m.data() + o, n}, {v.data() + o, n}, cfg, step);
    }
    EXPECT_EQ(master.bytes, full.bytes) << "Adam on shards must equal Adam on the full tensor";
    float g[2] = {0, 0};
    for (int k = 0; k < world; ++k) {
      MatrixView xs{master.as<float>() + k * shard * kK, DType::kF32, shard, kK};
      auto [a, b] = ref::local_amaxes(xs, c.recipe);
      g[0] = std::fmax(g[0], a);
      g[1] = std::fmax(g[1], b);
    }
    for (int k = 0; k < world; ++k) {
      MatrixView xs{master.as<float>() + k * shard * kK, DType::kF32, shard, kK};
      const uint8_t* before = params[static_cast<size_t>(k)].rowwise->data.data();
      ref::requantize_shard_into(params[static_cast<size_t>(k)], xs, [&](std::span<float> a) {
        a[0] = std::fmax(a[0], g[0]);
        a[1] = std::fmax(a[1], g[1]);
      });
      EXPECT_EQ(params[static_cast<size_t>(k)].rowwise->data.data(), before) << "re-quantization must be in place";
    }
    std::vector<ShardPayload> payloads;
    for (const auto& p : params) payloads.push_back(ref::fsdp_pre_all_gather(p));
    const QuantizedTensor gathered = ref::fsdp_post_all_gather(ref::concat_gathered(payloads), payloads[0].meta);
    EXPECT_BITWISE_EQ(gathered, ref::quantize(full.view(), c.recipe)) << " step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, AdamOnShards, ::testing::ValuesIn(testing::fsdp_cases()),
                         [](const auto& info) { return info.param.name; });

// ---- Columnwise derivation -----------------------------------------------------------------------

TEST(DeriveColumnwise, TransposeEqualsQuantizedColumnwiseFor2DRecipes) {
  const uint64_t seed = testing::test_seed();
  Recipe mx2d = testing::make_mxfp8(true);
  mx2d.mxfp8().tile_2d = true;
  for (const Recipe& r : {testing::make_nvfp4(true, true), testing::make_fp8_block_2d(true), testing::make_fp8_tensor(true), mx2d}) {
    SCOPED_TRACE(r.name());
    const HostMatrix x = testing::weight_rows(seed, 0, 256, 384);
    const QuantizedTensor both = ref::quantize(x.view(), r);
    for (ScaleLayout lay : {ScaleLayout::kCompact, ScaleLayout::kPadded}) {
      if (lay == ScaleLayout::kPadded && r.kind() == RecipeKind::kFP8Tensor) continue;
      QuantizedTensor derived = both, expect = both;
      derived.columnwise.reset();
      if (lay != ScaleLayout::kCompact) {
        ref::convert_layout(derived, lay);
        ref::convert_layout(expect, lay);
      }
      ref::derive_columnwise(derived);
      EXPECT_BITWISE_EQ(derived, expect);
    }
  }
}

TEST(DeriveColumnwise, RefusedWhereThePlanesAreIndependent) {
  Recipe fp8_1d = Recipe::of(Fp8BlockOptions{});
  for (const Recipe& r : {testing::make_nvfp4(false, true), testing::make_mxfp8(true), fp8_1d}) {
    const HostMatrix x = testing::weight_rows(1, 0, 128, 128);
    QuantizedTensor q = ref::quantize(x.view(), r);
    q.columnwise.reset();
    try {
      ref::derive_columnwise(q);
      ADD_FAILURE() << r.name() << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not"), std::string::npos) << e.what();
      std::printf("[%s] %s\n", r.name().c_str(), e.what());
    }
  }
}

// ---- Slicing and concatenation ------------------------------------------------------------------

TEST(SliceConcat, RoundTripAndSliceOfFullEqualsQuantizedSlice) {
  const uint64_t seed = testing::test_seed();
  Recipe fp8_1d = Recipe::of(Fp8BlockOptions{});
  Recipe rs = testing::make_nvfp4(false, false);
  rs.nvfp4().row_scaled = true;
  std::vector<Recipe> recipes{testing::make_nvfp4(false, true), testing::make_nvfp4(true, true), testing::make_mxfp8(true),
                              testing::make_fp8_block_2d(true), fp8_1d, testing::make_fp8_tensor(true), rs};
  for (const Recipe& r : recipes) {
    SCOPED_TRACE(r.name());
    const HostMatrix x = testing::weight_rows(seed, 0, 512, 192);
    const QuantizedTensor q = ref::quantize(x.view(), r);
    for (ScaleLayout lay : {ScaleLayout::kCompact, ScaleLayout::kPadded, ScaleLayout::kSwizzled}) {
      if (lay != ScaleLayout::kCompact && (r.kind() == RecipeKind::kFP8Tensor || (lay == ScaleLayout::kSwizzled && r.kind() == RecipeKind::kFP8Block)))
        continue;
      QuantizedTensor ql = q;
      if (lay != ScaleLayout::kCompact) ref::convert_layout(ql, lay);
      const std::vector<QuantizedTensor> parts{ref::slice_rows(ql, 0, 128), ref::slice_rows(ql, 128, 384), ref::slice_rows(ql, 384, 512)};
      EXPECT_BITWISE_EQ(ref::concat_rows(parts), ql);
    }
    // Block-local recipes: a slice of the quantized full tensor is the quantized slice.
    if (r.kind() == RecipeKind::kMXFP8 || r.kind() == RecipeKind::kFP8Block || r.nvfp4_row_scaled()) {
      const HostMatrix xs = testing::weight_rows(seed, 128, 384, 192);
      EXPECT_BITWISE_EQ(ref::slice_rows(q, 128, 384), ref::quantize(xs.view(), r));
    }
  }
}

TEST(SliceConcat, MisalignedBoundariesAreRefused) {
  const HostMatrix x = testing::weight_rows(3, 0, 256, 128);
  const QuantizedTensor q = ref::quantize(x.view(), testing::make_fp8_block_2d(true));
  EXPECT_THROW(ref::slice_rows(q, 0, 64), Error);
  EXPECT_NO_THROW(ref::slice_rows(q, 128, 256));
}

TEST(ShardRowRange, ChunksLikeTorchChunkRoundedToGranularity) {
  EXPECT_EQ(ref::shard_row_range(512, 4, 3, 16), (std::pair<int64_t, int64_t>{384, 512}));
  EXPECT_EQ(ref::shard_row_range(100, 3, 2, 1), (std::pair<int64_t, int64_t>{68, 100}));
  EXPECT_EQ(ref::shard_row_range(256, 4, 3, 128), (std::pair<int64_t, int64_t>{256, 256}));
}

// ---- Refusals ----------------------------------------------------------------------------------

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FsdpRefusals, SwizzledScales) {
  const HostMatrix x = testing::weight_rows(5, 0, 128, 128);
  QuantizedTensor q = ref::quantize(x.view(), testing::make_nvfp4(false, false));
  ref::convert_layout(q, ScaleLayout::kSwizzled);
  const std::string e = error_of([&] { ref::fsdp_pre_all_gather(q); });
  EXPECT_NE(e.find("swizzled"), std::string::npos) << e;
}

TEST(FsdpRefusals, ShardRowsNotAMultipleOfTheBlock) {
  // NVFP4: an 8-row shard (hand-made, since the quantizer itself needs M % 16).
  const HostMatrix x = testing::weight_rows(5, 0, 16, 64);
  QuantizedTensor q = ref::quantize(x.view(), testing::make_nvfp4(false, false));
  q.rows = 8;
  q.rowwise->data_rows = 8;
  q.rowwise->data.resize(8 * 32);
  q.rowwise->scale.rows = 8;
  q.rowwise->scale.bytes.resize(8 * 4);
  std::string e = error_of([&] { ref::fsdp_pre_all_gather(q); });
  EXPECT_NE(e.find("shard_M"), std::string::npos) << e;
  EXPECT_NE(e.find("16"), std::string::npos) << e;
  // MXFP8: 48 rows; FP8 128x128: 64 rows; FP8 1x128 at all.
  const HostMatrix x48 = testing::weight_rows(5, 0, 48, 64), x64 = testing::weight_rows(5, 0, 64, 128);
  e = error_of([&] { ref::fsdp_pre_all_gather(ref::quantize(x48.view(), testing::make_mxfp8(false))); });
  EXPECT_NE(e.find("multiple of 32"), std::string::npos) << e;
  e = error_of([&] { ref::fsdp_pre_all_gather(ref::quantize(x64.view(), testing::make_fp8_block_2d(false))); });
  EXPECT_NE(e.find("multiple of 128"), std::string::npos) << e;
  Recipe fp8_1d = Recipe::of(Fp8BlockOptions{});
  fp8_1d.columnwise = false;
  e = error_of([&] { ref::fsdp_pre_all_gather(ref::quantize(x64.view(), fp8_1d)); });
  EXPECT_NE(e.find("1x128"), std::string::npos) << e;
}

TEST(FsdpRefusals, ColumnwiseUsageOf1DNvfp4) {
  const HostMatrix x = testing::weight_rows(5, 0, 32, 64);
  const QuantizedTensor q = ref::quantize(x.view(), testing::make_nvfp4(false, true));
  const std::string e = error_of([&] { ref::fsdp_pre_all_gather(q); });
  EXPECT_NE(e.find("2D"), std::string::npos) << e;
}

TEST(FsdpViews, OnlyIdentityViewsAndSlices) {
  const HostMatrix x = testing::weight_rows(5, 0, 32, 64);
  const QuantizedTensor q = ref::quantize(x.view(), testing::make_nvfp4(false, false));
  const int64_t sz[2] = {32, 64}, st[2] = {64, 1}, tst[2] = {1, 32}, half[2] = {16, 64};
  EXPECT_NO_THROW(ref::check_identity_view(q, sz, st, 0));
  std::string e = error_of([&] { ref::check_identity_view(q, sz, tst, 0); });
  EXPECT_NE(e.find("only identity views"), std::string::npos) << e;
  e = error_of([&] { ref::check_identity_view(q, half, st, 0); });
  EXPECT_NE(e.find("only identity views"), std::string::npos) << e;
  e = error_of([&] { ref::check_identity_view(q, sz, st, 64); });
  EXPECT_NE(e.find("only identity views"), std::string::npos) << e;
  EXPECT_NO_THROW(ref::check_identity_slice(q, 0, 0, 32, 1));
  EXPECT_NO_THROW(ref::check_identity_slice(q, 1, 0, INT64_MAX, 1));
  e = error_of([&] { ref::check_identity_slice(q, 0, 16, 32, 1); });
  EXPECT_NE(e.find("only identity slices"), std::string::npos) << e;
  e = error_of([&] { ref::check_identity_slice(q, 1, 0, 64, 2); });
  EXPECT_NE(e.find("only identity slices"), std::string::npos) << e;
}

}  // namespace
}  // namespace qtc
