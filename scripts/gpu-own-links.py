#!/usr/bin/env python3
"""Links of their own on one GPU: StragglAR against the baselines where each rank's rate is its own.

Ranks that share one GPU and all of its memory bandwidth never leave a link idle, so StragglAR
cannot win there. Under MPS each rank can instead get a fixed share of the SMs
(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and the device executor a fixed number of CTAs
(STRAGGLAR_IPC_BLOCKS): when the ranks' copies together stay well below what the memory gives,
each rank's rate is set by its own SMs, a link of its own, as a GPU on NVLink has. This script
  1. checks that (the link check, the cluster's rule): for each CTA count, each rank's copy rate
     alone (stragglar-gpu-link-rate), then every rank's while all copy at once; all at once must
     reach at least 85% of alone. The largest CTA count that holds is used from then on;
  2. measures the pre-arrival phase: Ring with nobody late, priced down to a ReduceScatter among
     n - 1 ranks ((n-2)/(n-1) of a buffer against Ring's 2(n-1)/n);
  3. runs Ring, Halving-Doubling, StragglAR (flat and log-depth) and the adaptive mode on the
     device executor (stragglar-bench, -c 1), the last rank late by 1x and 2x that phase at
     every size (--delay_us_per_mib), and tabulates the time after the straggler's arrival:
     StragglAR's best family over the best baseline, and the adaptive mode over the best forced.

Eight ranks come first: the goals are theirs. Writes own-links.md (the tables, for docs/results/)
and own-links.json to --out, after each rank count. Exit status: 0
when every run finished with exact results (a goal missed is reported, not failed), 1 otherwise,
2 for bad arguments.

usage: gpu-own-links.py --bench BIN --rate BIN --preload LIB --out DIR [--ranks 8,4]
                        [--ctas 1,2,4,8] [--sizes 16M,25M,64M,256M] [--delays 1,2]
                        [--iters 20] [--warmup 32] [--adapt-warmup 96] [--seconds 1]
                        [--limit 300]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

LINK_BOUND = 0.85  # all at once / alone, at least: the cluster's link-bound rule
BASELINES = ("ring", "halving-doubling")
STRAGGLAR_FAMILIES = ("stragglar", "stragglar-log-depth")
# (size in MiB or up, lowest StragglAR / baseline) at 8 ranks: the goals.
GOALS = ((64, 1.25), (25, 1.15))
ADAPT_WITHIN = 1.05
RATE_LINE = re.compile(r"link-rate: ctas (\d+), .*: ([0-9.]+) GB/s")


def mib(text):
    units = {"K": 1 / 1024, "M": 1, "G": 1024}
    return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text) / (1 << 20)


def log(*args):
    print(*args, flush=True)


class Runs:
    """Starts the programs, each with its log in --out, and keeps the failures."""

    def __init__(self, args):
        self.args = args
        self.failures = []

    def env(self, ranks, extra=None):
        env = dict(os.environ)
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(100 // ranks)
        env.update(extra or {})
        return env

    def rate_command(self, ctas, start_file=None):
        command = [self.args.rate, f"--ctas={ctas}", f"--seconds={self.args.seconds}"]
        return command + ([f"--start_file={start_file}"] if start_file else [])

    def rate_alone(self, ranks, ctas):
        result = subprocess.run(self.rate_command(ctas), env=self.env(ranks), text=True,
                                capture_output=True, timeout=self.args.limit)
        return self.parse_rate(result.stdout, result.returncode, f"{ranks} ranks, alone")

    def rates_together(self, ranks, ctas):
        """Every rank's rate over one shared window, all started before it opens."""
        start_file = os.path.join(self.args.out, f"start-{ranks}-{ctas}")
        if os.path.exists(start_file):
            os.remove(start_file)
        processes = [subprocess.Popen(self.rate_command(ctas, start_file), env=self.env(ranks),
                                      text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                     for _ in range(ranks)]
        for process in processes:  # every one set up before the window opens
            line = process.stdout.readline()
            if "ready" not in line:
                log(f"link-rate did not get ready: {line.strip()}")
        with open(start_file + ".tmp", "w") as f:
            f.write(f"{time.time() + 0.2:.6f}\n")
        os.replace(start_file + ".tmp", start_file)
        rates = []
        for rank, process in enumerate(processes):
            output, _ = process.communicate(timeout=self.args.limit)
            rates.append(self.parse_rate(output, process.returncode,
                                         f"{ranks} ranks, rank {rank} of all at once"))
        return rates

    def parse_rate(self, output, code, what):
        match = RATE_LINE.search(output or "")
        if code != 0 or not match:
            self.failures.append(f"link rate ({what}): exit {code}, {output.strip()[-200:]}")
            return None
        return float(match.group(2))

    def bench(self, name, ranks, ctas, extra_env, bench_args, warmup=None):
        """One stragglar-bench run with the preload on the device executor; its JSON's rows.

        At INFO and with its learned state saved (NAME.state.json: the calibration's ratios per
        plan and size), so that each run says which link the model was given and how it was
        corrected: what explains an adaptive choice the tables disagree with."""
        path = os.path.join(self.args.out, name)
        if os.path.exists(path + ".state.json"):  # an earlier run's would be loaded at the start
            os.remove(path + ".state.json")
        env = self.env(ranks, {
            "LD_PRELOAD": self.args.preload, "STRAGGLAR_EXECUTOR": "device",
            "STRAGGLAR_DEBUG": "INFO",
            "STRAGGLAR_MIN_BYTES": "0", "STRAGGLAR_EPOCH_CALLS": "16",
            "STRAGGLAR_IPC_BLOCKS": str(ctas),
            "STRAGGLAR_IPC_BYTES": f"{max(int(mib(s)) for s in self.args.sizes)}MiB",
            "STRAGGLAR_TRACE_FILE": path + ".trace.csv",
            "STRAGGLAR_STATE_FILE": path + ".state.json", **extra_env})
        command = [self.args.bench, "--ranks", str(ranks), "--one_gpu", "-d", "float", "-o", "sum",
                   "-c", "1", "--sizes", ",".join(self.args.sizes), "-w",
                   str(self.args.warmup if warmup is None else warmup),
                   "-n", str(self.args.iters), "--json", path + ".json",
                   "--timeout_s", str(self.args.limit - 10), *bench_args]
        with open(path + ".log", "w") as out:
            code = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=self.args.limit).returncode
        try:
            with open(path + ".json") as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = {}
        rows = report.get("rows", [])
        wrong = sum(row["oop"].get("wrong") or 0 for row in rows)
        if code != 0 or not rows or wrong:
            self.failures.append(f"{name}: exit {code}, {len(rows)} rows, {wrong} wrong")
        log(f"--- {name}: exit {code}, {len(rows)} rows, {wrong} wrong")
        return {row["size"]: row["oop"] for row in rows}


