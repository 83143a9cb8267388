#!/usr/bin/env bash
# Every GPU check in one go, for a machine with an NVIDIA GPU (docs/results/README.md lists them):
#   reduce  build/bin/stragglar-gpu-reduce-check: the CUDA reduction kernels against the CPU ones
#           for every dtype x op, and their bandwidth against a device-to-device copy
#   timer   build/bin/gpu_timer_test: the GPU call timer (CUPTI / CUDA events)
#   pass    tests/nccl/passthrough_check.sh: one process, a one-rank communicator and an AllReduce
#           through the preload in every mode, also with NCCL loaded privately (RTLD_LOCAL, as
#           PyTorch's is under Python): NCCL's own output each time
#   doctor  stragglar doctor --preload nccl: the NCCL preload can work here (driver, devices,
#           NCCL, CUPTI found), exit 0
#   bench   stragglar-bench, 4 ranks on one GPU (one process each, own NCCL_HOSTID, sockets on lo),
#           1 MiB..64 MiB x4, float sum, -c 1: (a) without the preload, with it (b) off,
#           (c) observe, (d) adapt, (e) StragglAR forced; (f) rank 3 spinning 2 ms before every
#           AllReduce, without the preload, adaptive and forced; then the time ratios per size
#   sweep   stragglar-bench -c 1 for every dtype x op at a few sizes (odd counts, fewer elements
#           than ranks): NCCL alone (checks the checker), the preload adaptive, StragglAR forced,
#           the preload adaptive with the ranks as 2 nodes of 2 (STRAGGLAR_TOPOLOGY=2x2), and
#           StragglAR's plans for scale forced: log-depth, and hierarchical on 2x2
#   prearrival  StragglAR forced (straggler 3), 4 ranks on one GPU: its pre-arrival phase as the
#           plan's send/recv rounds against NCCL collectives on the ready ranks' communicator
#           (STRAGGLAR_PRE_ARRIVAL=rounds|nccl), side by side: 3, 12, 48 MiB (equal blocks:
#           ReduceScatter) and 16 MiB (uneven: Reduce per block), without and with rank 3
#           spinning 2 ms; then -c 1 for every dtype x op with nccl at both kinds of size
#   device  the device executor (STRAGGLAR_EXECUTOR=device, one kernel per call over peer memory),
#           4 and 8 ranks on one GPU: -c 1 for every dtype x op with Ring, Halving-Doubling and
#           StragglAR forced (flat, log-depth, and hierarchical with the ranks as 2 or 4 nodes
#           of 2), in windows smaller than the message (slices); then after-arrival
#           times with the last rank spinning 2 ms, 1 MiB..256 MiB x4: NCCL alone, StragglAR over
#           NCCL send/recv, StragglAR and Ring on the device executor, the adaptive mode on it
#   rounds  the device executor's cost per round, 4 and 8 ranks on one GPU: Ring at 4 KiB
#           (2(n-1) rounds of almost nothing), without and with the kernel's own timeline
#           (STRAGGLAR_DEVICE_STAMPS), with 1 CTA, and with the signals at the system's scope
#           (STRAGGLAR_DEVICE_SCOPE=system; on one GPU the default is the GPU's), plain and with
#           the timeline; scripts/device-stamps.py then says where a call's time goes (host,
#           launch, GPU idle, kernel, waits, posts, start skew)
#   own-links  scripts/gpu-own-links.py: links of their own on one GPU under MPS, each rank a
#           fixed share of the SMs and of CTAs: the link check (each rank's copy rate alone and
#           all at once, stragglar-gpu-link-rate; 85% or more is link-bound), then Ring,
#           Halving-Doubling, StragglAR flat and log-depth and the adaptive mode on the device
#           executor, 4 and 8 ranks, 16/25/64/256 MiB, the last rank late by 1x and 2x the
#           pre-arrival phase: StragglAR's best family / the best baseline after arrival
#   links   tests/nccl/link_check.sh: 4 processes on one GPU run a send/recv pipeline with link
#           profiling on; rank 1's transfers slowed on the wire from 8 s in: every transfer
#           bit-exact, every rank names a link out of rank 1, rank 0 writes the advice; without
#           the slowing nobody is named
#   slow-link  tests/nccl/slow_link_check.sh (also ctest gpu.nccl_slow_link): stragglar-bench, 4
#           ranks on one GPU, rank 2's wire slowed from the start: the preload's probe names rank
#           2's link at setup, StragglAR runs in most calls, every value exact; without the
#           slowing nobody is named
#   watchdog  tests/nccl/watchdog_check.sh: 4 processes on one GPU, rank 3 never comes to call 20:
#           plain NCCL stays stuck; with the preload (STRAGGLAR_WARN_AFTER=1s,
#           STRAGGLAR_TIMEOUT=3s), for NCCL's own AllReduce and StragglAR forced, ranks 0-2 warn,
#           revoke, see a later call fail, their first 20 calls exact, and rank 0 writes its trace
#   ddp     tests/gpu/ddp_check.py under torchrun, 2 ranks on one GPU: the final parameters'
#           SHA-256 without and with the preload (adaptive, and StragglAR forced) must be identical
# Each check has a header and its own log, failures do not stop the others, and a PASS/FAIL/SKIP
# table ends the run. Everything lands in --out DIR: gpu-check.log (all of the output),
# one log per check, the benchmarks' JSON, ratios.json, summary.json and gpu-<date>.md (a draft
# for docs/results/).
#
# usage: scripts/gpu-check.sh [BUILD_DIR] [--out DIR]
#                            [--only reduce,timer,pass,doctor,links,slow-link,watchdog,bench,
#                                    prearrival,device,rounds,own-links,sweep,ddp]
#                            [--prebuilt] [--quick] [--mps] [--iters N] [--limit SECONDS]
#   BUILD_DIR defaults to build/ (scripts/build.sh); when it is configured the needed targets
#   are built first, otherwise the script says what is missing. --prebuilt uses BUILD_DIR's
#   bin/ and lib/ as they are (binaries built elsewhere, e.g. on a machine with the Debian
#   packages, for a GPU machine without them). --only runs a subset, e.g. to stay under a
#   per-command time limit (the bench step takes the longest); --quick shrinks the bench step
#   (1 MiB..16 MiB, fewer iterations); --iters sets its timed iterations per size (default 20);
#   --limit caps each program's run (default 590 s). --quick also shrinks the device step's timed
#   runs (4 MiB..64 MiB, 10 iterations).
#   --mps runs the bench and sweep steps under CUDA MPS (nvidia-cuda-mps-control -d, stopped
#   afterwards): without it the ranks' processes time-slice the one GPU, and every NCCL call
#   then takes tens of milliseconds whatever its size, which hides the algorithms' differences.
#   Each run with the preload writes a trace (NAME.trace.csv), and the log shows which algorithm
#   the calls of each size ran.
# Exit status: 0 when nothing failed (skips allowed), 1 otherwise, 2 for bad arguments.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo=$(pwd)

