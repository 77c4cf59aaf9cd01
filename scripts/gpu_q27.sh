#!/usr/bin/env bash
# \file gpu_q27.sh
# \brief One GPU call (~4 minutes) for the MXFP8 / FP8 block / FP8 tensor cast kernels of issue 27: the register
#        kernels (LaunchOptions::cast_kernel = auto / register) and the pipelined ones (= pipelined) side by side.
#        1. test_quantize_cuda (QTC_REQUIRE_GPU=1): every MXFP8 / FP8 conformance case, each on both kernels (the
#           pipelined cases end in "Pipelined"), QuantizeWithAmax (FP8 tensor on both) and the determinism test
#           (which also compares the pipelined kernels, on 1 and 3 CTAs, with the first launch);
#        2. compute-sanitizer memcheck and racecheck on a small subset of the pipelined cases (QTC_SMALL=1);
#        3. bench_quantize_cuda's MXFP8 / FP8 rows with QTC_CAST_KERNEL=register, then =pipelined (with the TE peer
#           when DIR holds libte_sm90.so.xz, as scripts/te/run_quantize_gpu.sh unpacks it), 3 repetitions each.
#
#   Here (no GPU):  cmake --preset gpu-run && cmake --build build-gpu -j2 --target test_quantize_cuda bench_quantize_cuda
#                   scripts/gpu_run.sh --stage build-gpu          (-> .carry/gpu; add libte_sm90.so.xz there for TE)
#   There:          OUT=... scripts/gpu_q27.sh .carry/gpu           (run's carry: [".carry/gpu"])
# Env: QTC_BENCH_REPS (default 3), QTC_Q27_SKIP (words: tests sanitizer bench).
set -uo pipefail
DIR="$(cd "${1:-.carry/gpu}" && pwd)"
OUT="${OUT:-$DIR/out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$DIR:${LD_LIBRARY_PATH:-}"
export QTC_REQUIRE_GPU=1
export QTC_MACHINE_KIND="${QTC_MACHINE_KIND:-h200}"
export QTC_COMMIT="$(cat "$DIR/commit.txt" 2>/dev/null || echo unknown)"
export QTC_DRIVER_VERSION="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
SKIP="${QTC_Q27_SKIP:-}"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "date $(date -u +%FT%TZ) commit $QTC_COMMIT"
say "gpu $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null)"
T="$DIR/test_quantize_cuda"
FAILED=0

# The conformance cases' names: Quantize/Conformance.BitExactAgainstReference/<label><dtype><M>x<K><input>[Pipelined].
CASES='Quantize/Conformance.BitExactAgainstReference/Mxfp8*:Quantize/Conformance.BitExactAgainstReference/Fp8*'
if [[ " $SKIP " != *" tests "* ]]; then
  start=$(date +%s)
  timeout 150 "$T" --gtest_brief=1 --gtest_filter="$CASES:QuantizeWithAmax.*:Determinism.*" \
    --gtest_output="json:$OUT/tests.json" > "$OUT/tests.log" 2>&1
  rc=$?
  say "tests rc=$rc ($(( $(date +%s) - start )) s): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/tests.log" | tr '\n' ' ')"
  say "  of which pipelined cases: $("$T" --gtest_list_tests --gtest_filter="$CASES" 2>/dev/null | grep -c 'Pipelined')"
  grep -E '^\[  FAILED  \]' "$OUT/tests.log" | head -20 | tee -a "$SUMMARY"
  [ $rc -ne 0 ] && FAILED=1
  gzip -f "$OUT/tests.json"
fi

if [[ " $SKIP " != *" sanitizer "* ]] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    if [ "$tool" = memcheck ]; then
      f='Quantize/Conformance.*/*BF16*Normal*Pipelined:Quantize/Conformance.*/*F16*NanInfNegZero*Pipelined:QuantizeWithAmax.*'
    else
      f='Quantize/Conformance.*/*BF16*304x304Normal*Pipelined:Quantize/Conformance.*/*F16*256x272Ties*Pipelined'
    fi
    start=$(date +%s)
    QTC_SMALL=1 timeout 100 compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$T" --gtest_brief=1 --gtest_filter="$f" > "$OUT/sanitizer_$tool.log" 2>&1
    rc=$?
    say "sanitizer $tool rc=$rc ($(( $(date +%s) - start )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')"
    [ $rc -ne 0 ] && FAILED=1
  done
fi

if [[ " $SKIP " != *" bench "* ]]; then
  NV=""
  if [ -f "$DIR/libte_sm90.so.xz" ]; then
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
      "$DIR/libte_sm90.so.xz" /tmp/libtransformer_engine.so && TE=/tmp/libtransformer_engine.so
    SP="$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)"
    NV="$(find "$SP/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')"
  fi
  say "TE peer: ${TE:-none (no libte_sm90.so.xz in $DIR)}"
  for v in register pipelined; do
    start=$(date +%s)
    # TE's rows once (with the pipelined run): its time and byte comparison do not depend on qtc's kernel.
    te=""; [ "$v" = pipelined ] && te="${TE:-}"
    QTC_CAST_KERNEL=$v QTC_TE_LIB="$te" LD_LIBRARY_PATH="$DIR:$NV${LD_LIBRARY_PATH:-}" timeout 120 "$DIR/bench_quantize_cuda" \
      --benchmark_filter='MXFP8|FP8' --benchmark_repetitions="${QTC_BENCH_REPS:-3}" --benchmark_report_aggregates_only=true \
      --benchmark_out="$OUT/bench_$v.json" --benchmark_out_format=json > "$OUT/bench_$v.log" 2>&1
    say "bench $v rc=$? ($(( $(date +%s) - start )) s)"
    python3 - "$OUT/bench_$v.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"  no JSON: {e}"); sys.exit(0)
for b in d.get("benchmarks", []):
    if b.get("aggregate_name") not in (None, "median"):
        continue
    extra = "  ".join(f"{k} {b[k]:.3f}" for k in ("frac_of_copy", "te_ms", "frac_of_te", "te_bytes_equal") if k in b)
    print(f"  {b['name']:<48} {b.get('real_time', 0):8.4f} {b.get('time_unit', '')}  {extra}")
EOF
  done
fi

tar -C "$OUT" -czf "$OUT/logs.tgz" $(cd "$OUT" && ls *.log 2>/dev/null) && (cd "$OUT" && rm -f *.log)
say "overall: $([ $FAILED -eq 0 ] && echo PASS || echo FAIL)"
exit $FAILED
