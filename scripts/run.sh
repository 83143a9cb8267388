#!/usr/bin/env bash
# The main job with its embedded defaults, from a fresh checkout. Until the host runtime lands
# (`stragglar run`), it shows the plans and the cost model on the paper's 8-GPU setting: which
# algorithm wins, by how much, and how late the straggler must be for StragglAR to pay off.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
build_dir=${STRAGGLAR_BUILD_DIR:-build}
stragglar="$build_dir/bin/stragglar"
echo "== 8 ranks, 1 GiB, straggler (rank 5) 20 ms late; alpha 3 us, 450 GiB/s"
"$stragglar" sim --ranks 8 --bytes 1GiB --straggler 5 --delay 20ms "$@"
echo
echo "== the same with the straggler on time: StragglAR must not be chosen here"
"$stragglar" sim --ranks 8 --bytes 1GiB --straggler 5 --delay 0 "$@"
echo
echo "== achieved post-arrival rounds against the lower bound L(n), every plan verified"
"$stragglar" rounds --min-ranks 2 --max-ranks 16 --verify
