# py23's H200 call: pip install ./python from source with the CUDA kernels (issue 23 item 3), then the module's
# whole pytest suite with QTC_REQUIRE_GPU=1, and a timing of verify on CUDA tensors against the host path.
set -u; export PYTHONUNBUFFERED=1; C=$PWD/.carry/py23; mkdir -p /tmp/s $OUT/py && tar -C /tmp/s -xJf $C/src.tar.xz && cd /tmp/s
{ echo "commit $(cat $C/COMMIT)"; date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2; nproc; } > $OUT/py/env.log 2>&1
export CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90-real -DQTC_PY_CUDA=ON" CMAKE_BUILD_PARALLEL_LEVEL=16
SECONDS=0
OUT=$OUT/py QTC_GPU_PY_WHEEL=0 QTC_GPU_PY_KEEP=1 QTC_GPU_PY_PROBE=0 timeout 220 bash scripts/gpu_python.sh $C/py > $OUT/py/main.log 2>&1
echo "gpu_python.sh: rc=$? in ${SECONDS} s" >> $OUT/py/summary.txt
M=$(ls /tmp/qtc-gpu-python.*/venv-src/lib/python3*/site-packages/qtc/_qtc*.so 2>/dev/null | head -1)
if [ -n "$M" ]; then
  { echo "== $M"; readelf -d $M | grep NEEDED; echo "exports:"; nm -D --defined-only $M; } >> $OUT/py/env.log 2>&1
  P=$(dirname $(dirname $(dirname $M)))/../../bin/python
  timeout 40 $P $C/bench.py > $OUT/py/bench.log 2>&1; echo "bench rc=$?" >> $OUT/py/bench.log
fi
grep -E "qtc: CUDA|qtc: no kernels|error:" $OUT/py/source_install.log | head -5 >> $OUT/py/summary.txt
gzip -f $OUT/py/source_install.log
cat $OUT/py/summary.txt $OUT/py/bench.log 2>/dev/null; grep -E "FAILED|ERROR|SKIPPED|passed|failed|Error" $OUT/py/pytest_source.log | cut -c1-220 | tail -60
