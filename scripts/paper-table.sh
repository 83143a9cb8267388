#!/usr/bin/env bash
# Reproduces the StragglAR authors' table: Ring / StragglAR time after the straggler arrives, at
# alpha = 3 us, 450 GiB/s, 1 GiB, with the delay long enough to hide the ReduceScatter. Prints
# ours next to theirs. Needs a build (scripts/build.sh) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
stragglar=${STRAGGLAR_BUILD_DIR:-build}/bin/stragglar
printf '%6s %10s %10s %10s %12s\n' ranks ring/ours paper diff post-rounds
for pair in 4:1.127 8:1.363 16:1.565 32:1.718 64:1.826 128:1.897 256:1.941; do
  n=${pair%%:*}
  paper=${pair##*:}
  "$stragglar" sim --ranks "$n" --bytes 1GiB --alpha 3us --bandwidth 450GiB/s --delay 1s \
    --algorithms ring,stragglar --json |
    python3 -c '
import json, sys
n, paper = int(sys.argv[1]), float(sys.argv[2])
rows = {r["algorithm"]: r for r in json.load(sys.stdin)["results"]}
ours = rows["stragglar"]
ratio = rows["ring"]["after_last_arrival_s"] / ours["after_last_arrival_s"]
rounds = ours["post_arrival_rounds"]
print(f"{n:6d} {ratio:10.3f} {paper:10.3f} {100 * (ratio / paper - 1):+9.2f}% {rounds:12d}")
' "$n" "$paper"
done