build_dir=build
out=""
only="reduce,timer,pass,doctor,links,slow-link,watchdog,bench,prearrival,device,rounds,own-links,sweep,ddp"
prebuilt=0
quick=0
mps=0
iters=20
limit=590
while (($# > 0)); do
  case "$1" in
    --out)
      (($# >= 2)) || { echo "gpu-check: --out needs a directory" >&2; exit 2; }
      out=$2
      shift 2
      ;;
    --out=*) out=${1#--out=}; shift ;;
    --only)
      (($# >= 2)) || { echo "gpu-check: --only needs a list" >&2; exit 2; }
      only=$2
      shift 2
      ;;
    --only=*) only=${1#--only=}; shift ;;
    --prebuilt) prebuilt=1; shift ;;
    --quick) quick=1; shift ;;
    --mps) mps=1; shift ;;
    --iters)
      [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: --iters needs a count" >&2; exit 2; }
      iters=$2
      shift 2
      ;;
    --limit)
      [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || { echo "gpu-check: --limit needs seconds" >&2; exit 2; }
      limit=$2
      shift 2
      ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) build_dir=$1; shift ;;
  esac
done
for step in ${only//,/ }; do
  case "$step" in
    reduce | timer | pass | doctor | links | slow-link | watchdog | bench | prearrival | device \
      | rounds | own-links | sweep | ddp) ;;
    *) echo "gpu-check: --only: unknown step \"$step\" (reduce, timer, pass, doctor, links, slow-link," \
      "watchdog, bench, prearrival, device, rounds, own-links, sweep, ddp)" >&2
      exit 2 ;;
  esac
done
wanted() { [[ ",$only," == *",$1,"* ]]; }

stamp=$(date +%Y-%m-%d-%H%M%S)
out=${out:-/tmp/stragglar-gpu-check-$stamp}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
log=$out/gpu-check.log
: >"$log"
exec > >(tee -a "$log") 2>&1

if command -v python3 >/dev/null; then python=python3; else python=""; fi

# --- bookkeeping --------------------------------------------------------------------------------
names=()
statuses=()
details=()
record() {  # NAME STATUS DETAIL
  names+=("$1")
  statuses+=("$2")
  details+=("$3")
  echo ">>> $1: $2${3:+ ($3)}"
}
header() { printf '\n==================== %s ====================\n' "$*"; }

# run_logged NAME LIMIT_S COMMAND...: runs with its output on the console and in $out/NAME.log;
# sets rc (124: ran past LIMIT_S).
run_logged() {
  local name=$1 limit=$2
  shift 2
  echo "\$ $*"
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  rc=${PIPESTATUS[0]}
  echo "(exit status $rc)"
}

# status_of RC: PASS for 0, SKIP for 77, FAIL otherwise.
status_of() {
  case "$1" in
    0) echo PASS ;;
    77) echo SKIP ;;
    *) echo FAIL ;;
  esac
}

# --- device and build ---------------------------------------------------------------------------
header "device"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(hostname)"
echo "command: $0 $build_dir --out $out --only $only"
echo "commit: $(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)" \
  "($(git -C "$repo" status --porcelain 2>/dev/null | wc -l) files differ from it)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || true
else
  echo "nvidia-smi: not found (the device is printed by each check below)"
fi
if command -v nvcc >/dev/null; then nvcc --version | tail -n 2; fi
if [[ -n $python ]]; then
  $python -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda,
