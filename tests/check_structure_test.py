#!/usr/bin/env python3
"""scripts/check-structure.py finds what it is for: planted in small trees, an include cycle
between folders, a file over the limit, a function over the limit and each kind of broken layer
rule are each reported, and clean trees (with lambdas, classes, namespaces, raw strings and
initializer braces; with the layers' allowed includes) pass."""

import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "check-structure.py")


def run(files, *extra):
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        result = subprocess.run([sys.executable, SCRIPT, "--root", root, *extra],
                                capture_output=True, text=True)
        return result.returncode, result.stdout + result.stderr


def function(name, body_lines):
    body = "".join(f"  int x{i} = {i};\n" for i in range(body_lines))
    return f"int {name}() {{\n{body}  return 0;\n}}\n"


CLEAN = {
    "low/a.h": '#pragma once\nnamespace n {\nstruct A { int f() const { return 1; } };\n}\n',
    "high/b.cc": ('#include "low/a.h"\nnamespace n {\nnamespace {\n'
                  'constexpr int kTable[] = {1, 2, 3};\n'
                  'const char* kText = R"(a { brace ) and "quotes")";\n}  // namespace\n'
                  + function("Short", 100) +
                  'int Lambda() {\n  auto f = [](int a) { return a; };\n  return f(1);\n}\n'
                  'class C {\n public:\n  int g() { return 2; }\n};\n}  // namespace n\n'),
}


def header(*includes):
    return "#pragma once\n" + "".join(f'#include "{i}"\n' for i in includes)


# The layers as they are meant to include each other (docs/architecture.md): passes.
LAYERED = {
    "base/log.h": header(),
    "kernels/plan/plan.h": header(),
    "kernels/reduce/reduce.h": header(),
    "kernels/cuda/scope.h": header(),
    "kernels/synth/ring.cc": header("kernels/plan/plan.h"),
    "kernels/program/program.h": header("kernels/plan/plan.h", "kernels/reduce/reduce.h"),
    "kernels/exec/progress.h": header(),
    "kernels/exec/args.h": header("kernels/program/program.h", "kernels/reduce/reduce.h"),
    "kernels/exec/host/run.h": header("kernels/program/program.h", "kernels/exec/progress.h",
                                      "kernels/exec/args.h"),
    "kernels/exec/nccl/run.h": header("kernels/program/program.h", "kernels/cuda/scope.h"),
    "profiler/timer.h": header("kernels/cuda/scope.h"),
    "policy/model/links.h": header("kernels/plan/plan.h"),
    "policy/cache.h": header("kernels/synth/ring.cc", "kernels/program/program.h",
                             "profiler/timer.h", "policy/model/links.h"),
    "exporters/out.h": header("policy/cache.h"),
    "pipeline/schedule.h": header("policy/cache.h"),
    "runtime/comm.h": header("kernels/exec/host/run.h", "policy/cache.h", "exporters/out.h",
                             "pipeline/schedule.h", "base/log.h"),
    "pipeline/links/profiler.h": header("pipeline/schedule.h", "runtime/comm.h", "exporters/out.h"),
    "runtime/replay/replay.h": header("runtime/comm.h"),
    "runtime/mpi/backend.h": header("runtime/comm.h"),
    "runtime/nccl/backend.h": header("runtime/comm.h", "kernels/exec/nccl/run.h",
                                     "pipeline/links/profiler.h"),
}


