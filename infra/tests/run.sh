#!/usr/bin/env bash
# Checks of infra/ that need no cluster, no FreeBSD host and no image build:
#  - shellcheck on every shell script under infra/ (POSIX ones as sh);
#  - the hostile-input tests of the FreeBSD jail scripts and the browser
#    pod's entrypoint (infra/tests/freebsd.sh, dry run);
#  - systemd-analyze verify of infra/systemd/cordon.service, if available;
#  - kubectl kustomize infra/k8s (offline), if kubectl is installed;
#  - infra/systemd/cordon.toml loads in a built cordon (config show), if
#    one is built.
# The manifests' content is checked by server/tests/it/infra.rs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

if ! command -v shellcheck >/dev/null; then
  echo "infra checks: shellcheck is missing (infra/scripts/setup.sh installs it)" >&2
  exit 1
fi

echo "-- shellcheck"
sh_files=()
bash_files=()
while IFS= read -r -d '' f; do
  first=$(head -n 1 "$f")
  case $first in
    '#!/bin/sh'*) sh_files+=("$f") ;;
    '#!/usr/bin/env bash'* | '#!/bin/bash'*) bash_files+=("$f") ;;
    *)
      case $f in
        *.subr) sh_files+=("$f") ;;
        *.sh) bash_files+=("$f") ;;
      esac
      ;;
  esac
done < <(find infra -type f ! -name '*.yaml' ! -name 'Dockerfile*' ! -name '*.md' -print0 | sort -z)
[ "${#sh_files[@]}" -ge 5 ] || { echo "found only ${#sh_files[@]} POSIX scripts: ${sh_files[*]}" >&2; exit 1; }
shellcheck -x -P SCRIPTDIR -s sh "${sh_files[@]}"
shellcheck -x -P SCRIPTDIR -s bash "${bash_files[@]}"
echo "shellcheck: ${#sh_files[@]} POSIX sh and ${#bash_files[@]} bash scripts clean"

echo "-- hostile input (dry run)"
bash infra/tests/freebsd.sh

echo "-- systemd unit"
if command -v systemd-analyze >/dev/null; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # verify insists the binary exists: check the unit with a stand-in.
  sed 's#^ExecStart=/usr/local/bin/cordon #ExecStart=/bin/true #' \
    infra/systemd/cordon.service >"$tmp/cordon.service"
  if out=$(systemd-analyze verify "$tmp/cordon.service" 2>&1) && [ -z "$out" ]; then
    echo "systemd-analyze verify: clean"
  else
    echo "systemd-analyze verify cordon.service:" >&2
    echo "$out" >&2
    exit 1
  fi
  for key in 'User=cordon' 'ProtectSystem=strict' 'ReadWritePaths=/var/lib/cordon' \
    'NoNewPrivileges=yes' 'CapabilityBoundingSet=' 'RestrictNamespaces=user mnt pid net ipc uts cgroup' \
    'PrivateUsers=no' 'Delegate=yes' 'Restart=on-failure'; do
    grep -qx "$key" infra/systemd/cordon.service || { echo "cordon.service lacks $key" >&2; exit 1; }
  done
  for key in MemoryDenyWriteExecute ProtectKernelTunables ProtectKernelLogs ProcSubset ProtectProc; do
    if grep -q "^$key=" infra/systemd/cordon.service; then
      echo "cordon.service sets $key, which breaks Chromium or bwrap (see the comment there)" >&2
      exit 1
    fi
  done
else
  echo "systemd-analyze not available: unit not verified (skipped)"
fi

echo "-- kustomize"
if command -v kubectl >/dev/null; then
  kinds=$(kubectl kustomize infra/k8s | grep -c '^kind:')
  echo "kubectl kustomize infra/k8s: $kinds objects"
else
  echo "kubectl not available: kustomize build not checked (skipped)"
fi

echo "-- example cordon.toml"
bin=${CORDON_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/cordon}
if [ -x "$bin" ]; then
  (cd / && env -i PATH=/usr/bin:/bin "$bin" --config "$root/infra/systemd/cordon.toml" config show >/dev/null)
  echo "infra/systemd/cordon.toml loads ($bin)"
else
  echo "no built cordon at $bin: cordon.toml not loaded (skipped)"
fi
echo "infra checks passed"
