#!/usr/bin/env bash
# \file gpu_merged_check.sh
# \brief The whole GPU check of a merged tree in one device call (written 2026-12-07; that session got no machine to
#        run it). Here: cmake --preset gpu-run; cmake --build build-gpu -j2 --target test_quantize_cuda test_gemm_cuda
#        test_testing_device prop_gpu qtc; scripts/gpu_run.sh --stage build-gpu; git rev-parse --short=12 HEAD > .carry/final/COMMIT;
#        tar -C .carry -cJf .carry/gpu.tar.xz gpu. Call: carry [".carry/gpu.tar.xz", ".carry/final"],
#        command: bash scripts/gpu_merged_check.sh (~6 min on an H200 with a warm machine).
set -u
R="$OUT"
tar -C .carry -xJf .carry/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu:${LD_LIBRARY_PATH:-}
G=.carry/gpu
{ cat .carry/final/COMMIT; date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $R/env.txt 2>&1
OUT=/tmp/gpuout QTC_BENCH=0 QTC_SANITIZE=0 timeout 230 bash scripts/gpu_run.sh $G > $R/gpu_run_main.log 2>&1
echo "gpu_run rc=$? at ${SECONDS}s" >> $R/gpu_run_main.log
cp /tmp/gpuout/summary.txt "$R/gpu_summary.txt" 2>/dev/null; cp /tmp/gpuout/logs.tar.gz "$R/gpu_logs.tar.gz" 2>/dev/null
( for d in conformance/vectors/*/; do echo "== $d"; timeout 15 $G/qtc verify --backend all "$d" 2>&1 | tail -2; done ) > $R/verify_cuda.log 2>&1
echo "verify done at ${SECONDS}s" >> $R/gpu_run_main.log
export QTC_SMALL=1 QTC_REQUIRE_GPU=1
san() {  # tool exe filter
  timeout 45 compute-sanitizer --tool $1 --error-exitcode 99 --print-limit 20 $G/$2 --gtest_brief=1 --gtest_filter="$3" > /tmp/san.log 2>&1
  echo "$1 $2 '$3': rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/san.log | tr '\n' ' ') at ${SECONDS}s" >> $R/sanitizers.txt
  cat /tmp/san.log >> /tmp/san_all.log
}
san memcheck test_quantize_cuda '*BF16*Normal*:*F32*NanInfNegZero*:*F16*Tiny*:QuantizeWithAmax.*:CudaBackend.*:*DeviceCompare*:HybridCuda.*:CudaRules.*'
san memcheck test_quantize_cuda '*Mxfp4*:*Swizzled8x4*:*DeepGemm*'
san memcheck test_testing_device '*'  # verify_on_device: equivalence tier, layouts, the host fallbacks
san memcheck test_gemm_cuda '*Poison*:*Routing*:*Nvfp4ToBf16*'
san racecheck test_quantize_cuda '*BF16*128x128Normal*'
san racecheck test_gemm_cuda '*Poison*:*Routing*'
tar -C /tmp -czf "$R/sanitizers.tar.gz" san_all.log 2>/dev/null
cat $R/gpu_summary.txt | cut -c1-600; tail -2 $R/gpu_run_main.log; cat $R/sanitizers.txt; grep -E '^==|pass|fail|PASS|FAIL' $R/verify_cuda.log | cut -c1-160
