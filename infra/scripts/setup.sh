#!/usr/bin/env bash
# Installs what building, running and testing Cordon needs, skipping what is
# already there: Debian packages (Chromium, binaryen, bubblewrap, PostgreSQL,
# sqlite3, shellcheck, faketime, curl and jq for the docs' examples, Node.js,
# pip), the wasm32 target, rustfmt/clippy, the wasm-bindgen CLI
# matching the pinned crate, the end-to-end tests' npm packages, the
# stock Python MCP client (PyPI `mcp`) the MCP test drives, browser-use
# (PyPI, in end2end/.venv) for the CDP endpoint's browser-use test, and
# schemathesis and openapi-python-client (PyPI, in end2end/.venv-contract)
# for the API contract test (end2end/tests/contract.test.js).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
WASM_BINDGEN_VERSION=0.2.105
MCP_PY_VERSION=2.3.0
BROWSER_USE_VERSION=0.13.14
SCHEMATHESIS_VERSION=4.32.5
OPENAPI_PYTHON_CLIENT_VERSION=0.29.1
python=${CORDON_TEST_PYTHON:-python3}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for pkg in chromium binaryen brotli bubblewrap postgresql sqlite3 ca-certificates shellcheck faketime curl jq; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
"$python" -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
"$python" -c "import venv, ensurepip" >/dev/null 2>&1 || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if command -v rustup >/dev/null; then
  rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
  for c in rustfmt clippy; do
    rustup component list --installed | grep -q "^$c" || rustup component add "$c"
  done
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION\$"; then
  echo "setup: installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (a few minutes, once)"
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --locked --quiet
fi

if [ ! -d "$root/end2end/node_modules/playwright-core" ]; then
  (cd "$root/end2end" && npm ci --no-audit --no-fund --loglevel=error)
fi

# Debian 12's Python is "externally managed": pip needs --break-system-packages
# (it only adds this one package and its dependencies).
if ! "$python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_PY_VERSION')" 2>/dev/null; then
  echo "setup: installing the Python MCP client (mcp==$MCP_PY_VERSION)"
  "$python" -m pip install --quiet --disable-pip-version-check --break-system-packages "mcp==$MCP_PY_VERSION"
fi

# browser-use in a venv of its own (it pins many packages; the system's
# Python stays as it is). Its telemetry is switched off by the test.
venv="$root/end2end/.venv"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('browser-use') != '$BROWSER_USE_VERSION')" 2>/dev/null; then
  echo "setup: installing browser-use==$BROWSER_USE_VERSION into end2end/.venv (a minute, once)"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "browser-use==$BROWSER_USE_VERSION"
fi

# The contract test's tools in a venv of their own (schemathesis pins
# hypothesis and friends; the generated client needs httpx and attrs,
# which come with them).
venv="$root/end2end/.venv-contract"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('schemathesis') != '$SCHEMATHESIS_VERSION' or m.version('openapi-python-client') != '$OPENAPI_PYTHON_CLIENT_VERSION')" 2>/dev/null; then
  echo "setup: installing schemathesis==$SCHEMATHESIS_VERSION and openapi-python-client==$OPENAPI_PYTHON_CLIENT_VERSION into end2end/.venv-contract (a minute, once)"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "schemathesis==$SCHEMATHESIS_VERSION" "openapi-python-client==$OPENAPI_PYTHON_CLIENT_VERSION"
fi
