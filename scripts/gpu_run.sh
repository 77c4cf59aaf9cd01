#!/usr/bin/env bash
# \file gpu_run.sh
# \brief The whole GPU part in one go, on the GPU machine, from a build carried from the development machine:
#        every test_* executable labelled gpu (QTC_REQUIRE_GPU=1), compute-sanitizer memcheck + racecheck on the
#        kernel tests at small shapes (QTC_SMALL=1), every bench_*cuda binary (--benchmark_format=json), and the
#        torch.compile peer. Logs and JSON go to $OUT (default ./gpu-out): at most 8 files, logs in one tarball.
#
#   Here (no GPU):  scripts/gpu_run.sh --stage [build-gpu]   copies the gpu tests, the benchmarks and
#                   libbenchmark into .carry/gpu (stripped; carry it with the run)
#   There:          scripts/gpu_run.sh [.carry/gpu|build-gpu] [--quick]
# Env: QTC_SEED (test seed), QTC_SANITIZE=0 (skip the sanitizer), QTC_BENCH=0 (skip benchmarks and the peer),
#      QTC_BENCH_REPS (repetitions, default 9), QTC_BENCH_FILTER (--benchmark_filter for every benchmark binary),
#      QTC_TESTS=0 (skip the test executables; with QTC_SANITIZE=0, a benchmark-only call),
#      QTC_BENCH_BINARIES (regex of the benchmark binaries to run), QTC_BENCH_TIMEOUT (s per binary, default 400).
#      Budget: at 9 repetitions bench_quantize_cuda takes ~3 min and bench_gemm_cuda over 400 s; the device tool
#      allows 600 s a call, so run them in separate calls (QTC_BENCH_BINARIES=quantize, then =gemm).
#      QTC_TEST_FILTER (gtest filter for the full test run).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"

gpu_test_names() {  # test executables labelled gpu, from the CTest files of a build dir
  grep -rh --include=CTestTestfile.cmake 'set_tests_properties' "$1" 2>/dev/null |
    grep -E 'LABELS "[^"]*\bgpu\b' | sed -E 's/^set_tests_properties\((\[=\[)?([^] ]+)(\]=\])? .*/\2/' | sort -u
}

