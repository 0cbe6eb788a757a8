#!/usr/bin/env bash
# The control-plane image (infra/images/cordon/Dockerfile), run for real
# under podman (opt-in; not in CI): the image built by
# infra/images/build-local.sh --cordon from the local Debian base, run the
# way the Dockerfile documents, with the bwrap driver it documents:
#
#  - `cordon serve` as the image's user (uid 10001) with its defaults
#    (data in the /var/lib/cordon volume, the site built in, JSON logs),
#    the master key from the environment, sandbox_driver = "bwrap" and
#    `--security-opt systempaths=unconfined` (podman's default seccomp
#    profile already allows the user namespaces bwrap makes; only the
#    masked /proc paths stop it: "Can't mount proc");
#  - /readyz ready with the bwrap driver; the image's HEALTHCHECK passing
#    (`podman healthcheck run`); the dashboard's `/` answering HTML, and
#    the wasm it links served from the image's site;
#  - a tenant and an API key made with the image's own CLI
#    (`podman exec <container> cordon ...`, while serve runs);
#  - a session opened (Chromium under bwrap inside the container), a page
#    served on the loopback navigated through Cordon's egress guard
#    (egress_allow), a snapshot and a screenshot, the session closed;
#  - SIGTERM (`podman stop`, 10 s grace, podman's and Docker's default):
#    the container exits 0 within the grace; it and its volume removed,
#    no container left (listed).
#
# Why bwrap and not the exec driver into browser containers (as
# infra/tests/pod-container.sh runs from the host): exec_create would run
# inside this container, which has neither podman nor python3 (pod-podman.py),
# and driving the host's podman from it means handing the control plane the
# host's podman socket, that is root on the host; nobody should deploy it
# so. bwrap is what the image ships for one host (Chromium and bubblewrap
# are in it), and it works under podman here with the option above.
#
# Networking: `--network host` with Cordon on its default loopback bind
# (CORDON_BIND=127.0.0.1:<free port>), so this script, the health check
# and the page server share one loopback; the browsers are in bwrap's own
# network namespace whatever the container's. Not shown here: a published
# port with CORDON_BIND=0.0.0.0:8080, which Cordon refuses without TLS
# (tls_cert/tls_key or trusted_proxy behind an https proxy).
#
# Usage (as root, from a clone): bash infra/tests/images.sh
# Environment: CORDON_IMAGE (default localhost/cordon:0.1.0; when absent,
# built with `infra/images/build-local.sh --cordon`, 30-40 minutes on
# 2 cores).
# Installs (apt) if missing: podman, runc, uidmap, fuse-overlayfs,
# slirp4netns (infra/images/podman-env.sh), curl.
# Took 2-3 s here with the image built (the image itself: 38 minutes cold
# on 2 cores shared with other builds, 35 s after a change outside the
# Rust sources; see docs/deployment.md, "Run here").
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[ "$#" = 0 ] || { echo "images: no arguments expected (see the header)" >&2; exit 64; }
[ "$(id -u)" = 0 ] || { echo "images: run as root (rootful podman)" >&2; exit 1; }

image=${CORDON_IMAGE:-localhost/cordon:0.1.0}
py=/usr/bin/python3
grace=10
started=$(date +%s)
step() { echo "-- [$(($(date +%s) - started)) s] $*"; }
fail() { echo "images: FAILED: $*" >&2; exit 1; }

# shellcheck source=infra/images/podman-env.sh
. "$root/infra/images/podman-env.sh"
podman_env_setup curl
if ! podman image exists "$image"; then
  step "no image $image: building it (infra/images/build-local.sh --cordon, 30-40 minutes)"
  CORDON_IMAGE=$image bash "$root/infra/images/build-local.sh" --cordon
fi

