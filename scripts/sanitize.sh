#!/usr/bin/env bash
# Builds the CPU parts under AddressSanitizer+UBSan and under ThreadSanitizer and runs the suites
# that exercise threads, buffers and the runtime (CI runs this after the main test suite). Each
# tree builds only the targets its suites need, and no CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --sanitizers
# Clang: its sanitizer trees build in 60% of GCC's time (device_executor_test.cc under ASan: 27 s
# against 44 s; docs/results/ci-time-2026-11-29.md), and its ASan and TSan are the reference ones.
compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
# Suites that run more than one thread: both sanitizers.
threaded=(host_transport_test host_executor_test runtime_test communicator_test metrics_test
  log_test link_profiler_test tcp_report_transport_test device_rank_test device_executor_test
  link_class_queues_test call_watchdog_test link_probe_test call_gate_test)
# Suites on one thread that touch memory a sanitizer must watch: the readers of what users hand in
# (fuzzed), the buffers and the reductions over them, and the programs that index into them.
# AddressSanitizer+UBSan only: ThreadSanitizer has nothing to find in them. The pure model suites
# (plans, schedules, the simulators, the policy and its calibration, the pipeline advisor) run only
# in the main suite: their code runs under AddressSanitizer here all the same, inside the executor,
# runtime and communicator suites and the MPI preload, and their 17 programs took a fifth of this
# tree's compile time (172 of 922 CPU-s under GCC; docs/results/ci-time-2026-11-29.md).
single_threaded=(program_test reduce_test replay_test trace_export_test env_config_test
  device_program_test exact_data_test state_file_test agreed_settings_test fuzz_inputs_test)
for sanitizer in address thread; do
  dir="build-${sanitizer}"
  echo "== ${sanitizer} sanitizer (${dir})"
  suites=("${threaded[@]}")
  # The MPI preload: its executors under ASan; under TSan the MPI_THREAD_MULTIPLE program (OpenMPI
  # is not built for TSan: tests/mpi/run_check.sh leaves its own accesses unchecked).
  mpi=ON
  mpi_targets=(stragglar_mpi mpi_threads_check)
  if [[ $sanitizer == address ]]; then
    suites+=("${single_threaded[@]}")
    mpi_targets+=(mpi_allreduce_check mpi_protocol_check)
  fi
  # -O1 -g1 (line tables): what a sanitizer report needs, at about half the compile time of -O2 -g
  # and 4% more test time (docs/performance.md, "CI time").
  # A unity build, as scripts/test.sh's: the libraries in batches that parse shared headers once.
  cmake -S . -B "$dir" -G Ninja "${compilers[@]}" -DSTRAGGLAR_SANITIZE="$sanitizer" \
    -DSTRAGGLAR_CUDA=OFF -DCMAKE_UNITY_BUILD=ON \
    -DSTRAGGLAR_BUILD_BENCHMARKS=OFF -DSTRAGGLAR_MPI="$mpi" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target "${suites[@]}" "${mpi_targets[@]}"
  pattern=$(IFS='|'; echo "${suites[*]}")
  if [[ $sanitizer == address ]]; then
    # The MPI preload and its executors (round by round, segmented, on per-class queues) on exact
    # data; tests/mpi/run_check.sh loads the ASan runtime first. The mpi4py loop preloads the
    # library into Python, which ASan cannot follow. Each executor path runs once here: not the
    # repeats of one that another test runs at its largest shape (LABELS repeat,
    # tests/CMakeLists.txt: each launch costs 5-30 s under ASan on 2 cores). Nor mpi.outputs,
    # whose files the suites' writers make here too (it reads them with the command-line tool,
    # which this tree does not build). Nor the second run of a path that another test here
    # already takes through the preload: Ring and Halving-Doubling at 8 ranks (their plans are
    # data for the one executor that mpi.auto.np8, mpi.stragglar.np8 and the log-depth and
    # hierarchical runs take through 8 ranks, and the verifier checks every plan's indices), the
    # network messages and per-class queues of a second family, pieces without segments, the
    # lifetimes and errors of a second and third family, 3 ranks of the protocol, and the
    # settings that differ across ranks or turn the policy off, whose agreement
    # (agreed_settings_test, env_config_test) runs here on its own: 84 of the 186 s these
    # programs took under ASan (2026-11-30). The main suite runs them all.
    mpi_tests='mpi\..*'
    asan_repeats='train|outputs|threads\..*|ring\.np8|halving-doubling\.np8|queues-auto\.np8'
    asan_repeats+='|network-messages-ring\.np6|stragglar-pieces8\.np4|segments-ring\.np3'
    asan_repeats+='|lifetimes\.(ring|stragglar)|errors\.(ring|auto)|protocol\.np3|mode-.*'
    asan_repeats+='|settings-differ\..*|segment-differs|queues-differ|network-message-differs'
    asan_repeats+='|topology-misfit'
    skipped=(-LE repeat -E "^mpi\.(${asan_repeats})\$")
  else
    # Threads on communicators of their own, the preload's shared state under TSan.
    mpi_tests='mpi\.threads\.tsan.*'
    skipped=()
  fi
  # One ctest run for the suites and the MPI programs, so that the last of the one share the cores
  # with the other's. Stop at the first report so CI fails loudly and the report is the last thing
  # printed.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir "$dir" -R "^((${pattern})\.|${mpi_tests}\$)" "${skipped[@]}" \
    --output-on-failure -j "$(nproc)"
done
