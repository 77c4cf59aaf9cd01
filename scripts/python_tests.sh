#!/usr/bin/env bash
# \file python_tests.sh
# \brief The ctest test `python_tests` (label python): installs the C++ package of BUILD into BUILD/python-test/prefix,
#        makes a venv there (numpy, pytest, ml_dtypes, safetensors, nanobind, scikit-build-core from PyPI), builds
#        `pip install ./python` against the installed package (no recompilation of the reference; the build folder
#        BUILD/python-test/skbuild is kept, so a second run only relinks), then runs pytest on python/tests.
#        torch is optional: the tests that need it skip with the reason when it is absent.
# Usage: scripts/python_tests.sh BUILD [QTC_BINARY]
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" && pwd)"
root="$build/python-test"
mkdir -p "$root"
step() { echo "python_tests: $1 done at ${SECONDS} s"; }
cmake --install "$build" --prefix "$root/prefix" > "$root/install.log"
if [ ! -x "$root/venv/bin/python" ]; then
  python3 -m venv "$root/venv"
fi
py="$root/venv/bin/python"
"$py" -m pip install -q --disable-pip-version-check nanobind scikit-build-core numpy pytest ml_dtypes safetensors
step "venv and PyPI packages"
CMAKE_PREFIX_PATH="$root/prefix" "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  --force-reinstall --config-settings=build-dir="$root/skbuild" "$src/python"
step "pip install ./python"
cd "$root"
QTC_BINARY="${2:-}" "$py" -m pytest -q -rs -p no:cacheprovider "$src/python/tests"
