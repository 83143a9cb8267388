#!/usr/bin/env bash
# The whole test suite from a fresh checkout: installs what is missing, builds, runs every test.
# The CUDA code is compiled once, for Hopper (sm_90: the H100 and H200 the GPU checks run on),
# unless the arguments say otherwise: the default build and the packages compile it for sm_80 too,
# which doubles the time of the slowest files and tests nothing more on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
arguments=("$@")
[[ " $* " == *" -DCMAKE_CUDA_ARCHITECTURES="* ]] || arguments+=(-DCMAKE_CUDA_ARCHITECTURES=90)
scripts/build.sh "${arguments[@]}"
build_dir=${STRAGGLAR_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
