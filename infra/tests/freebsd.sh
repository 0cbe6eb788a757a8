#!/usr/bin/env bash
# Feeds hostile input to the scripts that turn Cordon's environment into
# privileged commands, all in dry-run mode (CORDON_DRY_RUN=1: they print
# each command as "+ word word ..." instead of running it), on any OS:
#
#  - infra/freebsd/cordon-jail-create and cordon-jail-destroy (the `exec`
#    driver on FreeBSD): every bad id, proxy, runtime dir, limit, window or
#    site setting exits non-zero with a message and prints no command;
#    valid input prints the expected sequence with the CDP URL last; an
#    unknown but valid id is a no-op success for destroy;
#  - infra/images/browser/cordon-browser (the Kubernetes browser pod's
#    entrypoint): the same for its environment;
#  - both Chromium command lines carry every flag of Cordon's BASE_FLAGS
#    (server/src/sandbox/chromium.rs) and the proxy flags.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
create=$root/infra/freebsd/cordon-jail-create
destroy=$root/infra/freebsd/cordon-jail-destroy
browser=$root/infra/images/browser/cordon-browser

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checks=0

fail() {
  printf 'FAIL: %s\n' "$*" >&2
  failures=$((failures + 1))
}

id=b_abcdefghijklmnopqrstuvwxyz
runtime=/var/db/cordon/run/$id
state=$tmp/state
mkdir -p "$state"
printf 'state=%s\n' "$state" >"$tmp/jail.conf"

# The environment Cordon gives a create, plus the test's site settings.
base_env=(
  PATH=/usr/bin:/bin
  CORDON_DRY_RUN=1
  CORDON_JAIL_CONFIG="$tmp/jail.conf"
  CORDON_SANDBOX_ID="$id"
  CORDON_PROXY=127.0.0.1:41234
  CORDON_RUNTIME_DIR="$runtime"
  CORDON_UPLOADS_DIR="$runtime/uploads"
  CORDON_DOWNLOADS_DIR="$runtime/downloads"
  CORDON_LIMIT_MEMORY_BYTES=1073741824
  CORDON_LIMIT_PIDS=1024
  CORDON_LIMIT_OPEN_FILES=8192
  CORDON_LIMIT_TMPFS_BYTES=536870912
  CORDON_LIMIT_CPU_WEIGHT=100
)

# run SCRIPT VAR=VALUE...: the script with the base environment, the given
# variables replacing theirs; stdout in $out, stderr in $err, status in $rc.
run() {
  local script=$1
  shift
  rc=0
  env -i "${base_env[@]}" "$@" "$script" >"$tmp/out" 2>"$tmp/err" || rc=$?
  out=$(cat "$tmp/out")
  err=$(cat "$tmp/err")
}

# refused WHAT SCRIPT VAR=VALUE...: non-zero, a message naming the first
# VAR given (so it was refused for that, not for something else), no
# command printed.
refused() {
  local what=$1 var=
  shift
  checks=$((checks + 1))
  if [ "$#" -gt 1 ]; then
    var=${2%%=*}
  fi
  run "$@"
  if [ "$rc" = 0 ]; then
    fail "$what: accepted (exit 0); stdout: $out"
  elif [ -z "$err" ]; then
    fail "$what: exit $rc without a message"
  elif [ -n "$var" ] && [ "$var" != CORDON_JAIL_CONFIG ] && [[ $err != *"$var"* ]]; then
    fail "$what: refused, but the message does not name $var: $err"
  elif grep -q '^+ ' "$tmp/out" || [ -n "$out" ]; then
    fail "$what: refused but printed: $out"
  fi
}

# A marker a command substitution would create if anything evaluated input.
pwned=$tmp/pwned
hostile_ids=(
  ""
  "b_"
  "b_../../../etc"
  "../$id"
  "b_abcdefghijklm/nopqrstuvwxyz"
  "b_abcdefghijklm..pqrstuvwxyz"
  "b_abcdefghijklmnopqrstuvwx;z"
  "b_abcdefghijklmnopqrstuv\$(touch $pwned)"
  "b_abcdefghijklmnopqrstuv\`touch $pwned\`"
  "b_\$(touch $pwned)"
  "b_abcdefghijklm nopqrstuvwxy"
  "b_abcdefghijklmnopqrstuvwxy
z"
  "${id}
"
  "${id}a"
  "b_$(printf 'a%.0s' $(seq 1 300))"
  "b_ABCDEFGHIJKLMNOPQRSTUVWXYZ"
  "b_0bcdefghijklmnopqrstuvwxyz"
  "b_abcdefghijklmnopqrstuvwxy1"
  "s_abcdefghijklmnopqrstuvwxyz"
  "-b_abcdefghijklmnopqrstuvwxy"
  "b_abcdefghijklmnopqrstuvwxy*"
  "b_abcdefghijklmnopqrstuvwx|z"
  "b_abcdefghijklmnopqrstuvwx&z"
)

