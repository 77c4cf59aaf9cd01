#!/usr/bin/env bash
# \file sanitize_test.sh
# \brief The sanitizer stage of CI: configures the `sanitize` preset (clang, ASan + UBSan without recovery,
#        CPU only), builds only what the `cpu`, `vectors`, `property` and `fuzz` tests run, and runs those
#        labels (the fuzz targets for a fixed number of inputs each). Any sanitizer report fails the stage.
set -euo pipefail
cd "$(dirname "$0")/.."
labels='cpu|vectors|property|fuzz'
cmake --preset sanitize >/dev/null
# The executables of the selected tests (each test is named after its executable; the qtc_* tests run qtc).
available=$(cmake --build build-asan --target help | sed -n 's/^\.\.\. \([A-Za-z0-9_]*\).*/\1/p')
wanted=$(ctest --test-dir build-asan -N -L "$labels" -LE slow | sed -n 's/^ *Test *#[0-9]*: \([A-Za-z0-9_]*\)$/\1/p')
targets=(qtc)
for t in $wanted; do
  if grep -qx "$t" <<<"$available"; then targets+=("$t"); fi
done
echo "sanitize: building ${#targets[@]} targets: ${targets[*]}"
cmake --build build-asan -j2 --target "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan -L "$labels" -LE slow --output-on-failure
