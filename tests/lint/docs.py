#!/usr/bin/env python3
"""The README is a front door: at most 300 lines, every docs/ page linked from it, and
every relative link in it and in docs/ (files and #anchors, as GitHub renders headings)
leads somewhere. Usage: docs.py REPO_ROOT. Prints each broken rule; exits 1 if any."""
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
for b in broken:
    print(b)
print(f"docs: {len(broken)} broken rule(s)")
sys.exit(1 if broken else 0)
