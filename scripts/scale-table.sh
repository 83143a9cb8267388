#!/usr/bin/env bash
# The scale table of docs/scale-model.md: after a late straggler arrives (1 s, so every plan's
# pre-arrival phase is hidden), the best baseline's time divided by the best StragglAR-family
# plan's, from `stragglar sim`. Above 1: StragglAR's family is faster. Flat machines compare with
# Ring and Halving-Doubling; machines of N nodes of 8 with NCCL's ring and tree as well (closed
# forms, docs/scale-model.md) and the hierarchical ring (a plan). The family is flat, log-depth and (on nodes) hierarchical StragglAR;
# flat StragglAR at 4096 ranks, a plan of 25 million transfers, is left out, which the label says:
# it loses to log-depth StragglAR there. (Ring at 4096 ranks is priced by its ring run, without
# its 33 million transfers.) The last rows price every plan with per-class queues. Needs a build (scripts/build.sh) and python3.
# Usage:
#   scripts/scale-table.sh [SIZES...]        (default: 64MiB 1GiB)
set -euo pipefail
cd "$(dirname "$0")/.."
stragglar=${STRAGGLAR_BUILD_DIR:-build}/bin/stragglar
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(64MiB 1GiB)

# One cell: "ratio (best of the family / best baseline)".
cell() {
  "$stragglar" sim "$@" --delay 1s --json | python3 -c '
import json, sys
rows = json.load(sys.stdin)["results"]
def best(family):
    return min((r for r in rows if r["family"] == family), key=lambda r: r["after_last_arrival_s"])
ours, theirs = best("stragglar"), best("baseline")
print(f"{theirs['"'"'after_last_arrival_s'"'"'] / ours['"'"'after_last_arrival_s'"'"']:.2f} "
      f"({ours['"'"'algorithm'"'"']} / {theirs['"'"'algorithm'"'"']})")
'
}

row() {  # label, then sim flags per size
  local label=$1
  shift
  local line="| $label |"
  for size in "${sizes[@]}"; do line+=" $(cell "$@" --bytes "$size") |"; done
  echo "$line"
}

header="| machine |"
rule="|---|"
for size in "${sizes[@]}"; do
  header+=" $size |"
  rule+="---|"
done
echo "$header"
echo "$rule"
for n in 8 64 256 1024; do row "$n ranks, flat" --ranks "$n"; done
row "4096 ranks, flat (no flat StragglAR)" --ranks 4096 \
  --algorithms ring,halving-doubling,stragglar-log-depth
family=stragglar-hierarchical,stragglar-log-depth
for nodes in 2 8 32 64 512; do
  row "${nodes}x8" --topology "${nodes}x8" \
    --algorithms "ring,halving-doubling,nccl-ring,nccl-tree,ring-hierarchical,$family"
done
# The same machines priced as executors with a send and a receive queue per link class would run
# the plans (--queues per-class; none does yet): hierarchical StragglAR then also moves its shards
# in pieces, overlapping the rails (docs/scale-model.md, "Per-class queues").
for nodes in 2 8 32 64; do
  row "${nodes}x8, per-class queues" --topology "${nodes}x8" --queues per-class \
    --algorithms "ring,halving-doubling,nccl-ring,nccl-tree,ring-hierarchical,$family"
done
