#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds into build/ (or $STRAGGLAR_BUILD_DIR).
# Extra arguments go to the CMake configure step, e.g. -DSTRAGGLAR_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_dir=${STRAGGLAR_BUILD_DIR:-build}
generator=()
if command -v ninja >/dev/null && [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  generator=(-G Ninja)
fi
cmake -S . -B "$build_dir" "${generator[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
