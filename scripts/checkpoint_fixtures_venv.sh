#!/usr/bin/env bash
# \file checkpoint_fixtures_venv.sh
# \brief Creates the Python environment of conformance/checkpoints/make_fixtures.py (issue 26): a venv with the
#        pinned packages of scripts/checkpoint_fixtures_requirements.txt (and the lock beside it when present), from
#        PyPI only.
#
# Usage: scripts/checkpoint_fixtures_venv.sh [VENV_DIR]     (default: ${QTC_FIXTURES_VENV:-$HOME/.cache/qtc/fixtures-venv})
# The wheels are downloaded once into ${QTC_FIXTURES_WHEELS:-$HOME/.cache/qtc/fixtures-wheels} (pip download), then
# installed from that folder with --no-index, so a second run needs no network and the download is measured: the
# script prints the wheels' total size and the time of each step. Prints "venv ready: DIR" and exits 0 when
# `import torch, modelopt, compressed_tensors, safetensors, ml_dtypes` works in the venv.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-${QTC_FIXTURES_VENV:-$HOME/.cache/qtc/fixtures-venv}}"
WHEELS="${QTC_FIXTURES_WHEELS:-$HOME/.cache/qtc/fixtures-wheels}"
REQ="$ROOT/scripts/checkpoint_fixtures_requirements.txt"
LOCK="$ROOT/scripts/checkpoint_fixtures_lock.txt"
PY="${PYTHON:-python3}"

want=(-r "$REQ")
[ -f "$LOCK" ] && want+=(-c "$LOCK")
t0=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
mkdir -p "$WHEELS"
# PIP_FIND_LINKS may name a local folder of this machine: only PyPI (pip's default index) and our own wheel folder.
env -u PIP_FIND_LINKS "$VENV/bin/python" -m pip download --disable-pip-version-check --quiet \
  --only-binary=:all: -d "$WHEELS" "${want[@]}"
t1=$(date +%s)
echo "download: $(du -sb "$WHEELS" | cut -f1) bytes in $(ls "$WHEELS" | wc -l) wheels, $((t1 - t0)) s"
env -u PIP_FIND_LINKS "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet \
  --no-index --find-links "$WHEELS" "${want[@]}"
t2=$(date +%s)
echo "install: $((t2 - t1)) s; venv $(du -sb "$VENV" | cut -f1) bytes"
"$VENV/bin/python" -c "import torch, modelopt, compressed_tensors, safetensors, ml_dtypes, requests; \
print('torch', torch.__version__, 'modelopt', modelopt.__version__, 'compressed_tensors', compressed_tensors.__version__)"
echo "venv ready: $VENV"
