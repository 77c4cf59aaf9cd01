#!/usr/bin/env bash
# Second H200 call of 2026-12-03: the MXFP4 F16-NaN fix (test_quantize_cuda's MXFP4 cases, memcheck on them,
# qtc verify --backend all over the torchao vectors), the Python package (scripts/gpu_python.sh, with the venv fix)
# and the Triton FP8 group-quantizer dumps (kernel files written to a module of their own).
set -u
cd "$(dirname "$0")/.."
R="$OUT"
tar -C .carry -xJf .carry/gpu2.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu2:${LD_LIBRARY_PATH:-}
( OUT=/tmp/pyout timeout 380 bash scripts/gpu_python.sh .carry/py > /tmp/pyout_main.log 2>&1; echo "rc=$?" >> /tmp/pyout_main.log ) &
PYPID=$!
( mkdir -p /tmp/tr/triton_out; PYTHONUNBUFFERED=1 timeout 200 python3 conformance/peers/triton_group_fp8_dump.py \
    --vllm .carry/triton/fp8_utils.py --sglang .carry/triton/fp8_kernel.py /tmp/tr/triton_out > /tmp/tr/triton.log 2>&1
  echo "rc=$?" >> /tmp/tr/triton.log; tar -C /tmp/tr -czf "$R/triton_out.tar.gz" triton_out triton.log ) &
TRPID=$!
{
  echo "commit $(cat .carry/gpu2/commit.txt) $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  QTC_REQUIRE_GPU=1 timeout 200 .carry/gpu2/test_quantize_cuda --gtest_brief=1 --gtest_filter='*Mxfp4*:*MXFP4*:Determinism.*' > /tmp/q.log 2>&1
  echo "test_quantize_cuda MXFP4 + determinism: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/q.log | tr '\n' ' ')"
  QTC_SMALL=1 QTC_REQUIRE_GPU=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
    .carry/gpu2/test_quantize_cuda --gtest_brief=1 --gtest_filter='*Mxfp4*F16*:*Mxfp4*BF16*Normal*' > /tmp/mc.log 2>&1
  echo "memcheck MXFP4 F16 + BF16 normal: rc=$? $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED) ' /tmp/mc.log | tr '\n' ' ')"
  for d in conformance/vectors/torchao conformance/vectors/ocp; do
    echo "== qtc verify --backend all $d"; timeout 30 .carry/gpu2/qtc verify --backend all "$d" 2>&1 | tail -3; done
} > "$R/gpu2_summary.txt" 2>&1
cp /tmp/q.log "$R/test_quantize_cuda_mxfp4.log"; tail -c 200000 /tmp/mc.log > "$R/memcheck_mxfp4.log"
wait $TRPID
while [ $SECONDS -lt 400 ] && kill -0 $PYPID 2>/dev/null; do sleep 1; done
tar -C /tmp -czf "$R/python_out.tar.gz" pyout pyout_main.log 2>/dev/null
cat "$R/gpu2_summary.txt" /tmp/pyout/summary.txt 2>/dev/null; tail -3 /tmp/tr/triton.log
