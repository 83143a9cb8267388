#!/usr/bin/env bash
# cluster.slowdown: a link slows 5x mid-run on the emulated cluster of RUN_CHECK_CLUSTER (4 hosts
# of one rank, tests/cluster/on_cluster.sh). One job of 224 calls of 1 MiB in epochs of 16, rank 3
# late by 30 ms throughout, every result checked (tests/mpi/lateness.cc). At call 112 host 2's
# link goes from 200 to 40 Mbit/s: every algorithm now waits on it, and StragglAR, Ring and
# Halving-Doubling take about the same time.
# Before the change the policy must have settled on a fast algorithm: in calls 48-111 every epoch
# runs an algorithm whose fastest epoch there is within 1.4x the fastest of them (epochs of one
# algorithm vary more than that on a loaded VM, so each is judged by its algorithm's best). Which one it is, is not asserted: at 4 ranks
# StragglAR's gain after a 30 ms straggler is about 8% at 1 MiB (86 against 93 ms a call), and
# on a loaded 2-core machine StragglAR, Ring and Halving-Doubling each took 82-95 ms, so the
# policy may rightly move among them (a fresh clone's test once failed asserting StragglAR).
# The policy must follow within 3 epochs of the change: from call 160 on, every epoch runs an
# algorithm whose fastest epoch there is within 1.6x the fastest of them. StragglAR around the slow link is the fastest by then
# (1.2-1.4x Ring and Halving-Doubling), and the policy may move among them on what it measures
# (epoch medians vary 1.2x with Ring alone); what fails is an epoch of the library's own
# AllReduce, 625 ms a call here, 2.3x StragglAR's.
# Before the calibration scaled every algorithm by the shift it measured, the algorithms not
# running kept their old factors, and the policy went through them one by one, the library's own
# included: h, r, S, n, h, h in epochs 9 to 15 (n at 625 ms), h, r, n, r, S, r, h in another run.
# The ranks then probe for a slow link again (the calibration moved), and must name rank 1's
# within 2 epochs of the change (Communicator::FollowLinkChange).
# Prints the algorithm and median time of every epoch and "cluster.slowdown: ok".
# usage: slowdown_check.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
cluster=$(cd "$(dirname "$0")/../../scripts" && pwd)/cluster.sh
name=$RUN_CHECK_CLUSTER
slowed=${name}2  # rank 1's host
readonly calls=224 epoch=16 change=112
work=$(mktemp -d)
trap 'kill "$job" 2>/dev/null; rm -rf "$work"' EXIT
timeout 200 "$cluster" run --name "$name" -x "LD_PRELOAD=$build/lib/libstragglar_mpi.so" \
  -x STRAGGLAR_EPOCH_CALLS=$epoch -x "STRAGGLAR_TRACE_FILE=$work/trace.csv" \
  -x LATENESS_PROGRESS_EVERY=$epoch -x STRAGGLAR_DEBUG=INFO \
  "$build/bin/mpi_lateness" $calls "3@0-$calls:0.03" \
  >"$work/job.out" 2>&1 &
job=$!
waited=0
until grep -q "lateness: call $change\$" "$work/job.out"; do
  kill -0 "$job" 2>/dev/null || {
    echo "FAIL: the job ended before call $change"
    tail -5 "$work/job.out"
    exit 1
  }
  ((waited < 600)) || { echo "FAIL: no call $change within 120 s"; exit 1; }
  sleep 0.2
  waited=$((waited + 1))  # in steps of 0.2 s
done
"$cluster" rate --name "$name" "$slowed" 40mbit
wait "$job"
status=$?
(($(grep -c "lateness: rank [0-3] exact" "$work/job.out") == 4)) || {
  echo "FAIL: status $status, not every rank exact"
  tail -5 "$work/job.out"
  exit 1
}
python3 - "$work/trace.csv" $epoch $change <<'PY'
import collections, csv, statistics, sys
trace, epoch, change = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ran, shortest = collections.defaultdict(dict), collections.defaultdict(lambda: float("inf"))
for row in csv.DictReader(open(trace)):
    call, rank = int(row["call"]), int(row["rank"])
    ran[call][rank] = row["algorithm"]
    shortest[call] = min(shortest[call], float(row["duration_s"]))