def link_check(runs, ranks):
    """The largest CTA count whose ranks keep 85% of their rate alone, and every count's row."""
    rows, chosen = [], None
    for ctas in runs.args.ctas:
        alone = [runs.rate_alone(ranks, ctas) for _ in range(2)]
        together = runs.rates_together(ranks, ctas)
        if None in alone or None in together:
            continue
        alone_rate = statistics.median(alone)
        ratio = min(together) / alone_rate
        rows.append({"ranks": ranks, "ctas": ctas, "alone_gbps": alone,
                     "together_gbps": together, "lowest_ratio": ratio,
                     "link_bound": ratio >= LINK_BOUND})
        log(f"{ranks} ranks, {ctas} CTAs: alone {alone_rate:.1f} GB/s, all at once "
            f"{min(together):.1f}-{max(together):.1f} GB/s, lowest {ratio:.2f} of alone")
        if ratio >= LINK_BOUND:
            chosen = ctas
    return chosen, rows


def phase_us_per_mib(runs, ranks, ctas):
    """The pre-arrival phase per MiB: Ring's time with nobody late, as a ReduceScatter of n - 1."""
    ring = runs.bench(f"own-{ranks}-phase-ring", ranks, ctas, {"STRAGGLAR_ALGORITHM": "ring"}, [])
    if not ring:
        return None
    largest = max(ring)
    share = ((ranks - 2) / (ranks - 1)) / (2 * (ranks - 1) / ranks)
    return ring[largest]["time_us"] * share / (largest / (1 << 20))


def measure(runs, ranks, ctas, per_mib):
    """After-arrival times: {delay multiple: {family: {size: us}}}."""
    times = {}
    for multiple in runs.args.delays:
        delay = ["--straggler", str(ranks - 1), "--delay_us_per_mib", f"{multiple * per_mib:.3f}"]
        times[multiple] = {}
        for family in BASELINES + STRAGGLAR_FAMILIES + ("adapt",):
            env = {} if family == "adapt" else {"STRAGGLAR_ALGORITHM": family}
            if family in STRAGGLAR_FAMILIES:
                env["STRAGGLAR_STRAGGLER"] = str(ranks - 1)
            # The adaptive mode is timed once it has learned each size (--adapt-warmup).
            warmup = runs.args.adapt_warmup if family == "adapt" else None
            rows = runs.bench(f"own-{ranks}-late{multiple:g}x-{family}", ranks, ctas, env, delay,
                              warmup)
            times[multiple][family] = {size: row.get("after_arrival_us")
                                       for size, row in rows.items()}
    return times


