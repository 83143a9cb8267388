#!/usr/bin/env bash
# The NCCL preload's slow-link probe on a GPU (ctest gpu.nccl_slow_link; scripts/gpu-check.sh,
# step "slow-link"): stragglar-bench, 4 ranks on one GPU (one process and NCCL_HOSTID each, NCCL
# sockets over lo), 4 MiB float sums, every result checked (-c 1), the preload adaptive. Rank 2's
# wire is slowed from the start (tests/nccl/slow_socket.c, 2 ms before every send of 64 KiB or
# more). Checks: every value exact; the probe at setup names rank 2's link, on the line rank 0
# logs at INFO ("rank 2's link N.NNx slower"); after the warm-up StragglAR runs in most calls (the
# plan around the slow link). Then slowed again with epochs of one call: exact, rank 2 named. Then
# the same without the slowing: exact, and no slow link named.
# Without a GPU, stragglar-bench prints its SKIP line and exits 77, and so does this.
# usage: slow_link_check.sh BUILD_DIR PRELOAD OUT_DIR
set -uo pipefail
build_dir=$1 preload=$2 out=$3
bench=$build_dir/bin/stragglar-bench
shim=$build_dir/lib/libslow_socket.so
[[ -x $bench && -f $shim && -f $preload ]] || { echo "FAIL: not built: $bench $shim $preload"; exit 1; }
mkdir -p "$out"
failed=0
fail() { echo "FAIL: $*"; failed=1; }

run_bench() {  # NAME [VAR=VALUE...]: one run; its output in OUT/NAME.log, its trace beside it
  local name=$1
  shift
  rm -f "$out/$name.trace.csv"
  env LD_PRELOAD="$shim:$preload" STRAGGLAR_DEBUG=INFO STRAGGLAR_EPOCH_CALLS=16 \
    STRAGGLAR_TRACE_FILE="$out/$name.trace.csv" "$@" \
    timeout 300 "$bench" --ranks 4 --one_gpu -b 4M -e 4M -d float -o sum -c 1 -w 64 -n 32 \
    --timeout_s 280 >"$out/$name.log" 2>&1
  local rc=$?
  if ((rc == 77)); then
    grep -m 1 "^SKIP" "$out/$name.log"
    exit 77
  fi
  ((rc == 0)) || fail "$name: stragglar-bench exited $rc; its last lines:"
  ((rc == 0)) || tail -n 5 "$out/$name.log"
  grep -q "^# Out of bounds values : 0 OK" "$out/$name.log" || fail "$name: wrong values"
}

# stragglar_share TRACE: the share of rank 0's calls after the warm-up's first 32 that ran StragglAR.
stragglar_share() {
  awk -F, 'NR > 1 && $2 == 0 && $1 >= 32 { calls++; if ($6 == "stragglar") s++ }
           END { printf "%d/%d", s, calls }' "$1"
}

run_bench slowed SLOW_SOCKET_HOSTID=stragglar-bench-2 SLOW_SOCKET_US=2000
named=$(grep -m 1 -o "rank [0-9]*'s link [0-9.]*x slower" "$out/slowed.log")
echo "slowed: ${named:-no slow link named}; StragglAR in $(stragglar_share "$out/slowed.trace.csv") calls from call 32"
[[ $named == "rank 2's link "* ]] || fail "slowed: the probe did not name rank 2's link"
share=$(stragglar_share "$out/slowed.trace.csv")
((2 * ${share%/*} > ${share#*/})) || fail "slowed: StragglAR ran in only $share calls"

# Epochs of one call: the backend's exchange is sized by the epoch (2 values a call per rank), and
# the setup probe sends 4 per rank through it; sized by the epoch alone, it would fail here.
run_bench slowed-epoch1 SLOW_SOCKET_HOSTID=stragglar-bench-2 SLOW_SOCKET_US=2000 \
  STRAGGLAR_EPOCH_CALLS=1
named=$(grep -m 1 -o "rank [0-9]*'s link [0-9.]*x slower" "$out/slowed-epoch1.log")
echo "slowed, epochs of 1 call: ${named:-no slow link named}"
[[ $named == "rank 2's link "* ]] || fail "slowed-epoch1: the probe did not name rank 2's link"

run_bench healthy
if grep -q "'s link [0-9.]*x slower" "$out/healthy.log"; then
  fail "healthy: a slow link was named: $(grep -m 1 -o "rank [0-9]*'s link [0-9.]*x slower" "$out/healthy.log")"
else
  echo "healthy: no slow link named"
fi
((failed)) && echo "nccl slow link check: FAIL" || echo "nccl slow link check: OK"
exit $failed
