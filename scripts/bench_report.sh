#!/usr/bin/env bash
# \file bench_report.sh
# \brief Runs the CPU benchmark suites with repetitions, compares each with the committed baseline of this
#        machine kind (Google Benchmark's compare.py: Mann-Whitney U test over the repetitions), and writes the
#        report (Markdown + self-contained HTML + JSON) with `qtc report`. Prints the report folder last.
#
# Usage: scripts/bench_report.sh [options]
#   --build DIR         build folder (default: build; configured and built here when needed)
#   --kind KIND         machine kind: baselines come from reports/baselines/KIND (default: cpp-kernels-2core,
#                       or $QTC_MACHINE_KIND)
#   --reps N            repetitions per benchmark (default 9: compare.py's U test wants 9 or more)
#   --min-time S        --benchmark_min_time per repetition (default 0.1 s)
#   --filter REGEX      --benchmark_filter
#   --out DIR           report folder (default: BUILD/bench-report/<UTC time>, linked as BUILD/bench-report/latest)
#   --results DIR       add every *.json in DIR (e.g. GPU results fetched from the H200) to the run and compare
#                       each with reports/baselines/KIND/<same file name>
#   --no-run            do not run the CPU suites (use with --results)
#   --conform FILE      add `qtc conform`'s report.json to the report
#   --record            add this run to reports/history (commit that file to keep it)
#   --update-baseline   copy this run's JSON into reports/baselines/KIND (commit them to make them the baseline)
#   --fail-on-regression  exit 1 when the comparison finds a regression
# The CPU suites run here are judged on process CPU time (MeasureProcessCPUTime; set QTC_COMPARE_METRIC=real
# for real time): on a machine shared with other builds, real time follows their load. Repetitions are
# interleaved at random (--benchmark_enable_random_interleaving) so drift spreads over all benchmarks.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
KIND="${QTC_MACHINE_KIND:-cpp-kernels-2core}"
REPS=9
MIN_TIME=0.1
FILTER=""
OUT=""
RESULTS=""
RUN=1
CONFORM=()
RECORD=()
UPDATE=0
FAIL=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$(realpath -m "$2")"; shift 2 ;;
    --kind) KIND="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --min-time) MIN_TIME="$2"; shift 2 ;;
    --filter) FILTER="$2"; shift 2 ;;
    --out) OUT="$(realpath -m "$2")"; shift 2 ;;
    --results) RESULTS="$(realpath "$2")"; shift 2 ;;
    --no-run) RUN=0; shift ;;
    --conform) CONFORM+=(--conform "$(realpath "$2")"); shift 2 ;;
    --record) RECORD=(--record); shift ;;
    --update-baseline) UPDATE=1; shift ;;
    --fail-on-regression) FAIL=(--fail-on-regression); shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_report.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# compare.py from Debian's libbenchmark-tools; it needs scipy, which Debian's own python3 has (python3-scipy).
COMPARE="${QTC_BENCH_COMPARE:-}"
if [ -z "$COMPARE" ]; then
  for c in /usr/share/benchmark/compare.py $(dpkg -L libbenchmark-tools 2>/dev/null | grep '/compare\.py$' || true); do
    [ -f "$c" ] && { COMPARE="$c"; break; }
  done
fi
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
[ -n "$COMPARE" ] || echo "bench_report.sh: compare.py not found (install libbenchmark-tools): no baseline comparison" >&2

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LATEST=""
if [ -z "$OUT" ]; then
  OUT="$BUILD/bench-report/$STAMP"
  LATEST="$BUILD/bench-report/latest"
fi
mkdir -p "$OUT/bench" "$OUT/compare"

# Build what this needs (the qtc command and the CPU suites).
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >&2
fi
TARGETS=(qtc)
[ "$RUN" = 1 ] && TARGETS+=(bench_reference_cpu)
cmake --build "$BUILD" --target "${TARGETS[@]}" -j "$(nproc)" >&2
QTC="$(find "$BUILD" -type f -name qtc -perm -u+x | head -n 1)"
[ -n "$QTC" ] || { echo "bench_report.sh: qtc was not built" >&2; exit 2; }

JSONS=()
CPU_SUITES=()  # run here: judged on process CPU time (this machine is shared; real time follows the load)
if [ "$RUN" = 1 ]; then
  # CPU suites: every bench_* executable that is not a GPU suite (GPU suites run on the GPU machine).
  for exe in "$BUILD"/reports/bench_*; do
    [ -x "$exe" ] || continue
    name="$(basename "$exe")"
    case "$name" in *cuda*|*gpu*|*gemm*|*allgather*|*nccl*) continue ;; esac
    suite="${name#bench_}"
    echo "bench_report.sh: running $name ($REPS repetitions; other work on this machine adds noise)" >&2
    QTC_MACHINE_KIND="$KIND" "$exe" --benchmark_repetitions="$REPS" --benchmark_min_time="$MIN_TIME" \
      ${FILTER:+--benchmark_filter="$FILTER"} --benchmark_out="$OUT/bench/$suite.json" --benchmark_out_format=json \
      --benchmark_enable_random_interleaving=true >&2
    JSONS+=("$OUT/bench/$suite.json")
    CPU_SUITES+=("$suite.json")
  done
fi
if [ -n "$RESULTS" ]; then
  for f in "$RESULTS"/*.json; do [ -f "$f" ] && JSONS+=("$f"); done
fi

ARGS=()
BASE="$ROOT/reports/baselines/$KIND"
for f in "${JSONS[@]}"; do
  ARGS+=(--bench "$f")
  b="$BASE/$(basename "$f")"
  if [ -n "$COMPARE" ] && [ -f "$b" ]; then
    c="$OUT/compare/$(basename "$f")"
    if "$PY" "$COMPARE" --no-color -d "$c" benchmarks "$b" "$f" > "${c%.json}.txt" 2>&1; then
      if [[ " ${CPU_SUITES[*]} " == *" $(basename "$f") "* ]] && [ "${QTC_COMPARE_METRIC:-cpu}" = cpu ]; then
        ARGS+=(--compare-cpu "$c")
      else
        ARGS+=(--compare "$c")
      fi
    else
      echo "bench_report.sh: compare.py failed on $(basename "$f"):" >&2; cat "${c%.json}.txt" >&2
    fi
  elif [ ! -f "$b" ]; then
    echo "bench_report.sh: no baseline $b: nothing to compare $(basename "$f") with" >&2
  fi
  if [ "$UPDATE" = 1 ]; then
    mkdir -p "$BASE"
    cp "$f" "$b"
    echo "bench_report.sh: baseline updated: $b (commit it)" >&2
  fi
done

[ -z "$LATEST" ] || ln -sfn "$OUT" "$LATEST"
"$QTC" report "${ARGS[@]}" "${CONFORM[@]}" --baseline "reports/baselines/$KIND" --history "$ROOT/reports/history" \
  "${RECORD[@]}" "${FAIL[@]}" --title "qtc benchmark report ($KIND)" --out "$OUT"