def table(ranks, ctas, times, misses):
    """Markdown rows, and each goal missed appended to `misses`."""
    lines = [f"\n### {ranks} ranks, {ctas} CTAs each, {100 // ranks}% of the SMs each\n",
             "| late by | size | Ring | Halving-Doubling | StragglAR | log-depth | adapt "
             "| StragglAR's best ÷ best baseline | adapt ÷ best forced |",
             "|---|---|---|---|---|---|---|---|---|"]
    for multiple, families in times.items():
        for size in sorted(families["ring"]):
            us = {family: families[family].get(size) for family in families}
            if any(value is None for value in us.values()):
                lines.append(f"| {multiple:g}× | {size >> 20} MiB | (a run is missing) |")
                continue
            baseline = min(us[f] for f in BASELINES)
            stragglar = min(us[f] for f in STRAGGLAR_FAMILIES)
            forced = min(us[f] for f in BASELINES + STRAGGLAR_FAMILIES)
            gain, adapt = baseline / stragglar, us["adapt"] / forced
            cells = " | ".join(f"{us[f]:.0f}" for f in BASELINES + STRAGGLAR_FAMILIES + ("adapt",))
            lines.append(f"| {multiple:g}× | {size >> 20} MiB | {cells} | {gain:.2f}× "
                         f"| {adapt:.2f} |")
            goal = next((g for floor, g in GOALS if size >= floor << 20), None)
            if ranks == 8 and goal is not None and gain < goal:
                misses.append(f"{ranks} ranks, {size >> 20} MiB, late {multiple:g}×: StragglAR "
                              f"{gain:.2f}× the best baseline, goal {goal}×")
            if adapt > ADAPT_WITHIN:
                misses.append(f"{ranks} ranks, {size >> 20} MiB, late {multiple:g}×: adapt "
                              f"{adapt:.2f}× the best forced candidate, goal ≤ {ADAPT_WITHIN}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", required=True)
    parser.add_argument("--rate", required=True)
    parser.add_argument("--preload", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ranks", default="8,4")
    parser.add_argument("--ctas", default="1,2,4,8")
    parser.add_argument("--sizes", default="16M,25M,64M,256M")
    parser.add_argument("--delays", default="1,2")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=32)
    # A size's plans are priced by the model alone until 4 of its calls are measured, and the NCCL
    # preload absorbs an epoch's calls an epoch after it ends: 3-4 epochs of 16 calls before the
    # calibration reaches a new size's decisions (docs/results/gpu-2026-11-30.md).
    parser.add_argument("--adapt-warmup", type=int, default=96)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--limit", type=int, default=300)
    args = parser.parse_args()
    try:
        args.ranks = [int(r) for r in args.ranks.split(",")]
        args.ctas = sorted(int(c) for c in args.ctas.split(","))
        args.delays = [float(d) for d in args.delays.split(",")]
        args.sizes = args.sizes.split(",")
        [mib(s) for s in args.sizes]
    except ValueError as error:
        parser.error(f"bad list: {error}")
    if any(r < 3 for r in args.ranks) or any(c < 1 for c in args.ctas):
        parser.error("--ranks needs 3 or more ranks each, --ctas counts of 1 or more")
    os.makedirs(args.out, exist_ok=True)
    runs = Runs(args)
    result = {"link_check": [], "tables": {}, "misses": []}
    lines = ["## Links of their own on one GPU", "",
             f"Command: `scripts/gpu-own-links.py --ranks {','.join(map(str, args.ranks))} "
             f"--sizes {','.join(args.sizes)}` (median of {args.iters} timed calls after "
             f"{args.warmup}, the adaptive mode's after {args.adapt_warmup}; after-arrival µs, "
             "out of place, -c 1).", "",
             "| ranks | CTAs | alone, GB/s | all at once, GB/s | lowest ÷ alone | link-bound |",
             "|---|---|---|---|---|---|"]
    for ranks in args.ranks:
        chosen, rows = link_check(runs, ranks)
        result["link_check"] += rows
        for row in rows:
            lines.append(f"| {ranks} | {row['ctas']} | {statistics.median(row['alone_gbps']):.1f} "
                         f"| {min(row['together_gbps']):.1f}–{max(row['together_gbps']):.1f} "
                         f"| {row['lowest_ratio']:.2f} | {'yes' if row['link_bound'] else 'no'} |")
        if chosen is None:
            chosen = args.ctas[0]
            result["misses"].append(f"{ranks} ranks: no CTA count is link-bound; measured with "
                                    f"{chosen}")
        per_mib = phase_us_per_mib(runs, ranks, chosen)
        if per_mib is None:
            continue
        log(f"{ranks} ranks: pre-arrival phase {per_mib:.1f} us per MiB ({chosen} CTAs)")
        times = measure(runs, ranks, chosen, per_mib)
        result["tables"][str(ranks)] = {"ctas": chosen, "phase_us_per_mib": per_mib,
                                        "after_arrival_us": {
                                            str(m): {f: {str(s): t for s, t in by.items()}
                                                     for f, by in fam.items()}
                                            for m, fam in times.items()}}
        lines += table(ranks, chosen, times, result["misses"])
        # Written after each rank count too: a run stopped at its time limit keeps what it has.
        write_report(args, lines, result, runs.failures)
    print(write_report(args, lines, result, runs.failures))
    return 1 if runs.failures else 0


def write_report(args, lines, result, failures):
    """own-links.md and own-links.json in --out, from the tables so far; the Markdown."""
    lines = lines + ["", "Goals missed: " + ("none" if not result["misses"] else "")]
    lines += [f"- {miss}" for miss in result["misses"]]
    result["failures"] = failures
    if failures:
        lines += ["", "Failed runs:"] + [f"- {failure}" for failure in failures]
    with open(os.path.join(args.out, "own-links.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "own-links.json"), "w") as f:
        json.dump(result, f, indent=2)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
