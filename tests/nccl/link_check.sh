#!/usr/bin/env bash
# Link profiling on a GPU (scripts/gpu-check.sh, step "links"): 4 processes on one GPU run a
# pipeline over NCCL send/recv (tests/nccl/pipeline_check.cc) with libstragglar.so preloaded and
# STRAGGLAR_LINK_PROFILING=on; after a healthy start, rank 1's outgoing transfers are slowed on
# the wire (tests/nccl/slow_socket.c). Checks: every transfer bit-exact on every rank; every rank
# names a slow link out of rank 1 (1->0 or 1->2); rank 0 writes advice for it. Then the same
# pipeline without slowing: nobody is named. (Should it name 0->1 or 2->1 instead: the shim's
# sleeps are in an NCCL proxy thread that also drives rank 1's receives.)
# usage: BUILD_DIR PRELOAD OUT_DIR
# Exit status: 0 passed, 1 failed, 77 skipped (no CUDA device).
set -uo pipefail
build_dir=$1 preload=$2 out=$3
program=$build_dir/bin/pipeline_check
shim=$build_dir/lib/libslow_socket.so
[[ -x $program && -f $shim && -f $preload ]] || { echo "FAIL: not built: $program $shim $preload"; exit 1; }
mkdir -p "$out"
failed=0

run_pipeline() {  # NAME SLOW(0|1)
  local name=$1 slow=$2 pids=() rank
  rm -f "$out/$name.id" "$out/$name-advice.json"
  for rank in 0 1 2 3; do
    local preloads=$preload
    ((slow && rank == 1)) && preloads="$shim:$preload"
    env NCCL_HOSTID="stragglar-links-$rank" NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 LD_PRELOAD="$preloads" \
      STRAGGLAR_LINK_PROFILING=on STRAGGLAR_DEBUG=INFO \
      STRAGGLAR_PIPELINE_MICROBATCHES=8 STRAGGLAR_PIPELINE_FORWARD=5ms \
      STRAGGLAR_PIPELINE_BACKWARD=10ms STRAGGLAR_PIPELINE_ADVICE_FILE="$out/$name-advice.json" \
      SLOW_SOCKET_US=500 SLOW_SOCKET_AFTER_S=8 \
      timeout 300 "$program" --rank "$rank" --ranks 4 --id_file "$out/$name.id" \
      --iterations 40 --microbatches 8 --bytes 4194304 \
      >"$out/$name-rank$rank.log" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  return $rc
}

run_pipeline slowed 1
slowed=$?
# Without a GPU every rank says so in one line and exits 77: the check is skipped (ctest
# gpu.nccl_links, SKIP_RETURN_CODE 77).
skip=$(grep -h -m 1 "^SKIP: no CUDA device" "$out"/slowed-rank*.log | head -1)
[[ -z $skip ]] || { echo "link check: $skip"; exit 77; }
if ((slowed == 0)); then
  echo "slowed: every rank exited 0"
else
  echo "FAIL: slowed: a rank failed; rank 0's last lines:"
  tail -n 3 "$out/slowed-rank0.log"
  failed=1
fi
# 40 iterations of 8 micro-batches, each a transfer in and out per direction a rank has.
expected=(640 1280 1280 640)
for rank in 0 1 2 3; do
  log=$out/slowed-rank$rank.log
  grep -H "transfers" "$log" || { echo "FAIL: rank $rank printed no result"; failed=1; }
  grep -q "rank $rank: ${expected[$rank]} transfers" "$log" ||
    { echo "FAIL: rank $rank: expected ${expected[$rank]} transfers"; failed=1; }
  grep -q " 0 wrong bytes" "$log" || { echo "FAIL: rank $rank: wrong bytes"; failed=1; }
  if grep -m 1 -H "slow link 1->[02] named" "$log"; then :; else
    echo "FAIL: rank $rank named no slow link out of rank 1"
    grep -H "slow link\|link profiling" "$log" | head -5
    failed=1
  fi
done
if [[ -f $out/slowed-advice.json ]]; then
  echo "advice: $(cat "$out/slowed-advice.json")"
  grep -q '"src": *1' "$out/slowed-advice.json" || { echo "FAIL: the advice is not for a link out of rank 1"; failed=1; }
else
  echo "FAIL: no advice file"
  failed=1
fi

if run_pipeline healthy 0; then echo "healthy: every rank exited 0"; else echo "FAIL: healthy: a rank failed"; failed=1; fi
for rank in 0 1 2 3; do
  log=$out/healthy-rank$rank.log
  grep -q " 0 wrong bytes" "$log" || { echo "FAIL: healthy rank $rank: wrong bytes or no result"; failed=1; }
  if grep -H "slow link .* named" "$log"; then echo "FAIL: healthy: rank $rank named a link"; failed=1; fi
done
((failed)) && echo "link check: FAIL" || echo "link check: OK"
exit $failed
