#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds into build/ (or $STRAGGLAR_BUILD_DIR).
# usage: scripts/build.sh [--target T]... [CMAKE_CONFIGURE_ARGS...]
#   --target T  builds only T (and what it needs), e.g. --target stragglar; repeatable; default all.
# The other arguments go to the CMake configure step, e.g. -DSTRAGGLAR_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
configure=()
while (($# > 0)); do
  case "$1" in
    --target)
      (($# >= 2)) || { echo "build.sh: --target needs a target" >&2; exit 2; }
      targets+=(--target "$2")
      shift 2
      ;;
    *) configure+=("$1"); shift ;;
  esac
done
scripts/install-deps.sh
build_dir=${STRAGGLAR_BUILD_DIR:-build}
generator=()
if command -v ninja >/dev/null && [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  generator=(-G Ninja)
fi
cmake -S . -B "$build_dir" "${generator[@]}" "${configure[@]+"${configure[@]}"}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]+"${targets[@]}"}"
