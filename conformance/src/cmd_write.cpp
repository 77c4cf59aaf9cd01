/// \file cmd_write.cpp
/// \brief The commands that WRITE vectors (VECTORS.md) in either layout:
///   `qtc quantize --recipe R [--param K=V]... (--input FILE [--tensor NAME] | --shape MxK ...) [--layout te]
///                 -o OUT`: x quantized by the CPU reference, every output of the recipe, written as
///                 one vector in the compact layout or as TransformerEngine holds the buffers;
///   `qtc convert PATH... --layout NAME -o OUT`: existing vectors (or TE dumps) rewritten into
///                 another layout (native_layout.hpp); the values are carried over, nothing is recomputed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cases.hpp"
#include "hybrid_cases.hpp"
#include "qtc/recipe_policy.hpp"
#include "commands.hpp"
#include "qtc/error.hpp"
#include "qtc/footprint.hpp"
#include "qtc/native_layout.hpp"
#include "qtc/output_file.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

namespace fs = std::filesystem;

struct LayoutArgs {
  std::string layout = "compact";
  int pad_byte = 0;

  Layout value() const { return layout_from_name(layout).value(); }  // CLI::IsMember checked the name
};

void add_layout_options(CLI::App* cmd, LayoutArgs& a) {
  std::vector<std::string> names;
  for (const LayoutName& n : kLayoutNames) names.emplace_back(n.name);
  cmd->add_option("--layout", a.layout, "compact (VECTORS.md shapes), te (TransformerEngine's padded buffers, TE_FORMATS.md §5), "
                                        "swizzled_128x4 (cuBLAS's order of TE's padded NVFP4 / MXFP8 / MXFP4 scales, §6), "
                                        "swizzled_8x4 (FlashInfer / TensorRT-LLM's small-M order of the same scales), "
                                        "deepgemm_packed_ue8m0 (FP8 block UE8M0 scales packed as DeepGEMM's) or fbgemm_mx4 "
                                        "(MXFP4 as FBGEMM's MX4 rows: per 32 elements 16 code bytes then the E8M0 byte, in "
                                        "<plane>_data, no <plane>_scale_inv); conformance/README.md")
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  cmd->add_option("--pad-byte", a.pad_byte, "value of every padding byte of a padded layout (TE's swizzle writes 0; its quantize "
                                            "kernels leave whatever the buffer held)")
      ->check(CLI::Range(0, 255))
      ->capture_default_str();
}

std::string tensor_list(const io::File& f) {
  std::vector<std::string> parts;
  for (const auto& t : f.tensors) parts.push_back(::fmt::format("{} {} [{}]", t.name, t.dtype, ::fmt::join(t.shape, ", ")));
  return ::fmt::format("{}", ::fmt::join(parts, ", "));
}

// ---------------------------------------------------------------------------------------------------
// qtc quantize

struct QuantizeArgs {
  std::string recipe;
  std::vector<std::string> params;
  std::string input, tensor = "x";
  std::string shape, input_kind = "normal", dtype = "f32";
  uint64_t seed = 20261129;
  bool no_dequantized = false;
  LayoutArgs layout;
  std::string out;
};

HostMatrix read_input(const QuantizeArgs& a) {
  const io::File f = io::read_file(a.input);
  const io::Tensor* t = f.find(a.tensor);
  if (t == nullptr) {
    // The file's only 2-D float tensor stands in for x when no tensor of that name exists.
    const io::Tensor* only = nullptr;
    int n = 0;
    for (const auto& c : f.tensors)
      if (c.shape.size() == 2 && (c.dtype == "F32" || c.dtype == "BF16" || c.dtype == "F16")) only = &c, ++n;
    QTC_CHECK(n == 1, a.input, ": no tensor '", a.tensor, "' and ", n,
              " 2-D F32/BF16/F16 tensors to choose from (name one with --tensor)");
    t = only;
  }
  QTC_CHECK(t->dtype == "F32" || t->dtype == "BF16" || t->dtype == "F16", a.input, ": tensor '", t->name, "' has dtype ",
            t->dtype, "; the input must be F32, BF16 or F16");
  return io::to_matrix(*t);
}

