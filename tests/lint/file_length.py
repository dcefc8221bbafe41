#!/usr/bin/env python3
"""File length: no C++ or Python file of the repository over 800 lines, tests included.
Every .cc, .h, .cu, .cuh and .py file is read, but those under build*/ and hidden folders
(.git, virtual environments).
Usage:
  file_length.py ROOT           print the breakers (and exceptions no longer needed); exit 1
                                when a file is over 800 lines and not a declared exception,
                                or when an exception is no longer over (take it off the list)
  file_length.py ROOT --list N  print every file over N lines, longest first
Why: a file that long holds more than one concern, and a newcomer cannot find the one they
look for (issue 54 split nine test files of 816 to 2,201 lines by concern into files under
600, and two sources). A test file splits like a source: its shared fixtures into a header
beside it, its tests by concern into files of the same test program."""
import os
import sys

MAX_LINES = 800
EXTENSIONS = (".cc", ".h", ".cu", ".cuh", ".py")

# Files allowed over MAX_LINES for now, each with why; the list only shrinks: an exception
# whose file is back under the limit (or gone) fails the lint until it is taken off.
EXCEPTIONS = {
}


def line_count(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(1 for _ in f)


def sources(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(("build", ".")) and x != "__pycache__")
        for f in sorted(files):
            if f.endswith(EXTENSIONS):
                path = os.path.join(d, f)
                yield os.path.relpath(path, root), line_count(path)


def main():
    root = sys.argv[1]
    args = sys.argv[2:]
    counts = dict(sources(root))
    if args[:1] == ["--list"]:
        limit = int(args[1])
        for path, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])):
            if n > limit:
                print(f"{n:6d} {path}")
        return 0
    failed = False
    for path, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])):
        if n <= MAX_LINES:
            continue
        if path in EXCEPTIONS:
            print(f"{path}: {n} lines, a declared exception ({EXCEPTIONS[path]})")
            continue
        print(f"{path}: {n} lines (at most {MAX_LINES}: split it by concern)")
        failed = True
    for path in sorted(EXCEPTIONS):
        if counts.get(path, 0) <= MAX_LINES:
            print(f"{path}: a declared exception no longer over {MAX_LINES} lines "
                  f"({counts.get(path, 'no such file')}): take it off the list in tests/lint/file_length.py")
            failed = True
    over = sum(1 for n in counts.values() if n > MAX_LINES)
    print(f"file_length: {len(counts)} files, {over} over {MAX_LINES} lines, "
          f"{len(EXCEPTIONS)} declared exceptions")
    return 1 if failed else 0


sys.exit(main())