def main():
    failures = []

    def expect(name, files, code, needle=None, *extra):
        got_code, output = run(files, *extra)
        if got_code != code or (needle and needle not in output):
            failures.append(f"{name}: exit {got_code}, output:\n{output}")

    expect("clean tree passes", CLEAN, 0, "no include cycle")
    cycle = dict(CLEAN)
    cycle["low/c.h"] = '#pragma once\n#include "high/d.h"\n'
    cycle["high/d.h"] = '#pragma once\n#include "low/a.h"\n'
    expect("an include cycle", cycle, 1, "include cycle between folders: high -> low -> high")
    long_file = dict(CLEAN)
    long_file["low/long.cc"] = "// line\n" * 701
    expect("a long file", long_file, 1, "low/long.cc: 701 lines (at most 700)")
    long_function = dict(CLEAN)
    long_function["low/f.cc"] = "namespace n {\n" + function("TooLong", 120) + "}\n"
    expect("a long function", long_function, 1, "low/f.cc:2: a function of 123 lines")
    # Functions inside a class and test macros count too.
    member = dict(CLEAN)
    member["low/m.cc"] = ("struct S {\n  void Method() {\n" + "    ;\n" * 130 + "  }\n};\n"
                          "TEST(Suite, Name) {\n" + "  ;\n" * 130 + "}\n")
    expect("a long method", member, 1, "low/m.cc:2: a function of 132 lines")
    expect("a long test", member, 1, "low/m.cc:135: a function of 132 lines")
    expect("the layers' allowed includes pass", LAYERED, 0, "the 18 layer rules hold")
    crowded = dict(CLEAN)
    for i in range(31 - sum(1 for path in CLEAN if path.startswith("low/"))):
        crowded[f"low/part{i}.h"] = "#pragma once\n"
    expect("a crowded folder", crowded, 1, "low/: 31 source files directly inside (at most 30)")
    crowded.pop("low/part0.h")
    expect("a full folder", crowded, 0, "no folder of more than 30 files")
    # One planted include per rule kind, each in a tree that has no cycle.
    planted = [
        ("kernels/synth/stragglar.cc", "kernels/exec/host/run.h",
         "kernels/synth may include only kernels/plan"),
        ("kernels/exec/mpi/run.cc", "kernels/exec/host/run.h",
         "kernels/exec/* may include only kernels/plan, kernels/program"),
        ("kernels/exec/device/run.cc", "kernels/synth/ring.cc",
         "kernels/exec/* may include only"),
        ("kernels/plan/verifier.cc", "kernels/reduce/reduce.h",
         "kernels/plan may include only itself"),
        ("kernels/reduce/exact.cc", "kernels/plan/plan.h",
         "kernels/reduce may include only itself"),
        ("kernels/program/lower.cc", "kernels/synth/ring.cc",
         "kernels/program may include only kernels/plan, kernels/reduce"),
        ("kernels/exec/queue.cc", "kernels/plan/plan.h",
         "kernels/exec may include only kernels/program, kernels/reduce"),
        ("kernels/newlayer/a.cc", "profiler/timer.h", "kernels/** may include only kernels/**"),
        ("policy/chooser.cc", "kernels/exec/nccl/run.h", "policy/** never includes"),
        ("profiler/gpu.cc", "kernels/exec/host/run.h", "profiler/** never includes"),
        ("exporters/trace.cc", "kernels/exec/host/run.h", "exporters/** never includes"),
        ("runtime/core.cc", "kernels/exec/nccl/run.h", "runtime never includes"),
        ("runtime/config.cc", "pipeline/links/profiler.h", "runtime never includes"),
        ("pipeline/search.cc", "exporters/out.h", "pipeline never includes"),
        ("policy/policy.cc", "pipeline/schedule.h", "policy/** never includes"),
        ("runtime/mpi/preload.cc", "runtime/nccl/backend.h", "runtime/mpi never includes"),
        ("runtime/nccl/preload.cc", "runtime/mpi/backend.h", "runtime/nccl never includes"),
        ("base/units.cc", "runtime/comm.h", "base may include only itself"),
        ("policy/model/sim.cc", "policy/cache.h", "policy/model never includes policy"),
        ("runtime/replay/replay.cc", "runtime/mpi/backend.h", "runtime/replay never includes"),
    ]
    for path, included, needle in planted:
        tree = dict(LAYERED)
        tree[path] = f'#include "{included}"\n'
        expect(f"{path} including {included}", tree, 1, f"{path}: includes {included}, but "
               + needle)
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        return 1
    print("check-structure reports every planted problem and passes a clean tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
