#!/usr/bin/env bash
# Third H200 call of 2026-12-03: the Python package on the stock image (scripts/gpu_python.sh: source install, error
# probe, pytest with QTC_REQUIRE_GPU=1, wheel) and the Triton FP8 group-quantizer dumps checked there by qtc verify.
set -u
cd "$(dirname "$0")/.."
R="$OUT"
tar -C .carry -xJf .carry/gpu2.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu2:${LD_LIBRARY_PATH:-}
( OUT=/tmp/pyout timeout 245 bash scripts/gpu_python.sh .carry/py > /tmp/pyout_main.log 2>&1; echo "rc=$?" >> /tmp/pyout_main.log ) &
PYPID=$!
mkdir -p /tmp/tr/triton_out
PYTHONUNBUFFERED=1 timeout 120 python3 conformance/peers/triton_group_fp8_dump.py \
    --vllm .carry/triton/fp8_utils.py --sglang .carry/triton/fp8_kernel.py /tmp/tr/triton_out > /tmp/tr/triton.log 2>&1
echo "dump rc=$?" >> /tmp/tr/triton.log
timeout 60 .carry/gpu2/qtc verify /tmp/tr/triton_out > /tmp/tr/triton_verify.log 2>&1; echo "verify rc=$?" >> /tmp/tr/triton_verify.log
timeout 60 .carry/gpu2/qtc identify /tmp/tr/triton_out > /tmp/tr/triton_identify.log 2>&1; echo "identify rc=$?" >> /tmp/tr/triton_identify.log
# a sample of the dumps (every 18th file) for the repository
mkdir -p /tmp/tr/sample && ls /tmp/tr/triton_out | awk 'NR % 18 == 1' | while read -r f; do cp "/tmp/tr/triton_out/$f" /tmp/tr/sample/; done
tar -C /tmp/tr -czf "$R/triton_sample.tar.gz" sample triton.log triton_verify.log triton_identify.log
while [ $SECONDS -lt 255 ] && kill -0 $PYPID 2>/dev/null; do sleep 1; done
tar -C /tmp -czf "$R/python_out.tar.gz" pyout pyout_main.log 2>/dev/null
tail -5 /tmp/tr/triton.log; grep -v "^PASS" /tmp/tr/triton_verify.log | tail -15; grep "^IMPL\|identified" /tmp/tr/triton_identify.log | tail -8
cat /tmp/pyout/summary.txt 2>/dev/null; tail -3 /tmp/pyout/pytest_source.log 2>/dev/null
