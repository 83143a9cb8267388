#!/usr/bin/env bash
# The main job with its embedded defaults, from a fresh checkout: `stragglar run` (8 ranks as
# threads, rank 5 persistently ~20 ms late, 16 MiB float32 AllReduce per step), Ring baseline vs the
# adaptive runtime on the same data and delays. Extra arguments go to `stragglar run`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what it runs: the CLI, not the test suites (a fraction of the build).
scripts/build.sh --target stragglar >&2  # its progress on stderr, the run on stdout
build_dir=${STRAGGLAR_BUILD_DIR:-build}
exec "$build_dir/bin/stragglar" run --summary-json "$build_dir/run-summary.json" "$@"
