#!/usr/bin/env bash
# infra/systemd/cordon.service under a real systemd (opt-in; not in CI):
# a Debian bookworm root (debootstrap minbase, then systemd, Chromium,
# bubblewrap, curl, python3 inside) booted with `systemd-nspawn -b` on a
# private network, the unit and infra/systemd/cordon.toml installed as
# docs/deployment.md says, and then:
#  - the service becomes active, as user cordon, with the unit's hardening
#    in force in its process (no capabilities, no_new_privs, read-only
#    system, the data dir writable) and the bwrap driver in /readyz;
#  - the dashboard and /readyz answer on 127.0.0.1:8080 inside;
#  - a tenant and API key made with the CLI (systemd-run as cordon, with
#    the unit's environment file), a session opened, a page (served inside
#    the container on loopback) navigated and snapshotted through the API;
#  - kill -9 of the main process: Restart=on-failure starts a new one, the
#    killed one's browsers are gone (the unit's cgroup), and the session it
#    ran is ended (by the reaper at start);
#  - systemctl stop cordon: a clean exit (status 0), no bwrap or Chromium
#    left in the container.
#
# Usage (as root, from a clone): bash infra/tests/systemd.sh [--rebuild-root]
# Environment: CORDON_BIN (default target/debug/cordon; `cargo build -p
# cordon` when absent), CORDON_SITE_ROOT (default target/site;
# `bash infra/scripts/build-site.sh debug` when absent),
# CORDON_SYSTEMD_ROOT (default /var/tmp/cordon-systemd/root: made once,
# 2 minutes here, reused; --rebuild-root makes it again), DEBIAN_MIRROR.
# Installs (apt) if missing: debootstrap, systemd-container.
# Took 7 s here with the root made.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=infra/images/debian-root.sh
. "$root/infra/images/debian-root.sh"
rebuild=0
for arg in "$@"; do
  case $arg in
    --rebuild-root) rebuild=1 ;;
    *)
      echo "systemd check: unknown argument $arg" >&2
      exit 64
      ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "systemd check: run as root" >&2; exit 1; }

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
rootfs=${CORDON_SYSTEMD_ROOT:-/var/tmp/cordon-systemd/root}
machine=cordon-systemd-check
started=$(date +%s)
step() { echo "-- [$(($(date +%s) - started)) s] $*"; }
fail() { echo "systemd check: FAILED: $*" >&2; exit 1; }

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
if [ "${#need[@]}" -gt 0 ]; then
  step "installing ${need[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

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

# On a host run by systemd, nspawn makes the container's scope itself.
# Without one (a container, a CI runner, this project's build machines)
# there is no machined to register with and no scope to make
# (--register=no --keep-unit), and the container must be started in a
# cgroup of its own (below), or its systemd cannot track a unit's
# processes ("Failed to kill control group …: Input/output error", and
# `systemd-cgls -u cordon` shows none of its browsers).
if [ -d /run/systemd/system ]; then
  nspawn=(systemd-nspawn --quiet)
  own_cgroups=()
else
  nspawn=(systemd-nspawn --quiet --register=no --keep-unit)
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    own_cgroups=("/sys/fs/cgroup/$machine")
  elif [ -d /sys/fs/cgroup/unified ]; then
    own_cgroups=("/sys/fs/cgroup/systemd/$machine" "/sys/fs/cgroup/unified/$machine")
  else
    own_cgroups=("/sys/fs/cgroup/systemd/$machine")
  fi
fi

# ------------------------------------------------------------ the root
if [ "$rebuild" = 1 ] || [ ! -e "$rootfs/.cordon-root-ready" ]; then
  step "making the root in $rootfs (debootstrap minbase + systemd, Chromium, bubblewrap)"
  debian_root "$rootfs" "$mirror" "$security_mirror" "$rootfs.debootstrap.log" \
    --include=systemd,systemd-sysv,dbus || fail "debootstrap"
  echo "$machine" >"$rootfs/etc/hostname"
  touch "$rootfs/.cordon-root-ready"
