#!/usr/bin/env bash
# Builds the dashboard's browser half: the `app` crate to wasm (feature
# `hydrate`), its JS glue with wasm-bindgen, the stylesheet and public files,
# into target/site (served by `cordon serve` as site_root).
#
# usage: infra/scripts/build-site.sh [debug|release]
# This is what cargo-leptos does for us, done with two plain commands so the
# cold build does not pay ~22 minutes to compile cargo-leptos itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
profile=${1:-debug}
target_dir=${CARGO_TARGET_DIR:-$root/target}
site=$root/target/site

case "$profile" in
  debug) cargo_profile=(); out=debug ;;
  release) cargo_profile=(--profile wasm-release); out=wasm-release ;;
  *) echo "usage: $0 [debug|release]" >&2; exit 2 ;;
esac

cd "$root"
cargo build -p app --lib --target wasm32-unknown-unknown --features hydrate "${cargo_profile[@]}"
rm -rf "$site"
mkdir -p "$site/pkg"
wasm-bindgen --target web --no-typescript --out-name cordon --out-dir "$site/pkg" \
  "$target_dir/wasm32-unknown-unknown/$out/app.wasm"
if [ "$profile" = release ] && command -v wasm-opt >/dev/null; then
  wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals "$site/pkg/cordon_bg.wasm" -o "$site/pkg/cordon_bg.wasm"
fi
cp style/cordon.css "$site/pkg/cordon.css"
cp -R public/. "$site/"
# The build's version (pages link its assets under it, cached for good) and
# each asset precompressed (the server answers the best the client accepts;
# nothing is compressed per request). brotli comes from Debian's `brotli`
# (setup.sh); without it, gzip alone.
(cd "$site/pkg" && cat cordon.js cordon_bg.wasm cordon.css | sha256sum | cut -c1-16 >version)
for f in "$site/pkg/cordon.js" "$site/pkg/cordon_bg.wasm" "$site/pkg/cordon.css"; do
  gzip -9 -k -f "$f"
  if command -v brotli >/dev/null; then
    brotli -f -k -q "$([ "$profile" = release ] && echo 11 || echo 5)" "$f"
  fi
done
echo "site built in $site ($profile)"
