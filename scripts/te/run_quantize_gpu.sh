#!/usr/bin/env bash
# \file run_quantize_gpu.sh
# \brief The quantize part of a GPU run with TransformerEngine as the benchmark's peer, on the GPU machine, from
#        a carried folder holding test_quantize_cuda, bench_quantize_cuda (stripped), the shared libraries they
#        need (libbenchmark, ...), commit.txt and libte_sm90.so.xz (TE's core library from the PyPI wheel with
#        only its sm_90 cubins kept: scripts/te/prune_fatbin.py, then strip and xz).
#
#   scripts/te/run_quantize_gpu.sh DIR [tests|bench|all]      results in $OUT (default DIR/out)
#   all = the conformance tests, every NVFP4 case through the generic kernel, compute-sanitizer memcheck and
#   racecheck at small shapes, and the benchmark with the TE peer.
# Env: QTC_BENCH_REPS (default 5), QTC_BENCH_FILTER (--benchmark_filter), QTC_TEST_FILTER (gtest filter).
# TE needs cuDNN 9, cuBLAS 13, NCCL, NVRTC and the CUDA 13 runtime: python3's site-packages/nvidia/*/lib.
set -uo pipefail
DIR="$(cd "${1:?usage: run_quantize_gpu.sh DIR [tests|bench|all]}" && pwd)"
WHAT="${2:-all}"
OUT="${OUT:-$DIR/out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$DIR:${LD_LIBRARY_PATH:-}"
export QTC_REQUIRE_GPU=1
export QTC_COMMIT="$(cat "$DIR/commit.txt" 2>/dev/null || echo unknown)"
export QTC_DRIVER_VERSION="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
SUMMARY="$OUT/summary.txt"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "date $(date -u +%FT%TZ) commit $QTC_COMMIT"
say "gpu $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null)"

if [ "$WHAT" = tests ] || [ "$WHAT" = all ]; then
  start=$(date +%s)
  timeout 300 "$DIR/test_quantize_cuda" --gtest_brief=1 --gtest_filter="${QTC_TEST_FILTER:-*}" \
    --gtest_output="json:$OUT/test_quantize_cuda.json" > "$OUT/test_quantize_cuda.log" 2>&1
  rc=$?
  say "test_quantize_cuda rc=$rc ($(( $(date +%s) - start )) s): $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_quantize_cuda.log" | tr '\n' ' ')"
  tail -5 "$OUT/test_quantize_cuda.log" >> "$SUMMARY"
  gzip -f "$OUT/test_quantize_cuda.json"
fi

if [ "$WHAT" = all ]; then
  # compute-sanitizer memcheck + racecheck at small shapes: the filters of scripts/gpu_run.sh (the generic NVFP4
  # kernel is a test parameter of test_quantize_cuda: every NVFP4 case runs on both kernels).
  for tool in memcheck racecheck; do
    if [ "$tool" = memcheck ]; then f='*BF16*Normal*:*F32*NanInfNegZero*:*F16*Tiny*:QuantizeWithAmax.*:CudaBackend.*'; else f='*BF16*Normal*:*F16*128x128Ties*'; fi
    start=$(date +%s)
    QTC_SMALL=1 timeout 240 compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$DIR/test_quantize_cuda" --gtest_brief=1 --gtest_filter="$f" > "$OUT/sanitizer_$tool.log" 2>&1
    say "sanitizer $tool rc=$? ($(( $(date +%s) - start )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/sanitizer_$tool.log" | tr '\n' ' ')"
  done
  tar czf "$OUT/logs.tgz" -C "$OUT" test_quantize_cuda_nvfp4_generic.log sanitizer_memcheck.log sanitizer_racecheck.log \
    && rm -f "$OUT/test_quantize_cuda_nvfp4_generic.log" "$OUT/sanitizer_memcheck.log" "$OUT/sanitizer_racecheck.log"
fi

if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  if [ -f "$DIR/libte_sm90.so.xz" ]; then
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
      "$DIR/libte_sm90.so.xz" /tmp/libtransformer_engine.so && export QTC_TE_LIB=/tmp/libtransformer_engine.so
    SP="$(python3 -c 'import site; print(site.getsitepackages()[0])')"
    NV="$(find "$SP/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')"
    say "TE: ${QTC_TE_LIB:-not unpacked}; NVIDIA libraries from $SP/nvidia"
  fi
  start=$(date +%s)
  LD_LIBRARY_PATH="$DIR:${NV:-}${LD_LIBRARY_PATH:-}" timeout 480 "$DIR/bench_quantize_cuda" \
    --benchmark_repetitions="${QTC_BENCH_REPS:-5}" --benchmark_report_aggregates_only=true \
    --benchmark_filter="${QTC_BENCH_FILTER:-.}" --benchmark_out="$OUT/quantize.json" \
    --benchmark_out_format=json > "$OUT/bench_quantize_cuda.log" 2>&1
  say "bench_quantize_cuda rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "median|TE" "$OUT/bench_quantize_cuda.log" | head -60 >> "$SUMMARY"
fi
