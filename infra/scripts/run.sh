#!/usr/bin/env bash
# Sets everything up, builds a release Cordon and runs it on its embedded
# defaults: SQLite in ./data, the local Chromium, http://127.0.0.1:8080.
# Extra arguments go to `cordon` (e.g. `infra/scripts/run.sh config show`).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bash infra/scripts/setup.sh
bash infra/scripts/build-site.sh release
cargo build --release -p cordon
export CORDON_SITE_ROOT=${CORDON_SITE_ROOT:-$root/target/site}
exec "${CARGO_TARGET_DIR:-$root/target}/release/cordon" "$@"
