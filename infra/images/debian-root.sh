# shellcheck shell=bash
# A Debian bookworm root made with debootstrap (minbase), given the apt
# sources of debian:bookworm-slim (updates and security too). Sourced by
# infra/images/build-local.sh (the browser image's base) and
# infra/tests/systemd.sh (the root the unit boots in).
#
# debian_root ROOTFS MIRROR SECURITY_MIRROR LOG [debootstrap options...]
# Replaces ROOTFS; debootstrap's output goes to LOG (its tail to stderr
# on failure, and the function fails).
debian_root() {
  local rootfs=$1 mirror=$2 security_mirror=$3 log=$4
  shift 4
  rm -rf "$rootfs"
  mkdir -p "$(dirname "$rootfs")"
  debootstrap --variant=minbase "$@" bookworm "$rootfs" "$mirror" >"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    echo "debootstrap failed (log: $log)" >&2
    return 1
  }
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}
