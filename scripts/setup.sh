#!/usr/bin/env bash
# \file setup.sh
# \brief Installs the Debian packages qtc builds against; does nothing when all are present.
set -euo pipefail
pkgs=(cmake g++ make ninja-build libeigen3-dev libgtest-dev libgmock-dev googletest librapidcheck-dev libbenchmark-dev
      libbenchmark-tools nlohmann-json3-dev libcli11-dev libfmt-dev libopenmpi-dev openmpi-bin libxxhash-dev libhwy-dev
      python3 python3-scipy gnuplot-nox chromium python3-venv python3-dev  # compare.py needs scipy; the report: gnuplot,
      # headless Chromium; the Python module (python/): venv and the headers it compiles against
      clang libclang-rt-dev  # the sanitizer stage: ASan, UBSan, libFuzzer
      ccache)  # compiles of unchanged sources (a rebuild, another worktree) come from the cache (CMake option QTC_CCACHE)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# CUTLASS headers for the optional sm_90a grouped GEMM (CMake option QTC_CUTLASS, on in the gpu-run preset): the
# nvidia-cutlass wheel from PyPI (pip of a throw-away venv), its include/ unpacked into ~/.cache/qtc/cutlass-4.2.0,
# where CMake looks (QTC_CUTLASS_DIR). Only where nvcc is; without network this warns and the default build (option
# off) does not need them.
cutlass_dir="${QTC_CUTLASS_DIR:-$HOME/.cache/qtc/cutlass-4.2.0}"
if [ -x /usr/local/cuda/bin/nvcc ] && [ ! -f "$cutlass_dir/include/cutlass/cutlass.h" ]; then
  tmp=$(mktemp -d)
  if python3 -m venv "$tmp/venv" && "$tmp/venv/bin/python" -m pip download --quiet --no-deps --dest "$tmp" \
       nvidia-cutlass==4.2.0.0 && python3 - "$tmp" "$cutlass_dir" <<'PY'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "nvidia_cutlass-*.whl"))[0]
prefix = "cutlass_library/source/include/"
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            dst = os.path.join(sys.argv[2], "include", name[len(prefix):])
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with z.open(name) as f, open(dst, "wb") as o:
                o.write(f.read())
PY
  then
    echo "setup: CUTLASS 4.2.0 headers in $cutlass_dir"
  else
    echo "setup: warning: could not fetch the nvidia-cutlass headers; builds with QTC_CUTLASS=ON need them" >&2
  fi
  rm -rf "$tmp"
fi