echo "== FreeBSD jail scripts: hostile sandbox ids"
for bad in "${hostile_ids[@]}"; do
  label=$(printf '%q' "$bad" | cut -c1-60)
  for script in "$create" "$destroy"; do
    refused "${script##*/} CORDON_SANDBOX_ID=$label" "$script" CORDON_SANDBOX_ID="$bad" \
      CORDON_RUNTIME_DIR="/var/db/cordon/run/$bad" \
      CORDON_UPLOADS_DIR="/var/db/cordon/run/$bad/uploads" \
      CORDON_DOWNLOADS_DIR="/var/db/cordon/run/$bad/downloads"
  done
done
# Missing altogether.
for script in "$create" "$destroy"; do
  checks=$((checks + 1))
  rc=0
  env -i PATH=/usr/bin:/bin CORDON_DRY_RUN=1 CORDON_JAIL_CONFIG="$tmp/jail.conf" \
    CORDON_RUNTIME_DIR="$runtime" "$script" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" = 0 ] || [ ! -s "$tmp/err" ] || [ -s "$tmp/out" ]; then
    fail "${script##*/} without CORDON_SANDBOX_ID: exit $rc, stdout $(cat "$tmp/out")"
  fi
done

echo "== FreeBSD jail scripts: hostile runtime dirs"
for bad in "relative/run/$id" "/var/db/../../etc/$id" "/var/db/cordon/run/b_other" \
  "$runtime/" "/var/db/cor don/run/$id" "/var/db/cordon/run/./$id" "//var/db/run/$id" \
  "/var/db/\$(touch $pwned)/$id" "/var/db/-rf/$id" "/var/db/cordon/run
/$id"; do
  label=$(printf '%q' "$bad" | cut -c1-60)
  for script in "$create" "$destroy"; do
    refused "${script##*/} CORDON_RUNTIME_DIR=$label" "$script" CORDON_RUNTIME_DIR="$bad" \
      CORDON_UPLOADS_DIR="$bad/uploads" CORDON_DOWNLOADS_DIR="$bad/downloads"
  done
done
refused "uploads dir elsewhere" "$create" CORDON_UPLOADS_DIR=/etc
refused "downloads dir elsewhere" "$create" CORDON_DOWNLOADS_DIR="$runtime/../x"

echo "== FreeBSD jail scripts: hostile proxies, limits, windows"
for bad in "" "127.0.0.1" "127.0.0.1:" ":41234" "127.0.0.1:abc" "127.0.0.1:0" \
  "127.0.0.1:65536" "127.0.0.1:4123456" "evil;rm:80" "\$(touch $pwned):80" \
  "\`touch $pwned\`:80" "1.2.3.4:80 --x" "300.1.1.1:80" "1.2.3:80" "1.2.3.4.5:80" \
  "127.0.0.1:80
--x" "[::1]:80" "proxy.example:80" "-1.2.3.4:80"; do
  refused "create CORDON_PROXY=$(printf '%q' "$bad")" "$create" CORDON_PROXY="$bad"
done
for var in CORDON_LIMIT_MEMORY_BYTES CORDON_LIMIT_PIDS CORDON_LIMIT_OPEN_FILES \
  CORDON_LIMIT_TMPFS_BYTES CORDON_LIMIT_CPU_WEIGHT; do
  for bad in abc -1 0 1e9 "10;reboot" " 5" "5 " "\$(touch $pwned)" 12345678901234567890 "0x10" "1
2"; do
    refused "create $var=$(printf '%q' "$bad")" "$create" "$var=$bad"
  done
done
for bad in 1280x720 1280,720,1 a,b ",720" "1280," "1280;720" "12800,720" 99,720 8000,720 1280,5000; do
  refused "create CORDON_WINDOW=$bad" "$create" CORDON_WINDOW="$bad"