if [ "${1:-}" = "--stage" ]; then
  BUILD="${2:-$ROOT/build-gpu}"
  DEST="$ROOT/.carry/gpu"
  rm -rf "$DEST" && mkdir -p "$DEST"
  for t in $(gpu_test_names "$BUILD"); do
    f=$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)
    [ -n "$f" ] && cp "$f" "$DEST/" && strip "$DEST/$t" && echo "$t" >> "$DEST/gpu_tests.txt"
  done
  for f in $(find "$BUILD" -type f -name 'bench_*cuda' -perm -u+x); do cp "$f" "$DEST/" && strip "$DEST/$(basename "$f")"; done
  # the qtc command, when built (qtc verify --backend cuda over the bundled vectors)
  [ -x "$BUILD/conformance/qtc" ] && cp "$BUILD/conformance/qtc" "$DEST/" && strip "$DEST/qtc"
  # the shared libraries the binaries need that the GPU image lacks (Debian's libbenchmark, libhwy, libfmt), under
  # their sonames
  for f in "$DEST"/*; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    ldd "$f" | awk '/libbenchmark|libhwy|libfmt/{print $1, $3}' | while read -r soname path; do cp -L "$path" "$DEST/$soname"; done
  done
  git -C "$ROOT" rev-parse --short=12 HEAD > "$DEST/commit.txt" 2>/dev/null
  du -sh "$DEST"; ls -la "$DEST"
  exit 0
fi

DIR="${1:-$ROOT/.carry/gpu}"
[ -d "$DIR" ] || DIR="$ROOT/build-gpu"
QUICK=0; [ "${2:-}" = "--quick" ] && QUICK=1
OUT="${OUT:-$ROOT/gpu-out}"
mkdir -p "$OUT/logs"
LOG="$OUT/logs"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

export QTC_REQUIRE_GPU=1
export QTC_MACHINE_KIND="${QTC_MACHINE_KIND:-h200}"  # the benchmark context names the kind (reports/baselines/<kind>)
export LD_LIBRARY_PATH="$DIR:${LD_LIBRARY_PATH:-}"
COMMIT=$(cat "$DIR/commit.txt" 2>/dev/null || git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
export QTC_COMMIT="$COMMIT"
export QTC_DRIVER_VERSION=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
say "date $(date -u +%FT%TZ) commit $COMMIT"
nvidia-smi > "$LOG/nvidia-smi.txt" 2>&1
say "gpu $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null)"
say "cuda $(nvcc --version 2>/dev/null | tail -2 | head -1)"

# 1. tests labelled gpu
if [ -f "$DIR/gpu_tests.txt" ]; then TESTS=$(cat "$DIR/gpu_tests.txt"); else TESTS=$(gpu_test_names "$DIR"); fi
FAILED=0
[ "${QTC_TESTS:-1}" = "0" ] && TESTS_RUN="" || TESTS_RUN="$TESTS"
for t in $TESTS_RUN; do
  exe=$(find -L "$DIR" -type f -name "$t" | head -1)
  [ -z "$exe" ] && { say "test $t: executable missing"; FAILED=1; continue; }
  start=$(date +%s)
  filter="${QTC_TEST_FILTER:-*}"
  timeout 420 "$exe" --gtest_brief=1 --gtest_filter="$filter" --gtest_output="json:$LOG/$t.json" > "$LOG/$t.log" 2>&1
  rc=$?
  end=$(date +%s)
  say "test $t: rc=$rc ($((end - start)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOG/$t.log" | tr '\n' ' ')"
  [ $rc -ne 0 ] && { FAILED=1; grep -E '^\[  FAILED  \]' "$LOG/$t.log" | head -20 | tee -a "$SUMMARY"; }
done

# 1b. (The generic NVFP4 kernel is a test parameter of test_quantize_cuda since issue 22: every NVFP4 case runs on
#     both kernels in step 1; no separate run.)

# 2. compute-sanitizer on the kernel tests, small shapes
if [ "${QTC_SANITIZE:-1}" != "0" ] && command -v compute-sanitizer >/dev/null; then
  for t in $TESTS; do
    case "$t" in test_quantize_cuda*) ;; *) continue ;; esac
    exe=$(find -L "$DIR" -type f -name "$t" | head -1)
    for tool in memcheck racecheck; do
      if [ "$tool" = memcheck ]; then f='*BF16*Normal*:*F32*NanInfNegZero*:*F16*Tiny*:QuantizeWithAmax.*:CudaBackend.*'; else f='*BF16*Normal*:*F16*128x128Ties*'; fi
      [ $QUICK -eq 1 ] && f='*BF16*128x128Normal*'
      start=$(date +%s)
      QTC_SMALL=1 timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
        "$exe" --gtest_brief=1 --gtest_filter="$f" > "$LOG/sanitizer_${tool}_$t.log" 2>&1
      rc=$?
      end=$(date +%s)
      say "sanitizer $tool $t: rc=$rc ($((end - start)) s) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer_${tool}_$t.log" | tail -1)"
      [ $rc -ne 0 ] && FAILED=1
    done
  done
fi

# 3. benchmarks and the torch.compile peer
if [ "${QTC_BENCH:-1}" != "0" ]; then
  for b in $(find -L "$DIR" -maxdepth 2 -type f -name 'bench_*cuda' | sort); do
    n=$(basename "$b")
    [[ "$n" =~ ${QTC_BENCH_BINARIES:-.} ]] || continue
    # Repetitions (default 9, what compare.py's U test wants) so a baseline carries its run-to-run spread.
    timeout "${QTC_BENCH_TIMEOUT:-400}" "$b" --benchmark_format=json --benchmark_out="$OUT/$n.json" --benchmark_out_format=json \
      --benchmark_repetitions="${QTC_BENCH_REPS:-9}" ${QTC_BENCH_FILTER:+--benchmark_filter="$QTC_BENCH_FILTER"} > "$LOG/$n.log" 2>&1
    say "bench $n: rc=$? (medians of ${QTC_BENCH_REPS:-9} repetitions)"
    python3 - "$OUT/$n.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d.get("benchmarks", [])
if any(b.get("run_type") == "aggregate" for b in rows):  # repetitions: print their medians only
    rows = [b for b in rows if b.get("aggregate_name") == "median"]
for b in rows:
    extra = "  ".join(f"{k} {b[k]:.3f}" for k in ("frac_of_copy", "frac_of_cublaslt", "frac_of_bf16", "frac_of_dense", "TFLOPs") if k in b)
    print(f"  {b['name']:<44} {b.get('real_time', 0):9.3f} {b.get('time_unit', '')}  {b.get('GBps', 0):8.1f} GB/s  {extra}")
EOF
  done
  if python3 -c 'import torch' 2>/dev/null; then
    PYTHONUNBUFFERED=1 timeout 300 python3 "$ROOT/reports/bench/torch_peer.py" "$OUT/torch_peer.json" > "$LOG/torch_peer.log" 2>&1
    say "torch peer: rc=$? $(tr '\n' ' ' < "$LOG/torch_peer.log" | tail -c 400)"
  else
    say "torch peer: torch not importable"
  fi
fi

tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOG"
say "overall: $([ $FAILED -eq 0 ] && echo PASS || echo FAIL)"
exit $FAILED
