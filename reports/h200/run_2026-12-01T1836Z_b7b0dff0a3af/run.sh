#!/usr/bin/env bash
# Final check of the merged main (h12b's recipe refactor + h15b's NVFP4 kernel) on the H200: the GPU test suites.
set -u
D="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$D:${LD_LIBRARY_PATH:-}"
export QTC_REQUIRE_GPU=1
O="${OUT:-/tmp/out}"; mkdir -p "$O"
S="$O/summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "date $(date -u +%FT%TZ) commit $(cat $D/commit.txt)"
say "gpu $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
run() {  # name timeout cmd...
  local n=$1 t=$2; shift 2; local t0=$(date +%s)
  timeout "$t" "$@" > "$O/$n.log" 2>&1
  say "$n rc=$? ($(( $(date +%s) - t0 )) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |ERROR SUMMARY' "$O/$n.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED' "$O/$n.log" | head -20 | tee -a "$S"
}
run prop_gpu 15 "$D/prop_gpu"
run test_quantize_cuda 80 "$D/test_quantize_cuda" --gtest_brief=1
run test_gemm_cuda 60 "$D/test_gemm_cuda" --gtest_brief=1
QTC_SMALL=1 run memcheck_grouped 25 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 "$D/test_gemm_cuda" --gtest_brief=1 --gtest_filter='*Grouped*'
gzip -f "$O"/*.log
