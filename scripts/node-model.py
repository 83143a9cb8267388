#!/usr/bin/env python3
"""The model's number for an 8-GPU node: StragglAR after the straggler's arrival against NCCL.

This is the cost model's number, not a measurement on eight GPUs. Each StragglAR family (flat and
log-depth) is priced by `stragglar sim` with the device executor's per-round cost as its alpha
(measured on one GPU by `scripts/gpu-check.sh --only rounds`: the kernel's time outside its waits
per round), and NCCL by its own closed forms (`stragglar sim --algorithms nccl-ring,nccl-tree`,
docs/scale-model.md) with NCCL's alpha. Both move data at the bandwidth NCCL's ring reaches on the
node's NVLink, and the straggler is late enough that the pre-arrival phase is hidden (the `after
last arrival` column). NVLS (NVLink SHARP, where the switch reduces) is priced as NCCL's busbw
figure for it: 2(n-1)/n of the buffer at --nvls-busbw, plus NCCL's alpha.

Prints a markdown table (for docs/results/) with the command; --json writes the numbers too.

usage: node-model.py --sim build/bin/stragglar [--round-cost-us 11.5,2] [--sizes 25MiB,64MiB,256MiB]
                     [--ranks 8] [--bandwidth 370GB/s] [--nccl-alpha-us 1] [--nvls-busbw-gbps 470]
                     [--json FILE]
"""

import argparse
import json
import subprocess
import sys

FAMILIES = ("stragglar", "stragglar-log-depth")
NCCL = ("nccl-ring", "nccl-tree")


def after_arrival_us(sim, ranks, size, bandwidth, alpha_us, algorithms):
    """{algorithm: microseconds after the last arrival} from `stragglar sim --json`."""
    output = subprocess.run(
        [sim, "sim", "--ranks", str(ranks), "--bytes", size, "--bandwidth", bandwidth,
         "--alpha", f"{alpha_us}us", "--delay", "100ms", "--algorithms", ",".join(algorithms),
         "--json"], check=True, capture_output=True, text=True).stdout
    return {row["algorithm"]: row["after_last_arrival_s"] * 1e6
            for row in json.loads(output)["results"]}


def size_bytes(size):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for unit, factor in units.items():
        if size.endswith(unit):
            return float(size[:-len(unit)]) * factor
    raise ValueError(f"size {size!r}: expected KiB, MiB or GiB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sim", required=True, help="the stragglar CLI")
    parser.add_argument("--round-cost-us", default="11.5,2")
    parser.add_argument("--sizes", default="25MiB,64MiB,256MiB")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--bandwidth", default="370GB/s")
    parser.add_argument("--nccl-alpha-us", type=float, default=1.0)
    parser.add_argument("--nvls-busbw-gbps", type=float, default=470.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    costs = [float(c) for c in args.round_cost_us.split(",")]
    sizes = args.sizes.split(",")
    n = args.ranks
    rows = []
    lines = ["| StragglAR's cost per round | size | StragglAR (flat / log-depth) | NCCL ring "
             "| NCCL tree | NVLS | best StragglAR ÷ NCCL's best of ring and tree "
             "| ÷ NVLS |", "|---|---|---|---|---|---|---|---|"]
    for cost in costs:
        for size in sizes:
            ours = after_arrival_us(args.sim, n, size, args.bandwidth, cost, FAMILIES)
            nccl = after_arrival_us(args.sim, n, size, args.bandwidth, args.nccl_alpha_us, NCCL)
            nvls = args.nccl_alpha_us + 2 * (n - 1) / n * size_bytes(size) / (
                args.nvls_busbw_gbps * 1e9) * 1e6
            best = min(ours.values())
            gain = min(nccl.values()) / best
            rows.append({"round_cost_us": cost, "size": size, "stragglar_us": ours,
                         "nccl_us": nccl, "nvls_us": nvls, "gain_vs_nccl": gain,
                         "gain_vs_nvls": nvls / best})
            lines.append(
                f"| {cost:g} µs | {size} | {ours['stragglar']:.0f} / "
                f"{ours['stragglar-log-depth']:.0f} µs | {nccl['nccl-ring']:.0f} µs "
                f"| {nccl['nccl-tree']:.0f} µs | {nvls:.0f} µs | **{gain:.2f}×** "
                f"| {nvls / best:.2f}× |")
    command = (f"scripts/node-model.py --sim build/bin/stragglar --round-cost-us "
               f"{args.round_cost_us} --sizes {args.sizes} --ranks {n} --bandwidth "
               f"{args.bandwidth} --nccl-alpha-us {args.nccl_alpha_us:g} --nvls-busbw-gbps "
               f"{args.nvls_busbw_gbps:g}")
    print(f"The model's number for {n} GPUs on NVLink ({args.bandwidth} for every algorithm, "
          f"NCCL's alpha {args.nccl_alpha_us:g} µs), time after the straggler's arrival. "
          f"Command: `{command}`\n")
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
