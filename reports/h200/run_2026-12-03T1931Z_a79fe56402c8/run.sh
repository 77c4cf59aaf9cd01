#!/usr/bin/env bash
# s22b (issue 22 item 2): test_quantize_cuda after the kernel-argument restructuring, on the H200.
# Binaries: the worktree's default build (sm_90, static GoogleTest), staged with their libhwy/libfmt.
set -u
cd "$(dirname "$0")"
tar -xJf bin.tar.xz
export LD_LIBRARY_PATH=$PWD/gpu:${LD_LIBRARY_PATH:-}
T=$PWD/gpu/test_quantize_cuda
R=${OUT:-/tmp/out}
mkdir -p "$R"
res() { grep -E '^\[  (PASSED|FAILED|SKIPPED) |ERROR SUMMARY' "$1" | head -4 | tr '\n' ' '; }
{
  echo "commit $(cat gpu/commit.txt) $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  s=$SECONDS; QTC_SMALL=1 QTC_REQUIRE_GPU=1 timeout 45 "$T" --gtest_brief=1 --gtest_filter='-Determinism.*' > "$R/small.log" 2>&1
  echo "test_quantize_cuda QTC_SMALL=1, all but Determinism (every NVFP4 case on kAuto and kGeneric): rc=$? $((SECONDS - s)) s $(res "$R/small.log")"
  s=$SECONDS; QTC_REQUIRE_GPU=1 timeout 30 "$T" --gtest_brief=1 --gtest_filter='Determinism.*' > "$R/det.log" 2>&1
  echo "Determinism (LaunchOptions: generic kernel, strips 1 and 3, 3 stages): rc=$? $((SECONDS - s)) s $(res "$R/det.log")"
  s=$SECONDS; QTC_REQUIRE_GPU=1 timeout 10 "$T" --gtest_brief=1 --gtest_filter='*Nvfp41x16BF164096x4096*:*Nvfp416x16BF164096x4096*' > "$R/big.log" 2>&1
  echo "NVFP4 1x16/16x16 BF16 4096x4096, both kernels: rc=$? $((SECONDS - s)) s $(res "$R/big.log")"
  s=$SECONDS; QTC_SMALL=1 QTC_REQUIRE_GPU=1 timeout 35 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 "$T" \
    --gtest_brief=1 --gtest_filter='*BF16128x128Normal*:*F3248x80NanInfNegZero*:*F1637x45Heavy*:CudaRules.*:Nvfp4KernelChoice.*' > "$R/memcheck.log" 2>&1
  echo "memcheck (QTC_SMALL=1, BF16 128x128 normal, F32 48x80 NaN/Inf/-0, F16 37x45 heavy, every recipe): rc=$? $((SECONDS - s)) s $(res "$R/memcheck.log")"
} 2>&1 | tee "$R/summary.txt"
for f in small det big memcheck; do grep -E '^\[  FAILED  \]' "$R/$f.log" | head -30 | sed "s/^/$f: /" >> "$R/failed.txt"; tail -c 3000000 "$R/$f.log" > "$R/$f.tmp" && mv "$R/$f.tmp" "$R/$f.log"; done