name=cordon-images-check-$$
volume=$name-data
work=$(mktemp -d /tmp/cordon-images-check.XXXXXX)
page_pid=
before=$(podman ps -a --format '{{.Names}}' | sort)
cleanup() {
  local status=$?
  [ -z "$page_pid" ] || kill "$page_pid" 2>/dev/null || true
  if podman container exists "$name"; then
    if [ "$status" != 0 ]; then
      echo "images: the last lines of Cordon's log (enrollment links left out):" >&2
      podman logs "$name" 2>&1 | grep -v '/enroll#' | tail -n 30 >&2 || true
    fi
    podman rm --force --time 0 "$name" >/dev/null 2>&1 || true
  fi
  podman volume rm --force "$volume" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
page_port=$(free_port)
mkdir -p "$work/page"
cat >"$work/page/index.html" <<'EOF'
<!doctype html><title>Served on loopback</title>
<h1>Served on the loopback to the image</h1><p>through Cordon's egress guard</p>
EOF
(cd "$work/page" && exec "$py" -m http.server --bind 127.0.0.1 "$page_port" >"$work/page.log" 2>&1) &
page_pid=$!

step "podman run $image (bwrap driver, systempaths=unconfined)"
# The key only through the environment: `-e NAME` passes it without a value
# on the command line.
CORDON_MASTER_KEY=$("$py" -c 'import secrets; print(secrets.token_hex(32))')
export CORDON_MASTER_KEY
podman volume create "$volume" >/dev/null
# podman runs the image's HEALTHCHECK on a systemd timer, which a host
# without systemd as PID 1 (this one) cannot make; it says so on every run,
# stop and rm. The check runs it once, `podman healthcheck run`.
no_timers() { grep -v 'unable to get systemd connection' >&2 || true; }
podman run --detach --name "$name" --network host \
  --security-opt systempaths=unconfined \
  --volume "$volume:/var/lib/cordon" \
  --env CORDON_MASTER_KEY \
  --env "CORDON_BIND=127.0.0.1:$port" \
  --env "CORDON_HEALTH_PORT=$port" \
  --env "CORDON_PUBLIC_URL=http://localhost:$port" \
  --env CORDON_SANDBOX_DRIVER=bwrap \
  --env "CORDON_EGRESS_ALLOW=127.0.0.1:$page_port" \
  "$image" 2>&1 >/dev/null | no_timers
unset CORDON_MASTER_KEY
url=http://127.0.0.1:$port
for _ in $(seq 1 120); do
  curl -fsS -o "$work/readyz.json" "$url/readyz" 2>/dev/null && break
  [ "$(podman inspect -f '{{.State.Running}}' "$name")" = true ] || fail "the container exited: $(podman inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$name")"
  sleep 0.5
done
[ -s "$work/readyz.json" ] || fail "/readyz never answered"
step "ready; /readyz checks:"
"$py" - "$work/readyz.json" <<'EOF' || fail "/readyz: $(head -c 600 "$work/readyz.json")"
import json, sys
r = json.load(open(sys.argv[1]))
checks = r["checks"]
for k, v in checks.items():
    print(f"  {k}: {json.dumps(v)[:200]}")
assert checks["sandbox"]["driver"] == "bwrap", "driver"
EOF
users=$(podman top "$name" user | awk 'NR > 1' | sort -u | tr '\n' ' ')
[ "$users" = "cordon " ] || fail "processes in the container run as $users, not only cordon (uid 10001)"
[ "$(podman top "$name" pid comm | awk '$1 == 1 { print $2 }')" = cordon ] || fail "cordon is not pid 1"
echo "every process in the container runs as uid 10001 (cordon); cordon serve is pid 1"

health=$(podman healthcheck run "$name" 2>&1) || fail "the image's HEALTHCHECK failed: $health"
echo "the image's HEALTHCHECK: ${health:-healthy}"

dash=$(curl -sS -L -o "$work/dashboard.html" -w '%{http_code} %{content_type}' "http://localhost:$port/")
case $dash in "200 text/html"*) ;; *) fail "the dashboard's / answered $dash" ;; esac
grep -qi '<!doctype html' "$work/dashboard.html" || fail "the dashboard's / is not an HTML page"
wasm=$(grep -o '/pkg/[^"]*cordon_bg\.wasm' "$work/dashboard.html" | head -n 1 || true)
[ -n "$wasm" ] || wasm=$(grep -o '/pkg/[^"]*\.js' "$work/dashboard.html" | head -n 1 || true)
[ -n "$wasm" ] || fail "the dashboard links no /pkg/ asset"
asset=$(curl -sS -o /dev/null -w '%{http_code} %{size_download}' "http://localhost:$port$wasm")
case $asset in "200 "*) ;; *) fail "$wasm answered $asset" ;; esac
echo "dashboard /: $dash, $(wc -c <"$work/dashboard.html") bytes of HTML; $wasm: $asset bytes"

