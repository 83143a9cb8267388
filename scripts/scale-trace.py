#!/usr/bin/env python3
"""A synthetic trace for `stragglar replay` at scale (docs/policy.md): RANKS ranks, CALLS calls of
16 MiB, 100 ms apart; the last rank 20 ms late, the others within 10 us. Deterministic.

Usage: scripts/scale-trace.py [RANKS] [CALLS] > FILE   (default: 4096 1000)
"""
import random
import sys


def main() -> None:
    ranks = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    random.seed(1)
    out = sys.stdout
    out.write("call,rank,arrival_s,duration_s,bytes\n")
    for call in range(calls):
        start = call * 0.1
        for rank in range(ranks):
            lag = 0.020 if rank == ranks - 1 else random.uniform(0, 10e-6)
            out.write(f"{call},{rank},{start + lag:.9f},0.001,16777216\n")


if __name__ == "__main__":
    main()
