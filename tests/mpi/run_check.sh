#!/usr/bin/env bash
# Runs one MPI test program under mpirun on this host, with or without libstragglar_mpi.so.
# usage: run_check.sh BUILD_DIR NPROCS PRELOAD(yes|no) PROGRAM [ARGS...]
# STRAGGLAR_* variables in the environment are passed to every rank. Runs as root too (CI).
set -euo pipefail
build_dir=$1 nprocs=$2 preload=$3
shift 3
args=(--allow-run-as-root --oversubscribe --bind-to none -np "$nprocs")
# Loopback only: the ranks are on this host, and a CI container may have odd interfaces.
args+=(--mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
for variable in $(compgen -e | grep '^STRAGGLAR_' || true); do args+=(-x "$variable"); done
if [[ $preload == yes ]]; then
  library="$build_dir/lib/libstragglar_mpi.so"
  # An install (scripts/gpu-bundle.sh) keeps the preloads in lib/stragglar/.
  [[ -f $library || ! -f $build_dir/lib/stragglar/libstragglar_mpi.so ]] ||
    library="$build_dir/lib/stragglar/libstragglar_mpi.so"
  [[ -f $library ]] || { echo "missing $library"; exit 1; }
  args+=(-x "LD_PRELOAD=$(realpath "$library")")
fi
# A test that passes on its output (PASS_REGULAR_EXPRESSION, which makes ctest ignore the exit
# status) must still fail when any rank failed: this line is every MPI test's FAIL pattern.
status=0
timeout 300 mpirun "${args[@]}" "$@" || status=$?
if ((status != 0)); then echo "run_check: mpirun exited with status $status"; fi
exit "$status"
