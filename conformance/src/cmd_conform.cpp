/// \file cmd_conform.cpp
/// \brief `qtc conform [--out DIR] [--backend cpu|cuda|all]`: the bundled vectors plus generated cases for every
///        recipe variant and profile; writes report.md and report.json and prints the report folder last.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "cases.hpp"
#include "commands.hpp"
#include "conform_report.hpp"
#include "hybrid_cases.hpp"
#include "qtc/error.hpp"
#include "qtc/report.hpp"
#include "backends.hpp"
#include "qtc/untrusted.hpp"
#include "qtc/verify.hpp"

namespace qtc::conformance {

namespace {

namespace fs = std::filesystem;

struct ConformOptions {
  std::string out = "qtc-report";
  std::string backend = "all";
  std::string vectors = QTC_BUNDLED_VECTORS_DIR;
  std::string filter;  ///< only recipes whose name contains it
  uint64_t seed = 20261129;
  bool no_generated = false;
  bool no_bundled = false;
  bool no_identify = false;
  std::vector<std::string> foreign;  ///< vectors dumped by other implementations
  VerifyOptions verify;              ///< --strict-padding
};

/// Progress on stderr: a line at each tenth of a phase.
class Progress {
 public:
  Progress(std::string what, size_t total) : what_(std::move(what)), total_(total) {
    std::fprintf(stderr, "qtc conform: %s (%zu)\n", what_.c_str(), total_);
  }
  void step(Verdict v) {
    ++done_;
    if (v == Verdict::kFail) ++failed_;
    if (v == Verdict::kError) ++errors_;
    const size_t tenth = total_ >= 10 ? total_ / 10 : 1;
    if (done_ % tenth == 0 || done_ == total_)
      std::fprintf(stderr, "  [%zu/%zu] %s: %zu failed, %zu errors\n", done_, total_, what_.c_str(), failed_, errors_);
  }

