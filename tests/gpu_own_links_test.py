#!/usr/bin/env python3
"""scripts/gpu-own-links.py against made-up programs, so that its logic runs without a GPU.

The fake link-rate program gives each process ctas x 10 GB/s, capped by a memory of
FAKE_MEMORY_GBPS shared by the processes of one window (they register in a folder beside the
start file); the fake bench prices each family on one rank's rate (100 us per MiB over the CTA
count) after the straggler's arrival, Ring and Halving-Doubling as 2(n-1)/n of the buffer,
StragglAR as (n - 2 + log2 n)/(n - 1). Each number the script reports follows from these: the CTA
count chosen by the 85% rule, the delays it passes (1x and 2x the phase it derives from Ring), the
ratios, the goals it says were missed, and a wrong result failing the run."""

import json
import math
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "gpu-own-links.py")

FAKE_RATE = r'''
import os, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
ctas, seconds = int(args["ctas"]), float(args["seconds"])
peers = 1
start_file = args.get("start_file")
if start_file:
    folder = start_file + ".peers"
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, str(os.getpid())), "w").close()
print("link-rate: ready", flush=True)
if start_file:
    while not os.path.exists(start_file):
        time.sleep(0.001)
    start = float(open(start_file).read())
    time.sleep(max(0.0, start - time.time()))
    peers = len(os.listdir(start_file + ".peers"))
alone = 10.0 * ctas
memory = float(os.environ["FAKE_MEMORY_GBPS"])
rate = alone * min(1.0, memory / (peers * alone))
print(f"link-rate: ctas {ctas}, 256 MiB, 9 copies in {seconds:.3f} s: {rate:.1f} GB/s")
'''

FAKE_BENCH = r'''
import json, math, os, sys
argv = sys.argv[1:]
value = lambda flag, default=None: argv[argv.index(flag) + 1] if flag in argv else default
n = int(value("--ranks"))
sizes = [int(s[:-1]) for s in value("--sizes").split(",")]  # in MiB
per_mib = float(value("--delay_us_per_mib", "0"))
family = os.environ.get("STRAGGLAR_ALGORITHM", "adapt")
us = 100.0 / int(os.environ["STRAGGLAR_IPC_BLOCKS"])  # per MiB on one rank's link
ring = 2 * (n - 1) / n
flat = (n - 2 + math.ceil(math.log2(n))) / (n - 1)
factor = {"ring": ring, "halving-doubling": 1.05 * ring, "stragglar": flat,
          "stragglar-log-depth": 1.1 * flat}
factor["adapt"] = float(os.environ.get("FAKE_ADAPT_FACTOR", "1.02")) * min(factor.values())
with open(os.environ["FAKE_CALLS"], "a") as log:
    log.write(json.dumps({"family": family, "ranks": n, "per_mib": per_mib,
                          "warmup": int(value("-w")), "state": os.environ["STRAGGLAR_STATE_FILE"],
                          "ctas": os.environ["STRAGGLAR_IPC_BLOCKS"],
                          "share": os.environ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"]}) + "\n")
wrong = 1 if os.environ.get("FAKE_WRONG") == family else 0
rows = []
for size in sizes:
    after = factor[family] * size * us
    place = {"time_us": after + per_mib * size, "wrong": wrong}
    if per_mib > 0:
        place["after_arrival_us"] = after
    rows.append({"size": size << 20, "oop": place, "ip": place})
json.dump({"rows": rows}, open(value("--json"), "w"))
sys.exit(1 if wrong else 0)
'''


def run(work, ranks="4,8", ctas="1,2,4", **env):
    rate, bench = os.path.join(work, "rate.py"), os.path.join(work, "bench.py")
    for path, text in ((rate, FAKE_RATE), (bench, FAKE_BENCH)):
        with open(path, "w") as f:
            f.write(f"#!{sys.executable}\n{text}")
        os.chmod(path, 0o755)
    out = os.path.join(work, "out")
    calls = os.path.join(work, "calls.jsonl")
    environment = dict(os.environ, FAKE_MEMORY_GBPS="90", FAKE_CALLS=calls, **env)
    result = subprocess.run(
        [sys.executable, SCRIPT, "--bench", bench, "--rate", rate, "--preload", "/none.so",
         "--out", out, "--ranks", ranks, "--ctas", ctas, "--sizes", "16M,64M",
         "--seconds", "0.05"], capture_output=True, text=True, env=environment, timeout=120)
    with open(os.path.join(out, "own-links.json")) as f:
        report = json.load(f)
    with open(calls) as f:
        made = [json.loads(line) for line in f]
    return result, report, made


