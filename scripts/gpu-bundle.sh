#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs into one folder, for a GPU machine that lacks the Debian
# packages the build needs (Abseil, prometheus-cpp, ...): build here, run there.
#
# usage: scripts/gpu-bundle.sh BUILD_DIR BUNDLE_DIR
#   BUILD_DIR   a configured build with CUDA (scripts/build.sh); the GPU targets are built first
#   BUNDLE_DIR  created or refreshed (about 16 MiB): build/, an install (cmake --install, stripped)
#               with the checks' own programs (component gpu-check); deps/ (the shared
#               libraries the binaries need beyond glibc, libstdc++, zlib, CUDA and NCCL); env.sh
# On the GPU machine, in a checkout of the same commit:
#   source BUNDLE_DIR/env.sh     # LD_LIBRARY_PATH: deps/, that machine's NCCL and CUPTI
#   scripts/gpu-check.sh BUNDLE_DIR/build --prebuilt --mps --out /tmp/gpu-check
# NCCL, the CUDA runtime and CUPTI come from the GPU machine (NCCL 2.28 or later; the binaries
# load libnccl.so.2 and libcudart.so.13 by soname).
# When the build found MPI, the MPI preload, its bench and its check travel too, for a machine
# with more cores than this one (OpenMPI 4.x there: they load libmpi.so.40 by soname):
#   STRAGGLAR_BUILD_DIR=BUNDLE_DIR/build scripts/mpi-bench.sh --check
set -euo pipefail
(($# == 2)) || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
cd "$(dirname "$0")/.."
build_dir=$1
bundle=$2
[[ -f $build_dir/CMakeCache.txt ]] || { echo "gpu-bundle: $build_dir is not a configured build" >&2; exit 2; }

# The bundle is an install (cmake/install.cmake) of what the checks run, plus the checks' own
# programs (the gpu-check component, tests/CMakeLists.txt): stripped, no RUNPATH.
components=(core cuda gpu-check)
targets=(stragglar stragglar_preload stragglar-bench stragglar-gpu-reduce-check stragglar-gpu-link-rate
  gpu_timer_test nccl_passthrough_check nccl_local_load_check nccl_passthrough_module pipeline_check watchdog_check slow_socket)
# Asked of the build's target list, so that a failing MPI build stops here instead of passing for
# a build without MPI.
listed=$(cmake --build "$build_dir" --target help)  # not piped: grep -q would cut it short
if [[ $listed == *stragglar-mpi-bench* ]]; then
  components+=(mpi)
  targets+=(stragglar_mpi stragglar-mpi-bench mpi_allreduce_check)
else
  echo "gpu-bundle: no MPI targets in $build_dir (MPI not found at configure); bundling without"
fi
# Without CUDA these targets do not exist, and the build says so.
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
rm -rf "$bundle/build" "$bundle/deps"
mkdir -p "$bundle/deps"
for component in "${components[@]}"; do
  cmake --install "$build_dir" --prefix "$bundle/build" --component "$component" --strip >/dev/null
done

# Everything ldd resolves except what any Linux with CUDA and NCCL (and MPI) has or must bring.
# MPI's libraries and their own needs come from the machine's OpenMPI, which was built with them.
system='/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libz|libnccl|libcudart|libcuda'
system+='|libmpi|libopen-rte|libopen-pal|libhwloc|libevent_core-[0-9.]+|libevent_pthreads-[0-9.]+'
system+='|libudev)\.so'
for file in "$bundle"/build/bin/* "$bundle"/build/lib/*.so "$bundle"/build/lib/stragglar/*.so; do
  ldd "$file"
done |
  awk '/=> \// {print $3}' | grep -Ev "$system" | sort -u |
  while read -r dependency; do cp -L "$dependency" "$bundle/deps/"; done

cat >"$bundle/env.sh" <<'EOF'
# Sourced on the GPU machine: the bundle's libraries, then that machine's NCCL and CUPTI.
bundle_deps=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/deps
nccl_dir=""
for dir in /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib64; do
  [[ -e $dir/libnccl.so.2 ]] && { nccl_dir=$dir; break; }
done
if [[ -z $nccl_dir ]]; then  # PyTorch's pip wheel
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
fi
cupti_dir=$(dirname "$(find /usr/local/cuda/ /usr/local/cuda*/ -name 'libcupti.so*' 2>/dev/null | head -n 1)" 2>/dev/null || true)
export LD_LIBRARY_PATH=$bundle_deps${nccl_dir:+:$nccl_dir}${cupti_dir:+:$cupti_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "gpu bundle: NCCL from ${nccl_dir:-nowhere (not found)}, CUPTI from ${cupti_dir:-nowhere (not found)}"
EOF
echo "gpu-bundle: $(du -sh "$bundle" | cut -f1) in $bundle; on the GPU machine:"
echo "  source $bundle/env.sh && scripts/gpu-check.sh $bundle/build --prebuilt --mps"
