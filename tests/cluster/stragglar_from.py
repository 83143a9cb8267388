#!/usr/bin/env python3
"""Checks a job's trace (the contract's CSV): CALLS calls of RANKS ranks each, every rank running
the same algorithm at every call, and StragglAR at every call from FIRST on. Exits with one
"FAIL: ..." line otherwise. Shared by cluster.policy and cluster.slow_link.

usage: stragglar_from.py TRACE CALLS RANKS FIRST
"""
import collections
import csv
import sys

trace, calls_wanted, ranks, first = sys.argv[1], *map(int, sys.argv[2:5])
ran = collections.defaultdict(dict)  # call -> rank -> algorithm
with open(trace) as rows:
    for row in csv.DictReader(rows):
        ran[int(row["call"])][int(row["rank"])] = row["algorithm"]
calls = sorted(ran)
if len(calls) != calls_wanted or any(len(ran[c]) != ranks for c in calls):
    sys.exit(f"FAIL: the trace has {len(calls)} calls, not {calls_wanted} of {ranks} ranks each")
differ = [c for c in calls if len(set(ran[c].values())) != 1]
if differ:
    sys.exit(f"FAIL: the ranks ran different algorithms at calls {differ[:5]}")
other = [c for c in calls if c >= first and ran[c][0] != "stragglar"]
if other:
    sys.exit(f"FAIL: calls {other[:5]} from call {first} on ran {ran[other[0]][0]}, not stragglar")
