#!/usr/bin/env bash
# \file build_wheel.sh
# \brief Builds the wheel of the Python package (distribution qtc-conformance, module qtc, console script qtc) from
#        this source tree, the reference compiled into the module (no installed C++ package is used: CMAKE_PREFIX_PATH
#        is cleared), then `auditwheel repair` where auditwheel is installed (a manylinux tag; the module links no
#        shared library but libstdc++ / libc: fmt header-only, Highway optional). The build needs scikit-build-core,
#        nanobind, cmake >= 3.25 and ninja in the running Python (--no-build-isolation: no network needed), fmt and
#        nlohmann_json found by CMake or in QTC_PY_DEPS (python/README.md).
#        The CUDA kernels are compiled in when nvcc is found (QTC_PY_CUDA=AUTO; CMAKE_ARGS=-DQTC_PY_CUDA=ON makes a
#        wheel without them an error): the module links the static CUDA runtime, so the wheel needs only the driver.
#        QTC_WHEEL_BUILD_DIR: a scikit-build-core build folder to reuse (e.g. the one of a source install of the same
#        tree: only what the wheel's settings change is compiled again).
# Usage: scripts/build_wheel.sh OUTDIR [PYTHON]   -> OUTDIR/qtc_conformance-*.whl (repaired when auditwheel ran)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
out="$(mkdir -p "$1" && cd "$1" && pwd)"
py="${2:-python3}"
raw="$out/raw"
rm -rf "$raw" && mkdir -p "$raw"
reuse=()
[ -n "${QTC_WHEEL_BUILD_DIR:-}" ] && reuse=(--config-settings=build-dir="$QTC_WHEEL_BUILD_DIR")
env -u CMAKE_PREFIX_PATH "$py" -m pip wheel -v --no-build-isolation --no-deps --disable-pip-version-check -w "$raw" \
  --config-settings=cmake.define.CMAKE_DISABLE_FIND_PACKAGE_qtc=ON \
  --config-settings=cmake.define.QTC_PY_HIGHWAY="${QTC_PY_HIGHWAY:-ON}" "${reuse[@]}" "$src/python"
whl="$(ls "$raw"/qtc_conformance-*.whl)"
if "$py" -m auditwheel --version > /dev/null 2>&1; then
  "$py" -m auditwheel show "$whl"
  "$py" -m auditwheel repair --only-plat -w "$out" "$whl" || { echo "build_wheel: auditwheel repair failed; keeping the plain wheel"; cp "$whl" "$out/"; }
else
  echo "build_wheel: auditwheel is not installed: the wheel keeps its linux_x86_64 tag"
  cp "$whl" "$out/"
fi
rm -rf "$raw"
ls -l "$out"/qtc_conformance-*.whl