fi
# What the check needs in the root (installed when missing, so an older
# root gets them too). Chromium's dependencies configure in a container
# (debootstrap's own configure step failed on dconf-service), with the
# host's network.
packages=(chromium bubblewrap curl ca-certificates fonts-liberation procps python3)
if ! chroot "$rootfs" dpkg-query -W "${packages[@]}" >/dev/null 2>&1; then
  step "installing ${packages[*]} in the root"
  "${nspawn[@]}" -D "$rootfs" --pipe /bin/sh -c '
    set -e
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "$@"
    apt-get clean
    rm -rf /var/lib/apt/lists/*' sh "${packages[@]}" >"$rootfs.apt.log" 2>&1 || {
    tail -n 20 "$rootfs.apt.log" >&2
    fail "installing packages in the root (log: $rootfs.apt.log)"
  }
  step "root ready"
fi

# ------------------------------------------------------------ install (docs/deployment.md, "One host on SQLite")
step "installing Cordon as docs/deployment.md says"
chroot "$rootfs" id cordon >/dev/null 2>&1 ||
  chroot "$rootfs" useradd --system --home-dir /var/lib/cordon --shell /usr/sbin/nologin cordon
install -m 0755 "$bin" "$rootfs/usr/local/bin/cordon"
rm -rf "$rootfs/usr/local/share/cordon/site" "$rootfs/var/lib/cordon"
mkdir -p "$rootfs/usr/local/share/cordon"
cp -R "$site" "$rootfs/usr/local/share/cordon/site"
rm -rf "$rootfs/usr/local/share/doc/cordon"
mkdir -p "$rootfs/usr/local/share/doc/cordon"
cp -R README.md docs "$rootfs/usr/local/share/doc/cordon/"
install -D -m 0644 infra/systemd/cordon.toml "$rootfs/etc/cordon/cordon.toml"
install -m 0600 /dev/null "$rootfs/etc/cordon/cordon.env"
{
  echo "CORDON_MASTER_KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
  # The check's page, served inside the container on loopback.
  echo "CORDON_EGRESS_ALLOW=127.0.0.1:8000"
} >"$rootfs/etc/cordon/cordon.env"
install -m 0644 infra/systemd/cordon.service "$rootfs/etc/systemd/system/cordon.service"
read -ra docs < <(sed -n 's/^Documentation=//p' infra/systemd/cordon.service)
for doc in "${docs[@]}"; do
  [ -f "$rootfs${doc#file://}" ] || fail "Documentation= names $doc, which the install does not put there"
done
chroot "$rootfs" systemctl enable cordon.service >/dev/null 2>&1
mkdir -p "$rootfs/srv/page"
cat >"$rootfs/srv/page/index.html" <<'EOF'
<!doctype html><title>systemd check</title><h1>Served inside the container</h1><button>Go</button>
EOF

# ------------------------------------------------------------ boot
nspawn_pid=
leader=
cleanup() {
  local status=$?
  if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
    # nspawn turns SIGTERM into an orderly poweroff of the container.
    kill -TERM "$nspawn_pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$nspawn_pid" 2>/dev/null || true
    wait "$nspawn_pid" 2>/dev/null || true
  fi
  # A container whose nspawn ended first (killed mid-boot) would live on
  # without it: its init, and with it its pid namespace, is ended too.
  if [ -n "$leader" ] && kill -0 "$leader" 2>/dev/null; then
    kill -KILL "$leader" 2>/dev/null || true
  fi
  local cg pids
  for cg in "${own_cgroups[@]}"; do
    [ -d "$cg" ] || continue
    pids=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null || true)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086 # one pid a word
      kill -KILL $pids 2>/dev/null || true
      sleep 1
    fi
    find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if [ "$status" != 0 ]; then
    echo "systemd check: the journal of cordon.service (enrollment links left out):" >&2
    SYSTEMD_LOG_LEVEL=err journalctl -D "$rootfs/var/log/journal" -u cordon --no-pager -n 40 2>/dev/null |
      grep -v '/enroll#' >&2 || true
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Persistent journal, so the check can read it after the container ends.
mkdir -p "$rootfs/var/log/journal"
rm -rf "${rootfs:?}/var/log/journal/"*

step "booting the root (systemd-nspawn -b, private network)"
(
  for cg in "${own_cgroups[@]}"; do
    mkdir -p "$cg"
    echo "$BASHPID" >"$cg/cgroup.procs"
  done
  exec "${nspawn[@]}" -b -D "$rootfs" --private-network --machine="$machine" --console=pipe
) >"$rootfs.boot.log" 2>&1 </dev/null &
nspawn_pid=$!
for _ in $(seq 1 60); do
  # nspawn's first child forks the container's init and exits: wait for
  # the child that is systemd.
  leader=$(ps -o pid=,comm= --ppid "$nspawn_pid" | awk '$2 == "systemd" { print $1; exit }' || true)
  [ -n "$leader" ] && break
  sleep 0.5
done
[ -n "$leader" ] || fail "no container init under systemd-nspawn ($(cat "$rootfs.boot.log"))"
ct() { nsenter -t "$leader" -a "$@"; }
for _ in $(seq 1 120); do
  state=$(ct systemctl is-system-running 2>/dev/null || true)
  case $state in running | degraded) break ;; esac
  sleep 0.5
done
echo "container systemd: $state ($(ct systemctl --version | head -n 1))"

# ------------------------------------------------------------ active, hardened
for _ in $(seq 1 120); do
  [ "$(ct systemctl is-active cordon 2>/dev/null)" = active ] &&
    ct curl -fsS -o /dev/null http://127.0.0.1:8080/readyz 2>/dev/null && break
  sleep 0.5
done
[ "$(ct systemctl is-active cordon)" = active ] || fail "cordon.service is $(ct systemctl is-active cordon)"
step "cordon.service active"
main=$(ct systemctl show -P MainPID cordon)
status=$(ct cat "/proc/$main/status")
[ "$(awk '/^Uid:/ { print $2 }' <<<"$status")" = "$(chroot "$rootfs" id -u cordon)" ] || fail "not running as cordon"
grep -q '^CapEff:[[:space:]]*0000000000000000$' <<<"$status" || fail "capabilities: $(grep CapEff <<<"$status")"
grep -q '^CapBnd:[[:space:]]*0000000000000000$' <<<"$status" || fail "bounding set: $(grep CapBnd <<<"$status")"
grep -q '^NoNewPrivs:[[:space:]]*1$' <<<"$status" || fail "no_new_privs not set"
# The filesystem as the service sees it (its mount namespace).
# ($main is a pid in the container's pid namespace: nsenter from inside.)
as_service() { ct nsenter -t "$main" -m -S "$(chroot "$rootfs" id -u cordon)" -G "$(chroot "$rootfs" id -g cordon)" "$@"; }
ct nsenter -t "$main" -m touch /usr/x 2>/dev/null && fail "/usr is writable for the service (ProtectSystem=strict)"
ct nsenter -t "$main" -m touch /etc/x 2>/dev/null && fail "/etc is writable for the service (ProtectSystem=strict)"
ct install -m 0700 -d /root/.home-probe
[ -z "$(ct nsenter -t "$main" -m ls -A /root 2>/dev/null)" ] || fail "/root is visible to the service (ProtectHome=yes)"
ct rmdir /root/.home-probe
if ! as_service sh -c 'touch /var/lib/cordon/.probe && rm /var/lib/cordon/.probe'; then
  fail "the data dir is not writable"
fi
props=$(ct systemctl show cordon -p User -p ProtectSystem -p NoNewPrivileges -p Delegate -p Restart -p PrivateTmp -p RestrictNamespaces -p CapabilityBoundingSet)
echo "$props" | tr '\n' ' '
echo
ct curl -fsS -o "/tmp/readyz.json" http://127.0.0.1:8080/readyz
readyz=$(ct cat /tmp/readyz.json)
echo "readyz: $readyz"
driver=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["checks"]["sandbox"]["driver"])' "$readyz")
[ "$driver" = bwrap ] || fail "/readyz: driver $driver, not bwrap"
dashboard=$(ct curl -sS -o /dev/null -w '%{http_code}' -H 'Host: cordon.example.com' http://127.0.0.1:8080/)
case $dashboard in 200 | 302 | 303 | 307) ;; *) fail "the dashboard answered $dashboard" ;; esac
echo "dashboard: HTTP $dashboard; /readyz: ready"

# ------------------------------------------------------------ a session through the API
step "a tenant and key with the CLI (systemd-run as cordon), a session through the API"
cli() {
  ct systemd-run --quiet --wait --pipe --collect -p User=cordon -p Group=cordon \
    -p EnvironmentFile=/etc/cordon/cordon.env -p WorkingDirectory=/var/lib/cordon \
    /usr/local/bin/cordon --config /etc/cordon/cordon.toml "$@"
}
cli tenant create acme >/dev/null
# The key: into a 0600 header file in the container, never printed.
key=$(cli apikey create --tenant acme --label systemd-check 2>/dev/null)
ct install -m 0600 /dev/null /root/auth
printf 'Authorization: Bearer %s\n' "$key" | ct sh -c 'cat > /root/auth'
unset key
ct systemd-run --quiet --unit=cordon-check-page --collect -p WorkingDirectory=/srv/page \
  python3 -m http.server --bind 127.0.0.1 8000
api() { # METHOD PATH [JSON]
  local out code
  out=$(ct curl -sS -H @/root/auth -H 'content-type: application/json' -X "$1" \
    ${3:+-d "$3"} -w '\n%{http_code}' "http://127.0.0.1:8080$2")
  code=${out##*$'\n'}
  out=${out%$'\n'*}
  case $code in 2??) printf '%s' "$out" ;; *) fail "$1 $2: HTTP $code: ${out:0:400}" ;; esac
}
sid=$(api POST /api/sessions '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["session_id"])')
api POST "/api/sessions/$sid/navigate" '{"url":"http://127.0.0.1:8000/"}' >/dev/null
api POST "/api/sessions/$sid/snapshot" '{}' | grep -q 'Served inside the container' || fail "the page is not in the snapshot"
echo "session $sid: navigated and snapshotted"
procs() { ct ps -e -o pid=,comm= | awk '$2 == "bwrap" || $2 ~ /^chrom/' | wc -l; }
cg=$(ct systemctl show -P ControlGroup cordon)
in_unit=$(ct systemd-cgls --no-pager -u cordon | grep -c -E 'bwrap|chromium' || true)
echo "browser processes: $(procs) (bwrap and Chromium), $in_unit of them in the unit's cgroup $cg"
[ "$in_unit" -gt 0 ] || fail "the unit's cgroup holds no browser: systemd does not track them"

# ------------------------------------------------------------ kill -9, Restart=on-failure
step "kill -9 of the main process"
old=$main
old_browsers=$(ct ps -e -o pid=,comm= | awk '$2 == "bwrap" || $2 ~ /^chrom/ { print $1 }')
ct kill -KILL "$old"
t0=$(date +%s%N)
for _ in $(seq 1 120); do
  main=$(ct systemctl show -P MainPID cordon)
  [ "$main" != 0 ] && [ "$main" != "$old" ] && [ "$(ct systemctl is-active cordon)" = active ] &&
    ct curl -fsS -o /dev/null http://127.0.0.1:8080/readyz 2>/dev/null && break
  sleep 0.5
done
if [ "$main" = "$old" ] || [ "$main" = 0 ]; then fail "cordon.service did not restart (MainPID $main)"; fi
echo "restarted in $((($(date +%s%N) - t0) / 1000000)) ms as pid $main (NRestarts=$(ct systemctl show -P NRestarts cordon))"
left=0
for p in $old_browsers; do
  if ct test -d "/proc/$p"; then left=$((left + 1)); fi
done
[ "$left" = 0 ] || fail "$left browser processes of the killed instance still run"
echo "the killed instance's $(echo "$old_browsers" | wc -w) browser processes are gone"
state=
for _ in $(seq 1 40); do
  session=$(api GET "/api/sessions/$sid")
  state=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("state", ""))' "$session")
  case $state in active | open | starting | ready | "") ;; *) break ;; esac
  sleep 0.5
done
echo "the killed instance's session: $session"
case $state in active | open | starting | ready | "") fail "the session of the killed instance is still $state" ;; esac

# ------------------------------------------------------------ systemctl stop
step "systemctl stop cordon"
before=$(procs)
t0=$(date +%s%N)
ct systemctl stop cordon
echo "stopped in $((($(date +%s%N) - t0) / 1000000)) ms; browser processes before: $before, after: $(procs)"
[ "$(procs)" = 0 ] || fail "browser processes left: $(ct ps -e -o pid=,comm=,args= | grep -E 'bwrap|chrom')"
result=$(ct systemctl show -P Result cordon)
code=$(ct systemctl show -P ExecMainStatus cordon)
if [ "$result" != success ] || [ "$code" != 0 ]; then fail "stop: Result=$result ExecMainStatus=$code"; fi
echo "Result=$result ExecMainStatus=$code"
ct systemctl stop cordon-check-page 2>/dev/null || true
step "systemd check passed"
