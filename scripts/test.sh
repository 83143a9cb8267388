#!/usr/bin/env bash
# The whole test suite from a fresh checkout: installs what is missing, builds, runs every test.
# Three defaults, each unless the arguments set it (docs/results/ci-time-2026-11-29.md measures
# them on the 2-vCPU build machine):
# - CUDA compiled once, for Hopper (sm_90: the H100 and H200 the GPU checks run on). The default
#   build and the packages compile it for sm_80 too, which doubles the time of the slowest files
#   and tests nothing more on a machine without a GPU.
# - Line tables (-g1) instead of full debug information: what a failure's backtrace needs, at
#   three quarters of the compile time.
# - A unity build: each library compiles its files in batches, which parse the shared headers once
#   (the kernels and policy libraries in 42 s instead of 74 s).
set -euo pipefail
cd "$(dirname "$0")/.."
arguments=("$@")
# -DNAME=..., -D NAME=... or -DNAME:TYPE=... among the arguments.
given() {
  local argument previous=""
  for argument in "${arguments[@]+"${arguments[@]}"}"; do
    [[ $argument =~ ^(-D)?$1(:[A-Za-z]+)?= && ($previous == -D || $argument == -D*) ]] && return 0
    previous=$argument
  done
  return 1
}
given CMAKE_CUDA_ARCHITECTURES || arguments+=(-DCMAKE_CUDA_ARCHITECTURES=90)
given CMAKE_CXX_FLAGS_RELWITHDEBINFO ||
  arguments+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
given CMAKE_UNITY_BUILD || arguments+=(-DCMAKE_UNITY_BUILD=ON)
scripts/build.sh "${arguments[@]}"
build_dir=${STRAGGLAR_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