"devices", torch.cuda.device_count())' 2>/dev/null || echo "torch: cannot import"
fi

header "build ($build_dir)"
targets=(stragglar-bench stragglar_preload stragglar-gpu-reduce-check gpu_timer_test
  nccl_passthrough_check pipeline_check watchdog_check slow_socket)
if ((prebuilt)); then
  echo "--prebuilt: using $build_dir/bin and $build_dir/lib as they are"
  ls -l "$build_dir"/bin "$build_dir"/lib
elif [[ ! -f $build_dir/CMakeCache.txt ]]; then
  echo "$build_dir is not a configured build; configuring (cmake -S . -B $build_dir -G Ninja)"
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if ! cmake -S . -B "$build_dir" "${generator[@]}" >"$out/configure.log" 2>&1; then
    echo "configure FAILED (full log: $out/configure.log). What CMake could not find:"
    grep -E "Could NOT find|Could not find|not found|No CMAKE_.*_COMPILER" "$out/configure.log" |
      sort -u | head -20
    echo "The build needs the Debian packages of scripts/install-deps.sh (abseil, nlohmann-json,"
    echo "prometheus-cpp, GoogleTest, Google Benchmark) and the CUDA toolkit with NCCL and CUPTI;"
    echo "run scripts/build.sh where they can be installed."
  fi
fi
if ((!prebuilt)) && [[ -f $build_dir/CMakeCache.txt ]]; then
  for target in "${targets[@]}"; do
    if cmake --build "$build_dir" --target "$target" -j "$(nproc)" >"$out/build-$target.log" 2>&1
    then
      echo "built $target"
    else
      echo "building $target FAILED (full log: $out/build-$target.log):"
      grep -E "error|Error" "$out/build-$target.log" | head -10
    fi
  done
  grep -E "^STRAGGLAR_HAVE_CUDA|^STRAGGLAR_CUDA:" "$build_dir/CMakeCache.txt" || true
