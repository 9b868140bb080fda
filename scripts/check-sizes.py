#!/usr/bin/env python3
"""Sizes a reader can hold: no production Rust file over 800 lines, and at
most three production functions over 100 lines, each saying in its doc
comment why it is still long ("Still one long function: ...").

Production code is every tracked `*.rs` file outside tests (`tests/`
directories, `tests.rs` files, the test kit, benches, fuzz targets), cut at
its first top-level `#[cfg(test)]`. A function's length runs from its `fn`
line to its closing brace; braces in strings, character literals and line
comments are not counted. Fails naming each file or function over the
limits."""

import re
import subprocess
import sys

MAX_FILE_LINES = 800
MAX_FN_LINES = 100
MAX_LONG_FNS = 3
REASON = "Still one long function"

TEST_PATH = re.compile(r"(^|/)tests/|(^|/)tests\.rs$|^test-kit/|(^|/)benches/|^fuzz/")
FN = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)")
NOISE = re.compile(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])\'|//.*$')


def production_lines(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if line.startswith("#[cfg(test)]"):
            return lines[:i], len(lines)
    return lines, len(lines)


def long_functions(path, lines):
    found = []
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        depth, opened, j = 0, False, i
        while j < len(lines):
            for ch in NOISE.sub("", lines[j]):
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if opened and depth == 0:
                break
            if not opened and lines[j].rstrip().endswith(";"):
                break
            j += 1
        if opened and j - i + 1 > MAX_FN_LINES:
            doc = "\n".join(lines[max(0, i - 12) : i])
            found.append((j - i + 1, path, i + 1, m.group(6), REASON in doc))
        i = j + 1 if opened else i + 1
    return found


def main():
    files = subprocess.run(
        ["git", "ls-files", "*.rs"], capture_output=True, text=True, check=True
    ).stdout.split()
    problems = []
    long_fns = []
    for path in files:
        if TEST_PATH.search(path):
            continue
        lines, total = production_lines(path)
        if total > MAX_FILE_LINES:
            problems.append(f"{path}: {total} lines (at most {MAX_FILE_LINES})")
        long_fns += long_functions(path, lines)
    for n, path, line, name, reasoned in long_fns:
        if not reasoned:
            problems.append(
                f"{path}:{line}: fn {name} is {n} lines (at most {MAX_FN_LINES}, "
                f"or a doc line '{REASON}: why')"
            )
    if len(long_fns) > MAX_LONG_FNS:
        names = ", ".join(f"{p}:{l} {name}" for _, p, l, name, _ in long_fns)
        problems.append(f"{len(long_fns)} functions over {MAX_FN_LINES} lines (at most {MAX_LONG_FNS}): {names}")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    if problems:
        return 1
    print(
        f"check-sizes: no production file over {MAX_FILE_LINES} lines; "
        f"{len(long_fns)} functions over {MAX_FN_LINES} lines, each with its reason"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
