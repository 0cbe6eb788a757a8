#!/usr/bin/env bash
# The browser pod's container, run for real (opt-in; not in CI): the browser
# image (infra/images/browser) run the way infra/k8s/browser-pod-template.yaml
# asks, translated to `podman run` flags by infra/tests/pod-podman.py (user,
# securityContext, resource limits, emptyDirs as tmpfs, readiness probe;
# `pod-podman.py args` prints the command), then driven:
#
#  1. directly over CDP (playwright-core, infra/tests/pod-drive.js): the
#     container is ready when its probe passes, runs as uid 10002 with a
#     read-only root, no capabilities, no_new_privs and seccomp, its limits
#     are in force, a page loads, a screenshot is taken, Browser.close ends
#     Chromium and with it the container; a probe that never passes, a
#     template that asks for privileges and a missing image are each a
#     clear error with no container left;
#  2. through Cordon (`cordon serve` with sandbox_driver = "exec", whose
#     create and destroy commands are pod-podman.py): a tenant and API key
#     made with the CLI, a session opened (one container per browser), a
#     page served on the host's loopback navigated through Cordon's egress
#     guard, a snapshot and a screenshot, the live view's first frame over
#     a live link, a download taken over CDP (download_transfer = "cdp":
#     the container shares no folder with Cordon) fetched byte-identical,
#     the session closed (its container removed), and SIGTERM
#     to Cordon removing the warm pool's containers: none left.
#
# Usage (as root, from a clone): bash infra/tests/pod-container.sh [--no-cordon]
# Environment: CORDON_BIN (default target/debug/cordon; built with
# `cargo build -p cordon` when absent), CORDON_SITE_ROOT (default
# target/site; `bash infra/scripts/build-site.sh debug` when absent),
# CORDON_BROWSER_IMAGE (default localhost/cordon-browser:0.1.0; built with
# infra/images/build-local.sh when absent), CORDON_POD_TEMPLATE (default the
# shipped template).
# Installs (apt) if missing: podman, runc, uidmap, fuse-overlayfs,
# slirp4netns (infra/images/podman-env.sh) and python3-yaml; the end-to-end
# tests' npm packages (end2end/, npm ci) for playwright-core and ws.
# Took 15 s here with the image and the binary built (1.5-2 min more to
# build the image the first time).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
with_cordon=1
for arg in "$@"; do
  case $arg in
    --no-cordon) with_cordon=0 ;;
    *)
      echo "pod-container: unknown argument $arg" >&2
      exit 64
      ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "pod-container: run as root (rootful podman)" >&2; exit 1; }

image=${CORDON_BROWSER_IMAGE:-localhost/cordon-browser:0.1.0}
template=${CORDON_POD_TEMPLATE:-$root/infra/k8s/browser-pod-template.yaml}
py=/usr/bin/python3
pod=("$py" "$root/infra/tests/pod-podman.py")
started=$(date +%s)
step() { echo "-- [$(($(date +%s) - started)) s] $*"; }
fail() { echo "pod-container: FAILED: $*" >&2; exit 1; }

# shellcheck source=infra/images/podman-env.sh
. "$root/infra/images/podman-env.sh"
podman_env_setup python3-yaml
if ! podman image exists "$image"; then
  step "no image $image: building it (infra/images/build-local.sh)"
  CORDON_BROWSER_IMAGE=$image bash "$root/infra/images/build-local.sh"
fi
if [ ! -d "$root/end2end/node_modules/playwright-core" ] || [ ! -d "$root/end2end/node_modules/ws" ]; then
  step "installing the end-to-end tests' npm packages (end2end/)"
  (cd "$root/end2end" && npm ci --no-audit --no-fund --loglevel=error)
fi
export NODE_PATH=$root/end2end/node_modules

