#!/usr/bin/env bash
# \file sanitize_test.sh
# \brief The sanitizer stage of CI: configures the `sanitize` preset (clang, ASan + UBSan without recovery,
#        CPU only), builds only what the `cpu`, `vectors`, `property` and `fuzz` tests run, and runs those
#        labels (the fuzz targets for a fixed number of inputs each). Any sanitizer report fails the stage.
set -euo pipefail
cd "$(dirname "$0")/.."
labels='cpu|vectors|property|fuzz'
# The preset compiles the vectorized sources for AVX2 only (CMakeLists.txt, QTC_SIMD_COMPILE_OPTIONS): on a CPU
# without AVX2, FMA, F16C and BMI2 they are compiled with every instruction set instead.
simd_opts=()
for f in avx2 fma f16c bmi2; do
  grep -qw "$f" /proc/cpuinfo 2>/dev/null || simd_opts=(-DQTC_SIMD_COMPILE_OPTIONS=)
done
cmake --preset sanitize "${simd_opts[@]}" >/dev/null
# The executables of the selected tests (each test is named after its executable; the qtc_* tests run qtc).
# The preset generates Ninja files: one ninja run builds every target two jobs at a time, the shared libraries once.
available=$(ninja -C build-asan -t targets all | sed -n 's/^\([A-Za-z0-9_]*\): phony$/\1/p')
wanted=$(ctest --test-dir build-asan -N -L "$labels" -LE slow | sed -n 's/^ *Test *#[0-9]*: \([A-Za-z0-9_]*\)$/\1/p')
targets=(qtc)
for t in $wanted; do
  if grep -qx "$t" <<<"$available"; then targets+=("$t"); fi
done
echo "sanitize: building ${#targets[@]} targets: ${targets[*]}"
ninja -C build-asan -j2 "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Two exhaustive numeric sweeps cost minutes of CPU under the sanitizers (test_gemm_ref timed out at 600 s on a
# loaded machine): they run here on the cases that reach every code path once (the whole sweeps run in the
# default stage); every other test of the labels runs whole.
heavy='^(test_gemm_ref|test_simd_exact)$'
ctest --test-dir build-asan -L "$labels" -LE slow -E "$heavy" -j2 --output-on-failure
GTEST_FILTER='GemmExact.*:GemmPairsRejected.*:Nvfp4Alpha.*:GemmEpilogue.*:RowScaled.*:*GemmPairs.*/0:*GemmPairs.*/1' \
  build-asan/reference/tests/test_gemm_ref
if [ -x build-asan/conformance/test_simd_exact ]; then
  QTC_SIMD_SWEEP=sanitizer GTEST_FILTER='SimdDispatch.*:SimdEnv.*:*LargerShapes*' build-asan/conformance/test_simd_exact
fi
