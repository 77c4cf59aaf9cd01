#!/usr/bin/env bash
# s25b, issue 25 item 3: the Triton FP8 group quantizers dumped on the H200 (conformance/peers/triton_group_fp8_dump.py,
# the kernels cut out of vLLM 0.33.0 / SGLang 0.5.23's files in .carry/triton) and checked there by qtc (branch s25b:
# profiles vllm_triton v2, sglang_triton, sglang_triton_colmajor with fp8.form rcp-max-mul-rcp and fp8.clamp_nan);
# then rcp_probe.py (what Triton's float32 `/` computes, the kernels' PTX).
set -u
C=.carry/s25b
R="$OUT"
CUB=$(python3 -c "import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=$PWD/$C:${CUB:-}:${LD_LIBRARY_PATH:-}
chmod +x $C/qtc
mkdir -p /tmp/tr
S=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/summary.txt 2>&1
$C/qtc --version >> $R/summary.txt 2>&1
PYTHONUNBUFFERED=1 timeout 80 python3 conformance/peers/triton_group_fp8_dump.py --vllm .carry/triton/fp8_utils.py \
    --sglang .carry/triton/fp8_kernel.py /tmp/tr/out > /tmp/tr/dump.log 2>&1
echo "dump rc=$? at $((SECONDS-S)) s" >> /tmp/tr/dump.log
timeout 20 $C/qtc verify /tmp/tr/out > /tmp/tr/verify.log 2>&1; echo "verify rc=$? at $((SECONDS-S)) s" >> /tmp/tr/verify.log
timeout 25 python3 $C/rcp_probe.py > $R/rcp_probe.txt 2>&1; echo "probe rc=$? at $((SECONDS-S)) s" >> $R/rcp_probe.txt
timeout 20 $C/qtc identify /tmp/tr/out > /tmp/tr/identify.log 2>&1; echo "identify rc=$? at $((SECONDS-S)) s" >> /tmp/tr/identify.log
gzip -c /tmp/tr/verify.log > $R/triton_verify.log.gz; gzip -c /tmp/tr/identify.log > $R/triton_identify.log.gz
cp /tmp/tr/dump.log $R/triton_dump.log
{ tail -3 /tmp/tr/dump.log; tail -2 /tmp/tr/verify.log; grep "^IMPL\|identified\|identify rc" /tmp/tr/identify.log; } >> $R/summary.txt
cat $R/summary.txt; grep -v "^PASS" /tmp/tr/verify.log | cut -c1-300 | head -12; cat $R/rcp_probe.txt | cut -c1-600
