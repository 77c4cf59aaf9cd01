/// \file cmd_gating.cpp
/// \brief `qtc gating [--cc X.Y] [--cublas N] [--feature NAME]`: prints the capability table (qtc/gating.hpp)
///        for the card this runs on, or for a given compute capability and cuBLAS version (no GPU needed).
///        With --feature, prints that row only and exits 0 when supported, 1 when not.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "commands.hpp"
#include "qtc/error.hpp"
#include "qtc/gating.hpp"
#ifdef QTC_HAVE_CUDA
#include "qtc/cuda/gemm.hpp"
#endif

namespace qtc::conformance {

namespace {

struct GatingOptions {
  std::string cc;
  std::string cublas;
  std::string feature;
};

int run_gating(const GatingOptions& o) {
  gating::Capability cap;
#ifdef QTC_HAVE_CUDA
  if (o.cc.empty()) cap = cuda::device_capability();
#endif
  if (!o.cc.empty()) {
    gating::parse_compute_capability(o.cc, cap);
    cap.cublas = 0;
    cap.cuda_runtime = 0;
  }
  if (!o.cublas.empty()) cap.cublas = gating::parse_cublas_version(o.cublas);
  if (cap.sm() == 0) {
#ifdef QTC_HAVE_CUDA
    std::fprintf(stderr, "qtc gating: no CUDA device; pass --cc X.Y (and --cublas N) to print the table for a card\n");
#else
    std::fprintf(stderr, "qtc gating: built without CUDA; pass --cc X.Y (and --cublas N) to print the table for a card\n");
#endif
    return 2;
  }
  if (!o.feature.empty()) {
    const auto f = gating::feature_from_name(o.feature);
    if (!f) {
      std::fprintf(stderr, "qtc gating: unknown feature \"%s\"\n", o.feature.c_str());
      return 2;
    }
    const gating::Support s = gating::query(*f, cap);
    std::printf("%s %s\n", o.feature.c_str(), s.supported ? "yes" : ("no: " + s.reason).c_str());
    return s.supported ? 0 : 1;
  }
  std::printf("%s", gating::format_table(cap).c_str());
  return 0;
}

}  // namespace

void register_gating(CLI::App& app) {
  auto opts = std::make_shared<GatingOptions>();
  CLI::App* sub = app.add_subcommand("gating", "Print the capability table (features x this card and cuBLAS)");
  sub->add_option("--cc", opts->cc, "Compute capability X.Y instead of the card's (no GPU needed)");
  sub->add_option("--cublas", opts->cublas, "cuBLAS version (13.1, 13.1.0 or 130100) instead of the loaded one");
  sub->add_option("--feature", opts->feature, "Print one row (e.g. gemm.fp8_block); exit 1 if unsupported");
  sub->callback([opts] {
    try {
      exit_code() = run_gating(*opts);
    } catch (const qtc::Error& e) {
      std::fprintf(stderr, "qtc gating: %s\n", e.what());
      exit_code() = 2;
    }
  });
}

}  // namespace qtc::conformance
