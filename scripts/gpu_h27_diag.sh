#!/usr/bin/env bash
# Issue 27, diagnostic call (uncommitted kernel switches QTC_NVFP4_DIAG): timing of the NVFP4 fast kernel with parts
# removed, and ncu stall reasons / pipe use / L2 and DRAM sectors.
set -uo pipefail
D="${1:-.carry/h27}"
OUT="${OUT:-$PWD/h27-out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$D:${LD_LIBRARY_PATH:-}"
S="$OUT/summary.txt"
ROWS='NVFP4_1x16_BF16_amax_given|NVFP4_16x16_BF16_amax_given'
for cfg in "3 0" "3 1" "3 2" "3 3" "3 4" "3 8" "2 0"; do
  set -- $cfg
  QTC_NVFP4_STAGES=$1 QTC_NVFP4_DIAG=$2 timeout 60 "$D/bench_quantize_cuda" --benchmark_filter="^($ROWS)/" \
    --benchmark_repetitions=2 --benchmark_format=json > "$OUT/b.json" 2>/dev/null
  python3 - "$OUT/b.json" "$1" "$2" <<'PY' | tee -a "$S"
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    if b.get("aggregate_name") == "median":
        print(f"S={sys.argv[2]} diag={sys.argv[3]:>2} {b['run_name'].split('/')[0]:<30} {b['real_time']:.4f} ms")
PY
done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
ST=""
for r in barrier branch_resolving dispatch_stall drain imc_miss lg_throttle long_scoreboard math_pipe_throttle membar mio_throttle misc no_instruction not_selected selected short_scoreboard sleeping tex_throttle wait; do
  ST="$ST,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
M="gpu__time_duration.sum,smsp__thread_inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active$ST"
for cfg in "1x16 0" "16x16 0" "1x16 8"; do
  set -- $cfg
  QTC_NVFP4_STAGES=3 QTC_NVFP4_DIAG=$2 timeout 120 "$NCU" --clock-control none --cache-control none --csv --page raw --metrics "$M" \
    -k regex:nvfp4_fast --launch-skip 6 --launch-count 1 "$D/bench_quantize_cuda" --benchmark_filter="^NVFP4_${1}_BF16_amax_given/" \
    --benchmark_repetitions=1 > "$OUT/ncu_${1}_d$2.csv" 2>/dev/null
  python3 - "$OUT/ncu_${1}_d$2.csv" "$1 diag=$2" <<'PY' | tee -a "$S"
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if len(rows) < 3: print("no rows", sys.argv[2]); sys.exit()
h, u, d = rows[0], rows[1], rows[2]
print("==", sys.argv[2])
out = []
for k, unit, v in zip(h, u, d):
    if "__" not in k: continue
    k2 = k.replace("smsp__average_warps_issue_stalled_", "stall_").replace("_per_issue_active.ratio", "")
    out.append(f"{k2}={v}{unit if unit not in ('', 'ratio') else ''}")
print("  " + "\n  ".join(out))
PY
done