/// --shape MxK: two decimal integers >= 1 that fit int64, nothing else (no sign, no space, no suffix).
std::pair<int64_t, int64_t> parse_shape(const std::string& s) {
  const auto x = s.find('x');
  auto number = [&](std::string_view t, int64_t& v) {
    if (t.empty() || t.size() > 19 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size() && v > 0;
  };
  int64_t m = 0, k = 0;
  QTC_CHECK(x != std::string::npos && number(std::string_view(s).substr(0, x), m) && number(std::string_view(s).substr(x + 1), k),
            "--shape '", s, "': expected MxK with M and K decimal integers from 1 to 2^63-1, e.g. 128x4096");
  return {m, k};
}

/// The output is checked before any work: a path that is not absent or a regular file is refused (write_file
/// checks it again right before it renames its temporary into place).
void check_output_path(const std::string& out) {
  if (const std::string why = io::output_path_problem(out); !why.empty())
    QTC_FAIL(out, ": refusing to write the output: the path ", why,
             " (rule 'output-regular-file': an output path must be absent or a regular file; it is never followed or replaced)");
}

/// `qtc quantize --recipe hybrid --param rowwise.recipe=... --param columnwise.recipe=...`: a hybrid vector
/// (hybrid_cases.hpp), both planes by the CPU reference.
int run_quantize_hybrid(const QuantizeArgs& a, const std::map<std::string, std::string>& md) {
  const HybridRecipe h = HybridRecipe::from_metadata(md);
  const Layout lo = a.layout.value();
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) ref::check_layout_applies(lo, h.plane_recipe(pk));
  HostMatrix x;
  if (!a.input.empty()) {
    QTC_CHECK(a.shape.empty(), "give either --input or --shape, not both");
    x = read_input(a);
  } else {
    QTC_CHECK(!a.shape.empty(), "give the input: --input FILE or --shape MxK");
    const auto [m, k] = parse_shape(a.shape);
    InputClass ic = InputClass::kNormal;
    bool found = false;
    for (InputClass c : all_input_classes())
      if (input_class_name(c) == a.input_kind) ic = c, found = true;
    QTC_CHECK(found, "--input-kind '", a.input_kind, "': unknown family");
    const DType d = a.dtype == "bf16" ? DType::kBF16 : a.dtype == "f16" ? DType::kF16 : DType::kF32;
    // Each plane's outputs, and the columnwise source, within the memory the process may use.
    for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise})
      check_quantize_resources(h.plane_recipe(pk), d, m, k, !a.no_dequantized, 4);
    x = make_input(ic, d, m, k, a.seed);
  }
  for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise})
    check_quantize_resources(h.plane_recipe(pk), x.dtype, x.rows, x.cols, !a.no_dequantized, 4);
  h.validate_input(x.dtype, x.rows, x.cols);
  auto cpu = make_cpu_backend();
  io::File f = make_hybrid_vector(h, x, *cpu, lo, !a.no_dequantized);
  f.metadata["source"] = "qtc " QTC_VERSION " CPU reference (qtc quantize)";
  f.metadata["case"] = !a.input.empty() ? fs::path(a.input).filename().string() + ":" + a.tensor
                                        : ::fmt::format("{}_{}x{}", h.name(), x.rows, x.cols);
  io::write_file(a.out, f);
  std::printf("wrote %s: %s, x [%lld, %lld] %s, layout %s: %s\n", a.out.c_str(), h.name().c_str(),
              static_cast<long long>(x.rows), static_cast<long long>(x.cols), std::string(dtype_name(x.dtype)).c_str(),
              std::string(layout_name(lo)).c_str(), tensor_list(f).c_str());
  return 0;
}

