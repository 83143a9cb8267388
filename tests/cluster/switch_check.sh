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
# Named at the exchange after call 31; call 32 is an exploration slot (one call in 64).
"$(dirname "$0")/stragglar_from.py" "$work/trace.csv" 48 4 33 || exit 1
echo "cluster.switch: ok (StragglAR from call 33 on every rank)"