step "a tenant and key with the image's CLI (podman exec), a session through the API"
cli() { podman exec "$name" cordon "$@"; }
cli tenant create acme >/dev/null
# The key goes to a 0600 header file, never to the terminal or argv.
install -m 0600 /dev/null "$work/auth"
# (Its notice on stderr goes to a file too.)
printf 'Authorization: Bearer %s\n' "$(cli apikey create --tenant acme --label images-check 2>"$work/apikey.err")" >"$work/auth"
# shellcheck source=infra/tests/lib.sh
. "$root/infra/tests/lib.sh"
sandbox() { # /readyz's sandbox check, in short
  curl -fsS "$url/readyz" | "$py" -c 'import json,sys; s=json.load(sys.stdin)["checks"]["sandbox"]
print("open_sessions {0[open_sessions]}, warm pool {0[pool_ready]}/{0[pool_size]}".format(s))'
}

t0=$(date +%s%N)
sid=$(api POST /api/sessions '{}' | jget session_id)
echo "session $sid opened in $((($(date +%s%N) - t0) / 1000000)) ms; /readyz: $(sandbox)"
procs=$(podman top "$name" comm | awk '$1 == "bwrap" { b++ } $1 ~ /^chrom/ { c++ } END { printf "%d bwrap, %d Chromium", b, c }')
case $procs in "0 bwrap"* | *" 0 Chromium") fail "no browser under bwrap in the container: $procs" ;; esac
echo "processes in the container: $procs (the session's browser and the warm pool's)"
api POST "/api/sessions/$sid/navigate" "{\"url\":\"http://127.0.0.1:$page_port/\"}" >"$work/navigate.json"
api POST "/api/sessions/$sid/snapshot" '{}' >"$work/snapshot.json"
grep -q "Served on the loopback" "$work/snapshot.json" || fail "the page is not in the snapshot: $(head -c 400 "$work/snapshot.json")"
grep -q 'GET / ' "$work/page.log" || fail "the page server saw no request"
api POST "/api/sessions/$sid/screenshot" '{}' >"$work/screenshot.json"
shot=$("$py" - "$work/screenshot.json" <<'EOF'
import base64, json, sys
def find(v):
    if isinstance(v, str) and len(v) > 1000:
        try:
            raw = base64.b64decode(v.split(",")[-1])
        except ValueError:
            return None
        return raw if raw[:4] == b"\x89PNG" or raw[:2] == b"\xff\xd8" else None
    for x in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else []):
        r = find(x)
        if r:
            return r
    return None
raw = find(json.load(open(sys.argv[1])))
print(len(raw) if raw else "")
EOF
)
[ -n "$shot" ] || fail "no image in the screenshot answer: $(head -c 300 "$work/screenshot.json")"
echo "navigated to the loopback page through the egress guard; snapshot taken, screenshot $shot bytes"
api DELETE "/api/sessions/$sid" >/dev/null
state=$(api GET "/api/sessions/$sid" | jget state)
case $state in closing | closed) ;; *) fail "the closed session is $state" ;; esac
ready=$(sandbox)
case $ready in "open_sessions 0,"*) ;; *) fail "after the close, /readyz: $ready" ;; esac
echo "session closed ($state); /readyz: $ready"

step "SIGTERM: podman stop --time $grace"
t0=$(date +%s%N)
podman stop --time "$grace" "$name" 2>&1 >/dev/null | no_timers
took=$((($(date +%s%N) - t0) / 1000000))
code=$(podman inspect -f '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || fail "the container exited $code on SIGTERM (137: killed after the grace)"
[ "$took" -lt $((grace * 1000)) ] || fail "the stop took $took ms, past the ${grace} s grace"
echo "stopped cleanly in $took ms (exit 0)"
podman logs "$name" 2>&1 | grep -v '/enroll#' | tail -n 3 | cut -c1-300
podman rm "$name" 2>&1 >/dev/null | no_timers
podman volume rm "$volume" >/dev/null
left=$(podman ps -a --format '{{.Names}}' | sort | comm -13 <(echo "$before") -)
[ -z "$left" ] || fail "containers left: $left"
echo "containers now (podman ps -a):"
podman ps -a --format '  {{.Names}} {{.Status}}'
echo "  (none new)"
step "control-plane image check passed"
