#!/usr/bin/env bash
# \file setup.sh
# \brief Installs the Debian packages qtc builds against; does nothing when all are present.
set -euo pipefail
pkgs=(cmake g++ make ninja-build libeigen3-dev libgtest-dev libgmock-dev googletest librapidcheck-dev libbenchmark-dev
      libbenchmark-tools nlohmann-json3-dev libcli11-dev libfmt-dev libopenmpi-dev openmpi-bin libxxhash-dev libhwy-dev
      python3 python3-scipy gnuplot-nox chromium python3-venv python3-dev  # compare.py needs scipy; the report: gnuplot,
      # headless Chromium; the Python module (python/): venv and the headers it compiles against
      clang libclang-rt-dev)  # the sanitizer stage: ASan, UBSan, libFuzzer
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