fi
build_dir=$(cd "$build_dir" 2>/dev/null && pwd || echo "$build_dir")
bench=$build_dir/bin/stragglar-bench
preload=$build_dir/lib/libstragglar.so
# An install (scripts/gpu-bundle.sh) keeps the preloads in lib/stragglar/.
[[ -f $preload || ! -f $build_dir/lib/stragglar/libstragglar.so ]] || preload=$build_dir/lib/stragglar/libstragglar.so
# need NAME FILE...: true when every file exists, otherwise records NAME as FAIL saying which not.
need() {
  local name=$1 missing=()
  shift
  for file in "$@"; do [[ -e $file ]] || missing+=("$file"); done
  ((${#missing[@]} == 0)) && return 0
  record "$name" FAIL "not built: ${missing[*]}"
  return 1
}

# The checks set what they need; nothing from the caller's environment may leak into them.
unset LD_PRELOAD
while read -r variable; do unset "$variable"; done < <(compgen -e STRAGGLAR_ || true)
epoch_calls=16  # the policy decides every 16 calls: the bench's 96 warm-up calls cover 6 epochs

# --- 1. reduction kernels -----------------------------------------------------------------------
if wanted reduce; then
  header "1. CUDA reduction kernels: every dtype x op, bandwidth vs device-to-device copy"
  if need reduce "$build_dir/bin/stragglar-gpu-reduce-check"; then
    run_logged reduce "$limit" "$build_dir/bin/stragglar-gpu-reduce-check"
    record reduce "$(status_of "$rc")" "exit $rc; $out/reduce.log"
  fi
fi

# --- 2. GPU timer -------------------------------------------------------------------------------
if wanted timer; then
  header "2. GPU call timer (gpu_timer_test)"
  if need timer "$build_dir/bin/gpu_timer_test"; then
    run_logged timer "$limit" "$build_dir/bin/gpu_timer_test"
    detail="exit $rc"
    # GoogleTest exits 0 when every test skipped: say so.
    skipped=$(grep -c "^\[  SKIPPED \]" "$out/timer.log" || true)
    ((skipped > 0)) && detail+="; $skipped lines of SKIPPED tests"
    record timer "$(status_of "$rc")" "$detail"
  fi
fi

# --- 2b. the preload in one process ------------------------------------------------------------
if wanted pass; then
  header "2b. libstragglar.so in one process: NCCL's own output in every mode, NCCL loaded privately too"
  if need pass "$build_dir/bin/nccl_passthrough_check" "$build_dir/bin/nccl_local_load_check" \
    "$build_dir/lib/libnccl_passthrough_module.so" "$preload"; then
    run_logged pass "$limit" "$repo/tests/nccl/passthrough_check.sh" "$build_dir" "$preload"
    detail="exit $rc"
    grep -q "^ncclAllReduce: 0 " "$out/pass.log" && detail+="; AllReduce on the GPU" ||
      detail+="; no GPU communicator (NCCL's errors compared)"
    record pass "$(status_of "$rc")" "$detail"
  fi
fi

# --- 2c. stragglar doctor -----------------------------------------------------------------------
if wanted doctor; then
  header "2c. stragglar doctor --preload nccl: the NCCL preload can work on this machine"
  if need doctor "$build_dir/bin/stragglar"; then
    run_logged doctor "$limit" "$build_dir/bin/stragglar" doctor --preload nccl
    detail="exit $rc; $(grep -m 1 'cuda:' "$out/doctor.log" || echo 'no cuda line')"
    record doctor "$(status_of "$rc")" "$detail"
  fi
fi

# bench_run NAME PRELOAD(yes|no) [VAR=VALUE...] -- BENCH_ARGS...: one stragglar-bench run with its
# JSON in $out/NAME.json; PASS needs exit 0 and the preload active exactly when asked for.
bench_run() {
  local name=$1 with_preload=$2 env_args=()
  shift 2
  while (($# > 0)) && [[ $1 != -- ]]; do env_args+=("$1"); shift; done
  shift
  if [[ $with_preload == yes ]]; then
    env_args+=("LD_PRELOAD=$preload" "STRAGGLAR_EPOCH_CALLS=$epoch_calls")
  fi
  [[ $with_preload == yes ]] && env_args+=("STRAGGLAR_TRACE_FILE=$out/$name.trace.csv")
  echo "--- $name"
  run_logged "$name" "$limit" env "${env_args[@]}" "$bench" --json "$out/$name.json" "$@"
  [[ $with_preload == yes ]] && algorithms "$out/$name.trace.csv"
  local status detail="exit $rc"
  status=$(status_of "$rc")
  ((rc == 124)) && detail+=" (timed out)"
  if [[ $status == PASS ]]; then
    local active
    active=$(grep -c "^# preload active: yes" "$out/$name.log" || true)
    if [[ $with_preload == yes && $active != 1 ]]; then
      status=FAIL
      detail+="; the preload is not active (ncclAllReduce is not libstragglar.so's)"
    elif [[ $with_preload == no && $active != 0 ]]; then
      status=FAIL
      detail+="; the preload is active in a run without it"
    fi
    detail+="; $(grep -E "^# Out of bounds values" "$out/$name.log" | sed 's/^# //')"
  fi
  record "$name" "$status" "$detail"
}

# algorithms TRACE: per message size, how many calls ran each algorithm (rank 0's rows of the
# preload's trace), over all calls and over the last 20.
algorithms() {
  [[ -n $python && -e $1 ]] || { echo "(no trace: $1)"; return; }
  $python "$repo/scripts/gpu-results.py" algorithms "$1"
}

# start_mps / stop_mps: a CUDA MPS control daemon of our own for the multi-process steps (--mps).
mps_control=""
start_mps() {
  ((mps)) || return 0
  mps_control=$(command -v nvidia-cuda-mps-control || true)
  if [[ -z $mps_control ]]; then
    echo "--mps: nvidia-cuda-mps-control not found; the ranks time-slice the GPU"
    return 0
  fi
  export CUDA_MPS_PIPE_DIRECTORY=$out/mps-pipe CUDA_MPS_LOG_DIRECTORY=$out/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if "$mps_control" -d; then
    echo "--mps: CUDA MPS control daemon started (pipes in $CUDA_MPS_PIPE_DIRECTORY)"
  else
    echo "--mps: the MPS control daemon did not start; the ranks time-slice the GPU"
    mps_control=""
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
}
stop_mps() {
  [[ -n $mps_control ]] || return 0
  echo quit | "$mps_control"
  sleep 1
  echo "--mps: MPS control daemon stopped"
  mps_control=""
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
trap stop_mps EXIT

# ratios A B...: per size, B's time over A's, from the benchmarks' JSON files.
ratios() {
  [[ -n $python ]] || { echo "(no python3: ratios not computed)"; return; }
  $python "$repo/scripts/gpu-results.py" ratios "$out" "$@"
}

# --- 2d. link profiling of send/recv -----------------------------------------------------------
if wanted links; then
  header "2d. link profiling: a 4-rank send/recv pipeline on one GPU, one rank's wire slowed"
  if need links "$build_dir/bin/pipeline_check" "$preload"; then
    run_logged links "$limit" "$repo/tests/nccl/link_check.sh" "$build_dir" "$preload" "$out/links"
    detail="exit $rc; $(grep -m 1 '^advice:' "$out/links.log" || echo 'no advice')"
    record links "$(status_of "$rc")" "$detail"
  fi
fi

# --- 2e. the AllReduce's slow-link probe ------------------------------------------------------
if wanted slow-link; then
  header "2e. the slow-link probe: stragglar-bench, 4 ranks on one GPU, rank 2's wire slowed"
  if need slow-link "$bench" "$preload" "$build_dir/lib/libslow_socket.so"; then
    run_logged slow-link "$limit" "$repo/tests/nccl/slow_link_check.sh" "$build_dir" "$preload" \
      "$out/slow-link"
    detail="exit $rc; $(grep -m 1 '^slowed:' "$out/slow-link.log" || echo 'no result')"
    record slow-link "$(status_of "$rc")" "$detail"
  fi
fi

# --- 2f. the call watchdog: a rank that never comes ---------------------------------------------
if wanted watchdog; then
  header "2f. the call watchdog: 4 ranks on one GPU, rank 3 never comes to call 20"
  if need watchdog "$build_dir/bin/watchdog_check" "$preload"; then
    run_logged watchdog "$limit" "$repo/tests/nccl/watchdog_check.sh" "$build_dir" "$preload" \
      "$out/watchdog"
    record watchdog "$(status_of "$rc")" "exit $rc; $(grep -c '^FAIL' "$out/watchdog.log") failures"
  fi
fi

# --- 3. stragglar-bench, 4 ranks on one GPU -----------------------------------------------------
if wanted bench; then
  header "3. stragglar-bench: 4 ranks on one GPU, 1 MiB..64 MiB x4, float sum, -c 1"
  if need bench "$bench" "$preload"; then
    common=(--ranks 4 --one_gpu -b 1M -e 64M -f 4 -d float -o sum -c 1 -w 96 -n "$iters"
      --timeout_s $((limit - 10)))
    ((quick)) && common=(--ranks 4 --one_gpu -b 1M -e 16M -f 4 -d float -o sum -c 1 -w 48 -n 10
      --timeout_s $((limit - 10)))
    late=(--straggler 3 --delay_us 2000)
    start_mps
    bench_run bench-a-native no -- "${common[@]}"
    bench_run bench-b-off yes STRAGGLAR_MODE=off -- "${common[@]}"
    bench_run bench-c-observe yes STRAGGLAR_MODE=observe -- "${common[@]}"
    bench_run bench-d-adapt yes STRAGGLAR_MODE=adapt -- "${common[@]}"
    bench_run bench-e-forced yes STRAGGLAR_ALGORITHM=stragglar -- "${common[@]}"
    bench_run bench-f-late-native no -- "${common[@]}" "${late[@]}"
    bench_run bench-f-late-adapt yes STRAGGLAR_MODE=adapt -- "${common[@]}" "${late[@]}"
    bench_run bench-f-late-forced yes STRAGGLAR_ALGORITHM=stragglar STRAGGLAR_STRAGGLER=3 -- \
      "${common[@]}" "${late[@]}"
    echo
    echo "--- ratios without a straggler (c-observe: 1/ratio - 1 is the observe mode's overhead)"
    ratios bench-a-native bench-b-off bench-c-observe bench-d-adapt bench-e-forced
    echo
    echo "--- ratios with rank 3 spinning 2 ms before every AllReduce"
    ratios bench-f-late-native bench-f-late-adapt bench-f-late-forced
    stop_mps
  fi
fi

# --- 3b. StragglAR's pre-arrival phase: the plan's rounds against NCCL collectives -------------
if wanted prearrival; then
  header "3b. StragglAR's pre-arrival phase: send/recv rounds vs NCCL collectives, 4 ranks on one GPU"
  if need prearrival "$bench" "$preload"; then
    forced=(STRAGGLAR_ALGORITHM=stragglar STRAGGLAR_STRAGGLER=3)
    pre=(--ranks 4 --one_gpu -d float -o sum -c 1 -w 48 -n "$iters" --timeout_s $((limit - 10)))
    equal=(-b 3M -e 48M -f 4)  # float counts divisible by the 3 ready ranks
    uneven=(-b 16M -e 16M)
    late=(--straggler 3 --delay_us 2000)
    start_mps
    for kind in rounds nccl; do
      bench_run "pre-$kind" yes "${forced[@]}" "STRAGGLAR_PRE_ARRIVAL=$kind" -- "${pre[@]}" "${equal[@]}"
      bench_run "pre-$kind-uneven" yes "${forced[@]}" "STRAGGLAR_PRE_ARRIVAL=$kind" -- \
        "${pre[@]}" "${uneven[@]}"
      bench_run "pre-$kind-late" yes "${forced[@]}" "STRAGGLAR_PRE_ARRIVAL=$kind" -- \
        "${pre[@]}" "${equal[@]}" "${late[@]}"
    done
    # Every dtype x op through NCCL's collectives: 1.5 MiB (equal blocks for every type size),
    # 1 MiB + 28 B (uneven).
    pre_sweep=(--ranks 4 --one_gpu -d all -o all -c 1 -w 2 -n 2 --timeout_s $((limit - 10)))
    bench_run pre-nccl-sweep-equal yes "${forced[@]}" STRAGGLAR_PRE_ARRIVAL=nccl -- \
      "${pre_sweep[@]}" -b 1536K -e 1536K
    bench_run pre-nccl-sweep-uneven yes "${forced[@]}" STRAGGLAR_PRE_ARRIVAL=nccl -- \
      "${pre_sweep[@]}" -b 1048604 -e 1048604
    echo
    echo "--- ratios: pre-arrival as NCCL collectives against the plan's rounds (> 1: nccl faster)"
    ratios pre-rounds pre-nccl
    ratios pre-rounds-uneven pre-nccl-uneven
    ratios pre-rounds-late pre-nccl-late
    stop_mps
  fi
fi

# --- 3c. the device executor --------------------------------------------------------------------
# device_used NAME RANKS: the run's log says the device executor was set up (STRAGGLAR_DEBUG=INFO).
device_used() {
  if ! grep -q "device executor: $2 ranks" "$out/$1.log"; then
    record "$1-device" FAIL "the device executor was not used: $(grep -m 1 -o \
      'device executor unavailable[^;]*' "$out/$1.log" || echo 'no setup line')"
  fi
}
# family_used NAME FAMILY: with a forced StragglAR family, the run's INFO lines name that family's
# plan (stragglar-log-depth, stragglar-hierarchical; the flat schedule names neither).
family_used() {
  local pattern
  case $2 in
    stragglar-log-depth) pattern="(log-depth: the straggler's buffer in" ;;
    stragglar-hierarchical) pattern="(hierarchical)" ;;
    *) return 0 ;;
  esac
  grep -qF "$pattern" "$out/$1.log" ||
    record "$1-family" FAIL "no plan of the family $2 ran (no INFO line with \"$pattern\")"
}
if wanted device; then
  header "3c. the device executor: one kernel per call over peer memory, 4 and 8 ranks on one GPU"
  if need device "$bench" "$preload"; then
    dev=(STRAGGLAR_EXECUTOR=device STRAGGLAR_DEBUG=INFO STRAGGLAR_MIN_BYTES=0)
    start_mps
    for ranks in 4 8; do
      # 1 MiB windows: the 2 MiB and 3 MiB + 28 B calls run in slices.
      check=(--ranks "$ranks" --one_gpu -d all -o all -c 1 -w 2 -n 2 --timeout_s $((limit - 10)))
      for algorithm in ring halving-doubling stragglar stragglar-log-depth stragglar-hierarchical
      do
        name="device-$ranks-check-$algorithm"
        nodes=()  # hierarchical StragglAR: the ranks as nodes of 2
        [[ $algorithm == stragglar-hierarchical ]] && nodes=("STRAGGLAR_TOPOLOGY=$((ranks / 2))x2")
        bench_run "$name" yes "${dev[@]}" "${nodes[@]}" STRAGGLAR_IPC_BYTES=1MiB \
          "STRAGGLAR_ALGORITHM=$algorithm" -- "${check[@]}" -b 8 -e 2M -f 64
        device_used "$name" "$ranks"
        family_used "$name" "$algorithm"
        bench_run "$name-odd" yes "${dev[@]}" "${nodes[@]}" STRAGGLAR_IPC_BYTES=1MiB \
          "STRAGGLAR_ALGORITHM=$algorithm" -- "${check[@]}" -b 3145756 -e 3145756
      done
      last=$((ranks - 1))
      sizes=(-b 16M -e 256M -f 4 -w 32 -n "$iters")
      ((ranks == 4)) && sizes=(-b 1M -e 256M -f 4 -w 32 -n "$iters")
      ((quick)) && sizes=(-b 4M -e 64M -f 4 -w 16 -n 10)
      time=(--ranks "$ranks" --one_gpu -d float -o sum -c 1 --timeout_s $((limit - 10))
        --straggler "$last" --delay_us 2000 "${sizes[@]}")
      bench_run "device-$ranks-late-native" no -- "${time[@]}"
      bench_run "device-$ranks-late-stragglar-nccl" yes STRAGGLAR_ALGORITHM=stragglar \
        "STRAGGLAR_STRAGGLER=$last" -- "${time[@]}"
      bench_run "device-$ranks-late-stragglar" yes "${dev[@]}" STRAGGLAR_ALGORITHM=stragglar \
        "STRAGGLAR_STRAGGLER=$last" -- "${time[@]}"
      device_used "device-$ranks-late-stragglar" "$ranks"
      bench_run "device-$ranks-late-ring" yes "${dev[@]}" STRAGGLAR_ALGORITHM=ring -- "${time[@]}"
      bench_run "device-$ranks-late-adapt" yes "${dev[@]}" -- "${time[@]}"
      echo
      echo "--- ratios, $ranks ranks, rank $last spinning 2 ms (> 1: faster than the first)"
      ratios "device-$ranks-late-ring" "device-$ranks-late-stragglar" \
        "device-$ranks-late-stragglar-nccl" "device-$ranks-late-native" "device-$ranks-late-adapt"
    done
    stop_mps
  fi
fi

# --- 3d. the device executor's cost per round -----------------------------------------------------
if wanted rounds; then
  header "3d. the device executor's cost per round: Ring at 4 KiB, 4 and 8 ranks on one GPU"
  if need rounds "$bench" "$preload"; then
    dev=(STRAGGLAR_EXECUTOR=device STRAGGLAR_DEBUG=INFO STRAGGLAR_MIN_BYTES=0
      STRAGGLAR_ALGORITHM=ring)
    start_mps
    for ranks in 4 8; do
      tiny=(--ranks "$ranks" --one_gpu -d float -o sum -c 1 -w 100 -n 1000 -b 4K -e 4K
        --timeout_s $((limit - 10)))
      # Side by side: plain, with the timeline (its cost shows against plain), with one CTA.
      bench_run "rounds-$ranks" yes "${dev[@]}" -- "${tiny[@]}"
      bench_run "rounds-$ranks-stamped" yes "${dev[@]}" \
        "STRAGGLAR_DEVICE_STAMPS=$out/rounds-$ranks-stamps" -- "${tiny[@]}"
      stamped=$(status_of "$rc")
      bench_run "rounds-$ranks-one-cta" yes "${dev[@]}" STRAGGLAR_IPC_BLOCKS=1 -- "${tiny[@]}"
      # What the GPU's scope saves: the same two runs with the system's.
      bench_run "rounds-$ranks-system" yes "${dev[@]}" STRAGGLAR_DEVICE_SCOPE=system -- "${tiny[@]}"
      bench_run "rounds-$ranks-system-stamped" yes "${dev[@]}" STRAGGLAR_DEVICE_SCOPE=system \
        "STRAGGLAR_DEVICE_STAMPS=$out/rounds-$ranks-system-stamps" -- "${tiny[@]}"
      system_stamped=$(status_of "$rc")
      echo "per-round cost, $ranks ranks: each run's time / $((2 * (ranks - 1))) rounds"
      for run in "$stamped stamps" "$system_stamped system-stamps"; do
        read -r run_status suffix <<<"$run"
        if [[ -n $python && $run_status == PASS ]]; then
          echo "--- where a call's time goes: rounds-$ranks-$suffix"
          $python scripts/device-stamps.py "$out/rounds-$ranks-$suffix" --skip 24 \
            --json "$out/rounds-$ranks-$suffix.json" || record "rounds-$ranks-$suffix" FAIL \
            "no timeline (scripts/device-stamps.py)"
        fi
      done
    done
    stop_mps
  fi
fi

# --- 3e. links of their own: an SM share per rank under MPS -------------------------------------
if wanted own-links; then
  header "3e. links of their own on one GPU: an SM share and a CTA count per rank, under MPS"
  rate=$build_dir/bin/stragglar-gpu-link-rate
  if [[ -z $python ]]; then
    record own-links SKIP "python3 not found"
  elif need own-links "$bench" "$preload" "$rate"; then
    start_mps
    own_iters=$iters
    ((quick)) && own_iters=10
    run_logged own-links "$limit" "$python" scripts/gpu-own-links.py --bench "$bench" \
      --rate "$rate" --preload "$preload" --out "$out/own-links" --iters "$own_iters" \
      --limit $((limit - 10))
    stop_mps
    record own-links "$(status_of "$rc")" \
      "exit $rc; $(grep -c '^- ' "$out/own-links/own-links.md" 2>/dev/null || echo 0) goals missed or runs failed; $out/own-links/own-links.md"
  fi
fi

# --- 4. correctness sweep -----------------------------------------------------------------------
if wanted sweep; then
  header "4. correctness sweep: -c 1, every dtype x op, 4 ranks on one GPU"
  if need sweep "$bench" "$preload"; then
    # 8 B: fewer elements than ranks for the wider types; 1 KiB, 128 KiB; 1 MiB + 28 B: odd
    # element counts for float and double, above the preload's default STRAGGLAR_MIN_BYTES.
    sweep=(--ranks 4 --one_gpu -d all -o all -c 1 -w 2 -n 2 --timeout_s $((limit - 10)))
    start_mps
    # nodes: the 4 ranks priced as 2 nodes of 2 (the setup gather of host ids, each link class
    # probed over NCCL send/recv, Ring priced as the hierarchical ring, hierarchical StragglAR
    # among the shapes).
    for mode in native adapt forced nodes log-depth hierarchical; do
      case $mode in
        native) setting=(no) ;;
        adapt) setting=(yes STRAGGLAR_MODE=adapt) ;;
        forced) setting=(yes STRAGGLAR_ALGORITHM=stragglar) ;;
        nodes) setting=(yes STRAGGLAR_MODE=adapt STRAGGLAR_TOPOLOGY=2x2 STRAGGLAR_DEBUG=INFO) ;;
        log-depth) setting=(yes STRAGGLAR_ALGORITHM=stragglar-log-depth STRAGGLAR_DEBUG=INFO) ;;
        hierarchical) setting=(yes STRAGGLAR_ALGORITHM=stragglar-hierarchical
          STRAGGLAR_TOPOLOGY=2x2 STRAGGLAR_DEBUG=INFO) ;;
      esac
      bench_run "sweep-$mode-small" "${setting[@]}" -- "${sweep[@]}" -b 8 -e 1M -f 128
      bench_run "sweep-$mode-odd" "${setting[@]}" -- "${sweep[@]}" -b 1048604 -e 1048604
      family_used "sweep-$mode-odd" "stragglar-$mode"
    done
    stop_mps
  fi
