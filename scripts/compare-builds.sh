#!/usr/bin/env bash
# Two builds side by side on this machine, interleaved so that drift hits both alike: the
# deterministic outputs (scenario suite, a replay) must be identical; policy_bench,
# executor_bench and `stragglar run`'s speedup are measured.
# usage: scripts/compare-builds.sh BEFORE_BIN AFTER_BIN OUT_DIR TRACE_CSV
#   e.g. a build of the earlier commit's bin/, build/bin, /tmp/compare, a trace of
#   `stragglar run --ranks 4 --straggler 2 --delay 5ms --bytes 256KiB --iterations 96
#   --epoch-calls 16 --trace FILE` (replayed with --epoch-calls 16).
set -u
B=$(realpath "$1"); A=$(realpath "$2"); M=$3; TRACE=$(realpath "$4")
mkdir -p "$M" && cd "$M" && cp "$TRACE" trace4.csv
echo "== scenarios (deterministic)"
$B/stragglar scenarios --json > sc-before.json 2>/dev/null; $A/stragglar scenarios --json > sc-after.json 2>/dev/null
cmp sc-before.json sc-after.json && echo "scenarios: identical JSON ($(wc -c < sc-after.json) bytes)"
echo "== replay (deterministic)"
$B/stragglar replay --trace trace4.csv --epoch-calls 16 --json > rp-before.json
$A/stragglar replay --trace trace4.csv --epoch-calls 16 --json > rp-after.json
# "exchange" (immediate or deferred) was added to the report with the one protocol.
python3 -c "import json; a, b = (json.load(open(f)) for f in ('rp-before.json', 'rp-after.json')); \
[d.pop('exchange', None) for d in (a, b)]; print('replay: identical' if a == b else 'replay: DIFFERENT')"
echo "== policy_bench (interleaved, 3 rounds)"
for i in 1 2 3; do
  $B/policy_bench --benchmark_format=json --benchmark_min_time=0.3 > pb-before-$i.json 2>/dev/null
  $A/policy_bench --benchmark_format=json --benchmark_min_time=0.3 > pb-after-$i.json 2>/dev/null
done
echo "== executor_bench (interleaved, 2 rounds)"
for i in 1 2; do
  $B/executor_bench --benchmark_format=json > eb-before-$i.json 2>/dev/null
  $A/executor_bench --benchmark_format=json > eb-after-$i.json 2>/dev/null
done
echo "== stragglar run (interleaved, 3 rounds, defaults)"
for i in 1 2 3; do
  $B/stragglar run --summary-json run-before-$i.json > /dev/null 2>&1
  $A/stragglar run --summary-json run-after-$i.json > /dev/null 2>&1
done
python3 - <<'PY'
import glob, json, statistics
def times(pattern, key="real_time"):
    out = {}
    for path in sorted(glob.glob(pattern)):
        for bench in json.load(open(path))["benchmarks"]:
            out.setdefault(bench["name"], []).append(bench[key])
    return out
for title, prefix in (("policy_bench, us per epoch", "pb"), ("executor_bench, ms", "eb")):
    before, after = times(f"{prefix}-before-*.json"), times(f"{prefix}-after-*.json")
    print(f"\n{title} (median of the interleaved runs)")
    for name in before:
        b, a = statistics.median(before[name]), statistics.median(after[name])
        print(f"  {name:62s} before {b:9.2f}  after {a:9.2f}  after/before {a / b:5.2f}")
print("\nstragglar run (defaults): speedup, adaptive and baseline mean latency")
for side in ("before", "after"):
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"run-{side}-*.json"))]
    print(f"  {side:6s} speedup {[round(r['speedup'], 2) for r in runs]}  adaptive ms "
          f"{[round(r['adaptive']['mean_s'] * 1e3, 1) for r in runs]}  baseline ms "
          f"{[round(r['baseline']['mean_s'] * 1e3, 1) for r in runs]}  correct "
          f"{all(r['correct'] for r in runs)}")
PY
