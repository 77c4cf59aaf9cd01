set -u; export PYTHONUNBUFFERED=1; C=$PWD/.carry; mkdir -p /tmp/s $OUT/py && tar -C /tmp/s -xJf $C/s23/src.tar.xz && cd /tmp/s
{ echo "commit fe9b167 (branch s23)"; date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "== /opt/gcc/bin/g++ (CXX):"; cat /opt/gcc/bin/g++; } > $OUT/py/env.log 2>&1
OUT=$OUT/py QTC_GPU_PY_WHEEL=0 QTC_GPU_PY_KEEP=1 QTC_GPU_PY_PROBE=0 timeout 52 bash scripts/gpu_python.sh $C/py > $OUT/py/main.log 2>&1
M=$(ls /tmp/qtc-gpu-python.*/venv-src/lib/python3*/site-packages/qtc/_qtc*.so); { echo "== $M"; readelf -d $M | grep NEEDED; echo "exports:"; nm -D --defined-only $M; } >> $OUT/py/env.log 2>&1
gzip -f $OUT/py/source_install.log
cat $OUT/py/summary.txt $OUT/py/env.log; grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|Fatal|Segmentation" $OUT/py/pytest_source.log | cut -c1-160 | tail -70
