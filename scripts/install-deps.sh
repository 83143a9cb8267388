#!/usr/bin/env bash
# Installs the Debian packages stragglar needs, skipping what is already there.
# CUDA, NCCL and CUPTI come from the CUDA toolkit and are optional (detected by CMake).
# usage: install-deps.sh [--sanitizers]   (--sanitizers: also what scripts/sanitize.sh builds with)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev prometheus-cpp-dev
  python3 prometheus  # the Prometheus server and promtool, for the monitoring tests
  openmpi-bin libopenmpi-dev python3-mpi4py python3-numpy  # the MPI preload library and its tests
  lintian file  # build (file: for dpkg-shlibdeps) and check the Debian packages (cpack -G DEB)
)
if [[ ${1:-} == --sanitizers ]]; then
  # Clang and its sanitizer runtimes: the sanitizer trees compile in about 60% of GCC's time.
  packages+=(clang libclang-rt-dev)
elif (($# > 0)); then
  echo "usage: $0 [--sanitizers]" >&2
  exit 2
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
