#!/usr/bin/env bash
# \file gpu_run.sh
# \brief The distributed layer's GPU check, run on the device machine from a carried bundle
#        (.carry/dist: bin/ built on the development machine, lib/ with Open MPI 4.1's runtime in case the
#        machine has none, openmpi3/ its components). NP=1 (default): one rank as an MPI singleton, NCCL
#        communicator of size 1. NP>1: the machine's mpirun, one rank per GPU, plus the kill-mid-all-gather
#        job. QTC_REQUIRE_GPU=1 throughout (a fall-back to MPI fails). Writes logs and JSON to $OUT.
# Usage: [NP=2] [ROWS=2048,8192] [BENCH_ARGS=--synthetic] distributed/gpu_run.sh [BUNDLE]   (default .carry/dist)
set -u
b=$(cd "${1:-.carry/dist}" && pwd)
np=${NP:-1}
out=${OUT:-/tmp/qtc-dist-out}; mkdir -p "$out"
tag="h200x${np}"
nccl=$(find / -xdev -name 'libnccl.so.2' 2>/dev/null | head -1)
echo "libnccl: ${nccl:-not found}; system mpirun: $(command -v mpirun || echo none) $(mpirun --version 2>/dev/null | head -1)"
export NCCL_NVLS_ENABLE=0 QTC_REQUIRE_GPU=${QTC_REQUIRE_GPU:-1} QTC_DIST_TIMEOUT_S=60 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
libs="$b/lib"
if [ "$np" -gt 1 ] && ldconfig -p | grep -q 'libmpi.so.40 '; then
  libs=""  # the machine's mpirun needs its own libmpi
else
  export OMPI_MCA_mca_base_component_path="$b/openmpi3" OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_pmix=isolated \
         OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi OMPI_MCA_btl_vader_single_copy_mechanism=none
fi
export LD_LIBRARY_PATH="${libs}${nccl:+:$(dirname "$nccl")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
launch=()
[ "$np" -gt 1 ] && launch=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
                            -x QTC_REQUIRE_GPU -x QTC_DIST_TIMEOUT_S -np "$np")
nvidia-smi -L
ldd "$b/bin/qtc_dist_tests" | grep -E 'not found|nccl|mpi'
timeout 120 "${launch[@]}" "$b/bin/qtc_dist_tests" 2>&1 | tee "$out/dist_tests_$tag.log" | grep -v -E '^\[ +(RUN|OK) ' | tail -40
rc=${PIPESTATUS[0]}
echo "qtc_dist_tests exit code $rc"
if [ "$np" -gt 1 ]; then
  QTC_DIST_TIMEOUT_S=10 bash "$b/expect_failure.sh" 60 -- "${launch[@]}" "$b/bin/qtc_dist_failure" kill 2>&1 | tail -3 | tee "$out/failure_$tag.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
rows=${ROWS:-2048,8192}
timeout 150 "${launch[@]}" "$b/bin/bench_allgather" --cols 4096 --rows "$rows" --iters 20 --warmup 5 --json "$out/allgather_$tag.json" \
  --checkpoint-dir /tmp/qtc-ckpt-bench ${BENCH_ARGS:-} 2>&1 | tee "$out/bench_allgather_$tag.log"
echo "bench_allgather exit code ${PIPESTATUS[0]}"
exit $rc
