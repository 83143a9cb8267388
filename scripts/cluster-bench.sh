#!/usr/bin/env bash
# The headline benchmark: StragglAR against the MPI library's Allreduce, Ring and
# Halving-Doubling on an emulated cluster (scripts/cluster.sh) of 4x1, 8x1 and 4x2 hosts, sizes
# 1-16 MiB, the last rank 0, about the pre-arrival phase and twice that late. Writes
# docs/results/cluster-DATE.{md,json,png}. Every option is scripts/cluster_bench.py's (--help);
# e.g. a quick look: scripts/cluster-bench.sh --shapes 4x1:200mbit --sizes 4MiB --runs 1; a slow
# link: --shapes 4x1:100mbit:h3=20mbit (host 3's link at 20 Mbit/s, nobody late and one late);
# a second late rank: 4x1:100mbit:h3=20mbit:r1@0.5 (rank 1 late by half the last rank's delay).
# Needs root and a build (scripts/build.sh); installs matplotlib for the plot if missing. Takes
# hours with the defaults: keep the machine otherwise idle, the hosts share its cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${STRAGGLAR_BUILD_DIR:-build}
for file in "$build_dir/bin/stragglar-mpi-bench" "$build_dir/lib/libstragglar_mpi.so"; do
  [[ -f $file ]] || {
    echo "cluster-bench: $file not found; build first (scripts/build.sh)" >&2
    exit 1
  }
done
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "cluster-bench: installing python3-matplotlib for the plot"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    python3-matplotlib >/dev/null || echo "cluster-bench: no matplotlib: no plot" >&2
fi
exec /usr/bin/python3 scripts/cluster_bench.py "$@"
