#!/usr/bin/env python3
"""The headline benchmark on an emulated cluster (scripts/cluster-bench.sh; docs/cluster.md).

For each shape (hosts x ranks per host) it brings a cluster up (scripts/cluster.sh), refuses to
report times as link numbers when the link check says the CPU sets them, and for each size runs
stragglar-mpi-bench once per candidate and repetition: STRAGGLAR_ALGORITHM forced to Ring,
Halving-Doubling and each StragglAR family, and left to the policy (adapt). Every run also times
the MPI library's own Allreduce (native), call by call interleaved with the candidate, on the
same data and delays. The straggler (the last rank) is 0, about the pre-arrival phase (the size
at the link's rate) and twice that late. A shape may slow one host's link
(`4x1:100mbit:h3=20mbit`, the slow-link straggler): its candidates are the baselines, StragglAR
forced around that host's rank, and adapt; nobody late, and the last rank late by one phase. A
shape may also make a second rank late (`4x1:200mbit:h3=40mbit:r1@0.5`: rank 1 late by half the
last rank's delay in every call, stragglar-mpi-bench --also-late): the delays as a distribution,
not one straggler.

Writes a Markdown report (medians of every call's time after the last arrival and of the whole
call, with the spread of the per-run medians), the raw samples as JSON, and a plot of speedup
against delay. Needs a build (scripts/build.sh), root, and matplotlib for the plot (Debian
python3-matplotlib).
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
BASELINES = ["native", "ring", "halving-doubling"]
FAMILIES = ["stragglar", "stragglar-log-depth", "stragglar-hierarchical"]
NAME = "bench"


def parse_size(text):
    match = re.fullmatch(r"(\d+)(B|KiB|MiB|GiB)", text)
    if not match:
        raise argparse.ArgumentTypeError(f"size {text!r}: use e.g. 4MiB")
    return int(match.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[
        match.group(2)]


def size_name(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def rate_bits(rate):
    match = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate)
    return float(match.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[match.group(2)]


def run(command, **kwargs):
    print("+ " + " ".join(shlex.quote(c) for c in command), flush=True)
    return subprocess.run(command, check=True, **kwargs)


class Shape:
    """Hosts x ranks per host at one rate; with "hK=RATE" ("h3=20mbit"), one host's link slower;
    with "rR@F" ("r1@0.5"), rank R also late, by F of the last rank's delay."""

    def __init__(self, layout, rate, *extras):
        hosts, per_host = re.fullmatch(r"(\d+)x(\d+)", layout).groups()
        self.layout, self.hosts, self.per_host, self.rate = layout, int(hosts), int(per_host), rate
        self.ranks = self.hosts * self.per_host
        self.text, self.slow_host, self.slow_rate, self.slow_rank = layout, None, None, None
        self.also_late = None  # (rank, fraction of the last rank's delay)
        for extra in extras:
            slow = re.fullmatch(r"h(\d+)=(\d+[kmg]?bit)", extra)
            late = re.fullmatch(r"r(\d+)@([0-9]*\.?[0-9]+)", extra)
            if slow and self.slow_host is None:
                if not 1 <= int(slow.group(1)) <= self.hosts:
                    raise ValueError(f"{extra!r}: a slow host is hK=RATE, K of 1..{self.hosts}")
                self.slow_host, self.slow_rate = int(slow.group(1)), slow.group(2)
                self.slow_rank = (self.slow_host - 1) * self.per_host  # its host's first rank
                self.text += f" h{self.slow_host} at {self.slow_rate}"
            elif late and self.also_late is None:
                rank, fraction = int(late.group(1)), float(late.group(2))
                if not 0 <= rank < self.ranks - 1 or not 0 < fraction <= 1:
                    raise ValueError(f"{extra!r}: a second late rank is rR@F, R of 0.."
                                     f"{self.ranks - 2} (not the last, the straggler), F in (0, 1]")
                self.also_late = (rank, fraction)
                self.text += f" r{rank}@{fraction:g}"
            else:
                raise ValueError(f"{extra!r}: want one hK=RATE (a slow host) and one rR@F (a "
                                 "second late rank)")

    def slow_factor(self):
        """How many times slower the slow host's link is (1 without one)."""
        if self.slow_host is None:
            return 1.0
        return rate_bits(self.rate) / rate_bits(self.slow_rate)

    def phase_s(self, size):
        """The size's time on one link at TCP's goodput (95% of the tc rate): one pre-arrival
        phase, the unit of the straggler's delays."""
        return size / (rate_bits(self.rate) * 0.95 / 8)

    def candidates(self):
        if self.slow_host is not None:
            # StragglAR forced around the slow host's rank: the plan the policy should find.
            return BASELINES[1:] + ["stragglar", "adapt"]
        families = FAMILIES if self.per_host > 1 else FAMILIES[:2]
        return BASELINES[1:] + families + ["adapt"]

    def delays(self, size):
        """Nobody late, and the last rank late by one and two phases; with a slow host, nobody
        late and the last rank (on another host) late by one phase."""
        phase = self.phase_s(size)
        return [0.0, phase] if self.slow_host is not None else [0.0, phase, 2 * phase]


