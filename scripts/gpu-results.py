#!/usr/bin/env python3
"""What scripts/gpu-check.sh reads back from its runs, kept out of its bash so that it runs (and is
tested: tests/gpu_results_test.py) without a GPU.

  gpu-results.py algorithms TRACE      per message size, how many of rank 0's calls ran each
                                       algorithm in a preload's trace, over all calls and the last 20
  gpu-results.py ratios OUT BASE NAME...
                                       per size, BASE's time over each NAME's, from OUT/NAME.json
                                       (stragglar-bench --json), printed and added to OUT/ratios.json
  gpu-results.py summary FILE          the checks' table (check, status, detail: one line each,
                                       tab-separated, on stdin) as FILE, {"checks": [...]}
"""

import collections
import csv
import json
import os
import sys


def algorithms(trace):
    calls = collections.defaultdict(list)
    with open(trace) as f:
        for row in csv.DictReader(f):
            if row["rank"] == "0":
                calls[int(row["bytes"])].append(row["algorithm"] or "?")
    for size, chosen in sorted(calls.items()):
        every = ", ".join(f"{a} {n}" for a, n in sorted(collections.Counter(chosen).items()))
        last = ", ".join(f"{a} {n}" for a, n in sorted(collections.Counter(chosen[-20:]).items()))
        print(f"# algorithms at {size} B: {every} (last 20: {last})")


def ratios(out, names):
    runs = {}
    for name in names:
        try:
            with open(os.path.join(out, name + ".json")) as f:
                runs[name] = json.load(f)
        except (OSError, ValueError):
            print(f"{name}: no JSON results")
    base = names[0]
    if not runs.get(base, {}).get("rows") or len(runs) < 2:
        print(f"(no ratios: {base} has no rows)")
        return
    short = {name: name.replace("bench-", "").replace("late-", "") for name in names}
    print(f"time of {base} / time of each run (> 1: faster than {base}); 'after' is the time "
          "after the straggler's arrival")
    head = f"{'size':>12} {'place':>5} {short[base] + ' (us)':>16}"
    for name in names[1:]:
        head += f" {short[name]:>12}"
    print(head)
    kept = os.path.join(out, "ratios.json")
    result = {}
    if os.path.exists(kept):
        with open(kept) as f:
            result = json.load(f)
    table = result.setdefault(f"{base} vs " + ", ".join(names[1:]), [])
    for i, row in enumerate(runs[base]["rows"]):
        for place in ("oop", "ip"):
            for metric in ("time_us", "after_arrival_us"):
                if metric not in row[place]:
                    continue
                label = row["size"] if metric == "time_us" else "after"
                line = f"{label:>12} {place:>5} {row[place][metric]:>16.1f}"
                entry = {"size": row["size"], "placement": place, "metric": metric,
                         base: row[place][metric]}
                for name in names[1:]:
                    rows = runs.get(name, {}).get("rows", [])
                    other = rows[i][place].get(metric) if i < len(rows) else None
                    if other:
                        line += f" {row[place][metric] / other:>11.3f}x"
                        entry[name] = other
                    else:
                        line += f" {'-':>12}"
                print(line)
                table.append(entry)
    with open(kept, "w") as f:
        json.dump(result, f, indent=2)


def summary(path):
    rows = [dict(zip(("check", "status", "detail"), line.rstrip("\n").split("\t", 2)))
            for line in sys.stdin if line.strip()]
    with open(path, "w") as f:
        json.dump({"checks": rows}, f, indent=2)


def main(argv):
    if len(argv) == 2 and argv[0] == "algorithms":
        algorithms(argv[1])
    elif len(argv) >= 3 and argv[0] == "ratios":
        ratios(argv[1], argv[2:])
    elif len(argv) == 2 and argv[0] == "summary":
        summary(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
