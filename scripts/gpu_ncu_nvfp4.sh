#!/usr/bin/env bash
# \file gpu_ncu_nvfp4.sh
# \brief On the GPU machine: Nsight Compute counters of the NVFP4 kernels as bench_quantize_cuda runs them, the
#        device amax pass and the cast of one call read together (no cache flush between kernels, clocks left
#        alone), so that the pair is profiled in the state the timed loop leaves it in.
#   scripts/gpu_ncu_nvfp4.sh BENCH_BINARY OUT_PREFIX [ROWS] [KERNEL_REGEX]
#   ROWS: benchmark rows separated by spaces (default: NVFP4 1x16 and 16x16, device amax and amax given);
#   KERNEL_REGEX: the kernels to profile (default: the amax pass and the NVFP4 casts).
#   NCU_REPLAY=application: every counter pass re-runs the program, so each profiled launch finds the caches as
#   the timed loop leaves them (kernel replay, the default, restores memory between passes through the L2).
# Writes OUT_PREFIX.csv (ncu --csv --page raw) and prints one line per kernel launch: duration, instructions
# per element (thread instructions / 16384^2), DRAM read/write bytes and % of peak, achieved occupancy, issue
# slots busy, L2 hit rate, and the launch's shared-memory configuration and grid.
set -uo pipefail
BIN="$1"
PREFIX="$2"
ROWS="${3:-NVFP4_1x16_BF16 NVFP4_1x16_BF16_amax_given NVFP4_16x16_BF16 NVFP4_16x16_BF16_amax_given}"
KRE="${4:-global_amax|nvfp4}"
NCU="${NCU:-ncu}"
command -v "$NCU" >/dev/null || NCU=/usr/local/cuda/bin/ncu
METRICS=gpu__time_duration.sum,smsp__thread_inst_executed.sum,sm__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,launch__shared_mem_config_size,launch__grid_size,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,launch__registers_per_thread,sm__maximum_warps_per_active_cycle_pct,launch__waves_per_multiprocessor
# Each benchmark row: two warm-up calls, then the timed loop; skip the first 6 matching launches, profile 4.
for row in $ROWS; do
  timeout 240 "$NCU" --replay-mode "${NCU_REPLAY:-kernel}" --cache-control none --clock-control none --csv --page raw --metrics "$METRICS" \
    -k "regex:$KRE" --launch-skip 6 --launch-count 4 \
    "$BIN" --benchmark_filter="^${row}/" --benchmark_repetitions=1 > "${PREFIX}_${row}.csv" 2> "${PREFIX}_${row}.err"
  echo "== $row (rc $?)"
  python3 - "${PREFIX}_${row}.csv" <<'EOF'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if len(rows) < 3:
    print("  no ncu rows"); sys.exit(0)
hdr, units, data = rows[0], rows[1], rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
def g(r, k):
    try: return float(r[ix[k]].replace(",", ""))
    except (KeyError, ValueError): return float("nan")
n = 16384.0 * 16384.0
for r in data:
    name = r[ix["Kernel Name"]][:38]
    dur = g(r, "gpu__time_duration.sum")
    du = units[ix["gpu__time_duration.sum"]]
    ms = dur / {"nsecond": 1e6, "ns": 1e6, "usecond": 1e3, "us": 1e3}.get(du, 1.0)
    def b(k):
        v = g(r, k); u = units[ix[k]] if k in ix else ""
        return v * {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(u, 1) / 1e6
    print(f"  {name:<38} {ms:7.3f} ms  inst/elem {g(r,'smsp__thread_inst_executed.sum')/n:6.1f}"
          f"  dram rd {b('dram__bytes_read.sum'):7.1f} MB wr {b('dram__bytes_write.sum'):6.1f} MB"
          f" ({g(r,'dram__throughput.avg.pct_of_peak_sustained_elapsed'):4.1f}% peak)"
          f"  occ {g(r,'sm__warps_active.avg.pct_of_peak_sustained_active'):4.1f}% (theor {g(r,'sm__maximum_warps_per_active_cycle_pct'):4.1f}%)"
          f"  issue {g(r,'smsp__issue_active.avg.pct_of_peak_sustained_active'):4.1f}%"
          f"  L2 hit {g(r,'lts__t_sector_hit_rate.pct'):4.1f}%  smem cfg {g(r,'launch__shared_mem_config_size'):.0f}"
          f"  grid {g(r,'launch__grid_size'):.0f} waves {g(r,'launch__waves_per_multiprocessor'):.2f} regs {g(r,'launch__registers_per_thread'):.0f}")
EOF
done
