#!/usr/bin/env python3
"""The cluster benchmark's report (scripts/cluster_bench.py --report-from), without a cluster.

Two parts of made-up samples, the forced candidates in one and adapt in the other, joined into one
report: each part's command is named, the goals table gives the verdict the numbers call for (a
point met, and one missed for each goal), a shape no part reached says so, the notes are carried,
and bad options get one line.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "scripts", "cluster_bench.py")
MIB = 1 << 20

# Seconds after the last arrival, every call alike, per delay and candidate. At 0: adapt 1.029x
# the best baseline (the 2% goal missed). At 44 ms: adapt 1.08x the best forced (the 5% goal
# missed); StragglAR 1.4x Ring. At 88 ms: StragglAR 1.25x (the 1.3x goal missed); adapt matches it.
# At 132 ms every goal met.
LATENCY = {
    0.0: {"native": 0.130, "ring": 0.070, "halving-doubling": 0.072, "stragglar": 0.080,
          "stragglar-log-depth": 0.140, "adapt": 0.072},
    0.044: {"native": 0.120, "ring": 0.070, "halving-doubling": 0.071, "stragglar": 0.050,
            "stragglar-log-depth": 0.090, "adapt": 0.054},
    0.088: {"native": 0.120, "ring": 0.070, "halving-doubling": 0.070, "stragglar": 0.056,
            "stragglar-log-depth": 0.060, "adapt": 0.056},
    0.132: {"native": 0.120, "ring": 0.070, "halving-doubling": 0.070, "stragglar": 0.048,
            "stragglar-log-depth": 0.055, "adapt": 0.049},
}
# One host's link slower (4x1:100mbit:h3=20mbit): nobody late, adapt within 3% of StragglAR
# around it but only 1.22x faster than the best baseline (the slow-link goal of 1.3x missed); the
# last rank late by a phase, adapt 1.125x the best forced.
SLOW_SHAPE = "4x1 h3 at 20mbit"
SLOW_LATENCY = {
    0.0: {"native": 0.900, "ring": 0.500, "halving-doubling": 0.450, "stragglar": 0.360,
          "adapt": 0.370},
    0.088: {"native": 1.000, "ring": 0.500, "halving-doubling": 0.500, "stragglar": 0.400,
            "adapt": 0.450},
}
# A link only 2x slower (4x1:100mbit:h2=50mbit), nobody late: the 1.3x goal is the for a
# link 5x slower and is not asked here (StragglAR around it is itself 1.16x Ring, measured); adapt
# within 2% of StragglAR forced meets the rest.
MILD_SHAPE = "4x1 h2 at 50mbit"
MILD_LATENCY = {
    0.0: {"native": 0.450, "ring": 0.300, "halving-doubling": 0.310, "stragglar": 0.260,
          "adapt": 0.265},
}
EXPECTED = {
    "| 4x1 h2 at 50mbit | 1 MiB | 0.0 ms | 1.019 |": "| 0.883 | met |",
    "| 4x1 h3 at 20mbit | 1 MiB | 0.0 ms | 1.028 |":
        "| 0.822 | MISSED: slow link: best baseline ÷ adapt < 1.3 |",
    "| 4x1 h3 at 20mbit | 1 MiB | 88.0 ms | 1.125 |": "| – | MISSED: adapt |",
    "| 4x1 | 1 MiB | 0.0 ms | 1.029 |": "| 1.029 | MISSED: nobody late |",
    "| 4x1 | 1 MiB | 44.0 ms | 1.080 |": "| – | MISSED: adapt |",
    "| 4x1 | 1 MiB | 88.0 ms | 1.000 |": "| – | MISSED: speedup < 1.3 |",
    "| 4x1 | 1 MiB | 132 ms | 1.021 |": "| – | met |",
}


def sample(delay, candidate, repetition, shape="4x1", latency=None):
    latency = latency or LATENCY
    calls = 3
    mix = {"stragglar" if delay else "ring": calls} if candidate == "adapt" else {candidate: calls}
    return {"shape": shape, "size": MIB, "delay_s": delay, "candidate": candidate,
            "repetition": repetition, "mix": mix,
            "native": {"latency": [latency[delay]["native"]] * calls,
                       "time": [latency[delay]["native"] + delay] * calls},
            "preload": {"latency": [latency[delay][candidate]] * calls,
                        "time": [latency[delay][candidate] + delay] * calls}}


def part(path, argv, candidates, verdict, shape="4x1", latency=None):
    samples = [sample(delay, candidate, repetition, shape, latency)
               for delay in (latency or LATENCY) for candidate in candidates
               for repetition in range(2)]
    with open(path, "w") as file:
        json.dump({"parts": [{"argv": argv, "commit": "abc1234", "started": "2026-11-28T03:02",
                              "ended": "04:00"}],
                   "verdicts": {shape: verdict}, "samples": samples}, file)


def bench(*args):
    # A build folder that is not there: an argument the bench wrongly accepted ends in its "build
    # first" error, never in a cluster brought up and measured.
    environment = dict(os.environ, STRAGGLAR_BUILD_DIR="no-such-build")
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True,
                          env=environment)


def main():
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    with tempfile.TemporaryDirectory() as work:
        forced = os.path.join(work, "forced.json")
        adapt = os.path.join(work, "adapt.json")
        notes = os.path.join(work, "notes.md")
        part(forced, ["cluster_bench.py", "--part", "forced"],
             ["ring", "halving-doubling", "stragglar", "stragglar-log-depth"],
             "link-bound: first check")
        part(adapt, ["cluster_bench.py", "--part", "adapt"], ["adapt"], "link-bound: second check")
        slow = os.path.join(work, "slow.json")
        part(slow, ["cluster_bench.py", "--part", "slow"],
             ["ring", "halving-doubling", "stragglar", "adapt"], "link-bound: slow", SLOW_SHAPE,
             SLOW_LATENCY)
        mild = os.path.join(work, "mild.json")
        part(mild, ["cluster_bench.py", "--part", "mild"],
             ["ring", "halving-doubling", "stragglar", "adapt"], "link-bound: mild", MILD_SHAPE,
             MILD_LATENCY)
        with open(notes, "w") as file:
            file.write("A note that stays with the report.\n")
        out = os.path.join(work, "report")
        result = bench("--shapes",
                       "4x1:200mbit,8x1:100mbit,4x1:100mbit:h3=20mbit,4x1:100mbit:h2=50mbit,"
                       "4x1:200mbit:h3=40mbit:r1@0.5",
                       "--sizes", "1MiB", "--report-from", forced, adapt, slow, mild, "--notes",
                       notes, "--out", out)
        expect(result.returncode == 0, f"--report-from exited {result.returncode}: "
               f"{result.stderr.strip()}")
        if result.returncode == 0:
            with open(out + ".md") as file:
                text = file.read()
            lines = text.splitlines()
            for command in ("--part forced", "--part adapt"):
                expect(any(command in line and "commit abc1234" in line for line in lines),
                       f"no line names the part `{command}` and its commit")
            for start, end in EXPECTED.items():
                found = [line for line in lines if line.startswith(start)]
                expect(len(found) == 1 and found[0].endswith(end),
                       f"goals row {start!r}: want it to end {end!r}, got {found}")
            expect("Link check: link-bound: first check; link-bound: second check" in text,
                   "the link checks of both parts are not both shown")
            expect("Not measured: no run reached this shape." in text,
                   "8x1, which no part reached, is not said to be unmeasured")
            expect("A note that stays with the report." in text, "the notes are not carried")
            with open(out + ".json") as file:
                joined = json.load(file)
            expect(len(joined["parts"]) == 4 and len(joined["samples"]) == 64,
                   f"the joined JSON holds {len(joined['parts'])} parts and "
                   f"{len(joined['samples'])} samples, not 4 and 64")
            expect("host 3 (rank 2) at 20mbit, StragglAR forced around it" in text,
                   "the slow shape's heading does not name the slow host")
            expect("## 4x1 h3 at 40mbit r1@0.5: 4 hosts of 1 rank, links 200mbit both ways; host 3 "
                   "(rank 2) at 40mbit, StragglAR forced around it; rank 1 also late, by 0.5 of "
                   "the last rank's delay" in text,
                   "the heading of a shape with a second late rank does not name it")

        for args, says in ((["--candidates", "ring,fast"], "'fast' is not one of"),
                           (["--shapes", "4x1:100mbit:h9=20mbit"], "K of 1..4"),
                           (["--shapes", "4x1:200mbit:r3@0.5"], "R of 0..2 (not the last"),
                           (["--shapes", "4x1:200mbit:r1@1.5"], "F in (0, 1]"),
                           (["--shapes", "4x1:200mbit:h3=40mbit:h2=40mbit"],
                            "want one hK=RATE (a slow host) and one rR@F"),
                           (["--notes", notes], "--notes goes with --report-from"),
                           (["--out", os.path.join(work, "missing", "report")],
                            "missing does not exist"),
                           # With a bad shape after it: were the warm-up let through, the
                           # shape's error would come instead, before anything is measured.
                           (["--adapt-warmup", "32", "--shapes", "x"], "so the timed calls would "
                            "measure the detection"),
                           (["--adapt-warmup", "48", "--shapes", "x"], "the exploration slot "
                            "(call 160) among the timed calls of row 3"),
                           (["--shapes", "4x1:200mbit"], "no-such-build/bin/stragglar-mpi-bench "
                            "not found; build first")):
            result = bench(*args)
            errors = result.stderr.strip().splitlines()
            expect(result.returncode == 2 and errors and says in errors[-1],
                   f"{' '.join(args)}: want exit 2 and {says!r}, got {result.returncode}: "
                   f"{result.stderr.strip()}")

    for failure in failures:
        print(f"bench_report_check: FAILED: {failure}")
    if failures:
        return 1
    print("bench_report_check: the joined report names each part, and its verdicts, notes and "
          "errors are right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
