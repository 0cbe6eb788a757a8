#!/usr/bin/env bash
# The whole test suite, as CI runs it: the infra/ checks (shellcheck, the
# deployment scripts' hostile-input tests), formatting, the layer check (no
# import runs up a layer; tools/layers), clippy (server and wasm),
# unit and integration tests against SQLite and a PostgreSQL started here,
# the dashboard's end-to-end tests in a real Chromium, the docs' shell
# examples run against a live Cordon (end2end/tests/docs_examples.test.js),
# and the API contract: schemathesis and a generated client against a live
# Cordon (end2end/tests/contract.test.js, about 50 s).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# Each part's header says when it began (seconds since the start), so a
# log shows where a cold run's time goes (BENCHMARKS.md, "cold run.sh").
start=$(date +%s)
part() { echo "== $1 (at $(($(date +%s) - start)) s)"; }
part "setup"
bash infra/scripts/setup.sh

# A cold build of the suite writes about 6 GB under target/ (cordon's
# test binaries are large; keep 10 free); a full disk shows up as a linker crash
# ("ld terminated with signal 7 [Bus error]"), so say up front what there is.
target_dir=${CARGO_TARGET_DIR:-$root/target}
mkdir -p "$target_dir"
free_gb=$(df -P -BG "$target_dir" | awk 'NR==2 { sub("G", "", $4); print $4 }')
echo "== disk: ${free_gb} GB free for $target_dir"
if [ "${free_gb:-0}" -lt 10 ]; then
  echo "warning: under 10 GB free; the build may fail with a linker Bus error" >&2
fi
# Incremental state only helps a second build in the same tree; CI builds once.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi

part "infra checks"
bash infra/tests/run.sh

part "rustfmt"
cargo fmt --all --check

part "layers (no import runs up a layer)"
# A dependency-free tool that builds in seconds, so it fails before the long build.
cargo run --quiet -p layers

part "dashboard build (wasm)"
bash infra/scripts/build-site.sh debug

part "clippy"
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p app --lib --target wasm32-unknown-unknown --features hydrate -- -D warnings

part "PostgreSQL for the tests"
pg_url=$(bash infra/scripts/test-postgres.sh start)
trap 'bash infra/scripts/test-postgres.sh stop' EXIT
export CORDON_TEST_POSTGRES_URL=$pg_url

# Belt and braces: any Cordon a test starts resolves nothing but localhost,
# so no DNS query leaves the machine.
export CORDON_EGRESS_RESOLVER=loopback-only

part "unit and integration tests (SQLite and PostgreSQL)"
# Benches are not tests: they run with `cargo bench` (clippy above checks them).
# --timings writes target/cargo-timings/*.html: which crate held the build
# up, and how busy the cores were (BENCHMARKS.md, "cold run.sh").
cargo test --workspace --lib --bins --tests --timings

part "end-to-end tests (Playwright + Chromium; the docs' examples)"
# Uses target/debug/cordon, built by the tests above. Every file in
# end2end/tests/ named *.test.js runs, docs_examples.test.js and
# contract.test.js (schemathesis; its tuned checks are named with their
# reasons in end2end/schemathesis.toml) included.
(cd end2end && npm test)
part "done"
