#!/usr/bin/env python3
"""Where the device executor's calls spend their time, from its timeline (STRAGGLAR_DEVICE_STAMPS).

usage: scripts/device-stamps.py PREFIX [--skip N] [--json FILE]

Reads PREFIX-rank<R>.csv of every rank (kernels/exec/device/device_timeline.h) and prints, over
the calls every rank launched (after the first N kept), the median with the 10th and 90th
percentiles, in microseconds, of:
  host interval   one call's entry into the executor to the next call's, on a rank
  host launch     a call's entry to its launch returning (lowering, upload, cudaLaunchKernel)
  gpu interval    one kernel's start to the next kernel's start, on a rank
  gpu idle        one kernel's end to the next kernel's start: the GPU waiting for a launch
  kernel          a kernel's start to its end
  in waits        the kernel's time in its waits for peers
  in posts        in its posts of signals (a system-scope fence and a store each)
  elsewhere       the rest of the kernel: moving data, the barriers before posts, the checks
  start skew      the last rank's kernel start after the first rank's, in one call (one GPU:
                  %globaltimer is one clock for every process on it)
  first wait      the kernel's first wait: mostly for the peer's kernel to start
and the median of each wait by its place in the call. Exit status 2 for bad arguments, 1 when
no call has every rank's stamps.
"""
import argparse
import collections
import csv
import glob
import json
import re
import statistics
import sys


def percentiles(values):
    values = sorted(values)
    if not values:
        return None
    at = lambda q: values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]
    return {"median": statistics.median(values), "p10": at(0.1), "p90": at(0.9), "n": len(values)}


def read_rank(path):
    """{call: {"host": {event: ns}, "gpu": [(event, ns, peer), ...]}}"""
    calls = collections.defaultdict(lambda: {"host": {}, "gpu": []})
    with open(path) as file:
        for row in csv.DictReader(file):
            call, ns = int(row["call"]), int(row["ns"])
            if row["source"] == "host":
                calls[call]["host"][row["event"]] = ns
            else:
                calls[call]["gpu"].append((row["event"], ns, int(row["peer"])))
    return calls


def kernel_parts(stamps):
    """(enter, exit, waits [(peer, ns)], posts [ns]) of one kernel's stamps, or None if
    incomplete."""
    events = dict((event, ns) for event, ns, _ in stamps if event in ("enter", "exit"))
    if "enter" not in events or "exit" not in events:
        return None
    waits, posts, begun = [], [], {}
    for event, ns, peer in stamps:
        if event.endswith("_begin"):
            begun[event] = ns
        elif event == "wait_end" and "wait_begin" in begun:
            waits.append((peer, ns - begun.pop("wait_begin")))
        elif event == "post_end" and "post_begin" in begun:
            posts.append(ns - begun.pop("post_begin"))
    return events["enter"], events["exit"], waits, posts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prefix")
    parser.add_argument("--skip", type=int, default=0, help="leave out the first N calls kept")
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()
    files = sorted(glob.glob(glob.escape(args.prefix) + "-rank*.csv"),
                   key=lambda f: int(re.search(r"-rank(\d+)\.csv$", f).group(1)))
    if not files:
        print(f"device-stamps: no {args.prefix}-rank*.csv", file=sys.stderr)
        return 2
    ranks = [read_rank(path) for path in files]
    common = set.intersection(*(set(c for c, v in rank.items() if kernel_parts(v["gpu"]))
                                for rank in ranks))
    calls = sorted(common)[args.skip:]
    if not calls:
        print("device-stamps: no call has every rank's kernel stamps", file=sys.stderr)
        return 1
    us = lambda ns: ns / 1000.0
    metrics = collections.defaultdict(list)
    by_place = collections.defaultdict(list)
    for call in calls:
        parts = [kernel_parts(rank[call]["gpu"]) for rank in ranks]
        metrics["start skew"].append(us(max(p[0] for p in parts) - min(p[0] for p in parts)))
        for rank, (enter, exit_, waits, posts) in zip(ranks, parts):
            in_waits = sum(ns for _, ns in waits)
            metrics["kernel"].append(us(exit_ - enter))
            metrics["in waits"].append(us(in_waits))
            if posts:
                metrics["in posts"].append(us(sum(posts)))
                metrics["one post"].extend(us(ns) for ns in posts)
            metrics["elsewhere"].append(us(exit_ - enter - in_waits - sum(posts)))
            if waits:
                metrics["first wait"].append(us(waits[0][1]))
            for place, (_, ns) in enumerate(waits):
                by_place[place].append(us(ns))
            host = rank[call]["host"]
            if "launched" in host:
                metrics["host launch"].append(us(host["launched"] - host["run"]))
            following = rank.get(call + 1)
            if following is not None and call + 1 in common:
                metrics["host interval"].append(us(following["host"]["run"] - host["run"]))
                next_enter = kernel_parts(following["gpu"])[0]
                metrics["gpu interval"].append(us(next_enter - enter))
                metrics["gpu idle"].append(us(next_enter - exit_))
    order = ["host interval", "host launch", "gpu interval", "gpu idle", "kernel", "in waits",
             "in posts", "one post", "elsewhere", "start skew", "first wait"]
    summary = {name: percentiles(metrics[name]) for name in order if metrics[name]}
    print(f"# {len(ranks)} ranks, calls {calls[0]}..{calls[-1]} ({len(calls)}), microseconds")
    print(f"{'':16} {'median':>9} {'p10':>9} {'p90':>9}")
    for name, value in summary.items():
        print(f"{name:16} {value['median']:9.1f} {value['p10']:9.1f} {value['p90']:9.1f}")
    places = {place: statistics.median(values) for place, values in sorted(by_place.items())}
    print("waits by place in the call (median us): " +
          " ".join(f"{place}:{value:.1f}" for place, value in places.items()))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"ranks": len(ranks), "calls": len(calls), "us": summary,
                       "waits_by_place_us": places}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
