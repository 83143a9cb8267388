#!/usr/bin/env bash
# cluster.nodes_policy: the policy on the emulated cluster of RUN_CHECK_CLUSTER
# (tests/cluster/on_cluster.sh), 4 hosts of 2 ranks (shared memory inside a host, 100 Mbit/s
# between), epochs of 16 calls of 1 MiB (as cluster.policy), every result checked
# (tests/mpi/lateness.cc):
#  1. Rank 7 (host 4) late by 180 ms at every call, two pre-arrival phases at this rate: named at
#     the exchange after call 31 (the detector's 32 calls), the policy runs StragglAR around it
#     from call 33 on (call 32 is the exploration slot, one in 64), every rank alike, and its plan
#     is hierarchical StragglAR (rank 0's INFO line). After arrival it took 110 ms against Ring's
#     147 at this point (docs/results/cluster-nodes-rails-2026-11-30.md).
#  2. Nobody late: after the first epoch (the library's own), Ring at every call but the
#     exploration slot. Hierarchical StragglAR took 178 ms there, Ring 144 and everything else 249
#     or more.
# Neither choice is a close race: each is the bench's, by 24% or more of the time after arrival.
# Prints the algorithms each job ran and "cluster.nodes_policy: ok".
# usage: nodes_policy_check.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
cluster=$(cd "$(dirname "$0")/../../scripts" && pwd)/cluster.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
job() {  # job NAME CALLS SCRIPT
  timeout 150 "$cluster" run --name "$RUN_CHECK_CLUSTER" \
    -x "LD_PRELOAD=$build/lib/libstragglar_mpi.so" -x STRAGGLAR_EPOCH_CALLS=16 \
    -x STRAGGLAR_DEBUG=INFO -x "STRAGGLAR_TRACE_FILE=$work/$1.csv" \
    "$build/bin/mpi_lateness" "$2" "$3" >"$work/$1.out" 2>&1
  local status=$?
  (($(grep -c "lateness: rank [0-7] exact" "$work/$1.out") == 8)) || {
    echo "FAIL: $1: status $status, not every rank exact"
    tail -5 "$work/$1.out"
    exit 1
  }
}
# Every rank ran the same algorithm at every call, and `want` at every call from `first` on but
# the exploration slot.
ran_from() {  # ran_from NAME CALLS FIRST WANT
  python3 - "$work/$1.csv" "$2" "$3" "$4" <<'PY'
import collections, csv, sys
trace, calls_wanted, first, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ran = collections.defaultdict(dict)
for row in csv.DictReader(open(trace)):
    ran[int(row["call"])][int(row["rank"])] = row["algorithm"]
calls = sorted(ran)
if len(calls) != calls_wanted or any(len(ran[c]) != 8 for c in calls):
    sys.exit(f"FAIL: {trace}: {len(calls)} calls, not {calls_wanted} of 8 ranks each")
differ = [c for c in calls if len(set(ran[c].values())) != 1]
if differ:
    sys.exit(f"FAIL: {trace}: the ranks ran different algorithms at calls {differ[:5]}")
print(" ".join(f"{c}:{ran[c][0]}" for c in calls))
other = [c for c in calls if c >= first and c != 32 and ran[c][0] != want]
if other:
    sys.exit(f"FAIL: {trace}: calls {other[:5]} from call {first} on ran {ran[other[0]][0]}, not {want}")
PY
}
job late 56 "7@0-56:0.18"
ran_from late 56 33 stragglar || exit 1
grep -qE "stragglar around rank 7 for 1 MiB: [0-9]+ chunks \(hierarchical\)" "$work/late.out" || {
  echo "FAIL: rank 0 named no hierarchical StragglAR plan around rank 7:"
  grep "stragglar around" "$work/late.out" | head -3
  exit 1
}
job nobody 40 "0@0-0:0"
ran_from nobody 40 16 ring || exit 1
echo "cluster.nodes_policy: ok"
