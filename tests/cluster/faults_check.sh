#!/usr/bin/env bash
# cluster.faults: faults across the hosts of the emulated cluster of RUN_CHECK_CLUSTER (4 hosts of
# one rank, tests/cluster/on_cluster.sh), each run bounded, every result checked
# (tests/mpi/lateness.cc), each compared with plain OpenMPI where both apply:
#  1. A host dies mid-run (its rank killed): the job ends, as a failure, about as fast with the
#     preload as without, and mpirun says why: the line naming the host, or, where a survivor's
#     TCP transport saw the lost peer first, its count of the processes it killed (which of the
#     two OpenMPI prints is its own race: a fresh clone's run of 2026-11-29 got the count without
#     the preload and the host's line with it).
#  2. A link goes down for 8 s mid-run, STRAGGLAR_WARN_AFTER=2s: the ranks waiting across it warn,
#     naming the rank they wait for; once it is up the run completes with every result exact.
#  3. A link goes down mid-run, STRAGGLAR_TIMEOUT=3s: the ranks waiting across it end the job with
#     a line naming the rank they wait for, within seconds; the link comes back so that mpirun can
#     reach the lost host's daemon and end.
# Each fault comes once the job has reached call 10 (rank 0's progress line), not at a time after
# its launch: CI's run of 2026-11-30, beside other tests, failed here, and on a loaded VM the link
# went down as the job's first call began, so a slower start would have met it inside MPI_Init or
# the preload's link probe, where no call waits and no warning can name a rank.
# Prints each case's times and "cluster.faults: ok" when all passed.
# usage: faults_check.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
cluster=$(cd "$(dirname "$0")/../../scripts" && pwd)/cluster.sh
name=$RUN_CHECK_CLUSTER
lost=${name}4  # the host that fails: rank 3's
work=$(mktemp -d)
trap '"$cluster" link --name "$name" "$lost" up 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The job in the background, output in $work/$1.out; its pid in $job: $2 checked MPI_Allreduce
# calls of 1 MiB (tests/mpi/lateness.cc, nobody late), about 80 ms each here with StragglAR: 400
# (about 30 s) where the job is ended, more than it can run first; 100 where it must finish: the
# fault comes at call 10, within a second (wait_for's step, about 13 calls), no call completes
# while a rank's link is down, and each call after the link is back costs the test's time (250
# calls held it 33 s after the link came back, 2026-11-30).
start_job() {
  local log=$work/$1.out calls=$2
  shift 2
  timeout 120 "$cluster" run --name "$name" -x LATENESS_PROGRESS_EVERY=10 "$@" \
    "$build/bin/mpi_lateness" "$calls" 0@0-0:0 >"$log" 2>&1 &
  job=$!
}
# Waits (at most 60 s, a start on a loaded machine) until the job of $1 has begun its call 10.
wait_for_calls() {
  wait_for "$1" 60 '^lateness: call 10$' >/dev/null ||
    fail "$1: the job did not reach call 10 within 60 s: $(tail -3 "$work/$1.out")"
}
# Waits (at most $2 s) for the pattern $3 in $work/$1.out; the seconds waited.
wait_for() {
  local waited=0
  until grep -qE "$3" "$work/$1.out" 2>/dev/null; do
    ((waited < $2)) || return 1
    sleep 1
    waited=$((waited + 1))
  done
  echo "$waited"
}
# Kills rank 3 where it runs: every process of the job inside the lost host.
kill_lost_rank() {
  local pid
  for pid in $(ip netns pids "$lost"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == mpi_lateness ]] && kill -9 "$pid"
  done
}
preload=(-x "LD_PRELOAD=$build/lib/libstragglar_mpi.so" -x STRAGGLAR_ALGORITHM=stragglar)

# 1. A host dies, with and without the preload.
for run in plain preload; do
  if [[ $run == plain ]]; then start_job "dies-$run" 400; else start_job "dies-$run" 400 "${preload[@]}"; fi
  wait_for_calls "dies-$run"
  kill_lost_rank
  begin=$SECONDS
  wait "$job"
  status=$?
  eval "dies_$run=$((SECONDS - begin))"
  ((status != 0)) || fail "$run: the job ended with status 0 after its rank 3 was killed"
  grep -qE "on node $lost exited on signal 9|[0-9]+ total processes killed" "$work/dies-$run.out" ||
    fail "$run: mpirun said nothing of the lost host: $(tail -3 "$work/dies-$run.out")"
done
echo "1. host $lost killed: the job ended in ${dies_plain}s with plain OpenMPI, ${dies_preload}s with the preload"
grep -hE -m1 "on node $lost exited on signal 9|[0-9]+ total processes killed" "$work"/dies-*.out
((dies_preload <= dies_plain + 10)) || fail "the preload's job took ${dies_preload}s to end"

# 2. A link down for 8 s, then up: warnings, then exact results.
start_job link-warns 100 "${preload[@]}" -x STRAGGLAR_WARN_AFTER=2s
wait_for_calls link-warns
"$cluster" link --name "$name" "$lost" down
warned=$(wait_for link-warns 8 'has waited [0-9.]+ m?s for rank [0-9]') || warned=none
sleep $((8 - ${warned/none/8}))
"$cluster" link --name "$name" "$lost" up
wait "$job"
status=$?
echo "2. link of $lost down 8 s: first warning after ${warned}s; the run then ended with status $status"
[[ $warned != none ]] || fail "no warning while the link was down: $(tail -3 "$work/link-warns.out")"
grep 'has waited' "$work/link-warns.out"
((status == 0)) || fail "the run failed after the link came back: $(tail -3 "$work/link-warns.out")"
(($(grep -c "lateness: rank [0-3] exact" "$work/link-warns.out") == 4)) ||
  fail "not every rank's results were exact after the link came back"

# 3. A link down, STRAGGLAR_TIMEOUT=3s: the job ends naming the rank waited for.
start_job link-timeout 400 "${preload[@]}" -x STRAGGLAR_TIMEOUT=3s
wait_for_calls link-timeout
"$cluster" link --name "$name" "$lost" down
ended=$(wait_for link-timeout 15 'longer than STRAGGLAR_TIMEOUT=3 s: ending the job') || ended=none
"$cluster" link --name "$name" "$lost" up
wait "$job"
status=$?
echo "3. link of $lost down, STRAGGLAR_TIMEOUT=3s: the line after ${ended}s; mpirun exited with status $status"
[[ $ended != none ]] || fail "no timeout line: $(tail -3 "$work/link-timeout.out")"
grep 'STRAGGLAR_TIMEOUT' "$work/link-timeout.out"
grep -qE 'has waited [0-9.]+ s for rank [0-9] in round [0-9]+, longer than STRAGGLAR_TIMEOUT' \
  "$work/link-timeout.out" || fail "the timeout line names no rank"
((status != 0)) || fail "the job went on after STRAGGLAR_TIMEOUT"

((failures == 0)) || exit 1
echo "cluster.faults: ok"