def check(condition, what):
    if not condition:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}")


def main():
    with tempfile.TemporaryDirectory() as work:
        result, report, calls = run(work)
        check(result.returncode == 0, f"exit 0 ({result.stdout[-300:]}{result.stderr[-300:]})")
        # 4 ranks: 1 and 2 CTAs fit a 90 GB/s memory (40, 80), 4 do not (160: 0.56 of alone);
        # 8 ranks: only 1 (80).
        bound = {(row["ranks"], row["ctas"]): row["link_bound"] for row in report["link_check"]}
        check(bound == {(4, 1): True, (4, 2): True, (4, 4): False, (8, 1): True, (8, 2): False,
                        (8, 4): False}, f"the 85% rule per CTA count: {bound}")
        check(report["tables"]["4"]["ctas"] == 2 and report["tables"]["8"]["ctas"] == 1,
              "the largest link-bound CTA count is used")
        for n, ctas in ((4, 2), (8, 1)):
            # Ring's 2(n-1)/n per MiB at 100/ctas us, as a ReduceScatter of n - 1: (n-2)/(n-1).
            phase = 100.0 / ctas * (n - 2) / (n - 1)
            late = [c for c in calls if c["ranks"] == n and c["per_mib"] > 0]
            check(sorted({round(c["per_mib"], 2) for c in late}) ==
                  [round(phase, 2), round(2 * phase, 2)], f"{n} ranks late by 1x and 2x the phase")
            check(len(late) == 10 and all(c["ctas"] == str(ctas) for c in late) and
                  all(c["share"] == str(100 // n) for c in calls if c["ranks"] == n),
                  f"{n} ranks: five families twice, each with the chosen CTAs and SM share")
        # The adaptive mode timed once it has learned each size; every run keeps its own state.
        check(all(c["warmup"] == (96 if c["family"] == "adapt" else 32) for c in calls),
              "warm-up: 96 calls for adapt, 32 for the forced families")
        check(len({c["state"] for c in calls}) == len(calls), "a state file per run")
        table = open(os.path.join(work, "out", "own-links.md")).read()
        ring, flat = 2 * 7 / 8 * 6400, (6 + 3) / 7 * 6400  # 8 ranks, 64 MiB at 100 us per MiB
        cells = " | ".join(f"{us:.0f}" for us in (ring, 1.05 * ring, flat, 1.1 * flat, 1.02 * flat))
        check(f"| 1× | 64 MiB | {cells} | {ring / flat:.2f}× | 1.02 |" in table,
              "the 8-rank row at 64 MiB: every family, the gain and adapt's ratio")
        check(report["misses"] == [], "no goal missed at 1.36x and adapt within 2%")

    with tempfile.TemporaryDirectory() as work:
        # One CTA count: the link check is the first run's, and these look only at the goals.
        result, report, _ = run(work, ranks="4", ctas="1", FAKE_ADAPT_FACTOR="1.2")
        check(result.returncode == 0 and len(report["misses"]) == 4 and
              all("adapt 1.20×" in miss for miss in report["misses"]),
              "adapt 20% off the best forced is a goal missed at every point, not a failure")

    with tempfile.TemporaryDirectory() as work:
        result, report, _ = run(work, ranks="4", ctas="1", FAKE_WRONG="stragglar")
        check(result.returncode == 1 and any("own-4-late1x-stragglar: exit 1, 2 rows, 2 wrong" in f
                                             for f in report["failures"]),
              "a wrong result fails the run and names it")
    print("gpu-own-links: ok")


if __name__ == "__main__":
    main()
