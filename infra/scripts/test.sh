#!/usr/bin/env bash
# The whole test suite, as CI runs it: the infra/ checks (shellcheck, the
# deployment scripts' hostile-input tests), formatting, clippy (server and wasm),
# unit and integration tests against SQLite and a PostgreSQL started here,
# and the dashboard's end-to-end tests in a real Chromium.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bash infra/scripts/setup.sh

echo "== infra checks"
bash infra/tests/run.sh

echo "== rustfmt"
cargo fmt --all --check

echo "== dashboard build (wasm)"
bash infra/scripts/build-site.sh debug

echo "== clippy"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p app --lib --target wasm32-unknown-unknown --features hydrate -- -D warnings

echo "== PostgreSQL for the tests"
pg_url=$(bash infra/scripts/test-postgres.sh start)
trap 'bash infra/scripts/test-postgres.sh stop' EXIT
export CORDON_TEST_POSTGRES_URL=$pg_url

# Belt and braces: any Cordon a test starts resolves nothing but localhost,
# so no DNS query leaves the machine.
export CORDON_EGRESS_RESOLVER=loopback-only

echo "== unit and integration tests (SQLite and PostgreSQL)"
# Benches are not tests: they run with `cargo bench` (clippy above checks them).
cargo test --workspace --lib --bins --tests

echo "== end-to-end tests (Playwright + Chromium)"
# Uses target/debug/cordon, built by the tests above.
(cd end2end && npm test)
