#!/usr/bin/env bash
# A rolling upgrade for real (opt-in; not in CI): two binaries built from
# two commits on one PostgreSQL, as a Deployment's rolling strategy runs
# them side by side.
#
#   release N    the checkout (HEAD)
#   release N+1  HEAD plus one expand-only migration (a column on
#                `sessions`, a table of its own), committed in a scratch
#                worktree: what the next release's migration may be under
#                the rule (docs/operations.md, "Upgrades")
#
# The steps, each checked:
#  1. replica a (N) serves; a session opens on it;
#  2. replica b (N+1) starts beside it, migrates the database, and serves;
#     sessions open on both (a writes rows across b's new column);
#  3. a restarts as N (a pod of the old ReplicaSet restarted mid-rollout):
#     it starts on the newer schema and serves;
#  4. a is replaced by N+1: both serve; every session closes;
#  5. a third binary with a *contract* migration (named so) is refused at
#     start while they run, naming it.
#
# Usage (from a clone): bash infra/tests/rolling-upgrade.sh
# Environment: CARGO_TARGET_DIR (default target/; the two builds share it,
# so the second compiles only the `cordon` crate again), CORDON_SITE_ROOT
# (default target/site; built with build-site.sh when absent),
# CORDON_PG_DIR / CORDON_PG_PORT (the test PostgreSQL, default
# /tmp/cordon-rolling-pg and 54341; see infra/scripts/test-postgres.sh).
# Needs what the test suite needs (infra/scripts/setup.sh): Rust,
# PostgreSQL 15, Chromium. Took about 6 minutes here with the first build
# done (two incremental builds of `cordon` and about 30 s of checks).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
site=${CORDON_SITE_ROOT:-$root/target/site}
work=$(mktemp -d /tmp/cordon-rolling.XXXXXX)
export CORDON_PG_DIR=${CORDON_PG_DIR:-/tmp/cordon-rolling-pg}
export CORDON_PG_PORT=${CORDON_PG_PORT:-54341}
pids=()
worktrees=()
log_a="" log_b=""

cleanup() {
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  for wt in "${worktrees[@]}"; do
    git -C "$root" worktree remove --force "$wt" 2>/dev/null || true
  done
  bash "$root/infra/scripts/test-postgres.sh" stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }

# A migration pair (both backends) on top of a worktree of HEAD, committed
# there; prints nothing. $1: the worktree, $2: the file's name after the
# number, $3: the PostgreSQL SQL, $4: the SQLite SQL.
add_migration() {
  local wt=$1 name=$2 pg=$3 lite=$4 last next
  last=$(find "$wt/migrations/postgres" -name '[0-9][0-9][0-9][0-9]_*.sql' -printf '%f\n' |
    cut -c1-4 | sort -n | tail -1)
  next=$(printf '%04d' $((10#$last + 1)))
  printf -- '-- %s (made by infra/tests/rolling-upgrade.sh)\n%s\n' "$name" "$pg" \
    >"$wt/migrations/postgres/${next}_${name}.sql"
  printf -- '-- %s (made by infra/tests/rolling-upgrade.sh)\n%s\n' "$name" "$lite" \
    >"$wt/migrations/sqlite/${next}_${name}.sql"
  git -C "$wt" add migrations
  git -C "$wt" -c user.name=rolling -c user.email=rolling@localhost \
    commit -qm "rolling-upgrade.sh: $name" >/dev/null
}

# Builds `cordon` in $1 into $2.
build() {
  (cd "$1" && CARGO_TARGET_DIR=$target cargo build --quiet -p cordon)
  cp "$target/debug/cordon" "$2"
}

step "binaries: N (HEAD $(git rev-parse --short HEAD)), N+1, and one with a contract migration"
[ -d "$site/pkg" ] || bash infra/scripts/build-site.sh debug
build "$root" "$work/cordon-n"
git worktree add -q --detach "$work/next" HEAD
worktrees+=("$work/next")
add_migration "$work/next" rolling_probe \
  "ALTER TABLE sessions ADD COLUMN rolling_note TEXT;
CREATE TABLE rolling_probe (id TEXT PRIMARY KEY, created_at BIGINT NOT NULL);" \
  "ALTER TABLE sessions ADD COLUMN rolling_note TEXT;
CREATE TABLE rolling_probe (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL);"
build "$work/next" "$work/cordon-n1"
add_migration "$work/next" contract_drop_rolling_probe \
  "DROP TABLE rolling_probe;" "DROP TABLE rolling_probe;"
build "$work/next" "$work/cordon-n2"
# The checkout's own build again, so target/ holds HEAD's binary after.
(cd "$root" && CARGO_TARGET_DIR=$target cargo build --quiet -p cordon)

step "PostgreSQL"
admin=$(bash infra/scripts/test-postgres.sh start | tail -1)
db_name="cordon_rolling_$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
psql -q "$admin" -c "CREATE DATABASE $db_name"
export CORDON_DATABASE_URL="${admin%/*}/$db_name"
CORDON_MASTER_KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export CORDON_MASTER_KEY
CORDON_CLUSTER_SECRET=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
export CORDON_CLUSTER_SECRET
export CORDON_SITE_ROOT=$site CORDON_POOL_SIZE=0 CORDON_SANDBOX_DRIVER=process
export CORDON_EGRESS_RESOLVER=loopback-only CORDON_LOG_FORMAT=json CORDON_LOG_LEVEL=info
export CORDON_REPLICA_LOST_AFTER_S=3

# Starts replica $1 with binary $2; sets addr_$1 and pid_$1.
start() {
  local name=$1 bin=$2 log addr=""
  log="$work/$1.$(date +%s%N).log"
  mkdir -p "$work/$name"
  (cd "$work/$name" && CORDON_REPLICA_NAME=$name CORDON_BIND=127.0.0.1:0 \
    CORDON_DATA_DIR="$work/$name/data" exec "$bin" serve >/dev/null 2>"$log") &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 1 600); do
    addr=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try: ev = json.loads(line)
    except ValueError: continue
    if ev.get("addr") and "listening" in str(ev.get("message", "")):
        print(ev["addr"]); break' "$log" 2>/dev/null || true)
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { tail -5 "$log" >&2; fail "replica $name ($bin) exited at start"; }
    sleep 0.1
  done
  [ -n "$addr" ] || fail "replica $name did not listen within 60 s"
  printf -v "addr_$name" '%s' "$addr"
  printf -v "pid_$name" '%s' "$pid"
  printf -v "log_$name" '%s' "$log"
  echo "replica $name ($(basename "$bin")) listening on $addr"
}

stop() {
  local pid_var="pid_$1"
  kill -TERM "${!pid_var}"
  wait "${!pid_var}" 2>/dev/null || true
}

api() { # replica method path [body]
  local addr_var="addr_$1"
  curl -sS --noproxy '*' -X "$2" -H "authorization: Bearer $key" \
    -H 'content-type: application/json' ${4:+--data "$4"} \
    -w '\n%{http_code}' "http://${!addr_var}$3"
}

open_on() { # replica → session id
  local out code
  out=$(api "$1" POST /api/sessions '{}')
  code=${out##*$'\n'}
  [ "$code" = 201 ] || fail "open on $1 answered $code: ${out%$'\n'*}"
  python3 -c 'import json,sys; print(json.loads(sys.argv[1])["session_id"])' "${out%$'\n'*}"
}

close_on() { # replica session
  local out code
  out=$(api "$1" DELETE "/api/sessions/$2")
  code=${out##*$'\n'}
  case $code in 2*) ;; *) fail "close of $2 on $1 answered $code" ;; esac
}

step "1. replica a runs release N"
(cd "$work" && "$work/cordon-n" tenant create acme >/dev/null)
key=$(cd "$work" && "$work/cordon-n" apikey create --tenant acme --label rolling | tail -1)
start a "$work/cordon-n"
s1=$(open_on a)

step "2. replica b runs release N+1 beside it (and migrates)"
start b "$work/cordon-n1"
grep -q 'rolling upgrade: replica \\"a\\" runs schema' "$log_b" ||
  fail "b did not say it rolls beside a: $(grep -c . "$log_b") log lines"
[ "$(psql -tAq "$CORDON_DATABASE_URL" -c 'SELECT MAX(version) FROM _sqlx_migrations')" -gt 15 ] ||
  fail "b did not migrate"
s2=$(open_on b)
s3=$(open_on a)

step "3. a restarts as release N on the newer schema"
stop a
start a "$work/cordon-n"
grep -q 'this binary knows up to' "$log_a" || fail "a did not say it runs on a newer schema"
s4=$(open_on a)

step "4. a is replaced by release N+1"
stop a
start a "$work/cordon-n1"
s5=$(open_on a)
# a's earlier sessions ended with its stops (reason shutdown); the others
# close.
for s in "$s1" "$s3" "$s4"; do
  out=$(api b GET "/api/sessions/$s")
  grep -q '"close_reason":"shutdown"' <<<"$out" || fail "session $s on a stopped replica: ${out%$'\n'*}"
done
close_on b "$s2"
close_on a "$s5"

step "5. a binary with a contract migration is refused while they run"
mkdir -p "$work/c"
if out=$(cd "$work/c" && CORDON_REPLICA_NAME=c CORDON_BIND=127.0.0.1:0 \
  CORDON_DATA_DIR="$work/c/data" timeout 60 "$work/cordon-n2" serve 2>&1 >/dev/null); then
  fail "the contract release started"
fi
grep -q 'contract drop rolling probe) is not expand-only' <<<"$out" ||
  fail "the refusal does not name the contract migration: $(tail -2 <<<"$out")"

stop a
stop b
echo
echo "rolling upgrade: OK (N and N+1 side by side on one PostgreSQL; contract refused)"