fi

# --- 5. PyTorch DDP -----------------------------------------------------------------------------
if wanted ddp; then
  header "5. PyTorch DDP under torchrun, 2 ranks on one GPU: identical final parameters"
  reason=""
  if [[ -z $python ]]; then
    reason="python3 not found"
  elif ! torch_error=$($python -c 'import torch' 2>&1); then
    reason="import torch failed: $(echo "$torch_error" | tail -n 1)"
  elif [[ $($python -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null) == 0 ]]; then
    reason="torch sees no CUDA device"
  elif ! $python -c 'import torch.distributed as d; assert d.is_nccl_available()' 2>/dev/null; then
    reason="this torch has no NCCL backend"
  fi
  if [[ -n $reason ]]; then
    record ddp SKIP "$reason"
  elif need ddp "$preload"; then
    $python -c 'import torch; print("torch", torch.__version__, "NCCL", torch.cuda.nccl.version())'
    ddp_status=PASS
    ddp_detail=""
    for run in native preload forced device; do
      mkdir -p "$out/ddp-$run"
      env_args=()
      case $run in
        preload) env_args=("LD_PRELOAD=$preload") ;;
        forced) env_args=("LD_PRELOAD=$preload" STRAGGLAR_ALGORITHM=stragglar STRAGGLAR_MIN_BYTES=0) ;;
        device) env_args=("LD_PRELOAD=$preload" STRAGGLAR_ALGORITHM=stragglar STRAGGLAR_MIN_BYTES=0
          STRAGGLAR_EXECUTOR=device STRAGGLAR_DEBUG=INFO) ;;
      esac
      # Epochs of 4 calls, so that the 20 steps' AllReduces complete epochs and reach the trace.
      [[ $run != native ]] &&
        env_args+=(STRAGGLAR_EPOCH_CALLS=4 "STRAGGLAR_TRACE_FILE=$out/ddp-$run/trace.csv")
      run_logged "ddp-$run" "$limit" env "${env_args[@]}" "$python" -m torch.distributed.run \
        --standalone --nproc_per_node 2 "$repo/tests/gpu/ddp_check.py" --out "$out/ddp-$run" \
        --steps 20 --one-gpu
      if ((rc != 0)); then
        ddp_status=FAIL
        ddp_detail+="$run: exit $rc; "
        continue
      fi
      hashes=$(cat "$out/ddp-$run"/rank*.sha256 2>/dev/null | sort -u)
      echo "$run: $(grep -h "preload" "$out/ddp-$run"/rank0.txt 2>/dev/null)"
      if [[ $(echo "$hashes" | wc -l) != 1 || -z $hashes ]]; then
        ddp_status=FAIL
        ddp_detail+="$run: the ranks' parameters differ; "
      elif [[ $run == native ]]; then
        native_hash=$hashes
        ddp_detail+="native ${hashes:0:16}; "
      elif [[ $hashes != "${native_hash:-}" ]]; then
        ddp_status=FAIL
        ddp_detail+="$run ${hashes:0:16} differs from native; "
      else
        ddp_detail+="$run identical; "
      fi
      if [[ $run != native ]] && ! grep -q "preload loaded: yes" "$out/ddp-$run/rank0.txt"; then
        ddp_status=FAIL
        ddp_detail+="$run: libstragglar.so not loaded in the workers; "
      fi
      # Which algorithm DDP's AllReduce calls ran: forced, they must have gone through our executor.
      if [[ $run != native ]]; then
        algorithms "$out/ddp-$run/trace.csv" | tee "$out/ddp-$run/algorithms.txt"
        if [[ $run == forced || $run == device ]] &&
          ! grep -q "stragglar [1-9]" "$out/ddp-$run/algorithms.txt"; then
          ddp_status=FAIL
          ddp_detail+="$run: no call ran StragglAR; "
        fi
        if [[ $run == device ]] && ! grep -q "device executor: 2 ranks" "$out/ddp-$run.log"; then
          ddp_status=FAIL
          ddp_detail+="device: the device executor was not set up; "
        fi
      fi
    done
    record ddp "$ddp_status" "${ddp_detail%; }"
  fi
