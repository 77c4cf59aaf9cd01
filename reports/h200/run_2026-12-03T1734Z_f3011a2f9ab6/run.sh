#!/usr/bin/env bash
# The lead's final H200 call of 2026-12-03: GPU tests + generic NVFP4 + compute-sanitizer (scripts/gpu_run.sh, no
# benchmarks), qtc verify --backend all over the committed vectors, the Python package (scripts/gpu_python.sh) and
# the Triton FP8 group-quantizer dumps (conformance/peers/triton_group_fp8_dump.py), the last two in parallel.
set -u
cd "$(dirname "$0")/.."
R="$OUT"
tar -C .carry -xJf .carry/gpu.tar.xz
( OUT=/tmp/pyout timeout 540 bash scripts/gpu_python.sh .carry/py > /tmp/pyout_main.log 2>&1; echo "rc=$?" >> /tmp/pyout_main.log ) &
PYPID=$!
( mkdir -p /tmp/tr/triton_out; PYTHONUNBUFFERED=1 timeout 240 python3 conformance/peers/triton_group_fp8_dump.py \
    --vllm .carry/triton/fp8_utils.py --sglang .carry/triton/fp8_kernel.py /tmp/tr/triton_out > /tmp/tr/triton.log 2>&1
  echo "rc=$?" >> /tmp/tr/triton.log; tar -C /tmp/tr -czf "$R/triton_out.tar.gz" triton_out triton.log ) &
TRPID=$!
OUT=/tmp/gpuout QTC_BENCH=0 timeout 400 bash scripts/gpu_run.sh .carry/gpu > /tmp/gpu_run_main.log 2>&1
echo "gpu_run rc=$? at ${SECONDS}s" >> /tmp/gpu_run_main.log
export LD_LIBRARY_PATH=$PWD/.carry/gpu:${LD_LIBRARY_PATH:-}
QTC_SMALL=1 QTC_REQUIRE_GPU=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
  .carry/gpu/test_gemm_cuda --gtest_brief=1 --gtest_filter='*Mxfp4*' > /tmp/memcheck_gemm_mxfp4.log 2>&1
echo "memcheck test_gemm_cuda *Mxfp4*: rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/memcheck_gemm_mxfp4.log | tr '\n' ' ')" >> /tmp/gpu_run_main.log
( for d in conformance/vectors/te conformance/vectors/torchao conformance/vectors/ocp conformance/vectors/te_layout; do
    echo "== $d"; timeout 30 .carry/gpu/qtc verify --backend all "$d" 2>&1 | tail -4; done ) > /tmp/verify_cuda.log 2>&1
wait $TRPID
while [ $SECONDS -lt 560 ] && kill -0 $PYPID 2>/dev/null; do sleep 1; done
cp /tmp/gpuout/summary.txt "$R/gpu_summary.txt" 2>/dev/null; cp /tmp/gpuout/logs.tar.gz "$R/gpu_logs.tar.gz" 2>/dev/null
cp /tmp/gpu_run_main.log /tmp/verify_cuda.log /tmp/memcheck_gemm_mxfp4.log "$R/" 2>/dev/null
tar -C /tmp -czf "$R/python_out.tar.gz" pyout pyout_main.log 2>/dev/null
cat /tmp/gpuout/summary.txt /tmp/verify_cuda.log /tmp/pyout/summary.txt 2>/dev/null; tail -3 /tmp/tr/triton.log