# What the policy does in a job's first calls (policy/detector.h, policy/exploration.cc): it names
# a straggler once it has lagged in half of the detector's 64-call window, 32 calls after it
# appears, and acts on it from the next epoch; and it explores one call in 64, the 32nd.
DETECTOR_NAMES_AFTER_CALLS = 32
EXPLORE_EVERY = 64


def adapt_warmup_problem(adapt_warmup, iterations, epoch_calls, rows=3):
    """Why adapt's timed calls would not measure its choice with this warm-up, or None. A job runs
    its rows (delays) one after another, each `adapt_warmup` untimed calls then `iterations`
    timed ones. Timed before the straggler is acted on they measure the detection (2026-11-30:
    Ring in 2 of 6 timed calls one phase late, 32 calls of warm-up), and timed over an exploration
    slot they run it once in `iterations` calls instead of once in 64."""
    needed = DETECTOR_NAMES_AFTER_CALLS + epoch_calls
    if adapt_warmup < needed:
        return (f"{adapt_warmup} is below {needed}: the policy names a straggler "
                f"{DETECTOR_NAMES_AFTER_CALLS} calls after it appears and acts at the next epoch "
                f"(--epoch-calls {epoch_calls}), so the timed calls would measure the detection")
    for row in range(rows):
        first = row * (adapt_warmup + iterations) + adapt_warmup
        for call in range(first, first + iterations):
            if call % EXPLORE_EVERY == EXPLORE_EVERY // 2:
                return (f"{adapt_warmup} puts the exploration slot (call {call}) among the timed "
                        f"calls of row {row + 1}, one call in {iterations} instead of one in "
                        f"{EXPLORE_EVERY}: take another warm-up")
    return None


