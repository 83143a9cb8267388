#!/usr/bin/env bash
# Runs one MPI test program under mpirun on this host, with or without libstragglar_mpi.so.
# usage: run_check.sh BUILD_DIR NPROCS PRELOAD(yes|no) PROGRAM [ARGS...]
# STRAGGLAR_* variables in the environment are passed to every rank. Runs as root too (CI).
# With RUN_CHECK_CLUSTER=NAME the ranks run on that emulated cluster instead (scripts/cluster.sh;
# NPROCS must be its hosts times their ranks, which the cluster's launch places).
set -euo pipefail
build_dir=$1 nprocs=$2 preload=$3
shift 3
if [[ -n ${RUN_CHECK_CLUSTER:-} ]]; then
  launch=("$(dirname "$0")/../../scripts/cluster.sh" run --name "$RUN_CHECK_CLUSTER")
  args=()
else
  launch=(mpirun)
  args=(--allow-run-as-root --oversubscribe --bind-to none -np "$nprocs")
  # Loopback only: the ranks are on this host, and a CI container may have odd interfaces.
  args+=(--mca btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
  # What an 8-rank job's start costs on 2 cores is mostly OpenMPI's own (0.64 s in MPI_Init), and
  # two parts of it have nothing to find here (docs/results/test-time-2026-12-01.md): the
  # point-to-point layer these transports need, named, so that no rank first opens and tries the
  # UCX one (0.46 s left), and hwloc without its PCI scan, which places network cards and
  # GPUs, neither used by these jobs (0.37 s left).
  export HWLOC_COMPONENTS=-pci,-linuxio  # mpirun's own, and each rank's through -x
  args+=(--mca pml ob1 -x HWLOC_COMPONENTS)
fi
for variable in $(compgen -e | grep '^STRAGGLAR_' || true); do args+=(-x "$variable"); done
# The ASan runtime a program or library was built with (scripts/sanitize.sh), if any: GCC's, or
# Clang's shared one.
asan_runtime_of() {
  { ldd "$1" 2>/dev/null || true; } | awk '/libasan|libclang_rt\.asan/ { print $3; exit }'
}
asan=$(asan_runtime_of "$(command -v "$1" || true)")
if [[ $preload == yes ]]; then
  library="$build_dir/lib/libstragglar_mpi.so"
  # An install (scripts/gpu-bundle.sh) keeps the preloads in lib/stragglar/.
  [[ -f $library || ! -f $build_dir/lib/stragglar/libstragglar_mpi.so ]] ||
    library="$build_dir/lib/stragglar/libstragglar_mpi.so"
  [[ -f $library ]] || { echo "missing $library"; exit 1; }
  preloads=$(realpath "$library")
  # A library built with ASan needs the ASan runtime loaded before it.
  library_asan=$(asan_runtime_of "$library")
  [[ -z $library_asan ]] || { asan=$library_asan preloads="$library_asan:$preloads"; }
  args+=(-x "LD_PRELOAD=$preloads")
fi
# Under ASan, leaks are not checked: OpenMPI keeps its own allocations until exit.
[[ -z $asan ]] || args+=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
# Under TSan (scripts/sanitize.sh's thread tree; GCC's runtime is a library, Clang's is inside
# the program): OpenMPI is not instrumented, so what it does in the program's buffers, and its own
# locks, are not checked (tests/mpi/tsan.supp), and only the shared-memory transport runs (its TCP
# transport's setup reports a lock order of its own).
program=$(command -v "$1" || true)
if { ldd "$program" 2>/dev/null || true; } | grep -q libtsan ||
  { nm -D --defined-only "$program" 2>/dev/null || true; } | grep -q ' __tsan_init$'; then
  tsan="suppressions=$(cd "$(dirname "$0")" && pwd)/tsan.supp ignore_noninstrumented_modules=1"
  args+=(-x "TSAN_OPTIONS=${TSAN_OPTIONS:+$TSAN_OPTIONS }$tsan report_signal_unsafe=0")
  [[ -n ${RUN_CHECK_CLUSTER:-} ]] || args=("${args[@]/self,vader,tcp/self,vader}")
fi
# A test that passes on its output (PASS_REGULAR_EXPRESSION, which makes ctest ignore the exit
# status) must still fail when any rank failed: this line is every MPI test's FAIL pattern.
status=0
timeout "${RUN_CHECK_TIMEOUT:-300}" "${launch[@]}" "${args[@]+"${args[@]}"}" "$@" || status=$?
if ((status != 0)); then echo "run_check: mpirun exited with status $status"; fi
exit "$status"
