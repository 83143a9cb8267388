#!/usr/bin/env python3
"""scripts/device-stamps.py reads the device executor's timeline (STRAGGLAR_DEVICE_STAMPS) as the
CSV that kernels/exec/device/device_timeline.cc writes, and each number it reports is the one
made-up stamps imply: two ranks, three calls, rank 1 starting 2 us after rank 0, each kernel 10 us
long with one 3 us wait and one 0.3 us post. A call one rank never launched (no GPU stamps) is left
out, no files is exit 2, and no call that every rank launched is exit 1."""

import json
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "device-stamps.py")


def write_rank(path, rank, calls, launched=lambda call: True):
    with open(path, "w") as f:
        f.write("call,source,event,ns,peer\n")
        for call in range(calls):
            base = call * 100_000  # 100 us between calls, on the host and on the GPU
            f.write(f"{call},host,run,{base + 1000 * rank},-1\n")
            if not launched(call):
                continue
            f.write(f"{call},host,launched,{base + 5000 + 1000 * rank},-1\n")
            enter = base + 20_000 + 2000 * rank
            peer = 1 - rank
            f.write(f"{call},gpu,enter,{enter},-1\n"
                    f"{call},gpu,post_begin,{enter + 500},-1\n"
                    f"{call},gpu,post_end,{enter + 800},-1\n"
                    f"{call},gpu,wait_begin,{enter + 1000},{peer}\n"
                    f"{call},gpu,wait_end,{enter + 4000},{peer}\n"
                    f"{call},gpu,exit,{enter + 10_000},-1\n")


def run(prefix, *extra):
    result = subprocess.run([sys.executable, SCRIPT, prefix, *extra], capture_output=True,
                            text=True)
    return result.returncode, result.stdout + result.stderr


def main():
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    with tempfile.TemporaryDirectory() as folder:
        prefix = os.path.join(folder, "t")
        write_rank(f"{prefix}-rank0.csv", 0, 4)
        write_rank(f"{prefix}-rank1.csv", 1, 4, launched=lambda call: call != 3)
        code, output = run(prefix, "--json", f"{prefix}.json")
        expect(code == 0, f"exit {code}: {output}")
        report = json.load(open(f"{prefix}.json"))
        expect(report["calls"] == 3, f"calls {report['calls']} (call 3 of rank 1 never launched)")
        expected = {"host interval": 100, "host launch": 5, "gpu interval": 100,
                    "gpu idle": 90, "kernel": 10, "in waits": 3, "in posts": 0.3,
                    "one post": 0.3, "elsewhere": 6.7, "start skew": 2, "first wait": 3}
        for name, value in expected.items():
            got = report["us"].get(name, {}).get("median")
            expect(got is not None and abs(got - value) < 1e-9, f"{name}: {got}, expected {value}")
        expect(report["waits_by_place_us"] == {"0": 3.0}, f"waits {report['waits_by_place_us']}")
        expect("start skew" in output and "2.0" in output, f"the table: {output}")

        code, output = run(os.path.join(folder, "none"))
        expect(code == 2 and "no " in output, f"no files: exit {code}: {output}")

        write_rank(f"{prefix}2-rank0.csv", 0, 2)
        write_rank(f"{prefix}2-rank1.csv", 1, 2, launched=lambda call: False)
        code, output = run(f"{prefix}2")
        expect(code == 1 and "no call has every rank's" in output, f"none common: {code}: {output}")

    for failure in failures:
        print("FAIL:", failure)
    print("device-stamps: ok" if not failures else f"device-stamps: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
