#!/bin/bash
# Whole-process timings of `faultline` at an older commit against this tree's build, side
# by side in one run, with the ratio per pair (old/new: above 1 means this tree is faster).
#   tests/bench/ab-commit.sh OLD_COMMIT NEW_FAULTLINE [RUNS] -- ARGS...
# builds OLD_COMMIT's `faultline` program only (in /tmp/faultline-ab/COMMIT, kept for the
# next call; ccache is used when installed), then runs `BIN ARGS...` for the two binaries
# in turn, A B A B ..., RUNS times each (default 5) after one warm-up each, and prints
# wall and CPU seconds (user+sys, children included) and peak memory (the largest single
# process), median and range, from /usr/bin/time. ARGS are run from the source root, so
# scenario paths are relative to it. Example (the issue's figure):
#   tests/bench/ab-commit.sh 28785e4 build/bin/faultline 5 -- sim run \
#       scenarios/byterobust-dense-9600.json --replicas 1000 --jobs 2
set -eu
old=${1:?usage: ab-commit.sh OLD_COMMIT NEW_FAULTLINE [RUNS] -- ARGS...}
new=${2:?usage: ab-commit.sh OLD_COMMIT NEW_FAULTLINE [RUNS] -- ARGS...}
shift 2
runs=5
if [ "${1:-}" != "--" ]; then runs=$1; shift; fi
[ "${1:-}" = "--" ] || { echo "ab-commit.sh: expected -- before the faultline arguments" >&2; exit 2; }
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
new=$(readlink -f "$new")
[ -x "$new" ] || { echo "ab-commit.sh: $new: not an executable" >&2; exit 2; }
sha=$(git -C "$root" rev-parse --verify "$old^{commit}") || { echo "ab-commit.sh: $old: not a commit" >&2; exit 2; }
dir=/tmp/faultline-ab/${sha:0:12}
if [ ! -x "$dir/build/bin/faultline" ]; then
  rm -rf "$dir"; mkdir -p "$dir"
  git -C "$root" archive "$sha" | tar -x -C "$dir" || { echo "ab-commit.sh: cannot export $sha" >&2; exit 1; }
  # The older tree reads ../shared like this one: point it at the same place.
  [ -e "$root/../shared" ] && ln -sfn "$(readlink -f "$root/../shared")" /tmp/faultline-ab/shared
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  echo "building faultline at ${sha:0:12} in $dir/build ..." >&2
  cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 "${launcher[@]}" \
    >"$dir/configure.log" 2>&1 || { echo "ab-commit.sh: configure failed: $dir/configure.log" >&2; exit 1; }
  cmake --build "$dir/build" -j"$(nproc)" --target faultline >"$dir/build.log" 2>&1 ||
    { echo "ab-commit.sh: build failed: $dir/build.log" >&2; exit 1; }
fi
oldbin=$dir/build/bin/faultline
cd "$root"
out=$(mktemp -d /tmp/ab-commit.XXXXXX)
one() {  # BIN TAG: one timed run, appended to $out/TAG
  /usr/bin/time -f "%e %U %S %M" -o "$out/last" "$1" "${@:3}" >/dev/null 2>"$out/stderr" ||
    { echo "ab-commit.sh: $2 run failed: $(tail -1 "$out/stderr")" >&2; exit 1; }
  cat "$out/last" >>"$out/$2"
}
one "$oldbin" warm "$@"; one "$new" warm "$@"
for _ in $(seq "$runs"); do one "$oldbin" old "$@"; one "$new" new "$@"; done
python3 - "$out" "${sha:0:12}" "$runs" "$*" <<'PY'
import statistics, sys
out, sha, runs, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def rows(tag):
    return [list(map(float, l.split())) for l in open(f"{out}/{tag}") if l.strip()]
old, new = rows("old"), rows("new")
def fig(rs, f):
    v = [f(r) for r in rs]
    return statistics.median(v), min(v), max(v)
print(f"faultline {args}   ({runs} runs each, interleaved)")
print(f"{'':14}{'old ' + sha:>28}{'this tree':>28}{'old/new (pairs)':>24}")
for name, f in [("wall s", lambda r: r[0]), ("cpu s", lambda r: r[1] + r[2]), ("peak MiB", lambda r: r[3] / 1024)]:
    o, n = fig(old, f), fig(new, f)
    ratios = sorted(f(a) / f(b) for a, b in zip(old, new) if f(b) > 0)
    print(f"{name:14}{o[0]:>12.3f} [{o[1]:.3f}-{o[2]:.3f}]{n[0]:>12.3f} [{n[1]:.3f}-{n[2]:.3f}]"
          f"{statistics.median(ratios):>10.2f} [{ratios[0]:.2f}-{ratios[-1]:.2f}]")
PY
rm -rf "$out"
