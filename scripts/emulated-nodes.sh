#!/usr/bin/env bash
# Issue 20's emulated machine check: `stragglar run --topology` on N×G emulated nodes, several
# sizes, a few runs each. Per run it prints the baseline (on nodes, the hierarchical ring) as
# measured and as modelled, and the time after the last arrival of the adaptive phase's calls that
# ran StragglAR (from its trace), next to the baseline's. Needs a build (scripts/build.sh) and
# python3.
# The last column is what the link probe measured, which the model prices with.
# Usage:
#   [QUEUES=rounds|per-class] scripts/emulated-nodes.sh [TOPOLOGY] [RUNS] [SIZES...]
#   (default: rounds 4x4 3 1MiB 4MiB 16MiB). QUEUES is `stragglar run --queues`: how every rank
#   runs its plans, and how the policy and the model line price them.
set -euo pipefail
cd "$(dirname "$0")/.."
stragglar=${STRAGGLAR_BUILD_DIR:-build}/bin/stragglar
topology=${1:-4x4}
if [[ ! $topology =~ ^([0-9]+)x([0-9]+)$ ]]; then
  echo "emulated-nodes: topology must be NxG, e.g. 4x4; got $topology" >&2
  exit 2
fi
ranks=$((BASH_REMATCH[1] * BASH_REMATCH[2]))
straggler=$((ranks > 5 ? 5 : ranks - 1))  # `stragglar run`'s default, where the machine has it
queues=${QUEUES:-rounds}
runs=${2:-3}
shift $(($# < 2 ? $# : 2))
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1MiB 4MiB 16MiB)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "| size | run | baseline measured | model | measured ÷ model | StragglAR after arrival (calls) | baseline ÷ StragglAR | links measured (inside; between nodes) |"
echo "|---|---|---|---|---|---|---|---|"
for size in "${sizes[@]}"; do
  for run in $(seq 1 "$runs"); do
    "$stragglar" run --topology "$topology" --inter-alpha 200us --inter-bandwidth 1GB/s --queues "$queues" \
      --iterations 96 --epoch-calls 8 --bytes "$size" --delay 20ms --straggler "$straggler" --seed "$run" \
      --summary-json "$work/summary.json" --trace "$work/trace.csv" >/dev/null
    python3 - "$work/trace.csv" "$work/summary.json" "$size" "$run" <<'PY'
import collections, csv, json, sys
calls = collections.defaultdict(list)
for row in csv.DictReader(open(sys.argv[1])):
    calls[int(row["call"])].append(row)
after = []  # StragglAR's calls: last completion - last arrival
for rows in calls.values():
    if rows[0]["algorithm"] != "stragglar":
        continue
    arrivals = [float(r["arrival_s"]) for r in rows]
    ends = [float(r["arrival_s"]) + float(r["duration_s"]) for r in rows]
    after.append(max(ends) - max(arrivals))
summary = json.load(open(sys.argv[2]))
baseline = summary["baseline"]
def link(model):
    return f"{model['alpha_s'] * 1e6:.0f} us + {model['bandwidth_Bps'] / 1e9:.2f} GB/s"
between = summary.get("topology", {}).get("inter_node_measured")
links = f"{link(summary['link'])}; {link(between) if between else 'as configured'}"
measured, model = baseline["mean_s"], baseline["model_s"]
if after:
    mean = sum(after) / len(after)
    ours, ratio = f"{mean * 1e3:.2f} ms ({len(after)})", f"{measured / mean:.2f}"
else:
    ours, ratio = "none ran", "-"
print(f"| {sys.argv[3]} | {sys.argv[4]} | {measured * 1e3:.2f} ms | {model * 1e3:.2f} ms | "
      f"{measured / model:.2f} | {ours} | {ratio} | {links} |")
PY
  done
done
