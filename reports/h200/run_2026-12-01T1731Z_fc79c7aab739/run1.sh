#!/usr/bin/env bash
# h15b's one call: tests, A/B bench (merged build 505f085 vs new), memcheck + racecheck on the fast NVFP4 cases, ncu
set -u
D="$(cd "$(dirname "$0")" && pwd)"
export LD_LIBRARY_PATH="$D:${LD_LIBRARY_PATH:-}"
export QTC_REQUIRE_GPU=1
O="${OUT:-/tmp/out}"; mkdir -p "$O"
S="$O/summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "date $(date -u +%FT%TZ) new $(cat $D/commit.txt) old $(cat $D/commit_old.txt)"
say "gpu $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader)"
t0=$(date +%s)
timeout 150 "$D/test_quantize_cuda" --gtest_brief=1 > "$O/test.log" 2>&1
say "test_quantize_cuda rc=$? ($(( $(date +%s) - t0 )) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$O/test.log" | tr '\n' ' ')"
grep -E '^\[  FAILED' "$O/test.log" | head -20 | tee -a "$S"
F='NVFP4_1x16_BF16$|NVFP4_1x16_BF16_amax_given$|NVFP4_16x16|NVFP4_rowscaled|Copy4GiB'
for b in bench_quantize_cuda bench_old; do
  t0=$(date +%s)
  timeout 70 "$D/$b" --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_out="$O/$b.json" --benchmark_out_format=json > "$O/$b.log" 2>&1
  say "$b rc=$? ($(( $(date +%s) - t0 )) s)"
  python3 - "$O/$b.json" <<'PY' | tee -a "$S"
import json,sys
d=json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    if b.get("aggregate_name")=="median":
        print(f"  {b['run_name']:<44} {b['real_time']:.4f} ms frac {b.get('frac_of_copy',0):.3f} moved {b.get('frac_of_copy_moved',0):.3f}")
PY
done
t0=$(date +%s)
QTC_SMALL=1 timeout 75 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 "$D/test_quantize_cuda" --gtest_brief=1 \
  --gtest_filter='*Nvfp41x16BF16*:*Nvfp416x16BF16*:*Nvfp4RowScaledBF16*:*Nvfp41x16ColOnlyBF16*:*Nvfp41x16RowOnlyBF16*:*Nvfp416x16F16*' > "$O/memcheck.log" 2>&1
say "memcheck rc=$? ($(( $(date +%s) - t0 )) s) $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' "$O/memcheck.log" | tr '\n' ' ')"
t0=$(date +%s)
timeout 60 ncu --clock-control none -k regex:nvfp4_fast --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section LaunchStats \
  --metrics smsp__thread_inst_executed.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
  "$D/bench_quantize_cuda" --benchmark_filter='NVFP4_1x16_BF16_amax_given$' --benchmark_repetitions=1 > "$O/ncu_1x16.txt" 2>&1
say "ncu rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "Duration|thread_inst_executed|smsp__inst_executed.sum|dram__bytes|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|issue_active|Registers Per|DRAM Throughput|Warp Cycles Per Issued|Stall|Pipe" "$O/ncu_1x16.txt" | head -24 | tee -a "$S"
t0=$(date +%s)
QTC_SMALL=1 timeout 30 compute-sanitizer --tool racecheck --error-exitcode 99 "$D/test_quantize_cuda" --gtest_brief=1 \
  --gtest_filter='*Nvfp416x16BF16*Normal*:*Nvfp41x16BF16*Normal*' > "$O/racecheck.log" 2>&1
say "racecheck rc=$? ($(( $(date +%s) - t0 )) s) $(grep -E 'RACECHECK SUMMARY' "$O/racecheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' "$O/racecheck.log" | tr '\n' ' ')"
