#!/usr/bin/env bash
# The lead's H200 call of 2026-12-03 (second session): every GPU test of the merged build (QTC_REQUIRE_GPU=1; the
# generic NVFP4 kernel is a test parameter), compute-sanitizer memcheck + racecheck on the quantize tests
# (scripts/gpu_run.sh, no benchmarks), memcheck on the grouped / hybrid / layout GPU tests, and qtc verify --backend
# all over the committed vector sets.
set -u
cd "$(dirname "$0")/../.."
R="$OUT"
tar -C .carry -xJf .carry/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu:${LD_LIBRARY_PATH:-}
OUT=/tmp/gpuout QTC_BENCH=0 timeout 420 bash scripts/gpu_run.sh .carry/gpu > /tmp/gpu_run_main.log 2>&1
echo "gpu_run rc=$? at ${SECONDS}s" >> /tmp/gpu_run_main.log
for f in '*Poison*:*Routing*:*Hybrid*' '*EveryScaleLayout*:*AllLayouts*'; do
  QTC_SMALL=1 QTC_REQUIRE_GPU=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
    .carry/gpu/test_gemm_cuda --gtest_brief=1 --gtest_filter="$f" > /tmp/mc.log 2>&1
  echo "memcheck test_gemm_cuda $f: rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/mc.log | tr '\n' ' ')" >> /tmp/gpu_run_main.log
  cat /tmp/mc.log >> /tmp/memcheck_gemm.log
done
QTC_SMALL=1 QTC_REQUIRE_GPU=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
  .carry/gpu/test_quantize_cuda --gtest_brief=1 --gtest_filter='HybridCuda.*:*Swizzled8x4*:*DeepGemm*:CudaRules.*' > /tmp/mcq.log 2>&1
echo "memcheck test_quantize_cuda hybrid/8x4/rules: rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/mcq.log | tr '\n' ' ')" >> /tmp/gpu_run_main.log
( for d in te te_layout torchao ocp te_hybrid flashinfer_8x4 compressed_tensors torch_cast ml_dtypes_cast modelopt vllm jax deepgemm; do
    echo "== $d"; timeout 40 .carry/gpu/qtc verify --backend all "conformance/vectors/$d" 2>&1 | tail -3; done ) > /tmp/verify_cuda.log 2>&1
cp /tmp/gpuout/summary.txt "$R/gpu_summary.txt" 2>/dev/null; cp /tmp/gpuout/logs.tar.gz "$R/gpu_logs.tar.gz" 2>/dev/null
cp /tmp/gpu_run_main.log /tmp/verify_cuda.log "$R/" 2>/dev/null
tar -C /tmp -czf "$R/sanitizer_extra.tar.gz" memcheck_gemm.log mcq.log 2>/dev/null
cat /tmp/gpuout/summary.txt | cut -c1-600; tail -4 /tmp/gpu_run_main.log; cat /tmp/verify_cuda.log
