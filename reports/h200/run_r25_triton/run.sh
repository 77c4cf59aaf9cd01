#!/usr/bin/env bash
# r25 (issue 25): on the H200: (1) the Triton FP8 group quantizers' 540 dumps again (conformance/peers/
# triton_group_fp8_dump.py, vLLM 0.33.0 / SGLang 0.5.23 kernels in .carry/r25/triton) to check the rcp.approx
# table model here (qtc verify runs on the CPU machine); (2) rcp_probe2.py: the table at every exponent, subnormal
# and large b; (3) compressed-tensors 0.20.0 on CUDA tensors (its Triton path), .carry/r25/compressed_tensors_dump.py.
set -u
C=.carry/r25
R="$OUT"
S=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/summary.txt 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $R/summary.txt 2>&1
PYTHONUNBUFFERED=1 timeout 40 python3 conformance/peers/triton_group_fp8_dump.py --vllm $C/triton/fp8_utils.py \
    --sglang $C/triton/fp8_kernel.py /tmp/tr/out >> $R/summary.txt 2>&1
echo "triton dump rc=$? at $((SECONDS-S)) s" >> $R/summary.txt
PYTHONUNBUFFERED=1 timeout 25 python3 $C/rcp_probe2.py $C/rcp_exceptions.npz >> $R/summary.txt 2>&1
echo "probe rc=$? at $((SECONDS-S)) s" >> $R/summary.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $C/whl/*.whl >> $R/summary.txt 2>&1
PYTHONPATH=/tmp/site:conformance/peers PYTHONUNBUFFERED=1 timeout 28 python3 $C/compressed_tensors_dump.py --device cuda /tmp/tr/ct >> $R/summary.txt 2>&1
echo "ct dump rc=$? at $((SECONDS-S)) s" >> $R/summary.txt
cd /tmp/tr && tar -cf - out ct | xz -T0 -6 | split -b 15M - $R/dumps.tar.xz.
ls -la $R >> $R/summary.txt; echo "done at $((SECONDS-S)) s" >> $R/summary.txt
cat $R/summary.txt
