#!/usr/bin/env bash
# \file fuzz_long.sh
# \brief Runs the fuzz targets for longer than CI does: each target for SECONDS seconds (default 600) from its
#        committed corpus, new inputs into build-asan/fuzz/grown_<target>, then merges (trims) the grown inputs
#        into fuzz/corpus/<target> (-merge=1 keeps only inputs that add coverage). Crashes are written to
#        build-asan/fuzz/findings_<target>/. Prints libFuzzer's final stats per target.
#        Usage: scripts/fuzz_long.sh [SECONDS] [TARGET...]   (builds them in the `sanitize` preset first unless
#        SKIP_BUILD is set; NICE sets the niceness, default 19). Targets may run in parallel, one call each.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_vector fuzz_ckpt_index fuzz_ckpt_shard)
if [ -z "${SKIP_BUILD:-}" ]; then
  cmake --preset sanitize >/dev/null
  cmake --build build-asan -j"${JOBS:-2}" --target "${targets[@]}"
fi
export ASAN_OPTIONS=detect_leaks=1
for t in "${targets[@]}"; do
  grown=build-asan/fuzz/grown_$t
  findings=build-asan/fuzz/findings_$t
  mkdir -p "$grown" "$findings"
  echo "== $t: ${secs} s"
  rc=0
  nice -n "${NICE:-19}" "build-asan/fuzz/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 \
    -artifact_prefix="$findings/" "$grown" "fuzz/corpus/$t" 2>&1 | tee "build-asan/fuzz/long_$t.log" | grep -E "^#[0-9]+ *DONE|^stat::|ERROR|SUMMARY" || rc=$?
  # Trim: the committed corpus plus the grown inputs, reduced to a set with the same coverage.
  merged=build-asan/fuzz/merged_$t
  rm -rf "$merged" && mkdir -p "$merged"
  "build-asan/fuzz/$t" -merge=1 -timeout=20 -rss_limit_mb=3072 "$merged" "fuzz/corpus/$t" "$grown" >"build-asan/fuzz/merge_$t.log" 2>&1
  rm -rf "fuzz/corpus/$t" && mv "$merged" "fuzz/corpus/$t"
  echo "$t: corpus now $(ls "fuzz/corpus/$t" | wc -l) inputs; findings: $(ls "$findings" | wc -l)"
done