 private:
  std::string what_;
  size_t total_, done_ = 0, failed_ = 0, errors_ = 0;
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// The bundled vectors: the source tree's copy recorded at build time; when the build was moved (a GPU machine
/// running a build made elsewhere), the copy next to the working directory or above the executable.
std::string find_bundled_vectors(const std::string& configured) {
  if (fs::is_directory(configured)) return configured;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates = {fs::path("conformance/vectors/te")};
  if (!ec)
    for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
      candidates.push_back(d / "conformance/vectors/te");
  for (const auto& c : candidates)
    if (fs::is_directory(c, ec)) return c.string();
  return configured;
}

int run_conform(ConformOptions o) {
  if (const char* s = std::getenv("QTC_SEED"); s != nullptr && *s != '\0') o.seed = std::strtoull(s, nullptr, 0);
  // The default bundled vectors are vectors/te and, beside it, vectors/te_layout (the same vectors in TE's layout).
  std::vector<std::string> bundled_dirs;
  if (o.vectors == QTC_BUNDLED_VECTORS_DIR) {
    o.vectors = find_bundled_vectors(o.vectors);
    const fs::path te_layout = fs::path(o.vectors).parent_path() / "te_layout";
    bundled_dirs = {o.vectors};
    if (fs::is_directory(te_layout)) bundled_dirs.push_back(te_layout.string());
  } else {
    bundled_dirs = {o.vectors};
  }
  // A bundled file's name in the report: relative to vectors/te, or "te_layout/<file>".
  auto bundled_name = [&](const fs::path& f) {
    std::error_code e;
    const fs::path base = bundled_dirs.size() > 1 && f.string().rfind(bundled_dirs[1], 0) == 0 ? fs::path(bundled_dirs[1]).parent_path()
                                                                                               : fs::path(o.vectors);
    const fs::path rel = fs::relative(f, base, e);
    return e || rel.empty() ? f.string() : rel.string();
  };
  const auto t0 = std::chrono::steady_clock::now();
  ConformRun run;
  run.version = QTC_VERSION;
  run.started = utc_now();
  run.seed = o.seed;
  run.vectors_dir = ::fmt::format("{}", ::fmt::join(bundled_dirs, "`, `"));

  std::error_code ec;
  const fs::path out = fs::absolute(o.out);
  fs::create_directories(out / "vectors", ec);
  if (ec) {
    std::fprintf(stderr, "qtc conform: %s: cannot create the report folder: %s\n", out.string().c_str(), ec.message().c_str());
    return 2;
  }

  std::vector<std::unique_ptr<QuantizeBackend>> owned = make_backends(o.backend);
  std::vector<QuantizeBackend*> backends;
  for (auto& b : owned) {
    backends.push_back(b.get());
    const std::string why = b->unavailable_reason();
    run.backends.push_back(why.empty() ? b->name() : b->name() + " (skipped: " + why + ")");
  }
  std::unique_ptr<QuantizeBackend> cpu = make_cpu_backend();

  std::vector<ConformRecord> records;
  Summary sum;
  auto record = [&](const std::string& suite, const std::string& check, FileResult r, Progress* prog) {
    sum.add(r.verdict);
    if (r.verdict == Verdict::kFail || r.verdict == Verdict::kError) std::printf("%s\n", result_line(r).c_str());
    if (prog) prog->step(r.verdict);
    records.push_back(ConformRecord{suite, check, std::move(r)});
  };

  // 1. The bundled vectors, on every backend.
  std::vector<fs::path> bundled_files;
  if (!o.no_bundled) {
    std::vector<FileResult> problems;
    bundled_files = collect_vector_files(bundled_dirs, problems);
    const auto& files = bundled_files;
    for (auto& p : problems) record("bundled", "verify", p, nullptr);
    Progress prog("bundled vectors x " + std::to_string(backends.size()) + " backend(s)", files.size() * backends.size());
    for (const auto& f : files)
      for (FileResult& r : verify_file(f, backends, o.verify)) {
        r.path = bundled_name(f);
        record("bundled", "verify", std::move(r), &prog);
      }
  }

  // 1b. Foreign vectors (dumps of other implementations): verified on every backend against the profile each claims.
  std::vector<fs::path> foreign_files;
  if (!o.foreign.empty()) {
    std::vector<FileResult> problems;
    foreign_files = collect_vector_files(o.foreign, problems);
    for (auto& p : problems) record("foreign", "verify", p, nullptr);
    Progress prog("foreign vectors x " + std::to_string(backends.size()) + " backend(s)", foreign_files.size() * backends.size());
    for (const auto& f : foreign_files)
      for (FileResult& r : verify_file(f, backends, o.verify)) {
        r.path = f.string();
        record("foreign", "verify", std::move(r), &prog);
      }
  }

  // 1c. The divergence table: each bundled and foreign vector attributed to the profiles that reproduce it.
  if (!o.no_identify) {
    std::vector<std::pair<std::string, fs::path>> todo;
    for (const auto& f : bundled_files) todo.emplace_back("bundled", f);
    for (const auto& f : foreign_files) todo.emplace_back("foreign", f);
    Progress prog("attributing vectors to profiles", todo.size());
    for (const auto& [suite, f] : todo) {
      VectorIdentity id = identify_vector(f, *cpu);
      if (suite == "bundled") id.path = bundled_name(f);
      prog.step(id.verdict == IdentityVerdict::kError ? Verdict::kError : Verdict::kPass);
      run.identities.emplace_back(suite, std::move(id));
    }
  }
  run.foreign_dirs = o.foreign;

  // 2. Generated cases: quantize with the CPU reference, write, read back, verify on every backend, bound-check.
  if (!o.no_generated) {
    std::vector<Recipe> recipes;
    for (const Recipe& r : all_recipe_variants())
      if (o.filter.empty() || r.name().find(o.filter) != std::string::npos) recipes.push_back(r);
    const std::vector<Case> cases = generated_cases(recipes);
    run.recipes = static_cast<int>(recipes.size());
    run.cases = static_cast<int>(cases.size());
    Progress prog(::fmt::format("generated cases ({} recipe variants)", recipes.size()), cases.size());
    for (const Case& c : cases) {
      const fs::path path = out / "vectors" / (c.id + ".safetensors");
      const std::string rel = fs::relative(path, out).string();
      FileResult base;
      base.path = rel;
      base.backend = "cpu";
      base.recipe = c.recipe.name();
      base.profile = std::string(profile_name(c.recipe.profile));
      Verdict worst = Verdict::kPass;
      auto note = [&](const std::string& check, FileResult r) {
        if (r.verdict == Verdict::kFail || (r.verdict == Verdict::kError && worst != Verdict::kFail)) worst = r.verdict;
        record("generated", check, std::move(r), nullptr);
      };
      try {
        const HostMatrix x = make_input(c.input, c.dtype, c.rows, c.cols, o.seed);
        const QuantizedTensor q = cpu->quantize(x.view(), c.recipe);
        const io::File file = make_vector(c, x, q, *cpu, o.seed);
        io::write_file(path, file);
        const io::File back = io::read_file(path);
        FileResult rt = base;
        rt.verdict = io::serialize(back) == io::serialize(file) ? Verdict::kPass : Verdict::kFail;
        if (rt.verdict == Verdict::kFail) rt.message = "the file read back differs from the file written";
        note("roundtrip", rt);
        for (QuantizeBackend* b : backends) {
          FileResult r = verify_vector(back, rel, *b);
          note("verify", std::move(r));
        }
        for (PlaneKind pk : {PlaneKind::kRowwise, PlaneKind::kColumnwise}) {
          if (!(pk == PlaneKind::kRowwise ? q.rowwise : q.columnwise)) continue;
          const BoundResult br = check_error_bound(q, pk, x.view(), cpu->dequantize(q, pk, DType::kF32));
          FileResult r = base;
          r.path = rel + (pk == PlaneKind::kRowwise ? " (rowwise)" : " (columnwise)");
          r.verdict = br.violations == 0 ? Verdict::kPass : Verdict::kFail;
          if (br.checked == 0) {
            r.verdict = Verdict::kSkipped;
            r.message = "bound not checked: " + br.not_checked;
          } else if (!br.not_checked.empty()) {
            r.details.push_back("not checked: " + br.not_checked);
          }
          if (br.violations)
            r.message = ::fmt::format("dequantize(quantize(x)) exceeds the error bound at {} of {} elements; first {}",
                                    br.violations, br.checked, br.first);
          note("bound", std::move(r));
        }
      } catch (const std::exception& e) {
        FileResult r = base;
        r.verdict = Verdict::kError;
        r.message = e.what();
        note("generate", std::move(r));
      }
      prog.step(worst);
    }
  }

  // 2b. Generated hybrid cases (hybrid_cases.hpp): each hybrid variant on two inputs, written, read back and
  // verified on every backend (the columnwise source dequantized by the backend under test).
  if (!o.no_generated) {
    std::vector<std::pair<std::string, HybridRecipe>> variants;
    for (auto& [id, h] : hybrid_variants())
      if (o.filter.empty() || ("hybrid_" + id).find(o.filter) != std::string::npos) variants.emplace_back(id, h);
    Progress prog(::fmt::format("generated hybrid cases ({} variants)", variants.size()), variants.size() * 2);
    for (const auto& [id, h] : variants)
      for (DType d : {DType::kF32, DType::kBF16}) {
        const int64_t m = h.group_rows.empty() ? 96 : 384, k = 160;
        const std::string cid = ::fmt::format("hybrid_{}_{}_{}x{}", id, dtype_name(d), m, k);
        const fs::path path = out / "vectors" / (cid + ".safetensors");
        FileResult base;
        base.path = fs::relative(path, out).string();
        base.backend = "cpu";
        base.recipe = h.name();
        base.profile = std::string(profile_name(h.rowwise.profile));
        Verdict worst = Verdict::kPass;
        try {
          const HostMatrix x = make_input(InputClass::kNormal, d, m, k, o.seed);
          io::File file = make_hybrid_vector(h, x, *cpu);
          file.metadata["source"] = "qtc " QTC_VERSION " CPU reference (qtc conform)";
          file.metadata["case"] = cid;
          io::write_file(path, file);
          const io::File back = io::read_file(path);
          for (QuantizeBackend* b : backends) {
            FileResult r = verify_vector(back, base.path, *b);
            if (r.verdict == Verdict::kFail || r.verdict == Verdict::kError) worst = r.verdict;
            record("generated", "verify", std::move(r), nullptr);
          }
        } catch (const std::exception& e) {
          FileResult r = base;
          r.verdict = worst = Verdict::kError;
          r.message = e.what();
          record("generated", "generate", std::move(r), nullptr);
        }
        prog.step(worst);
      }
  }

  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  try {
    write_conform_report(out, run, records);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qtc conform: %s\n", e.what());
    return 2;
  }
  // The project report (reports/: qtc_report.{md,html,json} and plots beside report.{md,json}) from the same
  // report.json; a problem there is a warning, never a verdict.
  try {
    const auto made = qtc::report::write_report_for_conform(out);
    for (const auto& w : made.warnings) std::fprintf(stderr, "qtc conform: report generator: %s\n", printable_text(w).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qtc conform: warning: the qtc report generator failed: %s\n", e.what());
  }
  std::fprintf(stderr, "qtc conform: report written (%.1f s)\n", run.seconds);
  std::printf("%s\n", sum.closing_line().c_str());
  std::printf("%s\n", out.string().c_str());  // the very last line: the report folder
  std::fflush(stdout);
  return sum.exit_code();
}

}  // namespace

void register_conform(CLI::App& app) {
  auto opts = std::make_shared<ConformOptions>();
  CLI::App* cmd = app.add_subcommand("conform", "Run the bundled vectors and generated cases for every recipe and profile; write a report");
  cmd->footer(
      "Runs (1) every bundled vector (TransformerEngine-derived vectors, VECTORS.md, in the compact and TE layouts) on each backend,\n"
      "and (2) generated cases: every recipe variant and profile on normal, heavy-tailed, zero-block, tiny/\n"
      "subnormal, huge, E2M1-tie and NaN/Inf/-0 inputs (F32, BF16, F16), quantized by the CPU reference,\n"
      "written as vectors under DIR/vectors, read back, verified on each backend (with a GPU: the CUDA\n"
      "kernels against the CPU reference) and checked for dequantize(quantize(x)) within the format's bound.\n"
      "Progress goes to stderr. stdout gets one line per failure or error, the closing 'N passed, N failed'\n"
      "line, and last the absolute path of the report folder (report.md, report.json).\n"
      "The report's divergence table says, for every bundled and --foreign vector, which profiles (te, te_pyref,\n"
      "ocp, torchao; MXFP8 also the scale rule) reproduce it bit for bit, or the closest one and its first mismatch.\n"
      "Exit status: 0 when nothing failed or errored, 1 when something failed, 2 when anything errored.\n"
      "Environment: QTC_SEED overrides --seed.");
  cmd->add_option("--out", opts->out, "Report folder (created)")->capture_default_str();
  cmd->add_option("--backend", opts->backend, "Backends to check: cpu, cuda or all")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  cmd->add_option("--vectors", opts->vectors,
                  "Folder of bundled vectors (default: vectors/te and, beside it, vectors/te_layout)")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed of the generated inputs")->capture_default_str();
  cmd->add_option("--recipe-filter", opts->filter, "Only generated recipes whose name contains this text");
  cmd->add_flag("--no-generated", opts->no_generated, "Skip the generated cases");
  cmd->add_flag("--no-bundled", opts->no_bundled, "Skip the bundled vectors");
  cmd->add_option("--foreign", opts->foreign,
                   "Vectors dumped by another implementation (files or folders, repeatable): verified against the "
                   "profile each claims, and attributed to the profiles that reproduce it in the divergence table");
  cmd->add_flag("--strict-padding", opts->verify.strict_padding,
                "Vectors with layout=te: padding entries must be zero (by default they are not compared)");
  cmd->add_flag("--no-identify", opts->no_identify, "Skip the divergence table (profile attribution of the vectors)");
  cmd->callback([opts] { exit_code() = run_conform(*opts); });
}

}  // namespace qtc::conformance
