#!/usr/bin/env bash
# \file gpu_h27_go.sh
# \brief Issue 27's device call (one call: tests, A/B benchmark, ncu, sanitizer), run from a staged folder D
#        holding test_quantize_cuda, bench_quantize_cuda, the shared libraries the image lacks and gpu_ncu_nvfp4.sh.
#   bash gpu_h27_go.sh D     writes logs and JSON under $OUT (at most 8 files: logs in one tarball)
# Env: H27_STEPS (default "fast bench ncu full memcheck racecheck"), H27_REPS (benchmark repetitions, default 3).
set -uo pipefail
D="${1:-.carry/h27}"
OUT="${OUT:-$PWD/h27-out}"
L="$OUT/logs"
mkdir -p "$L"
export LD_LIBRARY_PATH="$D:${LD_LIBRARY_PATH:-}"
export QTC_REQUIRE_GPU=1 QTC_MACHINE_KIND=h200
export QTC_COMMIT="$(cat "$D/commit.txt" 2>/dev/null || echo unknown)"
export QTC_DRIVER_VERSION="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
S="$OUT/summary.txt"
say() { echo "$*" | tee -a "$S"; }
say "date $(date -u +%FT%TZ) commit $QTC_COMMIT"
say "gpu $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null)"
STEPS="${H27_STEPS:-fast bench ncu full memcheck racecheck}"
REPS="${H27_REPS:-3}"
FAST='*Nvfp41x16BF16*:*Nvfp416x16BF16*:*Nvfp4RowScaledBF16*:*Nvfp41x16ColOnlyBF16*:*Nvfp41x16RowOnlyBF16*:*Nvfp416x16F16*:*Nvfp41x16F16*:*Nvfp4RowScaledF16*'
ROWS='Copy4GiB|NVFP4_1x16_BF16|NVFP4_1x16_BF16_amax_given|NVFP4_16x16_BF16|NVFP4_16x16_BF16_amax_given|NVFP4_rowscaled_BF16'
ROWS2='NVFP4_1x16_BF16_amax_given|NVFP4_16x16_BF16_amax_given'
t0=$(date +%s)
step() { say "-- $1 at +$(( $(date +%s) - t0 )) s"; }
for st in $STEPS; do
  case "$st" in
    fast)
      step "fast-kernel conformance cases + determinism"
      timeout 240 "$D/test_quantize_cuda" --gtest_brief=1 --gtest_filter="$FAST:Determinism.*:Nvfp4PackedEncoder.*:QuantizeWithAmax.*:CudaBackend.*" > "$L/test_fast.log" 2>&1
      say "fast tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$L/test_fast.log" | tr '\n' ' ')"
      grep -E '^\[  FAILED  \]' "$L/test_fast.log" | head -20 | tee -a "$S" ;;
    bench)
      # "stages strip rows": the default (3 stages, strips of 16 tiles) first, then the A/B variants; strip 1 with
      # 2 stages is the previous kernel's schedule (row-major tiles, one tile in flight).
      IFS=';' read -r -a CFGS <<< "${H27_BENCH_CFGS:-3 16 $ROWS;2 16 $ROWS;3 1 $ROWS;2 1 $ROWS;3 8 $ROWS2;3 32 $ROWS2;2 16 $ROWS2}"
      for cfg in "${CFGS[@]}"; do
        set -- $cfg
        step "bench stages=$1 strip=$2"
        QTC_NVFP4_STAGES=$1 QTC_NVFP4_STRIP=$2 timeout 200 "$D/bench_quantize_cuda" --benchmark_filter="^($3)/" \
          --benchmark_repetitions="$REPS" --benchmark_format=json > "$OUT/bench_s$1_h$2.json" 2> "$L/bench_s$1_h$2.err"
        say "bench stages=$1 strip=$2 rc=$?"
        python3 - "$OUT/bench_s$1_h$2.json" <<'PY' | tee -a "$S"
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    if b.get("aggregate_name") == "median":
        print(f"  {b['run_name'].split('/')[0]:<30} {b['real_time']:8.4f} ms  frac_of_copy {b.get('frac_of_copy', float('nan')):.3f}  moved {b.get('frac_of_copy_moved', float('nan')):.3f}")
PY
      done ;;
    ncu)
      step "ncu (the build's defaults)"
      timeout 280 bash "$D/gpu_ncu_nvfp4.sh" "$D/bench_quantize_cuda" "$L/ncu" \
        "${H27_NCU_ROWS:-NVFP4_1x16_BF16_amax_given NVFP4_16x16_BF16_amax_given NVFP4_rowscaled_BF16}" 'nvfp4' 2>&1 | tee -a "$S"
      NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
      ST=""
      for r in barrier long_scoreboard math_pipe_throttle mio_throttle not_selected short_scoreboard wait lg_throttle; do
        ST="$ST,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
      done
      M="gpu__time_duration.sum,smsp__thread_inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed$ST"
      for row in ${H27_STALL_ROWS:-NVFP4_1x16_BF16_amax_given NVFP4_16x16_BF16_amax_given}; do
        timeout 120 "$NCU" --clock-control none --cache-control none --csv --page raw --metrics "$M" -k regex:nvfp4_fast \
          --launch-skip 6 --launch-count 1 "$D/bench_quantize_cuda" --benchmark_filter="^$row/" --benchmark_repetitions=1 \
          > "$L/ncu_stalls_$row.csv" 2>/dev/null
        python3 - "$L/ncu_stalls_$row.csv" "$row" <<'PY' | tee -a "$S"
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if len(rows) < 3: print("  no ncu rows", sys.argv[2]); sys.exit()
h, u, d = rows[0], rows[1], rows[2]
out = []
for k, unit, v in zip(h, u, d):
    if not (k.endswith(".sum") or k.endswith(".avg.pct_of_peak_sustained_active") or k.endswith(".avg.pct_of_peak_sustained_elapsed") or k.endswith(".ratio")): continue
    k2 = k.replace("smsp__average_warps_issue_stalled_", "stall_").replace("_per_issue_active.ratio", "")
    out.append(f"{k2}={v}")
print(f"  stalls {sys.argv[2]}: " + " ".join(out))
PY
      done ;;
    full)
      step "full test_quantize_cuda"
      timeout 400 "$D/test_quantize_cuda" --gtest_brief=1 > "$L/test_full.log" 2>&1
      say "full tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$L/test_full.log" | tr '\n' ' ')"
      grep -E '^\[  FAILED  \]' "$L/test_full.log" | head -20 | tee -a "$S" ;;
    memcheck)
      step "memcheck"
      QTC_SMALL=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 "$D/test_quantize_cuda" \
        --gtest_brief=1 --gtest_filter="$FAST" > "$L/memcheck.log" 2>&1
      say "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$L/memcheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' "$L/memcheck.log" | tr '\n' ' ')" ;;
    racecheck)
      step "racecheck"
      QTC_SMALL=1 timeout 200 compute-sanitizer --tool racecheck --error-exitcode 99 --print-limit 20 "$D/test_quantize_cuda" \
        --gtest_brief=1 --gtest_filter='*Nvfp416x16BF16*Normal*:*Nvfp41x16BF16*Normal*:*Nvfp4RowScaledBF16*Normal*' > "$L/racecheck.log" 2>&1
      say "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$L/racecheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' "$L/racecheck.log" | tr '\n' ' ')" ;;
  esac
done
step "done"
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$L"
