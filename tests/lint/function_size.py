#!/usr/bin/env python3
"""Function sizes, read from formatted source (.clang-format: Google style, namespaces not
indented) and from Python. A C++ function is a definition whose body opens at the end of a
line at namespace or class level and closes with a `}` at the same indentation; lambdas and
local classes count toward the function that holds them. A Python function is a def, from
its first decorator to the last line of its body; a def inside it counts toward it. Every
.cc, .h, .cu and .py file is read but those under tests/ (test bodies read as scripts).
Usage:
  function_size.py ROOT [--list N]          print every function over N lines (default 100)
  function_size.py ROOT --check MAX_OVER_100 print the rule's breakers; exit 1 when a
                                            function is over 150 lines (declarative tables
                                            excepted: `// lint: table` on the line above)
                                            or more than MAX_OVER_100 are over 100.
Files over 800 lines: lint.file_length (file_length.py), tests included.
Why: a function that does not fit on two screens does more than one thing (leveldb has five
over 100 lines); the ceiling on how many may go only down."""
import os
import re
import sys

KEYWORDS = re.compile(r"^\s*(if|for|while|switch|do|else|namespace|class|struct|union|enum|extern|try|catch)\b")


def functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        body = line.rstrip()
        if body.endswith("{") and not KEYWORDS.match(line) and not body.lstrip().startswith(("//", "#", "=")):
            # The signature: this line and the continuation lines above it.
            start = i
            while start > 0 and lines[start - 1].strip() and not lines[start - 1].rstrip().endswith((";", "{", "}", ":")) \
                    and not lines[start - 1].lstrip().startswith(("//", "#")):
                start -= 1
            if len(lines[start]) - len(lines[start].lstrip(" ")) > 4:
                i += 1  # a statement's block, not a definition at namespace or class level
                continue
            signature = " ".join(l.strip() for l in lines[start:i + 1])
            if "(" in signature and not KEYWORDS.match(lines[start]) and not re.search(r"=\s*\{$", signature) \
                    and not re.match(r"^(class|struct|enum|namespace|union)\b", signature.split("(")[0].split()[-1] if signature.split("(")[0].split() else ""):
                indent = len(lines[start]) - len(lines[start].lstrip(" "))  # the signature's
                close = " " * indent + "}"
                j = i + 1
                while j < len(lines) and not (lines[j].startswith(close) and (len(lines[j]) - len(lines[j].lstrip(" "))) == indent):
                    j += 1
                if j < len(lines):
                    name = re.sub(r"\s+", " ", signature.split("(")[0]).split(" ")[-1]
                    table = start > 0 and "lint: table" in lines[start - 1]
                    out.append((j - start + 1, name, start + 1, table))
                    i = j + 1
                    continue
        i += 1
    return out


PY_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)\s*\(")


def py_functions(path):
    """Python functions and methods, from the def line (or its first decorator) to the last
    non-blank line of the body; a def inside a def counts toward the one that holds it."""
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    found = []
    for i, line in enumerate(lines):
        m = PY_DEF.match(line)
        if not m:
            continue
        indent = len(m.group(1))
        start = i
        while start > 0 and lines[start - 1].strip().startswith("@"):
            start -= 1
        body = i  # the signature may run over several lines: the body starts after its ':'
        depth = 0
        while body < len(lines):
            code = lines[body].split("#")[0]
            depth += code.count("(") + code.count("[") - code.count(")") - code.count("]")
            if depth <= 0 and code.rstrip().endswith(":"):
                break
            body += 1
        end = body
        quoted = None  # the quote of a multi-line string the line is in: its text may start anywhere
        for j in range(body + 1, len(lines)):
            t = lines[j]
            if quoted is None and t.strip() and len(t) - len(t.lstrip()) <= indent \
                    and not t.lstrip().startswith("#"):
                break
            if t.strip():
                end = j
            for q in ('"""', "'''"):
                if (quoted is None or quoted == q) and t.count(q) % 2:
                    quoted = None if quoted else q
        table = start > 0 and "lint: table" in lines[start - 1]
        found.append((end - start + 1, m.group(2), start + 1, table, end + 1))
    outer = [f for f in found if not any(o is not f and o[2] < f[2] <= o[4] for o in found)]
    return [f[:4] for f in outer]


def sources(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(("build", ".git")))
        rel = os.path.relpath(d, root)
        if rel == "tests" or rel.startswith("tests" + os.sep):
            continue  # test bodies are read as scripts: long is allowed there
        for f in sorted(files):
            if f.endswith((".cc", ".h", ".cu", ".py")):
                yield os.path.join(d, f)


def main():
    root = sys.argv[1]
    args = sys.argv[2:]
    found = []
    for path in sources(root):
        for n, name, line, table in (py_functions if path.endswith(".py") else functions)(path):
            found.append((n, os.path.relpath(path, root), line, name, table))
    found.sort(reverse=True)
    if args[:1] == ["--check"]:
        ceiling = int(args[1])
        over100 = [f for f in found if f[0] > 100 and not f[4]]
        over150 = [f for f in over100 if f[0] > 150]
        for n, path, line, name, _ in over150:
            print(f"{path}:{line}: {name} is {n} lines (at most 150, or mark a declarative table)")
        if len(over100) > ceiling:
            for n, path, line, name, _ in over100:
                print(f"{path}:{line}: {name} is {n} lines")
            print(f"{len(over100)} functions over 100 lines, at most {ceiling}: cut one, do not raise the ceiling")
        print(f"function_size: {len(over100)} over 100 lines, {len(over150)} over 150")
        sys.exit(1 if over150 or len(over100) > ceiling else 0)
    limit = int(args[1]) if args[:1] == ["--list"] else 100
    for n, path, line, name, table in found:
        if n > limit:
            print(f"{n:5d} {path}:{line} {name}{' (table)' if table else ''}")
    print(f"{sum(1 for f in found if f[0] > limit)} functions over {limit} lines")


main()