differ = [c for c in ran if len(set(ran[c].values())) != 1]
if differ:
    sys.exit(f"FAIL: the ranks ran different algorithms at calls {differ[:5]}")
letter = {"stragglar": "S", "native": "n", "ring": "r", "halving-doubling": "h"}
majority, medians = {}, {}
print(f"host 2's link 200 -> 40 Mbit/s at call {change}; per epoch (S stragglar, n the library's,"
      " r ring, h halving-doubling), median shortest duration:")
for first in range(0, len(ran), epoch):
    calls = range(first, min(first + epoch, len(ran)))
    letters = "".join(letter[ran[c][0]] for c in calls)
    majority[first] = collections.Counter(letters).most_common(1)[0][0]
    medians[first] = statistics.median(shortest[c] for c in calls)
    print(f"  {first:3d} {letters} {medians[first] * 1e3:5.0f} ms")
def settled(firsts, when, bar):
    # Every epoch among `firsts` runs an algorithm that was fast in one of them: its own fastest
    # epoch within `bar` times the fastest of all. Judged by the algorithm's best epoch, not each
    # epoch's own time: on this 2-core VM one algorithm's epochs in a row took 124-129 ms, then
    # 80-84 ms (Halving-Doubling, calls 48-111, 2026-11-30), a slowdown of the machine that is
    # not the policy's choice.
    fastest = min(medians[first] for first in firsts)
    best = collections.defaultdict(lambda: float("inf"))
    for first in firsts:
        best[majority[first]] = min(best[majority[first]], medians[first])
    slow = [first for first in firsts if best[majority[first]] > bar * fastest]
    if slow:
        sys.exit(f"FAIL: {when}, the epoch from call {slow[0]} ran {majority[slow[0]]}, whose "
                 f"fastest epoch took {best[majority[slow[0]]] / fastest:.2f}x the fastest "
                 f"epoch from call {firsts[0]} on")
    print(f"{when}, calls {firsts[0]}-{firsts[-1] + epoch - 1}: "
          f"{''.join(majority[first] for first in firsts)}, the slowest epoch "
          f"{max(medians[f] for f in firsts) / fastest:.2f}x the fastest")
settled(range(3 * epoch, change, epoch), "before the change", 1.4)
# After it, StragglAR around the slow link is the fastest (about 270 ms against Ring's and
# Halving-Doubling's 320-380), and the policy reaches it after remeasuring the others' guessed
# factors, one 4-call slot an epoch, so the epochs before it run 1.2-1.41x its time (2026-11-29,
# a fresh clone failed at 1.41 against a bar of 1.4). The detour this catches is the library's
# own, 625 ms here: 2.3x.
settled(range(change + 3 * epoch, len(ran), epoch), "3 epochs after it", 1.6)
PY
(($? == 0)) || exit 1
# The calibration moved, so the ranks probed for a slow link again and named rank 1's (host 2's):
# within 2 epochs of the change, which falls in epoch change / epoch.
named=$(grep -m1 -oE "after epoch [0-9]+ \(calibration moved [0-9.]+x\) link: .*rank 1's link [0-9.]+x slower" \
  "$work/job.out")
echo "${named:-no slow link named}"
epoch_named=$(grep -oE "^after epoch [0-9]+" <<<"$named" | grep -oE "[0-9]+$")
[[ -n $epoch_named ]] && ((epoch_named <= change / epoch + 1)) || {
  echo "FAIL: rank 1's link was not named slow after epoch $((change / epoch + 1)) at the latest"
  exit 1
}
echo "cluster.slowdown: ok"
