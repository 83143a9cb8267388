#!/usr/bin/env bash
# `cmake --install` into a fresh prefix, then the installed files used from there alone: no build
# tree, no LD_LIBRARY_PATH, a clean environment.
#   - the layout (bin/, lib/stragglar/, share/stragglar/) and no RUNPATH into the build tree;
#   - `stragglar --version`, `plan` (the same plan as the build's), `run --iterations` small;
#   - `stragglar doctor`: the expected lines, one line for a bad STRAGGLAR_MODE, a busy metrics
#     port named, and a non-zero exit where no preload is installed;
#   - the installed MPI preload's first INFO line is its banner, with the version.
# The installed preloads' own checks (mpi4py training, NCCL passthrough) run as separate tests on
# the prefix this script leaves in PREFIX.
# usage: install_check.sh BUILD_DIR PREFIX VERSION
set -euo pipefail
(($# == 3)) || { echo "usage: $0 BUILD_DIR PREFIX VERSION" >&2; exit 2; }
build_dir=$(realpath "$1")
prefix=$2
version=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "install_check: FAIL: $*" >&2; exit 1; }
# A clean environment: only what a user's shell has, none of the build's settings.
clean() { env -i PATH=/usr/bin:/bin HOME="$work" "$@"; }

rm -rf "$prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
prefix=$(realpath "$prefix")
echo "installed into $prefix: $(find "$prefix" -type f | wc -l) files"

# Layout. The preloads exist where the build made them (CUDA and MPI are optional at build time).
for file in bin/stragglar share/stragglar/dashboards/stragglar-dashboard.json \
  share/stragglar/dashboards/stragglar-rules.yml share/stragglar/dashboards/stragglar-rules.test.yml \
  share/stragglar/docs/monitoring.md share/stragglar/README.md share/doc/stragglar/copyright; do
  [[ -f $prefix/$file ]] || fail "$file is not installed"
done
preloads=()
for library in libstragglar.so libstragglar_mpi.so; do
  if [[ -f $build_dir/lib/$library ]]; then
    [[ -f $prefix/lib/stragglar/$library ]] || fail "lib/stragglar/$library is not installed"
    preloads+=("$prefix/lib/stragglar/$library")
  fi
done
for program in stragglar-bench stragglar-mpi-bench; do
  if [[ -f $build_dir/bin/$program ]]; then
    [[ -x $prefix/bin/$program ]] || fail "bin/$program is not installed"
  fi
done
# Nothing installed may lead back into the build tree.
for file in "$prefix"/bin/* "$prefix"/lib/stragglar/*; do
  if readelf -d "$file" | grep -E "RPATH|RUNPATH" | grep -q "$build_dir"; then
    fail "$file has a RUNPATH into the build tree: $(readelf -d "$file" | grep -E 'RPATH|RUNPATH')"
  fi
done
echo "layout: bin/, lib/stragglar/ (${#preloads[@]} preloads), share/stragglar/; no RUNPATH into the build"

# The CLI from the prefix.
[[ $(clean "$prefix/bin/stragglar" --version) == "stragglar $version" ]] ||
  fail "--version printed \"$(clean "$prefix/bin/stragglar" --version)\", expected \"stragglar $version\""
clean "$prefix/bin/stragglar" plan --ranks 5 --algorithm stragglar --json >"$work/plan.json"
"$build_dir/bin/stragglar" plan --ranks 5 --algorithm stragglar --json >"$work/plan-build.json"
cmp -s "$work/plan.json" "$work/plan-build.json" || fail "the installed plan differs from the build's"
clean "$prefix/bin/stragglar" run --ranks 4 --straggler 3 --bytes 256KiB --delay 2ms --iterations 8 \
  --epoch-calls 4 >"$work/run.log" 2>&1 || { cat "$work/run.log"; fail "stragglar run"; }
grep -q "speedup" "$work/run.log" || { cat "$work/run.log"; fail "stragglar run printed no summary"; }
echo "cli: --version, plan (identical to the build's), run --iterations 8"

# The doctor. Its lines on this machine: both preloads load, MPI is OpenMPI's, the settings.
doctor() { clean "$@" "$prefix/bin/stragglar" doctor --preload mpi >"$work/doctor.out" 2>&1; }
expect() { grep -Eq -- "$1" "$work/doctor.out" || { cat "$work/doctor.out"; fail "doctor: no line matching: $1"; }; }
if [[ " ${preloads[*]} " == *libstragglar_mpi.so* ]]; then
  doctor || { cat "$work/doctor.out"; fail "doctor --preload mpi exited non-zero on a machine with MPI"; }
  expect "^stragglar $version doctor \\($prefix/bin\\)$"
  expect "^\\[ok\\]   preload mpi: $prefix/lib/stragglar/libstragglar_mpi.so loads$"
  expect "^\\[ok\\]   mpi: Open MPI v[0-9.]+ \\("
  expect "^\\[ok\\]   settings: mode adapt, epoch 64 calls"
  expect "^\\[ok\\]   metrics: STRAGGLAR_METRICS_PORT unset"
  expect "^\\[ok\\]   verdict: .*the MPI preload can work here$"
  # A bad value: one line naming it, and a non-zero exit.
  if doctor STRAGGLAR_MODE=fast; then fail "doctor exited 0 with STRAGGLAR_MODE=fast"; fi
  [[ $(grep -c "STRAGGLAR_MODE" "$work/doctor.out") == 1 ]] || { cat "$work/doctor.out"; fail "not one line for STRAGGLAR_MODE"; }
  expect '^\[fail\] setting STRAGGLAR_MODE="fast" is invalid \(accepted: adapt, observe, off\); using adapt$'
  # A typo'd variable is named; a busy metrics port is named (the job would go on without it).
  python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$work/port" &
  holder=$!
  for _ in $(seq 50); do [[ -s $work/port ]] && break; sleep 0.1; done
  port=$(cat "$work/port")
  doctor STRAGGLAR_METRICS_PORT="$port" STRAGGLAR_EPOCH_CALL=8 || { cat "$work/doctor.out"; fail "doctor with a busy port exited non-zero"; }
  kill "$holder"
  expect "^\\[warn\\] metrics: in 127.0.0.1:$port-$((port + 7)) these ports cannot be bound: $port \\(Address already in use\\)"
  expect "^\\[warn\\] setting STRAGGLAR_EPOCH_CALL is not a stragglar setting \\(a typo\\?\\)$"
  echo "doctor: the expected lines; a bad STRAGGLAR_MODE named in one line (exit 1); a busy port and a typo named"
fi
# With no preload next to it, the doctor says so and exits non-zero.
mkdir -p "$work/bare/bin"
cp "$prefix/bin/stragglar" "$work/bare/bin/"
if clean "$work/bare/bin/stragglar" doctor >"$work/doctor.out" 2>&1; then
  cat "$work/doctor.out"; fail "doctor exited 0 with no preload installed"
fi
expect "^\\[warn\\] preload nccl: libstragglar.so is not installed next to $work/bare/bin$"
expect "^\\[fail\\] verdict: the NCCL preload cannot work here; the MPI preload cannot work here$"
echo "doctor: exit 1 where no preload is installed"

# The installed MPI preload: its first line at INFO, on every rank, says it is active and which
# version, over which MPI.
if [[ " ${preloads[*]} " == *libstragglar_mpi.so* ]]; then
  clean timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
    -x LD_PRELOAD="$prefix/lib/stragglar/libstragglar_mpi.so" -x STRAGGLAR_DEBUG=INFO \
    "$prefix/bin/stragglar-mpi-bench" --min-bytes 64KiB --max-bytes 64KiB --iterations 2 \
    --warmup 2 --delays 0 --check >"$work/mpi.out" 2>"$work/mpi.err" ||
    { cat "$work/mpi.out" "$work/mpi.err"; fail "the installed MPI preload under mpirun"; }
  for rank in 0 1; do
    first=$(grep -m 1 "\\[$rank\\] stragglar " "$work/mpi.err" || true)
    [[ $first =~ \[$rank\]\ stragglar\ INFO\ libstragglar_mpi.so\ $version\ active\ over\ Open\ MPI\ v[0-9.]+:\ mode\ adapt ]] ||
      { cat "$work/mpi.err"; fail "rank $rank's first line is not the banner: $first"; }
  done
  echo "mpi preload: first INFO line on every rank: ${first#*stragglar INFO }"
fi
echo OK
