#!/usr/bin/env python3
"""Checks the shape of the source tree (the test suite runs it):

  - layers: the folders' include graph has no cycle (a folder is the directory of a file, so
    runtime/ and runtime/nccl/ are two nodes); a cycle is printed with one include per edge;
  - rules: each of LAYER_RULES (which folders a folder may include, or must never include) holds
    for every include of the tree; a broken rule is printed with the include and the rule's why;
  - file length: no hand-written source file over --max-file-lines lines (stored tables aside,
    listed in LONG_FILES with the reason);
  - function length: no function over --max-function-lines lines, from its signature to its
    closing brace (a brace-counting reader, not a compiler: good enough for this tree's style);
  - folder size: no folder with more than --max-folder-files source files directly inside (a
    folder holds one idea; past that, its parts want folders of their own).

usage: check-structure.py [--root DIR] [--max-file-lines 700] [--max-function-lines 120]
                          [--max-folder-files 30]
Exit status 0 when the tree passes, 1 with one line per finding otherwise.
"""

import argparse
import os
import re
import subprocess
import sys

SOURCE_SUFFIXES = (".cc", ".h", ".cu", ".cuh", ".c")
# Files allowed past the file-length limit, and why. None today.
LONG_FILES = {}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# Which folders a folder may include, beyond itself. A pattern names folders by path segments:
# `*` is one segment, `**` any number (none too), so `kernels/exec/*` is each executor's folder and
# `kernels/**` is kernels/ and everything below it. A rule is (folders, "only" | "never",
# included folders, why): "only" lets the folders include nothing but those (and themselves),
# "never" forbids those. Every rule that matches a folder applies.
# What only the preload libraries and link profiling may know: MPI's and NCCL's glue.
LIBRARY_GLUE = ["kernels/exec/mpi", "kernels/exec/nccl", "kernels/exec/device", "runtime/mpi",
                "runtime/nccl", "pipeline/links"]
LAYER_RULES = [
    ("base", "only", [],
     "the base layer (logging, atomic files, units) stands below every layer that uses it"),
    ("kernels/**", "only", ["kernels/**"],
     "the collective layer knows no policy, clock, communicator or library glue"),
    ("kernels/plan", "only", [], "the plan IR stands alone: every other layer reads it"),
    ("kernels/synth", "only", ["kernels/plan"], "a synthesizer makes plans from the IR alone"),
    ("kernels/reduce", "only", [], "element reduction knows nothing of plans or transports"),
    ("kernels/cuda", "only", [], "the shared CUDA helpers know nothing of the layers using them"),
    ("kernels/program", "only", ["kernels/plan", "kernels/reduce"],
     "a program is a plan lowered for one rank, with its element type"),
    ("kernels/exec", "only", ["kernels/program", "kernels/reduce"],
     "what every executor shares (a call's arguments and progress) is of programs and elements"),
    ("kernels/exec/*", "only", ["kernels/plan", "kernels/program", "kernels/reduce",
                                "kernels/cuda", "kernels/exec"],
     "an executor runs a program: it never synthesizes a plan, nor uses another executor's code"),
    ("policy/**", "never", ["kernels/exec/**", "runtime/**", "exporters/**", "pipeline/**"],
     "the policy decides from plans and timings: it runs nothing and writes nothing"),
    ("policy/model", "never", ["policy"],
     "the cost model prices plans on links; the policy above it decides with those prices"),
    ("profiler/**", "never", ["kernels/exec/**", "policy/**", "runtime/**"],
     "the profiler measures calls; it neither runs nor decides them"),
    ("exporters/**", "never", ["kernels/exec/**", "runtime/**"],
     "exporters observe reports; they do not know how calls are run or exchanged"),
    ("runtime", "never", LIBRARY_GLUE,
     "the protocol and its library-free backends know neither MPI, NCCL nor link profiling"),
    ("runtime/replay", "never", LIBRARY_GLUE,
     "replayed traces are one of the protocol's library-free backends"),
    ("pipeline", "never", ["kernels/exec/**", "runtime/**", "exporters/**", "pipeline/links"],
     "the pipeline advisor's model prices schedules from link times: it runs and reads nothing"),
    ("runtime/mpi", "never", ["runtime/nccl", "kernels/exec/nccl", "kernels/exec/device"],
     "the MPI preload knows nothing of NCCL"),
    ("runtime/nccl", "never", ["runtime/mpi", "kernels/exec/mpi"],
     "the NCCL preload knows nothing of MPI"),
]


def source_files(root):
    """The tracked sources of a git checkout, else every source below root."""
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, text=True,
                                check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        listed = []
        for directory, _, names in os.walk(root):
            listed += [os.path.relpath(os.path.join(directory, n), root) for n in names]
    return sorted(p for p in listed if p.endswith(SOURCE_SUFFIXES) and
                  os.path.isfile(os.path.join(root, p)) and not p.startswith("build"))


def project_includes(root, path, present):
    """The includes of `path` that name files of the tree (not system or generated headers)."""
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return [included for included in INCLUDE.findall(f.read()) if included in present]