def bench_run(args, shape, size, delays, candidate, repetition, build):
    """One mpirun of the bench: the candidate against native, interleaved."""
    warmup = args.adapt_warmup if candidate == "adapt" else args.warmup
    with tempfile.TemporaryDirectory() as work:
        report = os.path.join(work, "bench.json")
        trace = os.path.join(work, "trace.csv")
        env = ["-x", f"LD_PRELOAD={build}/lib/libstragglar_mpi.so",
               "-x", f"STRAGGLAR_EPOCH_CALLS={args.epoch_calls}",
               "-x", f"STRAGGLAR_TRACE_FILE={trace}"]
        if candidate != "adapt":
            env += ["-x", f"STRAGGLAR_ALGORITHM={candidate}"]
        if candidate == "stragglar" and shape.slow_rank is not None:
            env += ["-x", f"STRAGGLAR_STRAGGLER={shape.slow_rank}"]
        also_late = []
        if shape.also_late is not None:
            also_late = ["--also-late", f"{shape.also_late[0]}:{shape.also_late[1]:g}"]
        command = [CLUSTER, "run", "--name", NAME, *env, f"{build}/bin/stragglar-mpi-bench",
                   "--min-bytes", f"{size}B", "--max-bytes", f"{size}B",
                   "--delays", ",".join(f"{d * 1e3:.3f}ms" for d in delays),
                   "--iterations", str(args.iterations), "--warmup", str(warmup), *also_late,
                   "--check", "--json", report]
        run(["timeout", str(args.run_timeout), *command], stdout=subprocess.DEVNULL)
        with open(report) as file:
            rows = json.load(file)["rows"]
        mixes = timed_mixes(trace, len(delays), warmup, args.iterations)
    results = []
    for row, mix in zip(rows, mixes):
        if row["wrong"]:
            sys.exit(f"cluster-bench: {row['wrong']} wrong elements with {candidate}")
        results.append({
            "shape": shape.text, "size": size, "delay_s": row["delay_s"],
            "candidate": candidate, "repetition": repetition, "mix": mix,
            "native": {"latency": row["native"]["samples_latency_s"],
                       "time": row["native"]["samples_time_s"]},
            "preload": {"latency": row["preload"]["samples_latency_s"],
                        "time": row["preload"]["samples_time_s"]}})
    return results


def timed_mixes(trace, rows, warmup, iterations):
    """What the preload ran in each row's timed calls, from rank 0's trace."""
    algorithms = {}
    if os.path.exists(trace):
        with open(trace) as file:
            for line in csv.DictReader(file):
                if line["rank"] == "0":
                    algorithms[int(line["call"])] = line.get("algorithm", "?")
    mixes = []
    for row in range(rows):
        first = row * (warmup + iterations) + warmup
        counts = {}
        for call in range(first, first + iterations):
            name = algorithms.get(call, "?")
            counts[name] = counts.get(name, 0) + 1
        mixes.append(counts)
    return mixes


def median(values):
    return statistics.median(values) if values else float("nan")


def summarize(samples):
    """Per (shape, size, delay, candidate): medians over every call, and the per-run spread."""
    table = {}
    for sample in samples:
        for who in ("native", "preload"):
            candidate = "native" if who == "native" else sample["candidate"]
            key = (sample["shape"], sample["size"], round(sample["delay_s"], 6), candidate)
            entry = table.setdefault(key, {"latency": [], "time": [], "runs": [], "mix": {}})
            entry["latency"] += sample[who]["latency"]
            entry["time"] += sample[who]["time"]
            entry["runs"].append(median(sample[who]["latency"]))
            if who == "preload":
                for name, count in sample["mix"].items():
                    entry["mix"][name] = entry["mix"].get(name, 0) + count
    return {key: {"latency": median(e["latency"]), "time": median(e["time"]),
                  "low": min(e["runs"]), "high": max(e["runs"]), "mix": e["mix"],
                  "calls": len(e["latency"])}
            for key, e in table.items()}


def ms(seconds):
    return f"{seconds * 1e3:.0f}" if seconds >= 0.1 else f"{seconds * 1e3:.1f}"


def this_commit():
    """The commit measured: HEAD, and whether tracked files differ from it."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return f"{commit}{' with local changes' if dirty else ''}"


def part_line(part):
    started = datetime.datetime.fromisoformat(part["started"])
    return (f"`{' '.join(shlex.quote(a) for a in part['argv'])}` (scripts/cluster-bench.sh), "
            f"commit {part.get('commit', 'not recorded')}, "
            f"{started:%Y-%m-%d %H:%M} to {part['ended']}")


def measured(table, shape):
    """Native and the candidates of `shape` that some run measured: a part run with --candidates
    reports on those alone, and the other families' columns wait for a joined report."""
    return ["native"] + [name for name in shape.candidates()
                         if any(key[0] == shape.text and key[3] == name for key in table)]


