#!/usr/bin/env bash
# A/B of two commits on this machine: each commit built in its own
# worktree and target directory, then one bench run for OLD and one for
# NEW per round, alternating which goes first, and a table of every
# figure both print (the p50 of each `p50 … ms` in the bench's output, and
# the other figures named below) with its median over the rounds, NEW/OLD,
# and the machine's load during the runs.
#
# Usage: bash infra/scripts/ab-bench.sh OLD NEW [SECTIONS]
#   OLD, NEW  commits (anything `git rev-parse` takes: a7f660c, HEAD~1, main)
#   SECTIONS  the bench's BENCH_ONLY (e.g. engine, or task,gate); all when
#             omitted
# Environment:
#   AB_BENCH   the cargo bench target (default sessions; live, dashboard, …)
#   AB_ROUNDS  rounds (default 3; each runs both commits once)
#   AB_DIR     where the worktrees, target directories and outputs go
#              (default /var/tmp/cordon-ab; a commit's build is kept there
#              and reused by the next A/B that names it)
#   BENCH_ITER, BENCH_CAPACITY, …: passed to the bench as they are.
#
# The second build starts from a copy of the first's target directory, so
# the dependencies compile once (a cold release build of the bench is
# about 15 minutes on 2 cores; the second, about 5).
#
# Measure with nothing else building: a parallel cargo build moves the
# figures by 30 %. The load column says what the machine was doing; a
# figure whose rounds disagree by more than the gap between OLD and NEW
# says nothing.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

usage() {
  sed -n '/^# Usage/,/^# Environment/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 64
}
if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then usage; fi
old=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "ab-bench: not a commit: $1" >&2; exit 64; }
new=$(git rev-parse --verify --quiet "$2^{commit}") || { echo "ab-bench: not a commit: $2" >&2; exit 64; }
sections=${3:-}
case $sections in
  *[!a-z0-9,_-]*) echo "ab-bench: SECTIONS is a comma-separated list of section names" >&2; exit 64 ;;
esac
bench=${AB_BENCH:-sessions}
case $bench in
  '' | *[!a-z0-9_-]*) echo "ab-bench: AB_BENCH is a bench target's name" >&2; exit 64 ;;
esac
rounds=${AB_ROUNDS:-3}
case $rounds in
  '' | *[!0-9]* | 0) echo "ab-bench: AB_ROUNDS is a whole number of rounds, at least 1" >&2; exit 64 ;;
esac
dir=${AB_DIR:-/var/tmp/cordon-ab}
mkdir -p "$dir/out"

# Builds commit $1 and prints its bench executable's path.
build() {
  local sha=$1 wt=$dir/wt-${1:0:12} target=$dir/target-${1:0:12}
  if [ ! -d "$wt" ]; then
    git worktree add --detach "$wt" "$sha" >&2
  fi
  # The dependencies of another commit's build, when there is one.
  if [ ! -d "$target" ]; then
    local seed
    # The one built last (its `release/deps` changes at every build that
    # compiles something): most likely the nearest commit, with the fewest
    # crates to build again.
    seed=$(find "$dir" -mindepth 3 -maxdepth 3 -path "$dir/target-*/release/deps" \
      -printf '%T@ %h\n' | sort -rn | head -n 1 | cut -d' ' -f2-)
    seed=${seed%/release}
    if [ -n "$seed" ]; then
      echo "== $sha: starting from a copy of $seed" >&2
      cp -a "$seed" "$target"
    fi
  fi
  echo "== building $bench at $sha" >&2
  (cd "$wt" && CARGO_TARGET_DIR=$target cargo bench -p cordon --bench "$bench" --no-run \
    --message-format=json-render-diagnostics) |
    jq -r 'select(.reason == "compiler-artifact" and .executable != null
                  and .target.kind == ["bench"]) | .executable' | tail -n 1
}

old_exe=$(build "$old")
new_exe=$(build "$new")
if [ ! -x "$old_exe" ] || [ ! -x "$new_exe" ]; then
  echo "ab-bench: a build gave no bench executable" >&2
  exit 1
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=$dir/out/$stamp
mkdir -p "$out"
echo "== $rounds rounds of $bench${sections:+ ($sections)}, outputs in $out"
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for side in $order; do
    if [ "$side" = old ]; then exe=$old_exe sha=$old; else exe=$new_exe sha=$new; fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "-- round $r, $side (${sha:0:12}), load $load"
    # Run as cargo bench runs it: from the package's directory.
    (cd "$dir/wt-${sha:0:12}/server" && BENCH_ONLY=$sections "$exe" --bench) >"$out/$side-$r.txt" 2>&1 || {
      echo "ab-bench: the $side run of round $r failed; its output:" >&2
      tail -n 30 "$out/$side-$r.txt" >&2
      exit 1
    }
    echo "$load $(cut -d' ' -f1 /proc/loadavg)" >"$out/$side-$r.load"
  done
done

# The figures: every `p50 N ms` (named by the text before it on its line,
# its numbers as N),
# and `N× raw`, `N MiB per session`, `N fps` with their line's start.
python3 - "$out" "$rounds" "${old:0:12}" "${new:0:12}" <<'PY'
import re, statistics, sys
from pathlib import Path
out, rounds, old, new = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
stat = re.compile(r"p50\s+([0-9.]+)\s*ms")
other = re.compile(r"([0-9.]+)\s*(×|x raw|MiB per session|fps)")
def short(text):
    text = re.sub(r"p50.*?\(n=\d+\)", "", text)  # earlier stats on the line
    text = re.sub(r"\([^()]*\)", "", text)        # asides
    # Numbers in a label (a frame rate printed before the figure) would
    # make the two sides' names differ; a label printed twice is numbered.
    text = re.sub(r"\d+(?:\.\d+)?", "N", text)
    return " ".join(text.replace(":", " ").split())[:78] or "(unnamed)"
def figures(text):
    # A name printed twice (the same sub-line under two headings) is
    # numbered in order, alike on both sides.
    found = {}
    def put(name, value):
        n, k = name, 1
        while n in found:
            k += 1
            n = f"{name} #{k}"
        found[n] = value
    for line in text.splitlines():
        for m in stat.finditer(line):
            put(short(line[:m.start()]), float(m.group(1)))
        if not stat.search(line):
            for m in other.finditer(line):
                put(short(line[:m.start()]) + " [" + m.group(2) + "]", float(m.group(1)))
    return found
runs = {s: [figures((out / f"{s}-{r}.txt").read_text()) for r in range(1, rounds + 1)] for s in ("old", "new")}
loads = {s: [(out / f"{s}-{r}.load").read_text().split() for r in range(1, rounds + 1)] for s in ("old", "new")}
names = []
for s in ("old", "new"):
    for f in runs[s]:
        for n in f:
            if n not in names:
                names.append(n)
def med(s, n):
    v = [f[n] for f in runs[s] if n in f]
    return (statistics.median(v), len(v)) if v else (None, 0)
print(f"\nA/B: old {old}, new {new}; {rounds} rounds; medians over the rounds (ms unless marked)")
print(f"{'figure':<80} {'old':>10} {'new':>10} {'new/old':>8}")
for n in names:
    (o, _), (w, _) = med("old", n), med("new", n)
    ratio = f"{w / o:.2f}" if o and w is not None else "—"
    fmt = lambda v: "—" if v is None else f"{v:.2f}"
    print(f"{n:<80} {fmt(o):>10} {fmt(w):>10} {ratio:>8}")
for s in ("old", "new"):
    print(f"load (1 min, before → after) {s}: " + ", ".join(f"{a}→{b}" for a, b in loads[s]))
PY
