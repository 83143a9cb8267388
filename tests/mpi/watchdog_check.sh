#!/usr/bin/env bash
# The call watchdog in the MPI preload (runtime/call_watchdog.h), on 4 processes of this host:
# the last rank is late for the second call by more than the watchdog's limits (lateness.cc),
# so the other ranks wait in their StragglAR call.
#  1. STRAGGLAR_WARN_AFTER=1s, 2 s late: each waiting rank warns once, naming the call, the
#     algorithm, the rank and round it waits for; the job ends normally. With the library's own
#     Allreduce forced, each names the rank that has not entered the call.
#  2. STRAGGLAR_TIMEOUT=1s, 30 s late: the job ends within seconds, not after the 30 s, each
#     waiting rank's line naming what it waited for, and rank 0 has written the trace and the
#     summary of the calls before it.
# usage: watchdog_check.sh BUILD_DIR
set -euo pipefail
build_dir=$(realpath "$1")
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work/log"; exit 1; }
late() {
  "$here/run_check.sh" "$build_dir" 4 yes "$build_dir/bin/mpi_lateness" 2 "3@1-2:$1" >"$work/log" 2>&1
}
export STRAGGLAR_ALGORITHM=stragglar STRAGGLAR_EPOCH_CALLS=1

STRAGGLAR_WARN_AFTER=1s late 2 || fail "the run with warnings failed"
warnings=$(grep -cE 'WARN world: call 1 \(stragglar\) has waited [0-9.]+ s for rank [0-3] in round [0-9]+ \(STRAGGLAR_WARN_AFTER=1 s\)$' "$work/log" || true)
((warnings == 3)) || fail "expected one warning from each of the 3 waiting ranks, got $warnings"
(($(grep -c "lateness: rank [0-3] exact" "$work/log") == 4)) || fail "a rank's sums are not exact"
echo "watchdog_check: 3 waiting ranks warned once each; the run ended normally"

# The library's own Allreduce: its waits are OpenMPI's, but the ranks of this host share their
# call counts, so the line names the rank that has not entered the call.
STRAGGLAR_ALGORITHM=native STRAGGLAR_WARN_AFTER=1s late 2 || fail "the native run failed"
absent=$(grep -cE "WARN world: call 1 \(the library's own AllReduce\) has waited [0-9.]+ s \(rank 3 has not entered it\) \(STRAGGLAR_WARN_AFTER=1 s\)$" "$work/log" || true)
((absent == 3)) || fail "expected 3 lines naming rank 3 as not entered, got $absent"
echo "watchdog_check: in the library's own Allreduce the 3 waiting ranks named rank 3 as absent"

start=$(date +%s)
status=0
STRAGGLAR_TIMEOUT=1s STRAGGLAR_TRACE_FILE="$work/trace.csv" STRAGGLAR_SUMMARY_FILE="$work/summary.json" \
  RUN_CHECK_TIMEOUT=60 late 30 || status=$?
elapsed=$(($(date +%s) - start))
((status != 0)) || fail "the job went on past STRAGGLAR_TIMEOUT"
((elapsed < 25)) || fail "the job took ${elapsed}s to end, as long as the late rank's sleep"
grep -qE 'call 1 \(stragglar\) has waited [0-9.]+ s for rank [0-3] in round [0-9]+, longer than STRAGGLAR_TIMEOUT=1 s: ending the job' "$work/log" ||
  fail "no line naming the rank waited for"
# MPI_Abort's error code, MPI_ERR_OTHER, is mpirun's exit status (OpenMPI).
((status == 16)) || fail "mpirun exited with $status, not MPI_Abort's MPI_ERR_OTHER (16)"
head -1 "$work/trace.csv" | grep -qx "call,rank,arrival_s,duration_s,bytes,algorithm,link_bytes_per_s,link_send_bytes_per_s,link_receive_bytes_per_s" ||
  fail "rank 0 wrote no trace"
rows=$(($(wc -l <"$work/trace.csv") - 1))
((rows == 4)) || fail "the trace has $rows rows; expected the first call's 4"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['calls'] == 1, s" \
  "$work/summary.json" || fail "no summary of the call before"
echo "watchdog_check: the job ended after ${elapsed}s with status $status (late rank: 30 s); trace and summary written"