def report(args, shapes, samples, verdicts, parts, out_md, out_json, out_png, notes=""):
    """Writes the report of every part's samples; the last part may still be running."""
    table = summarize(samples)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    started = datetime.datetime.fromisoformat(parts[0]["started"])
    lines = [f"# StragglAR on an emulated cluster ({started:%Y-%m-%d})", "",
             f"Machine: {os.cpu_count()} cores ({cpu}), Linux {platform.release()}, "
             f"{mpi_version()}."]
    if len(parts) == 1:
        lines += [f"Command: {part_line(parts[0])}.", ""]
    else:
        lines += ["Commands, one part of the shapes and sizes each:", ""]
        lines += [f"- {part_line(part)}" for part in parts] + [""]
    lines += ["Each cell is the median over every timed call of the time from the last arrival "
              "to the last completion, in ms, with the range of the per-run medians; `whole` is "
              "the median of the whole call (first arrival to last completion). The straggler is "
              "the last rank. Native is the MPI library's own Allreduce, timed in every run, "
              "interleaved call by call with the candidate. The best baseline is the fastest of "
              "native, Ring and Halving-Doubling; the best family is the fastest StragglAR "
              "family forced; `adapt mix` is what the policy ran in the timed calls.", ""]
    goals = []
    for shape in shapes:
        slow = (f"; host {shape.slow_host} (rank {shape.slow_rank}) at {shape.slow_rate}, "
                f"StragglAR forced around it" if shape.slow_host is not None else "")
        if shape.also_late is not None:
            slow += (f"; rank {shape.also_late[0]} also late, by {shape.also_late[1]:g} of the "
                     "last rank's delay")
        lines += [f"## {shape.text}: {shape.hosts} hosts of {shape.per_host} rank"
                  f"{'s' if shape.per_host > 1 else ''}, links {shape.rate} both ways{slow}", "",
                  f"Link check: {verdicts.get(shape.text, 'not run')}", ""]
        if shape.text not in verdicts:
            lines += ["Not measured: no run reached this shape.", ""]
            continue
        if not all(verdict.startswith("link-bound")
                   for verdict in verdicts[shape.text].split("; ")):
            lines += ["Not measured: the link check did not find the links setting the "
                      "times.", ""]
            continue
        names = measured(table, shape)
        left_out = [name for name in ["native"] + shape.candidates() if name not in names]
        if left_out:
            lines += [f"Not measured in these runs: {', '.join(left_out)}.", ""]
        if "adapt" not in names or not any(n in FAMILIES for n in names):
            lines += ["No table: it needs adapt and a StragglAR family.", ""]
            continue
        lines += ["| size | delay | " + " | ".join(names) + " | best baseline ÷ best family | "
                  "adapt ÷ best forced | whole: best baseline, best family, adapt | adapt mix |",
                  "|" + "---|" * (len(names) + 6)]
        for size in args.sizes:
            for delay in sorted({k[2] for k in table if k[0] == shape.text and k[1] == size}):
                cell = {n: table.get((shape.text, size, delay, n)) for n in names}
                if any(c is None for c in cell.values()):
                    continue
                base = min((n for n in BASELINES if n in names), key=lambda n: cell[n]["latency"])
                fams = [n for n in names if n in FAMILIES]
                fam = min(fams, key=lambda n: cell[n]["latency"])
                forced = min((n for n in names if n != "adapt"), key=lambda n: cell[n]["latency"])
                speedup = cell[base]["latency"] / cell[fam]["latency"]
                adapt_vs = cell["adapt"]["latency"] / cell[forced]["latency"]
                mix = ", ".join(f"{k} {v}" for k, v in sorted(cell["adapt"]["mix"].items()))
                lines.append(
                    f"| {size_name(size)} | {ms(delay)} ms | " +
                    " | ".join(f"{ms(cell[n]['latency'])} ({ms(cell[n]['low'])}–"
                               f"{ms(cell[n]['high'])})" for n in names) +
                    f" | {speedup:.2f} ({base} ÷ {fam}) | {adapt_vs:.3f} ({forced}) | "
                    f"{ms(cell[base]['time'])}, {ms(cell[fam]['time'])}, "
                    f"{ms(cell['adapt']['time'])} | {mix} |")
                goals.append((shape, size, delay, base, fam, forced, cell))
        lines.append("")
    lines += goal_lines(goals)
    if notes:
        lines += ["## Notes", "", notes.strip(), ""]
    with open(out_md, "w") as file:
        file.write("\n".join(lines) + "\n")
    with open(out_json, "w") as file:
        json.dump({"parts": parts, "verdicts": verdicts, "samples": samples, "notes": notes},
                  file)
    plot(args, shapes, table, out_png)
    print(f"cluster-bench: {out_md}, {out_json}, {out_png}")


