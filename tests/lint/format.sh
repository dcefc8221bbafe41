#!/usr/bin/env bash
# Every C++/CUDA source file is formatted as .clang-format says (the house style,
# docs/architecture.md §6), so that a diff shows changes and not someone's editor settings.
# Usage: format.sh REPO_ROOT. Fix with `git clang-format` (what a commit changes) or
# `clang-format -i FILE`. Without clang-format (Debian's clang-format package) the test is
# skipped (exit 77) on a developer's machine and fails under CI.
set -uo pipefail
root="$1"
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
  echo "lint.format: clang-format not found (apt-get install clang-format)"
  [ -n "${CI:-}" ] && exit 1
  exit 77
fi
cd "$root" || exit 1
mapfile -d '' files < <(find . \( -path ./build -o -path './build-*' -o -path ./.git \) -prune -o \
  -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' \) -print0 | sort -z)
bad=0
for f in "${files[@]}"; do
  if ! "$cf" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "${f#./}: not formatted (clang-format -i ${f#./})"
    bad=$((bad + 1))
  fi
done
echo "lint.format: ${#files[@]} files, $bad not formatted"
[ "$bad" -eq 0 ]
