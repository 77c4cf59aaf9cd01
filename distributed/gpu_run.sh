#!/usr/bin/env bash
# \file gpu_run.sh
# \brief The distributed layer's GPU check, run on the device machine from a carried bundle
#        (.carry/dist: bin/ built on the development machine, lib/ with Open MPI's runtime in case the
#        machine has none, openmpi3/ its components). One rank, NCCL communicator of size 1,
#        QTC_REQUIRE_GPU=1 (a fall-back to MPI or a skipped GPU test fails). Writes logs and JSON to $OUT.
# Usage: distributed/gpu_run.sh [BUNDLE]   (default .carry/dist)
set -u
b=$(cd "${1:-.carry/dist}" && pwd)
out=${OUT:-/tmp/qtc-dist-out}; mkdir -p "$out"
nccl=$(find / -xdev -name 'libnccl.so.2' 2>/dev/null | head -1)
echo "libnccl: ${nccl:-not found}; system mpirun: $(command -v mpirun || echo none)"
export LD_LIBRARY_PATH="$b/lib${nccl:+:$(dirname "$nccl")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_MCA_mca_base_component_path="$b/openmpi3" OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_pmix=isolated OMPI_MCA_btl=self,vader \
       OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
       OMPI_MCA_btl_vader_single_copy_mechanism=none NCCL_NVLS_ENABLE=0 QTC_REQUIRE_GPU=1 QTC_DIST_TIMEOUT_S=60
nvidia-smi -L
ldd "$b/bin/qtc_dist_tests" | grep -E 'not found|nccl|mpi' 
rc=0
timeout 90 "$b/bin/qtc_dist_tests" 2>&1 | tee "$out/dist_tests_h200x1.log" | grep -v -E '^\[ +(RUN|OK) ' | tail -40
rc=${PIPESTATUS[0]}
echo "qtc_dist_tests exit code $rc"
timeout 70 "$b/bin/bench_allgather" --cols 4096 --rows 2048,8192 --iters 20 --warmup 5 --json "$out/allgather_h200x1.json" \
  --checkpoint-dir /tmp/qtc-ckpt-bench 2>&1 | tee "$out/bench_allgather_h200x1.log"
echo "bench_allgather exit code ${PIPESTATUS[0]}"
exit $rc