work=$(mktemp -d /tmp/cordon-pod-check.XXXXXX)
cordon_pid=
page_pid=
before=$(podman ps -a --filter label=cordon.dev/sandbox --format '{{.Names}}' | sort)
cleanup() {
  local status=$?
  [ -z "$cordon_pid" ] || kill "$cordon_pid" 2>/dev/null || true
  [ -z "$page_pid" ] || kill "$page_pid" 2>/dev/null || true
  [ -z "$cordon_pid" ] || wait "$cordon_pid" 2>/dev/null || true
  # Whatever this run made and left (on failure): removed.
  local name
  for name in $(podman ps -a --filter label=cordon.dev/sandbox --format '{{.Names}}' | sort | comm -13 <(echo "$before") -); do
    echo "pod-container: removing leftover container $name" >&2
    podman rm --force --time 0 "$name" >/dev/null 2>&1 || true
  done
  if [ "$status" != 0 ] && [ -f "$work/cordon.log" ]; then
    echo "pod-container: the last lines of Cordon's log (enrollment links left out):" >&2
    grep -v '/enroll#' "$work/cordon.log" | tail -n 30 >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
leftovers() { podman ps -a --filter label=cordon.dev/sandbox --format '{{.Names}}' | sort | comm -13 <(echo "$before") -; }

step "the template as podman flags (pod-podman.py args)"
"${pod[@]}" args --template "$template" --image "$image" --sandbox-id b_podcheck --proxy 127.0.0.1:9

# ---------------------------------------------------------------- 1. CDP
step "1. the pod's container, driven over CDP"
t0=$(date +%s%N)
cdp=$("${pod[@]}" create --template "$template" --image "$image" --sandbox-id b_podcheck --proxy 127.0.0.1:9)
echo "ready in $((($(date +%s%N) - t0) / 1000000)) ms at $cdp"
name=cordon-b-podcheck
case $cdp in http://127.0.0.1:*) ;; *) fail "the CDP port is not published on 127.0.0.1: $cdp" ;; esac

# What the container runs as, as the kernel sees it.
inside() { podman exec "$name" sh -c "$1"; }
[ "$(inside 'id -u'):$(inside 'id -g')" = 10002:10002 ] || fail "not uid/gid 10002: $(inside id)"
status=$(inside 'cat /proc/1/status')
grep -q '^CapEff:[[:space:]]*0000000000000000$' <<<"$status" || fail "capabilities left: $(grep Cap <<<"$status")"
grep -q '^CapBnd:[[:space:]]*0000000000000000$' <<<"$status" || fail "bounding set not empty"
grep -q '^NoNewPrivs:[[:space:]]*1$' <<<"$status" || fail "no_new_privs not set"
grep -q '^Seccomp:[[:space:]]*2$' <<<"$status" || fail "no seccomp filter"
if inside 'touch /usr/x' 2>/dev/null; then fail "the root filesystem is writable"; fi
for dir in /run /var/tmp /home; do
  if inside "touch $dir/x" 2>/dev/null; then fail "$dir is writable (podman's --read-only tmpfs?)"; fi
done
inside 'touch /tmp/x /dev/shm/x && rm /tmp/x /dev/shm/x' || fail "/tmp or /dev/shm is not writable"
mounts=$(inside 'cat /proc/mounts')
grep -q '^tmpfs /tmp tmpfs .*size=524288k' <<<"$mounts" || fail "/tmp is not a 512Mi tmpfs: $(grep ' /tmp ' <<<"$mounts")"
grep -q '^tmpfs /dev/shm tmpfs .*size=262144k' <<<"$mounts" || fail "/dev/shm is not a 256Mi tmpfs"
limits=$(podman inspect -f '{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.CpuShares}}' "$name")
[ "$limits" = "1073741824 1000000000 256" ] || fail "limits (memory, nano-cpus, shares): $limits"
# The memory limit as the kernel holds it (cgroup v1 or v2).
pid=$(podman inspect -f '{{.State.Pid}}' "$name")
cg_v1=$(awk -F: '$2 == "memory" { print $3 }' "/proc/$pid/cgroup")
cg_v2=$(awk -F: '$1 == "0" { print $3 }' "/proc/$pid/cgroup")
if [ -n "$cg_v1" ] && [ -r "/sys/fs/cgroup/memory$cg_v1/memory.limit_in_bytes" ]; then
  kmem=$(cat "/sys/fs/cgroup/memory$cg_v1/memory.limit_in_bytes")
elif [ -r "/sys/fs/cgroup$cg_v2/memory.max" ]; then
  kmem=$(cat "/sys/fs/cgroup$cg_v2/memory.max")
else
  kmem=unknown
fi
[ "$kmem" = 1073741824 ] || fail "the kernel's memory limit is $kmem, not 1Gi"
echo "uid 10002, no capabilities, no_new_privs, seccomp, read-only root, tmpfs /tmp and /dev/shm, limits $limits"
node "$root/infra/tests/pod-drive.js" cdp "$cdp" "$work/direct.png"
for _ in $(seq 1 20); do
  [ "$(podman inspect -f '{{.State.Running}}' "$name")" = false ] && break
  sleep 0.5
done
[ "$(podman inspect -f '{{.State.Running}} {{.State.ExitCode}}' "$name")" = "false 0" ] ||
  fail "the container did not end with its browser: $(podman inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$name")"
"${pod[@]}" destroy --template "$template" --sandbox-id b_podcheck
"${pod[@]}" destroy --template "$template" --sandbox-id b_podcheck # idempotent
if podman container exists "$name"; then fail "destroy left $name"; fi
echo "navigated, screenshot taken, Browser.close ended the container (exit 0), destroyed"