done
for bad in yes true 2 " 1"; do
  refused "create CORDON_DRY_RUN=$bad" "$create" CORDON_DRY_RUN="$bad"
  refused "destroy CORDON_DRY_RUN=$bad" "$destroy" CORDON_DRY_RUN="$bad"
done

echo "== FreeBSD jail scripts: hostile site settings"
n=0
for bad in "template=zroot/cordon/browser" "template=zroot/x@y@z" "template=zroot/x;y@t" \
  "template=-o@x" "dataset=zroot/../x" "dataset=/zroot/x" "dataset=zroot/x y" \
  "root=usr/local/jails" "root=/usr/local/../jails" "interface=lo1;x" "interface=1lo" \
  "net=10.77" "net=10.77.0.0" "net=10.77.300" "pf_table=a;b" "pf_table=" "user=root;x" \
  "state=relative" "chrome=/usr/local/bin/chrome --x" "cdp_port=0" "cdp_port=x" \
  "unknown=1" "no equals sign" "template=\$(touch $pwned)@x"; do
  n=$((n + 1))
  printf 'state=%s\n%s\n' "$state" "$bad" >"$tmp/bad$n.conf"
  refused "create with jail.conf line $(printf '%q' "$bad")" "$create" CORDON_JAIL_CONFIG="$tmp/bad$n.conf"
  refused "destroy with jail.conf line $(printf '%q' "$bad")" "$destroy" CORDON_JAIL_CONFIG="$tmp/bad$n.conf"
done

[ ! -e "$pwned" ] || fail "a command substitution in the input was evaluated ($pwned exists)"

# Cordon's BASE_FLAGS (but the DevTools address and port, which each
# script sets for its setting) and the proxy flags.
mapfile -t base_flags < <(
  sed -n '/pub const BASE_FLAGS/,/^];/p' "$root/server/src/sandbox/chromium.rs" |
    sed -n 's/^ *"\(--[^"]*\)",$/\1/p' | grep -v '^--remote-debugging-'
)
[ "${#base_flags[@]}" -ge 20 ] || fail "read only ${#base_flags[@]} flags from chromium.rs"
proxy_flags=(--proxy-bypass-list=\<-loopback\> --disable-quic
  --force-webrtc-ip-handling-policy=disable_non_proxied_udp
  --webrtc-ip-handling-policy=disable_non_proxied_udp)

# has_flags WHAT LINE: LINE carries each flag as a whole word.
has_flags() {
  local flag
  for flag in "${base_flags[@]}" "${proxy_flags[@]}"; do
    checks=$((checks + 1))
    case " $2 " in
      *" $flag "*) ;;
      *) fail "$1: the Chromium command lacks $flag" ;;
    esac
  done
}

# line_no PATTERN: the number of the first stdout line matching (0 if none).
line_no() {
  grep -n -m1 -e "$1" "$tmp/out" | cut -d: -f1 || true
}

echo "== FreeBSD jail scripts: a valid create"
checks=$((checks + 1))
run "$create"
name=cb${id#b_}
if [ "$rc" != 0 ]; then
  fail "valid create: exit $rc: $err"
else
  last=$(tail -n 1 "$tmp/out")
  [ "$last" = "http://10.77.0.2:9222" ] || fail "valid create: last line is $last, not the CDP URL"
  for want in \
    "^+ /sbin/zfs clone -o mountpoint=/usr/local/cordon/jails/$name zroot/cordon/browser@template zroot/cordon/jails/$name\$" \
    "^+ /sbin/mount -t tmpfs -o size=536870912,mode=1777 tmpfs /usr/local/cordon/jails/$name/tmp\$" \
    "^+ /sbin/mount -t nullfs -o ro $runtime/uploads /usr/local/cordon/jails/$name$runtime/uploads\$" \
    "^+ /sbin/mount -t nullfs $runtime/downloads /usr/local/cordon/jails/$name$runtime/downloads\$" \
    "^+ write $state/$name.conf\$" \
    "^+ /usr/sbin/jail -f $state/$name.conf -c $name\$" \
    "^+ /usr/bin/rctl -a jail:$name:memoryuse:deny=1073741824\$" \
    "^+ /usr/bin/rctl -a jail:$name:maxproc:deny=1024\$" \
    "^+ /usr/bin/rctl -a jail:$name:openfiles:deny=8192\$" \
    "^+ /sbin/pfctl -q -t cordon_browsers -T add 10.77.0.2\$" \
    "^+ /usr/sbin/jexec -U browser $name /usr/sbin/daemon -f -p /tmp/cordon-chromium.pid /usr/local/bin/chrome " \
    "^+ /usr/bin/nc -z -w 1 10.77.0.2 9222\$"; do
    checks=$((checks + 1))
    if [ -z "$(line_no "$want")" ]; then
      fail "valid create: no line matching $want in:
$out"
    fi
  done
  clone=$(line_no '^+ /sbin/zfs clone')
  start=$(line_no '^+ /usr/sbin/jail -f')
  pf=$(line_no '^+ /sbin/pfctl')
  chrome=$(line_no '^+ /usr/sbin/jexec')
  checks=$((checks + 1))
  if ! { [ "$clone" -lt "$start" ] && [ "$start" -lt "$pf" ] && [ "$pf" -lt "$chrome" ]; }; then
    fail "valid create: order clone($clone) < jail -c($start) < pfctl add($pf) < chromium($chrome) broken"
  fi
  chrome_line=$(grep -m1 '^+ /usr/sbin/jexec' "$tmp/out")
  has_flags "jail create" "$chrome_line"
  for want in "--proxy-server=http://10.77.0.1:41234" "--remote-debugging-port=9222" \
    "--window-size=1280,720" "--user-data-dir=/tmp/cordon-profile"; do
    checks=$((checks + 1))
    case " $chrome_line " in
      *" $want "*) ;;
      *) fail "jail create: the Chromium command lacks $want" ;;
    esac
  done
  [ ! -e "$state/$name.ip" ] || fail "dry-run create wrote state"