def include_graph(root, files):
    """{folder: {included folder: "file: include"}} for includes of files in the tree."""
    graph = {}
    present = set(files)
    for path in files:
        folder = os.path.dirname(path)
        for included in project_includes(root, path, present):
            target = os.path.dirname(included)
            if target != folder:
                graph.setdefault(folder, {}).setdefault(target, f"{path}: {included}")
    return graph


def folder_matches(pattern, folder):
    """Whether `folder` (a/b/c) is named by `pattern` (segments, `*` one, `**` any number)."""
    def match(parts, names):
        if not parts:
            return not names
        if parts[0] == "**":
            return any(match(parts[1:], names[i:]) for i in range(len(names) + 1))
        return bool(names) and parts[0] in ("*", names[0]) and match(parts[1:], names[1:])
    return match(pattern.split("/"), folder.split("/") if folder else [])


def broken_rules(root, files):
    """One line per include that breaks a rule of LAYER_RULES."""
    present = set(files)
    found = []
    for path in files:
        folder = os.path.dirname(path)
        rules = [r for r in LAYER_RULES if folder_matches(r[0], folder)]
        if not rules:
            continue
        for included in project_includes(root, path, present):
            target = os.path.dirname(included)
            if target == folder:
                continue
            for pattern, kind, folders, why in rules:
                named = any(folder_matches(p, target) for p in folders)
                if named != (kind == "only"):
                    allowed = (f"may include only {', '.join(folders) or 'itself'}"
                               if kind == "only" else f"never includes {', '.join(folders)}")
                    found.append(f"{path}: includes {included}, but {pattern} {allowed} ({why})")
                    break
    return found


def find_cycle(graph):
    """One cycle of folders as a list [a, b, ..., a], or None."""
    state = {}  # folder -> "visiting" | "done"
    stack = []

    def visit(node):
        state[node] = "visiting"
        stack.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == "visiting":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def strip_comments_and_literals(text):
    """The text with comments, strings and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            open_paren = text.find("(", i)
            delimiter = text[i + 2:open_paren]
            j = text.find(")" + delimiter + '"', open_paren)
            j = n if j < 0 else j + len(delimiter) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            # A digit separator (1'000'000) is no literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and j < n and text[i + 1].isdigit():
                out.append(c)
                i += 1
                continue
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


CONTROL = re.compile(r"^\s*(if|for|while|switch|do|else|try|catch|return)\b")


def long_functions(text, limit):
    """[(first line, lines, head)] of the functions longer than `limit` lines."""
    code = strip_comments_and_literals(text)
    found = []
    stack = []  # (kind, start line) per open brace
    head_start = 0  # where the text before the next brace began (after ; { or })
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c in ";{}":
            if c == "{":
                head = code[head_start:i]
                enclosing = stack[-1][0] if stack else "scope"
                kind = "block"
                if enclosing in ("scope", "namespace", "type"):
                    if re.search(r"\bnamespace\b", head) or re.search(r'extern\s*$', head):
                        kind = "namespace"
                    elif re.search(r'\bextern\b', head) and "(" not in head:
                        kind = "namespace"
                    elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", head):
                        kind = "type"
                    elif ")" in head and "=" not in head.split("(")[0] and not CONTROL.match(head):
                        kind = "function"
                first = line - head.count("\n")
                # Skip blank lines at the head's start.
                for piece in head.split("\n"):
                    if piece.strip():
                        break
                    first += 1
                stack.append((kind, first, head.strip()))
            elif c == "}" and stack:
                kind, first, head = stack.pop()
                if kind == "function" and line - first + 1 > limit:
                    found.append((first, line - first + 1, " ".join(head.split())[:80]))
            head_start = i + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--max-file-lines", type=int, default=700)
    parser.add_argument("--max-function-lines", type=int, default=120)
    parser.add_argument("--max-folder-files", type=int, default=30)
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    files = source_files(root)
    findings = []
    graph = include_graph(root, files)
    cycle = find_cycle(graph)
    if cycle:
        edges = "; ".join(f"{a} -> {b} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:]))
        findings.append(f"include cycle between folders: {' -> '.join(cycle)}: {edges}")
    findings += broken_rules(root, files)
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n")
        if lines > args.max_file_lines and path not in LONG_FILES:
            findings.append(f"{path}: {lines} lines (at most {args.max_file_lines})")
        for first, length, head in long_functions(text, args.max_function_lines):
            findings.append(f"{path}:{first}: a function of {length} lines (at most "
                            f"{args.max_function_lines}): {head}")
    per_folder = {}
    for path in files:
        folder = os.path.dirname(path)
        per_folder[folder] = per_folder.get(folder, 0) + 1
    for folder, count in sorted(per_folder.items()):
        if count > args.max_folder_files:
            findings.append(f"{folder or '.'}/: {count} source files directly inside (at most "
                            f"{args.max_folder_files})")
    for finding in findings:
        print(finding)
    if findings:
        return 1
    layers = sorted(graph)
    print(f"check-structure: {len(files)} files, {len(layers)} folders that include others, "
          f"no include cycle, the {len(LAYER_RULES)} layer rules hold, no file over "
          f"{args.max_file_lines} lines, no function over {args.max_function_lines} lines, no "
          f"folder of more than {args.max_folder_files} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