# A template the container cannot become ready with: a clear error, nothing left.
step "1b. a probe that never passes"
sed 's#path: /json/version#path: /never#; s#failureThreshold: 30#failureThreshold: 3#' "$template" >"$work/never.yaml"
if out=$("${pod[@]}" create --template "$work/never.yaml" --image "$image" --sandbox-id b_podnever --proxy 127.0.0.1:9 2>&1); then
  fail "create succeeded with a probe that never passes: $out"
fi
grep -q 'never ready' <<<"$out" || fail "unexpected error: $out"
if podman container exists cordon-b-podnever; then fail "a failed create left its container"; fi
echo "refused: ${out##*pod-podman: }"

step "1c. a template that asks for privileges"
sed 's#privileged: false#privileged: true#' "$template" >"$work/privileged.yaml"
if out=$("${pod[@]}" create --template "$work/privileged.yaml" --image "$image" --sandbox-id b_podpriv --proxy 127.0.0.1:9 2>&1); then
  fail "create succeeded with privileged: true: $out"
fi
grep -q 'privileged' <<<"$out" || fail "unexpected error: $out"
if podman container exists cordon-b-podpriv; then fail "a refused create left a container"; fi
echo "refused: ${out##*pod-podman: }"

step "1d. an image that is missing"
if out=$("${pod[@]}" create --template "$template" --image localhost/cordon-no-such-image:0 --sandbox-id b_podnoimg --proxy 127.0.0.1:9 2>&1); then
  fail "create succeeded with a missing image: $out"
fi
grep -q -i 'image' <<<"$out" || fail "the error does not name the image: $out"
if podman container exists cordon-b-podnoimg; then fail "a failed create left a container"; fi
echo "refused: $(tail -n 1 <<<"$out")"

if [ "$with_cordon" = 0 ]; then
  step "pod container check passed (--no-cordon: Cordon not run)"
  exit 0
fi

# ---------------------------------------------------------------- 2. Cordon
step "2. the same container as Cordon's exec driver"
bin=${CORDON_BIN:-$root/target/debug/cordon}
site=${CORDON_SITE_ROOT:-$root/target/site}
if [ ! -x "$bin" ]; then
  step "no cordon at $bin: cargo build -p cordon"
  cargo build -p cordon
  bin=$root/target/debug/cordon
fi
if [ ! -d "$site" ]; then
  step "no site at $site: infra/scripts/build-site.sh debug"
  bash "$root/infra/scripts/build-site.sh" debug
  site=$root/target/site
fi
case "$root$template$image" in
  *[[:space:]]*) fail "exec_create is split on whitespace: the repository path, template and image need none" ;;
esac

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
page_port=$(free_port)
mkdir -p "$work/page" && install -d -m 0700 "$work/data"
cat >"$work/page/index.html" <<'EOF'
<!doctype html><title>Served on loopback</title>
<h1>Served on the host's loopback</h1><p>through Cordon's egress guard</p>
<button>Go</button>
EOF
# text/csv: a type the browser saves rather than shows.
"$py" -c 'import os,sys; open(sys.argv[1],"wb").write(os.urandom(300000))' "$work/page/report.csv"
(cd "$work/page" && exec "$py" -m http.server --bind 127.0.0.1 "$page_port" >"$work/page.log" 2>&1) &
page_pid=$!

cat >"$work/cordon.toml" <<EOF
bind = "127.0.0.1:$port"
public_url = "http://localhost:$port"
data_dir = "$work/data"
site_root = "$site"
sandbox_driver = "exec"
exec_create = "$py $root/infra/tests/pod-podman.py create --template $template --image $image"
exec_destroy = "$py $root/infra/tests/pod-podman.py destroy --template $template"
egress_allow = ["127.0.0.1:$page_port"]
pool_size = 1
download_transfer = "cdp"
[tenant_live_links.acme]
frame_ancestors = []
EOF
CORDON_MASTER_KEY=$("$py" -c 'import secrets; print(secrets.token_hex(32))')
export CORDON_MASTER_KEY
cordon() { (cd "$work" && exec "$bin" --config "$work/cordon.toml" "$@"); }
cordon tenant create acme >/dev/null
# The key goes to a 0600 header file, never to the terminal or argv.
install -m 0600 /dev/null "$work/auth"
printf 'Authorization: Bearer %s\n' "$(cordon apikey create --tenant acme --label pod-check)" >"$work/auth"

# Not through the function: $! must be cordon's own pid.
(cd "$work" && exec "$bin" --config "$work/cordon.toml" serve) >"$work/cordon.log" 2>&1 &
cordon_pid=$!
url=http://127.0.0.1:$port
for _ in $(seq 1 120); do
  curl -fsS -o "$work/readyz.json" "$url/readyz" 2>/dev/null && break
  kill -0 "$cordon_pid" 2>/dev/null || fail "cordon serve exited"
  sleep 0.5
