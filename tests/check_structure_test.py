#!/usr/bin/env python3
"""scripts/check-structure.py finds what it is for: planted in small trees, an include cycle
between folders, a file over the limit and a function over the limit are each reported, and a
clean tree (with lambdas, classes, namespaces, raw strings and initializer braces) passes."""

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
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        return 1
    print("check-structure reports every planted problem and passes a clean tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
