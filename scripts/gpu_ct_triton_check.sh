#!/usr/bin/env bash
# \file gpu_ct_triton_check.sh
# \brief Profile compressed_tensors_triton (compressed-tensors 0.20.0 on CUDA tensors, issue 25) against dumps it was
#        not written from: compressed_tensors_dump.py --device cuda --stress N (other seeds, 256x512 and 96x160, the
#        input families in turn), and the 432 regular dumps again. One device call; no qtc is needed there: the dumps
#        come back under $OUT and are checked on the CPU machine.
#
# Here, before the call:
#   mkdir -p .carry/ct_triton/whl
#   pip download --no-deps -d .carry/ct_triton/whl compressed-tensors==0.20.0 loguru
#   (r25's call also carried the other dependencies the image lacked as wheels: add them the same way if the
#   import fails; the image has torch 2.11 and triton 3.6.)
# Call: carry [".carry/ct_triton"], command: bash scripts/gpu_ct_triton_check.sh 24   (about 2 min of device time)
# Then, here: mkdir -p /tmp/ctt && tar -C /tmp/ctt -xJf FILES_AT/ct_triton_dumps.tar.xz
#   build/conformance/qtc verify /tmp/ctt/regular /tmp/ctt/stress /tmp/ctt/fp8 /tmp/ctt/fp8_other  -> "N passed, 0 failed"
#   (fp8: the FP8 / FP8_BLOCK presets of compressed_tensors_fp8_dump.py --device cuda, the 288 the profile's FP8 rules
#   were read from; fp8_other: the same over other shapes and values, 3 x 3 x 12 x 3 less the 1x128 ones of K = 160)
#   build/conformance/qtc identify /tmp/ctt/stress | tail -2
#     -> "IMPL  compressed-tensors 0.20.0 on CUDA: N files; compressed_tensors_triton reproduces N of N ..."
# (the regular ones should be byte-identical to reports/h200/run_r25_triton's 432 but for the metadata).
set -u
N=${1:-24}
R="$OUT"
S=$SECONDS
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $R/summary.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .carry/ct_triton/whl/*.whl >> $R/summary.txt 2>&1
export PYTHONPATH=/tmp/site:conformance/peers PYTHONUNBUFFERED=1
timeout 120 python3 conformance/peers/compressed_tensors_dump.py --device cuda --stress "$N" /tmp/ctt/stress >> $R/summary.txt 2>&1
echo "stress dump rc=$? at $((SECONDS-S)) s" >> $R/summary.txt
timeout 60 python3 conformance/peers/compressed_tensors_dump.py --device cuda /tmp/ctt/regular >> $R/summary.txt 2>&1
echo "regular dump rc=$? at $((SECONDS-S)) s" >> $R/summary.txt
timeout 60 python3 conformance/peers/compressed_tensors_fp8_dump.py --device cuda /tmp/ctt/fp8 >> $R/summary.txt 2>&1
echo "fp8 presets dump rc=$? at $((SECONDS-S)) s" >> $R/summary.txt
# FP8 / FP8_BLOCK over other inputs (other shapes draw other values) than the 288 the profile's FP8 rules were read from
timeout 90 python3 conformance/peers/compressed_tensors_fp8_dump.py --device cuda --shapes 64x384,96x160,136x256 \
    /tmp/ctt/fp8_other >> $R/summary.txt 2>&1
echo "fp8 other-shapes dump rc=$? at $((SECONDS-S)) s" >> $R/summary.txt
tar -C /tmp/ctt -cf - stress regular fp8 fp8_other | xz -T0 -6 > $R/ct_triton_dumps.tar.xz
ls -la $R >> $R/summary.txt
echo "done at $((SECONDS-S)) s" >> $R/summary.txt
cat $R/summary.txt