fi
# A non-loopback proxy is used as given; limits are optional.
run "$create" CORDON_PROXY=192.0.2.7:3128 CORDON_LIMIT_MEMORY_BYTES= CORDON_LIMIT_PIDS= \
  CORDON_LIMIT_OPEN_FILES= CORDON_LIMIT_CPU_WEIGHT= CORDON_LIMIT_TMPFS_BYTES=
checks=$((checks + 1))
if [ "$rc" != 0 ] || ! grep -q -- '--proxy-server=http://192.0.2.7:3128 ' "$tmp/out" ||
  grep -q rctl "$tmp/out"; then
  fail "create without limits / with a non-loopback proxy: exit $rc: $err $out"
fi
# The first free address is taken.
mkdir -p "$state/ip/10.77.0.2" "$state/ip/10.77.0.3"
run "$create"
checks=$((checks + 1))
[ "$(tail -n 1 "$tmp/out")" = "http://10.77.0.4:9222" ] || fail "create does not skip claimed addresses: $out"
rmdir "$state/ip/10.77.0.2" "$state/ip/10.77.0.3"

echo "== FreeBSD jail scripts: destroy"
# Unknown but valid: a no-op success, with a message, printing no command.
checks=$((checks + 1))
run "$destroy" CORDON_PROXY= CORDON_CDP_URL=http://10.77.0.2:9222
if [ "$rc" != 0 ] || [ -n "$out" ] || ! grep -q "nothing to do" "$tmp/err"; then
  fail "destroy of an unknown jail: exit $rc, stdout '$out', stderr '$err'"
fi
# Known (its address recorded at create): the whole teardown, in order.
printf '10.77.0.9\n' >"$state/$name.ip"
run "$destroy" CORDON_PROXY= CORDON_CDP_URL=http://10.77.0.9:9222
if [ "$rc" != 0 ]; then
  fail "destroy of a known jail: exit $rc: $err"
else
  prev=0
  for want in \
    "^+ /usr/sbin/jexec $name /bin/cat /tmp/cordon-chromium.pid\$" \
    "^+ /usr/sbin/jexec $name /bin/kill -TERM " \
    "^+ /usr/sbin/jexec $name /bin/kill -KILL " \
    "^+ /usr/sbin/jail -r $name\$" \
    "^+ /usr/bin/rctl -r jail:$name\$" \
    "^+ /sbin/pfctl -q -t cordon_browsers -T delete 10.77.0.9\$" \
    "^+ /sbin/umount /usr/local/cordon/jails/$name$runtime/downloads\$" \
    "^+ /sbin/umount /usr/local/cordon/jails/$name$runtime/uploads\$" \
    "^+ /sbin/umount /usr/local/cordon/jails/$name/tmp\$" \
    "^+ /sbin/zfs destroy -r zroot/cordon/jails/$name\$" \
    "^+ /bin/rm -f $state/$name.ip $state/$name.conf\$" \
    "^+ /bin/rmdir $state/ip/10.77.0.9\$"; do
    checks=$((checks + 1))
    at=$(line_no "$want")
    if [ -z "$at" ] || [ "$at" -le "$prev" ]; then
      fail "destroy: no line matching $want after line $prev in:
$out"
    else
      prev=$at
    fi
  done
fi
# A recorded address that is not one is refused before any command.
printf '10.77.0.9; reboot\n' >"$state/$name.ip"
refused "destroy with a corrupt state file" "$destroy"
rm -f "$state/$name.ip"

echo "== browser pod entrypoint"
base_env=(PATH=/usr/bin:/bin CORDON_DRY_RUN=1 CORDON_CHROMIUM=/nonexistent/chromium
  CORDON_PROXY=10.1.2.3:40000)
checks=$((checks + 1))
run "$browser"
if [ "$rc" != 0 ]; then
  fail "browser entrypoint, valid env: exit $rc: $err"
else
  chrome_line=$(grep -m1 '^+ /nonexistent/chromium ' "$tmp/out" || true)
  [ -n "$chrome_line" ] || fail "browser entrypoint: no Chromium command in: $out"
  has_flags "browser entrypoint" "$chrome_line"
  for want in "--proxy-server=http://10.1.2.3:40000" "--remote-debugging-port=9229" \
    "--window-size=1280,720" "--user-data-dir=/tmp/cordon-profile" "--no-sandbox"; do
    checks=$((checks + 1))
    case " $chrome_line " in
      *" $want "*) ;;
      *) fail "browser entrypoint: the Chromium command lacks $want" ;;
    esac
  done
  checks=$((checks + 1))
  grep -qx '+ socat TCP-LISTEN:9222,fork,reuseaddr TCP:127.0.0.1:9229' "$tmp/out" ||
    fail "browser entrypoint: no socat relay of 9222 in: $out"
fi
run "$browser" CORDON_CDP_PORT=9333 CORDON_WINDOW=800,600 CORDON_PROXY='[fd00::1]:3128' \
  CORDON_CHROMIUM_SANDBOX=1
checks=$((checks + 1))
if [ "$rc" != 0 ] || ! grep -q -- '--window-size=800,600 ' "$tmp/out" ||
  ! grep -q 'TCP-LISTEN:9333,' "$tmp/out" || grep -q -- '--no-sandbox' "$tmp/out" ||
  ! grep -q -- '--proxy-server=http://\[fd00::1\]:3128 ' "$tmp/out"; then
  fail "browser entrypoint, custom port/window/IPv6 proxy/sandbox: exit $rc: $err $out"
fi
for bad in "" "10.1.2.3" "10.1.2.3:" ":40000" "a;b:1" "\$(touch $pwned):80" \
  "\`touch $pwned\`:80" "host:port" "host:99999" "host:0" "-host:80" "host name:80" \
  "10.1.2.3:40000
--x" "[::1;x]:80" "[]:80" ".host:80"; do
  refused "browser CORDON_PROXY=$(printf '%q' "$bad")" "$browser" CORDON_PROXY="$bad"
done
for bad in abc 0 65536 "9222;x" "\$(touch $pwned)" " 9222" 9229 "1
2"; do
  refused "browser CORDON_CDP_PORT=$(printf '%q' "$bad")" "$browser" CORDON_CDP_PORT="$bad"
done
for bad in 1280 1280x720 1280,720,3 a,b "1280;720" 99999,1 50,50 ",720" "1280, 720"; do
  refused "browser CORDON_WINDOW=$(printf '%q' "$bad")" "$browser" CORDON_WINDOW="$bad"
done
for bad in yes 2 " 1"; do
  refused "browser CORDON_DRY_RUN=$bad" "$browser" CORDON_DRY_RUN="$bad"
  refused "browser CORDON_CHROMIUM_SANDBOX=$bad" "$browser" CORDON_CHROMIUM_SANDBOX="$bad"
done
refused "browser CORDON_CDP_INTERNAL_PORT=x" "$browser" CORDON_CDP_INTERNAL_PORT=x

[ ! -e "$pwned" ] || fail "a command substitution in the input was evaluated ($pwned exists)"

if [ "$failures" -gt 0 ]; then
  echo "freebsd.sh: $failures of $checks checks failed" >&2
  exit 1
fi
echo "freebsd.sh: all $checks checks passed"
