#!/usr/bin/env bash
# Starts (or stops) a throwaway PostgreSQL cluster for the test suite,
# listening on 127.0.0.1 only, trust auth, fsync off.
#
# usage: infra/scripts/test-postgres.sh start|stop
# `start` prints the admin URL the tests read from CORDON_TEST_POSTGRES_URL.
# PostgreSQL refuses to run as root, so as root the cluster runs as `postgres`.
set -euo pipefail
dir=${CORDON_PG_DIR:-/tmp/cordon-test-pg}
port=${CORDON_PG_PORT:-54329}
pg_bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
[ -d "$pg_bin" ] || { echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
  start)
    if [ -f "$dir/postmaster.pid" ] && as_pg "$pg_bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
      as_pg "$pg_bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    as_pg "$pg_bin/initdb" -D "$dir" -A trust -U postgres --no-sync >"$dir.initdb.log" 2>&1 \
      || { cat "$dir.initdb.log" >&2; exit 1; }
    as_pg "$pg_bin/pg_ctl" -D "$dir" -w -l "$dir/server.log" \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=300" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -d "$dir" ]; then
      as_pg "$pg_bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
      rm -rf "$dir" "$dir.initdb.log"
    fi
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
