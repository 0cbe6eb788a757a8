#!/usr/bin/env bash
# Sets everything up, builds a release Cordon and runs it on its embedded
# defaults: SQLite in ./data, the local Chromium, http://127.0.0.1:8080.
# Extra arguments go to `cordon` (e.g. `infra/scripts/run.sh config show`).
#
# The dashboard (wasm) and the server build at the same time: each ends in
# a long single-threaded stretch (the wasm's link-time optimisation, the
# `cordon` crate's front end), so on a small machine one fills the core
# the other leaves idle. Cargo locks each profile's directory on its own,
# so the two builds share the target directory without waiting on each
# other (BENCHMARKS.md, "cold run.sh").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bash infra/scripts/setup.sh
target_dir=${CARGO_TARGET_DIR:-$root/target}
mkdir -p "$target_dir"
site_log=$target_dir/site-build.log
echo "run.sh: building the dashboard (log: $site_log) and the server"
bash infra/scripts/build-site.sh release >"$site_log" 2>&1 &
site=$!
if ! cargo build --release -p cordon; then
  wait "$site" || true
  exit 1
fi
if ! wait "$site"; then
  echo "run.sh: the dashboard's build failed; the end of its log:" >&2
  tail -n 40 "$site_log" >&2
  exit 1
fi
export CORDON_SITE_ROOT=${CORDON_SITE_ROOT:-$root/target/site}
exec "$target_dir/release/cordon" "$@"
