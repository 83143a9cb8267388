#!/usr/bin/env bash
# End-to-end check of libstragglar_mpi.so in an mpi4py training loop (tests/mpi/train.py, 4
# processes): the final parameters, and every step's reduced loss and counts, must be identical
# byte for byte without the preload, with it under its adaptive policy and a straggler, and with
# StragglAR forced. train.py quantizes what it reduces so that the exact sums do not depend on the
# reduction order (see the comment there). The preload's traces must also show that StragglAR
# really ran: in some calls of the adaptive run, in every call of the forced one.
#   usage: tests/mpi/train_check.sh BUILD_DIR [PRELOAD [--forced-only]]
#   PRELOAD: the libstragglar_mpi.so to check (default: BUILD_DIR's; e.g. an installed one)
#   --forced-only: the native and forced runs alone, for a build of the same sources whose
#     adaptive run the main check already made (the installed preload: install.mpi_train).
# Exit codes: 0 identical, 1 a difference or a failed run, 77 skipped (no mpi4py/numpy/mpirun).
set -euo pipefail

if (($# < 1 || $# > 3)) || [[ $# == 3 && $3 != --forced-only ]]; then
  echo "usage: $0 BUILD_DIR [PRELOAD [--forced-only]]" >&2
  exit 2
fi
runs=(adaptive forced)
(($# < 3)) || runs=(forced)
if [[ ! -d $1 ]]; then
  echo "train_check: FAIL: build directory $1 not found" >&2
  exit 1
fi
build_dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
preload=${2:-$build_dir/lib/libstragglar_mpi.so}

if ! "$python" -c 'import mpi4py, numpy' 2>/dev/null; then
  echo "train_check: SKIPPED: $python cannot import mpi4py and numpy" \
    "(Debian packages python3-mpi4py python3-numpy)"
  exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "train_check: SKIPPED: mpirun not found (Debian package openmpi-bin)"
  exit 77
fi
if [[ ! -f $preload ]]; then
  echo "train_check: FAIL: $preload not found; build it first" >&2
  exit 1
fi

# The runs set what they need; nothing from the caller's environment may leak into them.
unset LD_PRELOAD
while read -r variable; do unset "$variable"; done < <(compgen -e STRAGGLAR_ || true)

work=$(mktemp -d "${TMPDIR:-/tmp}/stragglar-train-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

# --bind-to none: with more processes than cores, binding stacks them on the same cores. The
# timeout turns a hang (a collective that never completes) into a failure.
mpirun=(timeout 600 mpirun --allow-run-as-root --oversubscribe -np 4 --bind-to none)

# run NAME [mpirun options...] -- [train.py options...]
run() {
  local name=$1
  shift
  local options=()
  while [[ $1 != -- ]]; do
    options+=("$1")
    shift
  done
  shift
  echo "== $name"
  if ! "${mpirun[@]}" "${options[@]}" "$python" "$here/train.py" "$work/$name.npy" "$@" \
    >"$work/$name.log" 2>&1; then
    cat "$work/$name.log"
    echo "train_check: FAIL: the $name run failed (log above)" >&2
    exit 1
  fi
  cat "$work/$name.log"
}

# Each preload run also writes its per-call trace (CSV: call,rank,arrival_s,duration_s,bytes,
# algorithm), to show which algorithm really ran: the comparison means little if StragglAR never
# did.
common=(-x "LD_PRELOAD=$preload" -x STRAGGLAR_EPOCH_CALLS=8 -x STRAGGLAR_MIN_BYTES=0)
run native --
# The policy needs a few epochs of a persistently late rank before it picks StragglAR.
[[ ${runs[0]} != adaptive ]] ||
  run adaptive "${common[@]}" -x "STRAGGLAR_TRACE_FILE=$work/adaptive.csv" -- --straggler-ms 20
run forced "${common[@]}" -x "STRAGGLAR_TRACE_FILE=$work/forced.csv" \
  -x STRAGGLAR_ALGORITHM=stragglar -- --straggler-ms 5

status=0
for name in "${runs[@]}"; do
  if cmp "$work/native.npy" "$work/$name.npy"; then
    echo "train_check: $name: identical to native"
  else
    echo "train_check: FAIL: the $name run's results differ from the native run's" >&2
    status=1
  fi
done

for name in "${runs[@]}"; do
  if [[ ! -f $work/$name.csv ]]; then
    echo "train_check: FAIL: the $name run wrote no trace ($work/$name.csv)" >&2
    exit 1
  fi
  echo "train_check: $name: trace rows (rank x call) by algorithm:" \
    "$(awk -F, 'NR > 1 { n[$6]++ } END { for (a in n) printf " %s %d", a, n[a] }' \
      "$work/$name.csv")"
done
# count NAME ALGORITHM: the trace rows that ran ALGORITHM.
count() {
  awk -F, -v algorithm="$2" 'NR > 1 && $6 == algorithm { n++ } END { print n + 0 }' \
    "$work/$1.csv"
}
if [[ ${runs[0]} == adaptive ]] && (($(count adaptive stragglar) == 0)); then
  echo "train_check: FAIL: the adaptive run never chose StragglAR despite a 20 ms straggler," \
    "so its comparison checked only the native path" >&2
  status=1
fi
rows=$(($(wc -l <"$work/forced.csv") - 1))
if ((rows == 0 || $(count forced stragglar) != rows)); then
  echo "train_check: FAIL: STRAGGLAR_ALGORITHM=stragglar, yet not every call ran StragglAR" >&2
  status=1
fi
exit $status