int run_quantize(const QuantizeArgs& a) {
  check_output_path(a.out);
  std::map<std::string, std::string> md{{"recipe", a.recipe}};
  for (const std::string& p : a.params) {
    const auto eq = p.find('=');
    QTC_CHECK(eq != std::string::npos && eq > 0, "--param '", p, "': expected KEY=VALUE (a VECTORS.md metadata key)");
    const std::string key = p.substr(0, eq), value = p.substr(eq + 1);
    // The options that have their own flag are set there, once: a --param naming them would be ignored or would
    // silently override the flag.
    QTC_CHECK(key != "recipe" || value == a.recipe, "--param '", p, "' conflicts with --recipe ", a.recipe,
              " (rule 'one-source': name the recipe with --recipe only)");
    QTC_CHECK(key != "layout" && key != "swizzled", "--param '", p, "': '", key, "' is not a recipe parameter; use --layout ",
              kLayoutNameList, " (rule 'one-source')");
    QTC_CHECK(md.find(key) == md.end() || key == "recipe" || md[key] == value, "--param '", p, "': '", key, "' given twice with different values");
    md[key] = value;
  }
  if (HybridRecipe::is_hybrid(md)) return run_quantize_hybrid(a, md);
  const Recipe r = Recipe::from_metadata(md);
  const Layout lo = a.layout.value();
  ref::check_layout_applies(lo, r);

  Case c;
  c.recipe = r;
  HostMatrix x;
  if (!a.input.empty()) {
    QTC_CHECK(a.shape.empty(), "give either --input or --shape, not both");
    x = read_input(a);
  } else {
    QTC_CHECK(!a.shape.empty(), "give the input: --input FILE or --shape MxK");
    const auto [m, k] = parse_shape(a.shape);
    bool found = false;
    for (InputClass ic : all_input_classes())
      if (input_class_name(ic) == a.input_kind) c.input = ic, found = true;
    QTC_CHECK(found, "--input-kind '", a.input_kind, "': unknown family");
    const DType d = a.dtype == "bf16" ? DType::kBF16 : a.dtype == "f16" ? DType::kF16 : DType::kF32;
    // Sizes and memory before x is made: the input and the outputs, held up to four times over (the quantized
    // tensor, the vector's tensors, the layout conversion, the serialized file).
    check_quantize_resources(r, d, m, k, !a.no_dequantized, 4);
    x = make_input(c.input, d, m, k, a.seed);
  }
  if (!a.input.empty()) check_quantize_resources(r, x.dtype, x.rows, x.cols, !a.no_dequantized, 4);
  c.dtype = x.dtype;
  c.rows = x.rows;
  c.cols = x.cols;
  r.validate_input(x.dtype, x.rows, x.cols);
  auto cpu = make_cpu_backend();
  const QuantizedTensor q = cpu->quantize(x.view(), r);
  c.id = ::fmt::format("{}_{}x{}", r.name(), x.rows, x.cols);
  io::File f = make_vector(c, x, q, *cpu, a.seed);
  f.metadata["source"] = "qtc " QTC_VERSION " CPU reference (qtc quantize)";
  if (!a.input.empty()) {
    for (const char* k : {"comment", "flags", "case_seed"}) f.metadata.erase(k);
    f.metadata["case"] = fs::path(a.input).filename().string() + ":" + a.tensor;
  }
  if (a.no_dequantized) {
    std::vector<io::Tensor> keep;
    for (auto& t : f.tensors)
      if (!t.name.starts_with("dequantized_")) keep.push_back(std::move(t));
    f.tensors = std::move(keep);
  }
  f = ref::convert_vector_layout(f, lo, static_cast<uint8_t>(a.layout.pad_byte));
  io::write_file(a.out, f);
  std::printf("wrote %s: %s, x [%lld, %lld] %s, layout %s: %s\n", a.out.c_str(), r.name().c_str(),
              static_cast<long long>(x.rows), static_cast<long long>(x.cols), std::string(dtype_name(x.dtype)).c_str(),
              std::string(layout_name(lo)).c_str(), tensor_list(f).c_str());
  return 0;
}

// ---------------------------------------------------------------------------------------------------
// qtc convert

struct ConvertArgs {
  std::vector<std::string> paths;
  LayoutArgs layout;
  std::string out;
};

