/// \file fuzz_vector.cpp
/// \brief Fuzz target: a vector file as `qtc verify` reads it — the safetensors parser, then the whole verify
///        path (recipe metadata, the expected-output table, the CPU reference, the comparison) on whatever
///        parses. Every input must end in a verdict or a qtc::Error, never a crash, a leak or a hang.
#include <cstddef>
#include <cstdint>
#include <span>

#include "qtc/backend.hpp"
#include "qtc/error.hpp"
#include "qtc/safetensors.hpp"
#include "qtc/verify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto cpu = qtc::make_cpu_backend();
  qtc::io::File f;
  try {
    f = qtc::io::parse(std::span<const uint8_t>(data, size), "fuzz.safetensors");
  } catch (const qtc::Error&) {
    return 0;  // refused with a message: fine
  }
  const qtc::conformance::FileResult r = qtc::conformance::verify_vector(f, "fuzz.safetensors", *cpu);
  (void)qtc::conformance::result_line(r);
  return 0;
}