def goal_lines(goals):
    """The issue's goals, point by point."""
    lines = ["## Goals", "",
             "- After warm-up, adapt within 5% of the best forced candidate at every point.",
             "- Best StragglAR family ÷ best baseline, after arrival, ≥ 1.3× at 4x1 and ≥ 1.45× "
             "at 8x1 where the delay covers the pre-arrival phase.",
             "- With nobody late, adapt at most 2% slower than the best baseline.",
             "- One host's link 5x slower, nobody late: best baseline ÷ adapt ≥ 1.3× at 4x1 and "
             "≥ 1.4× at 8x1.",
             "- Nodes: best StragglAR family ÷ best baseline, after arrival, ≥ 1.15× at one phase "
             "late and ≥ 1.35× at two, 4x2.", "",
             "Per-run medians (ms) show the spread between runs.", "",
             "| shape | size | delay | adapt ÷ best forced | adapt's runs; best forced's | "
             "best baseline ÷ best family | nobody late: adapt ÷ best baseline | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for shape, size, delay, base, fam, forced, cell in goals:
        adapt_vs = cell["adapt"]["latency"] / cell[forced]["latency"]
        runs = (f"{ms(cell['adapt']['low'])}–{ms(cell['adapt']['high'])}; "
                f"{ms(cell[forced]['low'])}–{ms(cell[forced]['high'])}")
        speedup = cell[base]["latency"] / cell[fam]["latency"]
        misses = []
        if adapt_vs > 1.05:
            misses.append("adapt")
        target = {"4x1": 1.3, "8x1": 1.45}.get(shape.layout)
        if shape.slow_host is None and target and delay > 0 and speedup < target:
            misses.append(f"speedup < {target}")
        if shape.layout == "4x2" and delay > 0:
            # One phase late, or two (the bench's delays, rounded to the phase).
            phases = round(delay / shape.phase_s(size))
            node_target = {1: 1.15, 2: 1.35}.get(phases)
            if node_target and speedup < node_target:
                misses.append(f"speedup < {node_target}")
        idle = "–"
        if delay == 0:
            ratio = cell["adapt"]["latency"] / cell[base]["latency"]
            idle = f"{ratio:.3f}"
            # The goal for a link 5x slower; a milder one sets none (the best StragglAR
            # family itself is 1.16x Ring at 2x, 4x1 1 MiB), only adapt's 5% of it above.
            slow_target = {"4x1": 1.3, "8x1": 1.4}.get(shape.layout)
            if shape.slow_factor() < 5:
                slow_target = None
            if shape.slow_host is not None:
                if slow_target and 1 / ratio < slow_target:
                    misses.append(f"slow link: best baseline ÷ adapt < {slow_target}")
            elif ratio > 1.02:
                misses.append("nobody late")
        verdict = "met" if not misses else "MISSED: " + ", ".join(misses)
        lines.append(f"| {shape.text} | {size_name(size)} | {ms(delay)} ms | {adapt_vs:.3f} | "
                     f"{runs} | {speedup:.2f} | {idle} | {verdict} |")
    return lines + [""]


def plot(args, shapes, table, out_png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("cluster-bench: no matplotlib (Debian python3-matplotlib): no plot", file=sys.stderr)
        return
    figure, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 4), squeeze=False)
    for axis, shape in zip(axes[0], shapes):
        for size in args.sizes:
            delays = sorted({k[2] for k in table if k[0] == shape.text and k[1] == size})
            points = []
            for delay in delays:
                cells = {n: table.get((shape.text, size, delay, n))
                         for n in measured(table, shape)}
                if (any(c is None for c in cells.values()) or "adapt" not in cells
                        or not any(n in FAMILIES for n in cells)):
                    continue
                base = min(cells[n]["latency"] for n in BASELINES if n in cells)
                # Delays in units of the size's time on one link (0, 1, 2), so that sizes align.
                points.append((delay / shape.phase_s(size), base / cells["adapt"]["latency"],
                               base / min(cells[n]["latency"] for n in cells if n in FAMILIES)))
            if points:
                line, = axis.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                                  label=f"{size_name(size)} adapt")
                axis.plot([p[0] for p in points], [p[2] for p in points], linestyle="--",
                          color=line.get_color(), label=f"{size_name(size)} best family")
        axis.axhline(1, color="gray", linewidth=0.8)
        axis.set_title(f"{shape.text}, {shape.rate}")
        axis.set_xlabel("straggler delay ÷ the size's time on one link")
        axis.set_ylabel("best baseline ÷ time after last arrival")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out_png, dpi=110)
    # The report is redrawn after every run: a long bench would otherwise keep every figure.
    plt.close(figure)