int run_convert(const ConvertArgs& a) {
  const Layout to = a.layout.value();
  std::vector<FileResult> problems;
  // Each input with the name it gets under OUT: a file named on the command line keeps its base name, a file
  // found in a folder its path relative to that folder.
  std::vector<std::pair<fs::path, fs::path>> files;
  for (const std::string& root : a.paths) {
    const bool dir = fs::is_directory(root);
    for (const fs::path& f : collect_vector_files({root}, problems)) {
      std::error_code ec;
      fs::path rel = dir ? fs::relative(f, root, ec) : f.filename();
      if (ec || rel.empty() || *rel.begin() == "..") rel = f.filename();
      files.emplace_back(f, rel);
    }
  }
  for (const auto& p : problems) std::fprintf(stderr, "qtc convert: %s: %s\n", printable_text(p.path).c_str(), printable_text(p.message).c_str());
  if (!problems.empty()) return 2;
  // One input file may go to a file; anything else goes into a folder (created).
  const bool to_dir = files.size() != 1 || fs::is_directory(a.out) || a.paths.size() != 1 || fs::is_directory(a.paths[0]);
  if (to_dir) fs::create_directories(a.out);
  else check_output_path(a.out);
  // Two inputs never collapse onto one output: the second and later inputs that would take a name already taken
  // are errors (rename one, or convert them into separate folders), and the count below is what was written.
  std::map<fs::path, fs::path> taken;  // output -> the input that writes it
  int written = 0, errors = 0;
  for (const auto& [f, rel] : files) {
    try {
      const fs::path dst = to_dir ? fs::path(a.out) / rel : fs::path(a.out);
      const fs::path key = fs::weakly_canonical(dst);
      if (const auto it = taken.find(key); it != taken.end())
        QTC_FAIL("its output ", dst.string(), " is also the output of ", it->second.string(),
                 " (rule 'distinct-outputs': two inputs with the same name; rename one or convert them separately)");
      taken.emplace(key, f);
      const io::File in = io::read_file(f);
      Layout want = to;
      if (HybridRecipe::is_hybrid(in.metadata)) {  // each plane as its recipe's vector (hybrid_cases.hpp)
        const io::File out = convert_hybrid_vector(in, want, static_cast<uint8_t>(a.layout.pad_byte));
        if (to_dir && dst.has_parent_path()) fs::create_directories(dst.parent_path());
        io::write_file(dst, out);
        ++written;
        continue;
      }
      const Recipe r = Recipe::from_metadata(in.metadata);
      if ((want == Layout::kSwizzled || want == Layout::kSwizzled8x4) &&
          !describe_plane(r, PlaneKind::kRowwise, 0, 0).has_layout(want)) {
        want = Layout::kPadded;  // only NVFP4, MXFP8 and MXFP4 scales have the swizzled layouts
        std::fprintf(stderr, "qtc convert: %s: %s has no %s scales; written as layout=te\n", f.string().c_str(),
                     std::string(recipe_kind_name(r.kind())).c_str(), std::string(layout_name(to)).c_str());
      }
      const io::File out = ref::convert_vector_layout(in, want, static_cast<uint8_t>(a.layout.pad_byte));
      if (to_dir && dst.has_parent_path()) fs::create_directories(dst.parent_path());
      io::write_file(dst, out);
      ++written;
    } catch (const std::exception& e) {
      std::string m = e.what();
      if (const auto at = m.rfind(" [check `"); at != std::string::npos && m.back() == ']') m.erase(at);
      std::printf("ERROR %s: %s\n", printable_text(f.string()).c_str(), printable_text(m).c_str());
      ++errors;
    }
  }
  std::printf("%d converted to layout %s, %d errors\n", written, std::string(layout_name(to)).c_str(), errors);
  return errors ? 2 : 0;
}

template <typename F>
void run_guarded(const char* cmd, F f) {
  try {
    exit_code() = f();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "qtc %s: out of memory (rule 'memory': a resource limit, not a wrong answer)\n", cmd);
    exit_code() = 2;
  } catch (const std::exception& e) {
    std::string m = e.what();
    if (const auto at = m.rfind(" [check `"); at != std::string::npos && m.back() == ']') m.erase(at);
    std::fprintf(stderr, "qtc %s: %s\n", cmd, printable_text(m).c_str());
    exit_code() = 2;
  }
}

}  // namespace

