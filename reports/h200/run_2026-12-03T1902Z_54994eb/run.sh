set -u; C=$PWD/.carry; mkdir -p /tmp/s $OUT/py && tar -C /tmp/s -xJf $C/s23/src.tar.xz && cd /tmp/s
{ echo "commit 54994eb (branch s23)"; date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; which nvcc; nvcc --version | tail -2; ls /usr/local/cuda/lib64/libcudart_static.a; python3 -c "import torch,nanobind;print(torch.version.cuda,nanobind.__version__)"; } > $OUT/py/env.log 2>&1
OUT=$OUT/py QTC_GPU_PY_DIAG=1 QTC_GPU_PY_WHEEL=0 QTC_GPU_PY_KEEP=1 QTC_GPU_PY_TESTS=0 timeout 200 bash scripts/gpu_python.sh $C/py > $OUT/py/main.log 2>&1
M="import numpy as np, qtc
try: qtc.quantize(np.ones((30, 64), np.float32), 'nvfp4')
except ValueError as e: print('ValueError', e)"
V=$(ls -d /tmp/qtc-gpu-python.*/venv-src | head -1)
for L in "$(g++ -print-file-name=libstdc++.so.6)" /usr/lib/x86_64-linux-gnu/libstdc++.so.6 "$(g++ -print-file-name=libgcc_s.so.1)"; do echo "== LD_PRELOAD=$L"; LD_PRELOAD=$L timeout 30 $V/bin/python -c "$M"; echo "rc=$?"; done >> $OUT/py/env.log 2>&1
gzip -f $OUT/py/source_install.log
cat $OUT/py/summary.txt; tail -25 $OUT/py/env.log; head -c 5000 $OUT/py/probe.log; echo; head -c 3500 $OUT/py/diag.log | tail -c 1500; tail -c 2000 $OUT/py/diag.log
