#!/usr/bin/env python3
"""Every program parses its command line through the flag table (cli/flag_table.h): no C or
C++ source outside cli/flag_table.* compares an argument with an option by hand
(`a == "--name"`, `"--name" != a`, `strcmp(a, "--name")`). A program that takes an option
out before it dispatches uses FlagTable::extract. Python is not read: its programs parse with
argparse. Usage: flag_comparisons.py REPO_ROOT. Prints each comparison; exits 1 if any."""
import os
import re
import sys

# An option literal is "--" and a letter: a bare "--" (the end of options) is no option.
OPTION = r'"--[A-Za-z][^"]*"'
COMPARISON = re.compile(r"[!=]=\s*" + OPTION + "|" + OPTION + r"\s*[!=]=|strn?cmp\([^;]*" + OPTION)
EXEMPT = {os.path.join("cli", "flag_table.h"), os.path.join("cli", "flag_table.cc")}


def sources(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(("build", ".git")))
        for f in sorted(files):
            if f.endswith((".cc", ".h", ".cu", ".cuh", ".cpp")):
                yield os.path.join(d, f)


def main():
    root = sys.argv[1]
    found = []
    for path in sources(root):
        rel = os.path.relpath(path, root)
        if rel in EXEMPT:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if COMPARISON.search(line):
                    found.append(f"{rel}:{n}: a hand-written option comparison (use the flag "
                                 f"table, cli/flag_table.h): {line.strip()}")
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