fi

# --- summary ------------------------------------------------------------------------------------
header "summary"
failed=0
printf '%-24s %-5s %s\n' check status detail
for i in "${!names[@]}"; do
  printf '%-24s %-5s %s\n' "${names[$i]}" "${statuses[$i]}" "${details[$i]}"
  [[ ${statuses[$i]} == FAIL ]] && failed=1
done
if [[ -n $python ]]; then
  for i in "${!names[@]}"; do
    printf '%s\t%s\t%s\n' "${names[$i]}" "${statuses[$i]}" "${details[$i]}"
  done | $python "$repo/scripts/gpu-results.py" summary "$out/summary.json"
fi

# A draft for docs/results/gpu-<date>.md: device, command, summary and the benchmark tables.
draft=$out/gpu-$(date +%Y-%m-%d).md
{
  echo "# GPU run $(date -u '+%Y-%m-%d')"
  echo
  echo "Command: \`scripts/gpu-check.sh $build_dir --only $only\`" \
    "(commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown))."
  echo
  echo '```'
  sed -n '/==== device ====/,/==== build/p' "$log" | sed '1d;$d'
  echo '```'
  echo
  echo "| check | status | detail |"
  echo "|---|---|---|"
  for i in "${!names[@]}"; do
    echo "| ${names[$i]} | ${statuses[$i]} | ${details[$i]//|/\\|} |"
  done
  for file in "$out"/bench-*.log; do
    [[ -e $file ]] || continue
    echo
    echo "## $(basename "$file" .log)"
    echo
    echo '```'
    grep -E "^(\\$|#|  )" "$file" | grep -v "^#  Rank" | head -40
    echo '```'
  done
  if [[ -e $out/ratios.json ]]; then
    echo
    echo "## Ratios"
    echo
    echo '```'
    sed -n '/^--- ratios/,/^$/p' "$log"
    echo '```'
  fi
} >"$draft"
echo
echo "gpu-check: results in $out (gpu-check.log, summary.json, $(basename "$draft"))"
exit "$failed"
