#!/usr/bin/env bash
# The control plane's own instructions per tool call: a figure that does
# not move with the machine (issue 25). `cordon serve` runs under
# valgrind's callgrind; its counters are zeroed before a burst of one kind
# of call and dumped after it; Chromium is outside the count (callgrind does not
# follow child processes) and so is the client (curl). Each figure is the
# instructions counted over the burst, less those of an idle window of the
# same length (timers, the reaper), divided by the number of calls. The
# second column leaves out glibc's memset: valgrind counts each byte of a
# `rep stosb` as an instruction, and tungstenite zeroes the unused part of
# its 128 KiB read buffer before every socket read, so memset swamps the
# first column and moves with how the reads fall. The second is the one
# to compare.
#
# Usage: bash infra/scripts/instructions.sh [CALLS]
#   CALLS  calls per burst (default 50)
# Environment:
#   CORDON_BIN  the binary to count (default target/release/cordon, built
#               with `cargo build --release -p cordon` when missing)
#   KEEP=1      keep the work directory (the callgrind dumps, for
#               callgrind_annotate)
# Needs valgrind (apt: valgrind), curl and python3. Everything is on
# 127.0.0.1. Takes a few minutes: the control plane runs some 50 times
# slower under callgrind.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
calls=${1:-50}
case $calls in
  '' | *[!0-9]* | 0) echo "instructions: CALLS is a whole number, at least 1" >&2; exit 64 ;;
esac
for tool in valgrind callgrind_control curl python3; do
  command -v "$tool" >/dev/null || { echo "instructions: $tool is missing (apt: valgrind, curl)" >&2; exit 1; }
done
bin=${CORDON_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/cordon}
if [ ! -x "$bin" ]; then
  cargo build --release -p cordon
fi

work=$(mktemp -d /tmp/cordon-instructions.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${KEEP:-}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The page: a heading and an input (the sessions bench's page).
mkdir -p "$work/www"
echo '<!doctype html><html><head><title>Bench</title></head><body><h1>Bench</h1><input id=i><p>Hello</p></body></html>' >"$work/www/index.html"
page_port=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$page_port" >/dev/null 2>&1 &
pids+=($!)
page=http://127.0.0.1:$page_port/

port=$(free_port)
export CORDON_DATA_DIR=$work/data CORDON_BIND=127.0.0.1:$port CORDON_POOL_SIZE=2 \
  CORDON_EGRESS_ALLOW=127.0.0.1:$page_port CORDON_EGRESS_RESOLVER=loopback-only \
  CORDON_LOG_LEVEL=warn CORDON_SESSION_IDLE_S=3600
"$bin" tenant create bench >/dev/null
key=$("$bin" apikey create --tenant bench --label instructions)

valgrind --tool=callgrind \
  --callgrind-out-file="$work/cg.out" "$bin" serve >"$work/serve.log" 2>&1 &
vg=$!
pids+=("$vg")
base=http://127.0.0.1:$port
for _ in $(seq 1 600); do
  curl -fsS "$base/readyz" >/dev/null 2>&1 && break
  kill -0 "$vg" 2>/dev/null || { echo "instructions: cordon serve exited:" >&2; tail -n 20 "$work/serve.log" >&2; exit 1; }
  sleep 0.5
done
curl -fsS "$base/readyz" >/dev/null || { echo "instructions: not ready after 300 s" >&2; exit 1; }

call() { # METHOD PATH [JSON] -> body; fails on a non-2xx answer
  curl -fsS -X "$1" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    ${3:+--data "$3"} "$base$2"
}
sid_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["session_id"])'; }

# Counts the instructions of "$@" run CALLS times, as "name total".
dumps=0
count() { # NAME COMMAND...
  local name=$1
  shift
  callgrind_control --zero "$vg" >/dev/null 2>&1
  local t0
  t0=$(date +%s.%N)
  for _ in $(seq 1 "$calls"); do "$@" >/dev/null; done
  local t1
  t1=$(date +%s.%N)
  callgrind_control --dump="$name" "$vg" >/dev/null 2>&1
  dumps=$((dumps + 1))
  echo "$name $(python3 -c "print($t1 - $t0)")" >>"$work/windows"
}

sid=$(call POST /api/sessions '{"record":"off"}' | sid_of)
call POST "/api/sessions/$sid/navigate" "{\"url\":\"$page\"}" >/dev/null
for _ in 1 2 3 4 5; do
  call POST "/api/sessions/$sid/press" '{"key":"Tab"}' >/dev/null
  call POST "/api/sessions/$sid/read_dom" '{}' >/dev/null
done

count press call POST "/api/sessions/$sid/press" '{"key":"Tab"}'
count read_dom call POST "/api/sessions/$sid/read_dom" '{}'
count navigate call POST "/api/sessions/$sid/navigate" "{\"url\":\"$page\"}"
call DELETE "/api/sessions/$sid" >/dev/null

# An open from the pool and its close, one pair per call (the pool refills
# in between, inside the count: a session's whole bookkeeping).
open_close() {
  local s
  s=$(call POST /api/sessions '{"record":"off"}' | sid_of)
  call DELETE "/api/sessions/$s" >/dev/null
}
count open_close open_close
# The same wall time with nothing asked: what runs anyway.
idle_for=$(awk '{ s += $2 } END { printf "%.1f", s / NR }' "$work/windows")
count_idle() { sleep "$(python3 -c "print($idle_for / $calls)")"; }
count idle count_idle

python3 - "$work" "$calls" <<'PY'
import re, subprocess, sys
from pathlib import Path
work, calls = Path(sys.argv[1]), int(sys.argv[2])
windows = dict(l.split() for l in (work / "windows").read_text().splitlines())
totals, memsets = {}, {}
for f in sorted(work.glob("cg.out*")):
    text = f.read_text(errors="replace")
    # `desc: Trigger: dump <name>` (callgrind_control --dump=<name>).
    tot = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
    m = re.search(r"^desc: Trigger: dump (\w+)$", text, re.M)
    name = m.group(1) if m else None
    if name in windows and tot:
        totals[name] = int(tot.group(1))
        # glibc's memset: valgrind counts each byte of a `rep stosb` as an
        # instruction, so tungstenite zeroing its 128 KiB read buffer before
        # every socket read (microseconds of real time) would swamp the
        # figure and move with how the reads happen to fall.
        ann = subprocess.run(["callgrind_annotate", "--threshold=100", str(f)],
                             capture_output=True, text=True).stdout
        memsets[name] = sum(int(l.split()[0].replace(",", ""))
                            for l in ann.splitlines()
                            if "memset" in l and re.match(r"^\s*[\d,]+ ", l))
idle = totals.get("idle", 0)
idle_rate = idle / float(windows["idle"]) if "idle" in windows else 0.0
idle_rest = (idle - memsets.get("idle", 0)) / float(windows["idle"]) if "idle" in windows else 0.0
print(f"instructions of the control plane per call ({calls} calls a burst; idle {idle_rate/1e6:.1f} M instructions/s subtracted)")
print(f"  {'call':<11} {'all':>8}   {'without memset':>14}")
for name in ("press", "read_dom", "navigate", "open_close"):
    if name not in totals:
        print(f"  {name}: no dump found")
        continue
    own = totals[name] - idle_rate * float(windows[name])
    rest = totals[name] - memsets[name] - idle_rest * float(windows[name])
    print(f"  {name:<11} {own / calls / 1e6:7.2f} M   {rest / calls / 1e6:12.2f} M   (whole burst {totals[name]/1e6:.0f} M in {float(windows[name]):.1f} s)")
PY