void register_write(CLI::App& app) {
  {
    auto a = std::make_shared<QuantizeArgs>();
    CLI::App* cmd = app.add_subcommand("quantize", "Quantize an input with the CPU reference and write the vector (either layout)");
    cmd->footer(
        "Writes one VECTORS.md vector: x and every output of the recipe (both planes unless --param rowwise=0 or\n"
        "columnwise=0; FP8 per-tensor: rowwise_data, the transposed columnwise_data [K, M], scale_inv, amax), and the\n"
        "dequantized planes unless --no-dequantized. The input comes from a safetensors file (tensor x, or the\n"
        "file's only 2-D F32/BF16/F16 tensor, or --tensor NAME) or is generated (--shape MxK, --input-kind,\n"
        "--dtype, --seed). --layout te writes the buffers as TransformerEngine holds them (padded scales, FP8\n"
        "block 1x128 scales transposed); swizzled_128x4 the cuBLAS 128x4 scale order, swizzled_8x4 FlashInfer's\n"
        "8x4 one (NVFP4, MXFP8, MXFP4).\n"
        "Examples:\n"
        "  qtc quantize --recipe nvfp4 --shape 256x1024 --layout swizzled_128x4 -o nvfp4_te.safetensors\n"
        "  qtc quantize --recipe fp8_block --param tile=128x128 --input acts.safetensors --tensor h -o blk.safetensors\n"
        "Exit status 0, or 2 with the rule broken (unknown recipe / key / value, bad shape, unreadable input).");
    cmd->add_option("--recipe", a->recipe, "nvfp4, mxfp8, fp8_block, fp8_tensor, mxfp4 or hybrid (planes: --param rowwise.recipe=K, columnwise.recipe=K, rowwise.<key>=V, columnwise_source=...)")->required();
    cmd->add_option("--param", a->params, "KEY=VALUE recipe parameter or profile (VECTORS.md metadata), repeatable");
    cmd->add_option("--input", a->input, "safetensors file holding the input");
    cmd->add_option("--tensor", a->tensor, "input tensor name in --input")->capture_default_str();
    cmd->add_option("--shape", a->shape, "generate the input: MxK");
    cmd->add_option("--input-kind", a->input_kind, "generated family: normal, heavy, zero_blocks, tiny, huge, ties, special")
        ->capture_default_str();
    cmd->add_option("--dtype", a->dtype, "generated input type")->check(CLI::IsMember({"f32", "bf16", "f16"}))->capture_default_str();
    cmd->add_option("--seed", a->seed, "seed of the generated input")->capture_default_str();
    cmd->add_flag("--no-dequantized", a->no_dequantized, "leave out dequantized_rowwise / dequantized_columnwise");
    add_layout_options(cmd, a->layout);
    cmd->add_option("-o,--out", a->out, "output .safetensors file")->required();
    cmd->callback([a] { run_guarded("quantize", [&] { return run_quantize(*a); }); });
  }
  {
    auto a = std::make_shared<ConvertArgs>();
    CLI::App* cmd = app.add_subcommand("convert", "Rewrite vectors into another layout (compact, te, swizzled_128x4, swizzled_8x4, ...)");
    cmd->footer(
        "Each PATH is a vector or a folder of them (recursive). The layout a file is in comes from its metadata\n"
        "(layout, swizzled); its outputs are moved into the requested layout and the metadata updated; no value is\n"
        "recomputed. The swizzled layouts apply to NVFP4, MXFP8 and MXFP4 files (others are written as layout=te,\n"
        "with a note).\n"
        "One input file and an OUT that is not a folder: OUT is the file; otherwise OUT is a folder (created) and\n"
        "the files keep their names. Prints ERROR lines for files that cannot be converted (wrong shape for their\n"
        "layout, unknown recipe) and 'N converted to layout L, N errors'; exit 2 when any file failed.\n"
        "Example: qtc convert conformance/vectors/te --layout swizzled_128x4 -o te_dumps/");
    cmd->add_option("PATH", a->paths, "Vector files or folders")->required();
    add_layout_options(cmd, a->layout);
    cmd->add_option("-o,--out", a->out, "output file or folder")->required();
    cmd->callback([a] { run_guarded("convert", [&] { return run_convert(*a); }); });
  }
}

}  // namespace qtc::conformance
