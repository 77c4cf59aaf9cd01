#!/usr/bin/env bash
# \file ci_test.sh
# \brief What CI runs (the README's second command, after scripts/setup.sh): the default build and every test
#        but the `slow` ones and the `fixtures` one (scripts/check_checkpoint_fixtures.sh downloads 2.8 GB of
#        wheels), then the sanitizer stage (scripts/sanitize_test.sh). Prints each stage's time.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
cmake --preset default
cmake --build build -j2
ctest --test-dir build -LE "slow|fixtures" -j2 --output-on-failure
t1=$(date +%s)
echo "ci: default build and tests: $((t1 - t0)) s"
scripts/sanitize_test.sh
t2=$(date +%s)
echo "ci: sanitizer stage: $((t2 - t1)) s; total $((t2 - t0)) s"
