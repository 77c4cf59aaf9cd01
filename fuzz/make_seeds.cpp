/// \file make_seeds.cpp
/// \brief Writes the checkpoint seed corpora of the fuzz targets: small checkpoints of every recipe family
///        (each plane, compact / padded / swizzled scales, row-scaled NVFP4, an empty rank), their index.json
///        files into corpus/fuzz_ckpt_index and their shard files into corpus/fuzz_ckpt_shard.
///        Usage: fuzz_make_seeds <fuzz/corpus folder>. The vector corpus is a copy of small bundled vectors.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "qtc/checkpoint.hpp"
#include "qtc/layouts.hpp"
#include "qtc/quantize.hpp"
#include "qtc/sharding.hpp"

namespace {

namespace fs = std::filesystem;
using namespace qtc;

HostMatrix input(int64_t M, int64_t K, uint32_t seed) {
  HostMatrix m(DType::kF32, M, K);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < K; ++j) {
      s = s * 1664525u + 1013904223u;
      m.set(i, j, (static_cast<float>(s >> 8) * 0x1p-24f - 0.5f) * static_cast<float>(1 + (i % 5)));
    }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus folder>\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  fs::create_directories(out / "fuzz_ckpt_index");
  fs::create_directories(out / "fuzz_ckpt_shard");
  struct Case {
    std::string name;
    Recipe r;
    int64_t M, K;
    ScaleLayout layout;
  };
  std::vector<Case> cases;
  auto add = [&](const std::string& name, RecipeKind k, int64_t M, int64_t K, ScaleLayout lay, auto&& tweak) {
    Recipe r;
    r.set_options(Recipe::default_options(k));
    r.rowwise = true;
    r.columnwise = false;
    tweak(r);
    cases.push_back({name, r, M, K, lay});
  };
  add("nvfp4", RecipeKind::kNVFP4, 32, 32, ScaleLayout::kCompact, [](Recipe&) {});
  add("nvfp4_2d_col", RecipeKind::kNVFP4, 32, 32, ScaleLayout::kCompact, [](Recipe& r) { r.nvfp4().tile_2d = true; r.columnwise = true; });
  add("nvfp4_rowscaled", RecipeKind::kNVFP4, 32, 16, ScaleLayout::kCompact, [](Recipe& r) { r.nvfp4().row_scaled = true; });
  add("nvfp4_swizzled", RecipeKind::kNVFP4, 32, 64, ScaleLayout::kSwizzled, [](Recipe&) {});
  add("mxfp8_col", RecipeKind::kMXFP8, 64, 40, ScaleLayout::kCompact, [](Recipe& r) { r.columnwise = true; });
  add("mxfp8_padded", RecipeKind::kMXFP8, 33, 40, ScaleLayout::kPadded, [](Recipe&) {});
  add("fp8block_1d", RecipeKind::kFP8Block, 20, 130, ScaleLayout::kCompact, [](Recipe&) {});
  add("fp8block_2d", RecipeKind::kFP8Block, 130, 20, ScaleLayout::kCompact, [](Recipe& r) { r.fp8_block().tile_2d = true; r.columnwise = true; });
  add("fp8tensor", RecipeKind::kFP8Tensor, 9, 7, ScaleLayout::kCompact, [](Recipe& r) { r.columnwise = true; });
  int n = 0;
  for (int world : {1, 2, 3}) {
    const fs::path dir = fs::temp_directory_path() / ("qtc_fuzz_seeds_" + std::to_string(world));
    fs::remove_all(dir);
    std::vector<std::vector<ref::TensorShard>> per(static_cast<size_t>(world));
    for (size_t c = 0; c < cases.size(); ++c) {
      const Case& k = cases[c];
      const HostMatrix x = input(k.M, k.K, static_cast<uint32_t>(c + 7 * world));
      QuantizedTensor q = ref::quantize(x.view(), k.r);
      if (k.layout != ScaleLayout::kCompact) ref::convert_layout(q, k.layout);
      const int64_t g = ref::row_granularity(q);
      for (int r = 0; r < world; ++r) {
        const auto [b, e] = ref::shard_row_range(q.rows, world, r, g);
        per[static_cast<size_t>(r)].push_back(ref::TensorShard{k.name, q.rows, b, ref::slice_rows(q, b, e)});
      }
    }
    ref::SaveOptions o;
    o.fsync = false;
    ref::save_checkpoint(dir.string(), per, o);
    const std::string w = std::to_string(world);
    fs::copy_file(dir / "index.json", out / "fuzz_ckpt_index" / ("index_world" + w + ".json"), fs::copy_options::overwrite_existing);
    for (const auto& de : fs::directory_iterator(dir)) {
      const std::string f = de.path().filename().string();
      if (f.rfind("shard-", 0) == 0) {
        fs::copy_file(de.path(), out / "fuzz_ckpt_shard" / ("world" + w + "_" + f), fs::copy_options::overwrite_existing);
        ++n;
      }
    }
    // One shard file per tensor too: small seeds reach the per-tensor checks sooner.
    if (world == 1)
      for (size_t c = 0; c < cases.size(); ++c) {
        const fs::path d1 = dir.string() + "_" + cases[c].name;
        fs::remove_all(d1);
        std::vector<std::vector<ref::TensorShard>> one{{per[0][c]}};
        ref::save_checkpoint(d1.string(), one, o);
        for (const auto& de : fs::directory_iterator(d1))
          if (de.path().filename().string().rfind("shard-", 0) == 0)
            fs::copy_file(de.path(), out / "fuzz_ckpt_shard" / ("one_" + cases[c].name + ".qtc"), fs::copy_options::overwrite_existing);
        fs::remove_all(d1);
        ++n;
      }
    fs::remove_all(dir);
  }
  std::printf("wrote 3 index seeds and %d shard seeds under %s\n", n, out.c_str());
  return 0;
}
