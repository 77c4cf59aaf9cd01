#!/usr/bin/env bash
# Confirmation call after the fixes: test_quantize_cuda whole (QTC_REQUIRE_GPU=1), memcheck on the changed cases,
# qtc verify --backend all on te_hybrid and the F16-heavy sets.
set -u
cd "$(dirname "$0")/../.."
R="$OUT"
tar -C .carry -xJf .carry/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.carry/gpu:${LD_LIBRARY_PATH:-} QTC_REQUIRE_GPU=1
S="$R/summary2.txt"
echo "date $(date -u +%FT%TZ) commit $(cat .carry/gpu/commit.txt)" > "$S"
start=$SECONDS
timeout 240 .carry/gpu/test_quantize_cuda --gtest_brief=1 > /tmp/tq.log 2>&1
echo "test_quantize_cuda: rc=$? ($((SECONDS-start)) s) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/tq.log | tr '\n' ' ' | cut -c1-1500)" >> "$S"
QTC_SMALL=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 .carry/gpu/test_quantize_cuda \
  --gtest_brief=1 --gtest_filter='HybridCuda.*:*F16*NanInfNegZero*' > /tmp/mc.log 2>&1
echo "memcheck HybridCuda + F16 NanInfNegZero: rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' /tmp/mc.log | tr '\n' ' ' | cut -c1-600)" >> "$S"
for d in te_hybrid te torchao flashinfer_8x4; do echo "== $d: $(timeout 40 .carry/gpu/qtc verify --backend all conformance/vectors/$d 2>&1 | tail -1)" >> "$S"; done
gzip -c /tmp/tq.log > "$R/test_quantize_cuda.log.gz"
cat "$S"
