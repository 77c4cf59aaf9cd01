#!/usr/bin/env bash
# g28's one device call: correctness of the new build, the benchmark before/after on the same card, sanitizers.
set -u
D="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-/tmp/g28-out}"; mkdir -p "$OUT/logs"
S="$OUT/summary.txt"; : > "$S"
say() { echo "$*" | tee -a "$S"; }
export QTC_REQUIRE_GPU=1
say "date $(date -u +%FT%TZ) after $(cat "$D/after/commit.txt") before $(cat "$D/before/commit.txt")"
say "gpu $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader)"
t0=$(date +%s)
# 1. tests of the new build
LD_LIBRARY_PATH="$D/after" timeout 50 "$D/after/test_gemm_cuda" --gtest_brief=1 --gtest_filter='-*Fp8*:GroupedQuantizeCuda.*:GroupedPoison.Quantize*:GroupedPoison.HostileRoutingQuantizes*'  --gtest_output="json:$OUT/logs/test_gemm_cuda.json" > "$OUT/logs/test_gemm_cuda.log" 2>&1
say "test_gemm_cuda rc=$? ($(( $(date +%s) - t0 )) s) $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' "$OUT/logs/test_gemm_cuda.log" | tr '\n' ' ')"
grep -E "FAILED|Failure" "$OUT/logs/test_gemm_cuda.log" | head -20 | tee -a "$S"
# 2. benchmarks: after, then before, same filter and repetitions
F='BM_GroupedRowScaled|Nvfp4Emulated'
for v in after before; do
  t=$(date +%s)
  LD_LIBRARY_PATH="$D/$v" QTC_COMMIT=$(cat "$D/$v/commit.txt") timeout 45 "$D/$v/bench_gemm_cuda" --benchmark_filter="$F" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out_format=json \
    --benchmark_out="$OUT/bench_$v.json" > "$OUT/logs/bench_$v.log" 2>&1
  say "bench $v rc=$? ($(( $(date +%s) - t )) s)"
done
# 3. the dequantization variants alone (standalone microbenchmark, reports/h200/g28_dequant/dequant_variants.cu)
t=$(date +%s)
timeout 25 "$D/after/g28_dequant_variants" > "$OUT/dequant_variants.txt" 2>&1
say "dequant variants rc=$? ($(( $(date +%s) - t )) s)"
# 4. sanitizers on the grouped tests and the dequantization test, small shapes
G='GroupedPoison.Device*:GroupedPoison.HostileRoutingGemm*:GemmCudaGrouped*:GemmCudaExact.Nvfp4ToBf16*:GemmCudaExact.Nvfp4EmulatedReads*'
for tool in memcheck racecheck; do
  t=$(date +%s); lim=30; [ $tool = racecheck ] && lim=20
  QTC_SMALL=1 LD_LIBRARY_PATH="$D/after" timeout $lim compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20 \
    "$D/after/test_gemm_cuda" --gtest_brief=1 --gtest_filter="$G" > "$OUT/logs/sanitizer_$tool.log" 2>&1
  say "sanitizer $tool rc=$? ($(( $(date +%s) - t )) s) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/logs/sanitizer_$tool.log" | tr '\n' ' ')"
done
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
say "total $(( $(date +%s) - t0 )) s"
