#!/usr/bin/env bash
# p27's device call (issue 27): the packed E2M1 encoder and the absmax tree of the fast NVFP4 kernel.
# Run from the checkout root on the GPU machine: bash .carry/p27/run.sh   (unpacks .carry/p27.tar.xz)
# Binaries (built on the development machine, sm_90, nvcc 13.0; the lead's main build 6c5490b with
# nvfp4_fast.cu.o / nvfp4_fast_check.cu.o recompiled): base/ (main), v1/ (encoder), v2/ (encoder + absmax tree).
# Steps: v2 test_quantize_cuda (every NVFP4 case, QTC_REQUIRE_GPU=1), memcheck + racecheck on the fast-kernel NVFP4
# cases (QTC_SMALL=1), benchmark of the NVFP4 rows for base / v2 / v1 / v2 (medians of 3), ncu (base, v2).
set -uo pipefail
D=/tmp/p27
mkdir -p $D && tar -C $D -xJf .carry/p27.tar.xz
OUT="${OUT:-$PWD/p27-out}"; L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
say() { echo "$*" | tee -a "$S"; }
export QTC_REQUIRE_GPU=1 QTC_MACHINE_KIND=h200
export LD_LIBRARY_PATH="$D/lib:${LD_LIBRARY_PATH:-}"
t0=$(date +%s); step() { say "-- $1 at +$(( $(date +%s) - t0 )) s"; }
say "date $(date -u +%FT%TZ) commits $(cat $D/commits.txt)"
say "gpu $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null)"
FAST='*Nvfp41x16BF16*:*Nvfp416x16BF16*:*Nvfp4RowScaledBF16*:*Nvfp41x16ColOnlyBF16*:*Nvfp41x16RowOnlyBF16*:*Nvfp416x16F16*:*Nvfp41x16F16*:*Nvfp4RowScaledF16*'
ROWS='Copy4GiB|NVFP4_1x16_BF16|NVFP4_1x16_BF16_amax_given|NVFP4_16x16_BF16|NVFP4_16x16_BF16_amax_given|NVFP4_rowscaled_BF16'
step "v2 test_quantize_cuda, every NVFP4 case + determinism + QuantizeWithAmax + CudaBackend"
timeout 200 $D/v2/test_quantize_cuda --gtest_brief=1 --gtest_filter="${P27_TESTS:-*Nvfp4*:Determinism.*:QuantizeWithAmax.*:CudaBackend.*}" > $L/test_full_v2.log 2>&1
rc=$?; say "v2 full tests rc=$rc $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/test_full_v2.log | tr '\n' ' ')"
grep -E '^\[  FAILED  \]' $L/test_full_v2.log | head -20 | tee -a "$S"
if [ $rc -ne 0 ]; then
  step "v1 fast-kernel tests (v2 failed)"
  timeout 100 $D/v1/test_quantize_cuda --gtest_brief=1 --gtest_filter="$FAST:Determinism.*:Nvfp4PackedEncoder.*" > $L/test_fast_v1.log 2>&1
  say "v1 fast tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $L/test_fast_v1.log | tr '\n' ' ')"
fi
step "memcheck v2"
QTC_SMALL=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 $D/v2/test_quantize_cuda \
  --gtest_brief=1 --gtest_filter="$FAST" > $L/memcheck_v2.log 2>&1
say "memcheck rc=$? $(grep -E 'ERROR SUMMARY' $L/memcheck_v2.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' $L/memcheck_v2.log | tr '\n' ' ')"
step "racecheck v2"
QTC_SMALL=1 timeout 100 compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 $D/v2/test_quantize_cuda \
  --gtest_brief=1 --gtest_filter='*Nvfp416x16BF16*Normal*:*Nvfp41x16BF16*Normal*:*Nvfp4RowScaledBF16*Normal*' > $L/racecheck_v2.log 2>&1
say "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $L/racecheck_v2.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' $L/racecheck_v2.log | tr '\n' ' ')"
n=0
for v in ${P27_BENCH:-base v2 v1 v2}; do
  n=$((n+1)); step "bench $v (#$n)"
  timeout 100 $D/$v/bench_quantize_cuda --benchmark_filter="^($ROWS)/" --benchmark_repetitions=3 --benchmark_format=json \
    > $L/bench_${n}_$v.json 2> $L/bench_${n}_$v.err
  say "bench $v rc=$?"
  python3 - $L/bench_${n}_$v.json <<'PY' | tee -a "$S"
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    if b.get("aggregate_name") == "median":
        print(f"  {b['run_name'].split('/')[0]:<30} {b['real_time']:8.4f} ms  frac_of_copy {b.get('frac_of_copy', float('nan')):.3f}  moved {b.get('frac_of_copy_moved', float('nan')):.3f}")
PY
done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
ST=""
for r in barrier long_scoreboard math_pipe_throttle mio_throttle not_selected short_scoreboard wait lg_throttle; do
  ST="$ST,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
M="gpu__time_duration.sum,smsp__thread_inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed$ST"
for vr in ${P27_NCU:-base:NVFP4_1x16_BF16_amax_given v2:NVFP4_1x16_BF16_amax_given base:NVFP4_16x16_BF16_amax_given v2:NVFP4_16x16_BF16_amax_given}; do
  v=${vr%%:*}; row=${vr#*:}; {
    step "ncu $v $row"
    timeout 60 "$NCU" --clock-control none --cache-control none --csv --page raw --metrics "$M" -k regex:nvfp4_fast \
      --launch-skip 6 --launch-count 2 $D/$v/bench_quantize_cuda --benchmark_filter="^$row/" --benchmark_repetitions=1 \
      > $L/ncu_${v}_$row.csv 2> $L/ncu_${v}_$row.err
    python3 - $L/ncu_${v}_$row.csv "$v $row" <<'PY' | tee -a "$S"
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if len(rows) < 3: print("  no ncu rows", sys.argv[2]); sys.exit()
h, u = rows[0], rows[1]
for d in rows[2:]:
    g = dict(zip(h, d))
    f = lambda k: float(g[k].replace(",", ""))
    out = [f"{f('gpu__time_duration.sum')/1e3:.1f} us", f"inst/elem {f('smsp__thread_inst_executed.sum')/16384**2:.2f}"]
    for k in h:
        if k.endswith(".pct_of_peak_sustained_active") or k.endswith(".pct_of_peak_sustained_elapsed") or k.endswith(".ratio") or k.startswith("dram__bytes"):
            out.append(k.replace("smsp__average_warps_issue_stalled_", "stall_").replace("_per_issue_active.ratio", "").replace(".avg.pct_of_peak_sustained_active", "%").replace(".avg.pct_of_peak_sustained_elapsed", "%") + "=" + g[k])
    print("  ncu " + sys.argv[2] + ": " + " ".join(out))
PY
  }
done
step "done"
cp $L/bench_*.json $L/../ 2>/dev/null; tar -C $OUT -czf $OUT/logs.tgz logs && rm -rf $L
ls $OUT
