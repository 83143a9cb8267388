#!/usr/bin/env bash
# Native MPI_Allreduce vs libstragglar_mpi.so on one host: runs stragglar-mpi-bench with 4
# processes twice, first without the preload (a control: every ratio should be ~1, the spread shows
# the noise), then with it. Builds nothing: needs build/bin/stragglar-mpi-bench and
# build/lib/libstragglar_mpi.so (scripts/build.sh). Writes control.json and preload.json to
# --out DIR (default /tmp/stragglar-mpi-bench); every other argument goes to the bench, e.g.
#   scripts/mpi-bench.sh --max-bytes 8MiB --delays 0,20ms --check
# STRAGGLAR_* variables in the environment reach the preload (STRAGGLAR_EPOCH_CALLS defaults to 16
# here, so that the default 48 warmup pairs cover 3 policy epochs).
set -euo pipefail
cd "$(dirname "$0")/.."

out=/tmp/stragglar-mpi-bench
bench_args=()
while (($# > 0)); do
  case "$1" in
    --out)
      if (($# < 2)); then
        echo "mpi-bench: --out needs a directory" >&2
        exit 2
      fi
      out=$2
      shift 2
      ;;
    --out=*)
      out=${1#--out=}
      shift
      ;;
    *)
      bench_args+=("$1")
      shift
      ;;
  esac
done

build_dir=${STRAGGLAR_BUILD_DIR:-build}
if [[ ! -d $build_dir ]]; then
  echo "mpi-bench: build directory $build_dir not found; build first (scripts/build.sh)" >&2
  exit 1
fi
build_dir=$(cd "$build_dir" && pwd)  # LD_PRELOAD needs an absolute path
bench=$build_dir/bin/stragglar-mpi-bench
preload=$build_dir/lib/libstragglar_mpi.so
# An install (scripts/gpu-bundle.sh) keeps the preloads in lib/stragglar/.
[[ -f $preload || ! -f $build_dir/lib/stragglar/libstragglar_mpi.so ]] || preload=$build_dir/lib/stragglar/libstragglar_mpi.so
for file in "$bench" "$preload"; do
  if [[ ! -f $file ]]; then
    echo "mpi-bench: $file not found; build first (scripts/build.sh)" >&2
    exit 1
  fi
done
if ! command -v mpirun >/dev/null; then
  echo "mpi-bench: mpirun not found (Debian package openmpi-bin)" >&2
  exit 1
fi
mkdir -p "$out"

# --bind-to none: with more processes than cores, binding stacks them on the same cores.
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 4 --bind-to none)

echo "== control: no preload, MPI_Allreduce is PMPI_Allreduce (ratios ~1)"
# Local ranks inherit this environment: a leftover LD_PRELOAD would spoil the control.
env -u LD_PRELOAD "${mpirun[@]}" "$bench" --json "$out/control.json" "${bench_args[@]}"
echo
echo "== preload: $preload"
"${mpirun[@]}" -x "LD_PRELOAD=$preload" -x "STRAGGLAR_EPOCH_CALLS=${STRAGGLAR_EPOCH_CALLS:-16}" \
  "$bench" --json "$out/preload.json" "${bench_args[@]}"
echo
echo "mpi-bench: JSON in $out/control.json and $out/preload.json"