def mpi_version():
    out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "MPI (version unknown)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="4x1:200mbit,8x1:100mbit,4x2:200mbit",
                        help="HOSTSxRANKS:RATE[:hK=RATE][:rR@F], comma-separated: host K's link "
                        "at its own rate, rank R also late by F of the last rank's delay")
    parser.add_argument("--sizes", default="1MiB,4MiB,16MiB")
    parser.add_argument("--runs", type=int, default=2, help="repetitions of every run")
    parser.add_argument("--iterations", type=int, default=6, help="timed pairs per row")
    parser.add_argument("--warmup", type=int, default=2, help="untimed pairs per row, forced")
    parser.add_argument("--adapt-warmup", type=int, default=40,
                        help="untimed pairs per row for adapt: at least 32 + --epoch-calls, so "
                        "that a straggler is named and acted on, and no exploration slot (call "
                        "32 of every 64) among the timed calls")
    parser.add_argument("--epoch-calls", type=int, default=8)
    parser.add_argument("--run-timeout", type=int, default=3600)
    parser.add_argument("--allow-cpu-bound", action="store_true",
                        help="measure even where the link check says the CPU sets the times")
    parser.add_argument("--candidates", type=lambda text: text.split(","),
                        help="measure only these (comma-separated; default every candidate): a "
                        "part to join others with --report-from")
    parser.add_argument("--report-from", metavar="JSON", nargs="+",
                        help="write one report from the JSON of one or more runs (parts of the "
                        "shapes and sizes), measuring nothing; --shapes and --sizes name all")
    parser.add_argument("--notes", metavar="MARKDOWN",
                        help="with --report-from: a section of notes (follow-up measurements, "
                        "causes) that the report carries from then on")
    parser.add_argument("--out", default=os.path.join(
        ROOT, "docs", "results", f"cluster-{datetime.date.today():%Y-%m-%d}"),
        help="report path without suffix (.md, .json, .png)")
    args = parser.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.notes and not args.report_from:
        parser.error("--notes goes with --report-from")
    # Said before measuring: the report is written after every run, and a folder that is not there
    # would end the bench at its first.
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        parser.error(f"--out: folder {out_dir} does not exist")
    if not args.report_from and "adapt" in (args.candidates or ["adapt"]):
        problem = adapt_warmup_problem(args.adapt_warmup, args.iterations, args.epoch_calls)
        if problem is not None:
            parser.error(f"--adapt-warmup {problem}")
    known = BASELINES[1:] + FAMILIES + ["adapt"]
    for name in args.candidates or []:
        if name not in known:
            parser.error(f"--candidates: {name!r} is not one of {', '.join(known)}")
    shapes = []
    for item in args.shapes.split(","):
        fields = item.split(":")
        if not 2 <= len(fields) <= 4:
            parser.error(f"--shapes: {item!r} is not NxG:RATE[:hK=RATE][:rR@F]")
        try:
            shapes.append(Shape(*fields))
        except (ValueError, AttributeError) as error:
            parser.error(f"--shapes: {item!r}: {error}")
    build = os.path.join(ROOT, os.environ.get("STRAGGLAR_BUILD_DIR", "build"))
    # Said before any cluster comes up (scripts/cluster-bench.sh checks it too).
    for needed in ("bin/stragglar-mpi-bench", "lib/libstragglar_mpi.so"):
        if not args.report_from and not os.path.isfile(os.path.join(build, needed)):
            parser.error(f"{os.path.join(build, needed)} not found; build first "
                         "(scripts/build.sh)")
    samples, verdicts, parts, notes = [], {}, [], ""
    if args.report_from:
        for path in args.report_from:
            with open(path) as file:
                saved = json.load(file)
            samples += saved["samples"]
            for shape, verdict in saved["verdicts"].items():
                # A shape measured in several parts had a link check in each.
                known = verdicts.get(shape)
                verdicts[shape] = f"{known}; {verdict}" if known and known != verdict else verdict
            parts += saved["parts"]
            notes = saved.get("notes", notes)
        if args.notes:
            with open(args.notes) as file:
                notes = file.read()
        report(args, shapes, samples, verdicts, parts, args.out + ".md", args.out + ".json",
               args.out + ".png", notes)
        return
    part = {"argv": sys.argv, "commit": this_commit(),
            "started": datetime.datetime.now().isoformat(timespec="minutes"), "ended": "now"}
    parts.append(part)
    for shape in shapes:
        try:
            status = subprocess.run(
                [CLUSTER, "up", f"{shape.hosts}x{shape.per_host}", "--name", NAME, "--rate",
                 shape.rate, "--owner", str(os.getpid())], capture_output=True, text=True)
            print(status.stdout + status.stderr, end="", flush=True)
            if status.returncode != 0:
                sys.exit(f"cluster-bench: {shape.text}: {status.stdout}{status.stderr}".strip())
            verdicts[shape.text] = status.stdout.strip().splitlines()[-1].split(": ", 1)[1]
            if shape.slow_host is not None:
                # The check ran at the full rate: one link slower only makes it more link-bound.
                run([CLUSTER, "rate", "--name", NAME, f"{NAME}{shape.slow_host}",
                     shape.slow_rate])
            if not verdicts[shape.text].startswith("link-bound") and not args.allow_cpu_bound:
                print(f"cluster-bench: {shape.text} is not link-bound; not measured", flush=True)
                continue
            chosen = [c for c in shape.candidates() if not args.candidates or c in args.candidates]
            if not chosen:
                print(f"cluster-bench: {shape.text} has none of --candidates", flush=True)
                continue
            for size in args.sizes:
                delays = shape.delays(size)
                for repetition in range(args.runs):
                    turn = repetition % len(chosen)
                    order = chosen[turn:] + chosen[:turn]
                    for candidate in order:
                        samples += bench_run(args, shape, size, delays, candidate, repetition,
                                             build)
                        part["ended"] = f"{datetime.datetime.now():%H:%M}"
                        report(args, shapes, samples, verdicts, parts, args.out + ".md",
                               args.out + ".json", args.out + ".png")
        finally:
            subprocess.run([CLUSTER, "down", "--name", NAME])
    part["ended"] = f"{datetime.datetime.now():%H:%M}"
    report(args, shapes, samples, verdicts, parts, args.out + ".md", args.out + ".json",
           args.out + ".png")


if __name__ == "__main__":
    main()
