#!/usr/bin/env bash
# cluster.switch: on the emulated cluster of RUN_CHECK_CLUSTER (tests/cluster/on_cluster.sh), the
# last rank 60 ms late at every call of 1 MiB: the policy must name it and run StragglAR around it
# from the third epoch of 16 calls on (the detector needs 32 calls), every rank alike, every
# result exact. Prints "cluster.switch: ok".
# usage: switch_check.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
cluster=$(cd "$(dirname "$0")/../../scripts" && pwd)/cluster.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
timeout 240 "$cluster" run --name "$RUN_CHECK_CLUSTER" -x "LD_PRELOAD=$build/lib/libstragglar_mpi.so" \
  -x STRAGGLAR_EPOCH_CALLS=16 -x STRAGGLAR_DEBUG=INFO -x "STRAGGLAR_TRACE_FILE=$work/trace.csv" \
  "$build/bin/stragglar-mpi-bench" --min-bytes 1MiB --max-bytes 1MiB --delays 60ms \
  --warmup 40 --iterations 8 --check >"$work/out" 2>&1
status=$?
grep -v "plm:rsh: Warning: setpgid" "$work/out"
((status == 0)) || {
  echo "FAIL: the bench exited with status $status"
  exit 1
}
# Rank 0 names each plan at its first use: StragglAR around the late rank.
grep -q "stragglar around rank 3 for 1 MiB" "$work/out" || {
  echo "FAIL: no StragglAR plan around rank 3 ran"
  exit 1
}
python3 - "$work/trace.csv" <<'PY'
import collections, csv, sys
ran = collections.defaultdict(dict)  # call -> rank -> algorithm
for row in csv.DictReader(open(sys.argv[1])):
    ran[int(row["call"])][int(row["rank"])] = row["algorithm"]
calls = sorted(ran)
if len(calls) != 48 or any(len(ran[c]) != 4 for c in calls):
    sys.exit(f"FAIL: the trace has {len(calls)} calls, not 48 of 4 ranks each")
differ = [c for c in calls if len(set(ran[c].values())) != 1]
if differ:
    sys.exit(f"FAIL: the ranks ran different algorithms at calls {differ[:5]}")
# Named at the exchange after call 31; call 32 is an exploration slot (one call in 64).
late = [c for c in calls if c > 32 and ran[c][0] != "stragglar"]
if late:
    sys.exit(f"FAIL: calls {late[:5]} after the second epoch ran {ran[late[0]][0]}, not stragglar")
print("cluster.switch: ok (StragglAR from call 33 on every rank)")
PY
