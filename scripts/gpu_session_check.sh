#!/usr/bin/env bash
# \file gpu_session_check.sh
# \brief One device call for a session with little device time left: scripts/gpu_merged_check.sh (every GPU test,
#        sanitizers, verify --backend all; its files packed into $OUT/merged.tar.gz) and then scripts/gpu_python.sh
#        (source install with the kernels, pytest, the wheel, pytest again; logs in $OUT/py). Stage both first
#        (gpu_merged_check.sh's header; scripts/gpu_python.sh --stage .carry/py) and carry
#        [".carry/gpu.tar.xz", ".carry/final", ".carry/py"].
set -u
FINAL="$OUT"
mkdir -p /tmp/merged "$FINAL/py"
OUT=/tmp/merged bash scripts/gpu_merged_check.sh
tar -C /tmp -czf "$FINAL/merged.tar.gz" merged
echo "merged check done at ${SECONDS}s"
OUT="$FINAL/py" bash scripts/gpu_python.sh .carry/py
echo "python done at ${SECONDS}s"
cat "$FINAL/py/summary.txt" 2>/dev/null
