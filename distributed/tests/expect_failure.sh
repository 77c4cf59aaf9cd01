#!/usr/bin/env bash
# \file expect_failure.sh
# \brief Runs a command that must FAIL, and fail within LIMIT seconds (default 60): passes when the
#        command exits non-zero before the limit; fails when it succeeds or hangs (killed at the limit).
# Usage: expect_failure.sh [LIMIT] -- command args...
limit=60
if [ "$1" != "--" ]; then limit=$1; shift; fi
shift
start=$(date +%s.%N)
timeout --kill-after=5 "$limit" "$@"
rc=$?
el=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
# 124/137 come from timeout(1) only if the limit was reached; mpirun itself exits 137 when a rank was
# SIGKILLed, so the elapsed time decides.
hung=$(awk -v e="$el" -v l="$limit" 'BEGIN { print (e >= l) ? 1 : 0 }')
if [ "$hung" = 1 ]; then
  echo "expect_failure: HUNG: the job was still running after ${limit} s (rc $rc)"; exit 1
fi
if [ $rc -eq 0 ]; then
  echo "expect_failure: the job succeeded after ${el} s, but a rank failed and it should have failed"; exit 1
fi
echo "expect_failure: OK: the job failed with exit code $rc after ${el} s (limit ${limit} s)"
exit 0
