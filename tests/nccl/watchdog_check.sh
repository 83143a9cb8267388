#!/usr/bin/env bash
# The NCCL call watchdog on a GPU (scripts/gpu-check.sh, step "watchdog"): 4 processes on one GPU
# (tests/nccl/watchdog_check.cc) run AllReduce calls, each followed by the job's own wait for its
# stream; rank 3 never comes to call 20. Plain NCCL: ranks 0-2 wait for it until the check's
# bound (their work stuck on the GPU). With libstragglar.so, STRAGGLAR_WARN_AFTER=1s and
# STRAGGLAR_TIMEOUT=3s, for the library's own AllReduce (the default's first calls) and for
# StragglAR forced: ranks 0-2 warn once, then say the timeout's line, their stuck work ends, a
# later call returns an error (ncclRemoteError), calls 0-19 were exact, and rank 0 wrote its
# trace; each within 20 s of the stall.
# usage: BUILD_DIR PRELOAD OUT_DIR
# Exit status: 0 passed, 1 failed, 77 skipped (no CUDA device, or an NCCL that cannot revoke).
set -uo pipefail
build_dir=$1 preload=$2 out=$3
program=$build_dir/bin/watchdog_check
[[ -x $program && -f $preload ]] || { echo "FAIL: not built: $program $preload"; exit 1; }
mkdir -p "$out"
failed=0
cannot_revoke=0
fail() { echo "FAIL: $*"; failed=1; }

run_job() {  # NAME [VAR=VALUE...]: ranks 0-2 bounded by 60 s; rank 3 killed once they are done
  local name=$1 pids=() rank
  shift
  rm -f "$out/$name.id"
  for rank in 0 1 2 3; do
    env NCCL_HOSTID="stragglar-watchdog-$rank" NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "$@" \
      timeout -k 5 60 "$program" --rank "$rank" --ranks 4 --id_file "$out/$name.id" \
      --calls 40 --late_call 20 --late_seconds 3600 --stuck_after 20 \
      >"$out/$name-rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in 0 1 2; do wait "${pids[$rank]}"; done
  kill "${pids[3]}" 2>/dev/null
  wait "${pids[3]}" 2>/dev/null
  return 0
}

run_job plain
# Without a GPU every rank says so in one line and exits 77: the check is skipped (ctest
# gpu.nccl_watchdog, SKIP_RETURN_CODE 77).
skip=$(grep -h -m 1 "^SKIP: no CUDA device" "$out"/plain-rank*.log | head -1)
[[ -z $skip ]] || { echo "watchdog check: $skip"; exit 77; }
for rank in 0 1 2; do
  log=$out/plain-rank$rank.log
  grep -H "call 20's work stuck on the GPU" "$log" || fail "plain NCCL rank $rank: not stuck as expected"
done

for mode in native stragglar; do
  settings=(LD_PRELOAD="$preload" STRAGGLAR_DEBUG=INFO STRAGGLAR_WARN_AFTER=1s
            STRAGGLAR_TIMEOUT=3s STRAGGLAR_TRACE_FILE="$out/$mode.trace.csv")
  [[ $mode == stragglar ]] && settings+=(STRAGGLAR_ALGORITHM=stragglar)
  rm -f "$out/$mode.trace.csv"
  start=$SECONDS
  run_job "$mode" "${settings[@]}"
  took=$((SECONDS - start))
  echo "$mode: ranks 0-2 done after $took s"
  # NCCL's setup, 20 calls, the warning, the timeout and the ending; plain NCCL: the 60 s bound.
  ((took <= 45)) || fail "$mode: ranks 0-2 took $took s"
  for rank in 0 1 2; do
    log=$out/$mode-rank$rank.log
    grep -H "has waited .* for its work on the GPU.* (STRAGGLAR_WARN_AFTER=1 s)" "$log" ||
      fail "$mode rank $rank: no warning"
    grep -H "longer than STRAGGLAR_TIMEOUT=3 s: revoking the communicator" "$log" ||
      fail "$mode rank $rank: no timeout line"
    if grep -H "this NCCL cannot revoke a communicator" "$log"; then
      # An NCCL without ncclCommRevoke (2.28.3): the warning and the timeout line are all the
      # preload can give; the calls stay stuck, as docs/nccl.md says.
      cannot_revoke=1
      continue
    fi
    grep -H "returned .* after\|stream failed" "$log" || fail "$mode rank $rank: no call failed"
    if grep -q "returned .* after" "$log"; then
      next=$(grep -A1 "returned .* after" "$log" | tail -1)
      echo "$log: $next"
      [[ $next == *returned* && $next != *"returned no error"* ]] ||
        fail "$mode rank $rank: the call after the failed one did not fail"
    fi
    grep -q "stuck on the GPU" "$log" && fail "$mode rank $rank: its work stayed stuck"
    grep -H "rank $rank: calls 0-19 exact" "$log" ||
      grep -H "rank $rank: calls 0-20 exact" "$log" || fail "$mode rank $rank: calls 0-19 not exact"
  done
  [[ -s $out/$mode.trace.csv ]] && echo "$mode: rank 0 wrote $(($(wc -l <"$out/$mode.trace.csv") - 1)) trace rows" ||
    fail "$mode: rank 0 wrote no trace"
done
if ((failed)); then echo "watchdog check: FAIL"; exit 1; fi
if ((cannot_revoke)); then
  echo "watchdog check: SKIP: this NCCL has no ncclCommRevoke (NCCL 2.28.9 has it); warnings checked"
  exit 77
fi
echo "watchdog check: OK"
exit 0
