#!/usr/bin/env python3
"""scripts/gpu-results.py on made-up runs, so that what scripts/gpu-check.sh reads back from a GPU
is checked without one: each printed count and ratio follows from the files written here."""

import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "gpu-results.py")
failures = []


def run(*args, stdin=""):
    done = subprocess.run([sys.executable, SCRIPT, *args], input=stdin, capture_output=True,
                          text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def expect(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as work:
    # A trace of 25 calls at 1 MiB and 2 at 64 B: rank 0's algorithms, every call and the last 20
    # (the other ranks' rows, and the measured links' columns, are not counted).
    trace = os.path.join(work, "trace.csv")
    with open(trace, "w") as f:
        f.write("call,rank,arrival_s,duration_s,bytes,algorithm,link_bytes_per_s,"
                "link_send_bytes_per_s,link_receive_bytes_per_s\n")
        for call in range(25):
            for rank in range(2):
                algorithm = "ring" if call < 10 else "stragglar"
                f.write(f"{call},{rank},0,0,1048576,{algorithm},,,\n")
        f.write("25,0,0,0,64,,,,\n25,0,0,0,64,ring,,,\n")
    status, out, err = run("algorithms", trace)
    expect(status == 0, f"algorithms: status {status}: {err}")
    expect(out.splitlines() == [
        "# algorithms at 64 B: ? 1, ring 1 (last 20: ? 1, ring 1)",
        "# algorithms at 1048576 B: ring 10, stragglar 15 (last 20: ring 5, stragglar 15)",
    ], f"algorithms printed {out!r}")

    # Two benches of two sizes; the second lacks its second size's in-place row and the base has
    # an after-arrival time at the first size only.
    def bench(name, rows):
        with open(os.path.join(work, name + ".json"), "w") as f:
            json.dump({"rows": rows}, f)

    bench("bench-a-native", [
        {"size": 1024, "oop": {"time_us": 10.0, "after_arrival_us": 8.0}, "ip": {"time_us": 12.0}},
        {"size": 4096, "oop": {"time_us": 40.0}, "ip": {"time_us": 44.0}},
    ])
    bench("bench-e-forced", [
        {"size": 1024, "oop": {"time_us": 5.0, "after_arrival_us": 2.0}, "ip": {"time_us": 6.0}},
        {"size": 4096, "oop": {"time_us": 50.0}, "ip": {}},
    ])
    status, out, err = run("ratios", work, "bench-a-native", "bench-e-forced", "bench-missing")
    expect(status == 0, f"ratios: status {status}: {err}")
    lines = out.splitlines()
    expect(lines[0] == "bench-missing: no JSON results", f"ratios' first line {lines[:1]}")
    expect([line.split() for line in lines[3:]] == [
        ["1024", "oop", "10.0", "2.000x", "-"],
        ["after", "oop", "8.0", "4.000x", "-"],
        ["1024", "ip", "12.0", "2.000x", "-"],
        ["4096", "oop", "40.0", "0.800x", "-"],
        ["4096", "ip", "44.0", "-", "-"],
    ], f"ratios printed {lines[3:]}")
    with open(os.path.join(work, "ratios.json")) as f:
        kept = json.load(f)
    table = kept["bench-a-native vs bench-e-forced, bench-missing"]
    expect(len(table) == 5 and table[1] == {
        "size": 1024, "placement": "oop", "metric": "after_arrival_us", "bench-a-native": 8.0,
        "bench-e-forced": 2.0}, f"ratios.json {table[:2]}")
    # A second table is added beside the first, which stays.
    status, out, _ = run("ratios", work, "bench-e-forced", "bench-a-native")
    with open(os.path.join(work, "ratios.json")) as f:
        expect(len(json.load(f)) == 2, "ratios.json lost its first table")
    # No base rows: no table, and no failure (a GPU step that did not run).
    status, out, _ = run("ratios", work, "bench-missing", "bench-a-native")
    expect(status == 0 and "(no ratios: bench-missing has no rows)" in out, f"no base: {out!r}")

    # The checks' table: tab-separated lines, a detail with tabs of its own kept whole.
    path = os.path.join(work, "summary.json")
    status, _, err = run("summary", path, stdin="rounds\tPASS\t2.1 us\nlinks\tFAIL\ta\tb\n\n")
    expect(status == 0, f"summary: status {status}: {err}")
    with open(path) as f:
        expect(json.load(f) == {"checks": [
            {"check": "rounds", "status": "PASS", "detail": "2.1 us"},
            {"check": "links", "status": "FAIL", "detail": "a\tb"},
        ]}, "summary.json")

    # A command it does not know: its usage, and a failure.
    status, _, err = run("tables")
    expect(status != 0 and "gpu-results.py algorithms TRACE" in err, f"usage: {status} {err!r}")

if failures:
    sys.exit(f"{len(failures)} failed")
print("gpu_results: ok")
