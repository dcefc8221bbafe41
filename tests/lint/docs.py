#!/usr/bin/env python3
"""The README is a front door: at most 300 lines, every docs/ page linked from it, and
every relative link in it and in docs/ (files and #anchors, as GitHub renders headings)
leads somewhere; docs/layout.md names every folder of the tree (each top-level folder and
each folder inside one, but tests/ and docs/, as `name/` or `parent/name/`) and no folder
that is not there. Usage: docs.py REPO_ROOT. Prints each broken rule; exits 1 if any."""
import os
import re
import sys

root = sys.argv[1]
pages = sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
files = ["README.md"] + pages


def slug(heading):
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def anchors(path):
    out, seen, in_code = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"#{1,6} (.*)", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


broken = []
readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
lines = readme.count("\n")
if lines > 300:
    broken.append(f"README.md: {lines} lines, expected at most 300 (details belong in docs/)")
for f in files:
    text = re.sub(r"```.*?```", "", open(os.path.join(root, f), encoding="utf-8").read(), flags=re.S)
    for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue  # http:, mailto:
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(root, os.path.dirname(f), path)) if path else os.path.join(root, f)
        if not os.path.exists(full):
            broken.append(f"{f}: link to {target}: no such file")
        elif anchor and full.endswith(".md") and anchor not in anchors(full):
            broken.append(f"{f}: link to {target}: no such heading")
for page in pages:
    if f"({page}" not in readme:
        broken.append(f"README.md: {page} is not linked from the README")


def folders(root):
    """The tree's folders (without build outputs and hidden folders): those a reader must
    find in docs/layout.md (depth 1 and 2; depth 1 only in tests/ and docs/), and every
    folder's name at any depth."""
    required, names = set(), set()
    for d, dirs, fs in os.walk(root):
        rel = os.path.relpath(d, root).replace(os.sep, "/")
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "build", "__pycache__")))
        if rel == ".":
            continue
        depth = rel.count("/") + 1
        names.add(rel)
        names.add(rel.split("/")[-1])
        if (fs or dirs) and (depth == 1 or (depth == 2 and rel.split("/")[0] not in ("tests", "docs"))):
            required.add(rel)
    return required, names


layout = open(os.path.join(root, "docs", "layout.md"), encoding="utf-8").read()
named = set(re.findall(r"`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*)/`", layout))
required, existing = folders(root)
for d in sorted(required):
    leaf = d.split("/")[-1]
    if d not in named and leaf not in named:
        also = f" or `{leaf}/`" if leaf != d else ""
        broken.append(f"docs/layout.md: folder {d}/ is not named (as `{d}/`{also})")
for n in sorted(named):
    if not n.startswith("..") and n not in existing:
        broken.append(f"docs/layout.md: names {n}/, which is not a folder of the tree")
for b in broken:
    print(b)
print(f"docs: {len(broken)} broken rule(s)")
sys.exit(1 if broken else 0)