done
[ -s "$work/readyz.json" ] || fail "/readyz never answered"
driver=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["checks"]["sandbox"]["driver"])' "$work/readyz.json")
[ "$driver" = exec ] || fail "/readyz: driver $driver"
step "cordon serve ready (driver exec); the warm pool's container:"
for _ in $(seq 1 60); do
  [ -n "$(leftovers)" ] && break
  sleep 0.5
done
leftovers

# shellcheck source=infra/tests/lib.sh
. "$root/infra/tests/lib.sh"

t0=$(date +%s%N)
sid=$(api POST /api/sessions '{"downloads":"allow"}' | jget session_id)
echo "session $sid opened in $((($(date +%s%N) - t0) / 1000000)) ms"
api POST "/api/sessions/$sid/navigate" "{\"url\":\"http://127.0.0.1:$page_port/\"}" >"$work/navigate.json"
api POST "/api/sessions/$sid/snapshot" '{}' >"$work/snapshot.json"
grep -q "Served on the host" "$work/snapshot.json" || fail "the page is not in the snapshot: $(head -c 400 "$work/snapshot.json")"
grep -q 'GET / ' "$work/page.log" || fail "the page server saw no request"
echo "navigated to the loopback page through the egress guard; the snapshot shows it"
api POST "/api/sessions/$sid/screenshot" '{}' >"$work/screenshot.json"
"$py" - "$work/screenshot.json" "$work/cordon.png" <<'EOF' || fail "no PNG in the screenshot answer: $(head -c 300 "$work/screenshot.json")"
import base64, json, sys
answer = json.load(open(sys.argv[1]))
def find(v):
    if isinstance(v, str) and len(v) > 1000:
        try:
            raw = base64.b64decode(v.split(",")[-1])
        except Exception:
            return None
        if raw.startswith(b"\x89PNG") or raw.startswith(b"\xff\xd8"):
            return raw
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, list):
        for x in v:
            r = find(x)
            if r:
                return r
    return None
raw = find(answer)
if not raw:
    sys.exit(1)
open(sys.argv[2], "wb").write(raw)
print(f"screenshot: {len(raw)} bytes")
EOF
link=$(api POST "/api/sessions/$sid/live_link" '{"mode":"view","ttl_s":60}' | jget url)
ws=${link/http:/ws:}
ws=${ws/\?/\/ws?}
node "$root/infra/tests/pod-drive.js" live "$ws" "$work/live.jpg"
api POST "/api/sessions/$sid/navigate" "{\"url\":\"http://127.0.0.1:$page_port/report.csv\"}" >"$work/download-nav.json"
grep -q '"download_started":true' "$work/download-nav.json" || fail "the navigation did not start a download: $(head -c 400 "$work/download-nav.json")"
for _ in $(seq 1 60); do
  api GET "/api/sessions/$sid/downloads" >"$work/downloads.json"
  grep -q '"state":"completed"' "$work/downloads.json" && break
  sleep 0.5
done
grep -q '"name":"report.csv"' "$work/downloads.json" || fail "no completed report.csv: $(head -c 400 "$work/downloads.json")"
curl -fsS -H "@$work/auth" -o "$work/report.got" "$url/api/sessions/$sid/downloads/report.csv"
cmp -s "$work/page/report.csv" "$work/report.got" || fail "the downloaded bytes differ"
echo "a 300 kB download taken over CDP from the container, fetched byte-identical"
container=$(podman ps --filter label=cordon.dev/sandbox --format '{{.Names}}' | sort | comm -13 <(echo "$before") - | tr '\n' ' ')
api DELETE "/api/sessions/$sid" >/dev/null
echo "session closed; containers before the close: $container"
gone=0
for _ in $(seq 1 40); do
  n=$(leftovers | wc -l)
  # The warm pool refills: one container (the next session's) may run.
  if [ "$n" -le 1 ]; then gone=1; break; fi
  sleep 0.5
done
[ "$gone" = 1 ] || fail "the closed session's container is still there: $(leftovers | tr '\n' ' ')"

step "SIGTERM to cordon"
t0=$(date +%s%N)
kill -TERM "$cordon_pid"
wait "$cordon_pid" || fail "cordon serve exited $? on SIGTERM"
cordon_pid=
echo "cordon stopped in $((($(date +%s%N) - t0) / 1000000)) ms"
left=$(leftovers)
[ -z "$left" ] || fail "containers left after Cordon stopped: $left"
echo "no browser container left"
step "pod container check passed"
