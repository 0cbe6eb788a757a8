#!/usr/bin/env bash
# Builds Cordon's images from a local Debian base, with nothing downloaded
# outside Debian's package archive (no Docker Hub):
#
#  1. debootstrap --variant=minbase bookworm into a work directory (from
#     DEBIAN_MIRROR, default http://deb.debian.org/debian), with the
#     bookworm, bookworm-updates and bookworm-security suites in its apt
#     sources as in debian:bookworm-slim;
#  2. imports that root with `podman import` as the base image
#     (CORDON_BASE_IMAGE, default localhost/cordon-base:bookworm); kept
#     between runs, --rebuild-base makes it again;
#  3. builds infra/images/browser with --build-arg BASE_IMAGE=<that base>
#     (CORDON_BROWSER_IMAGE, default localhost/cordon-browser:0.1.0).
#
# With --cordon it also builds the control-plane image
# (infra/images/cordon/Dockerfile, CORDON_IMAGE, default
# localhost/cordon:0.1.0) with BASE_IMAGE=<that base> and
# BUILD_IMAGE=$CORDON_BUILD_IMAGE, which must name an image with a Rust
# toolchain (rustup and cargo, as the rust:*-bookworm images have) that
# podman can find; this script does not make one. That build compiles
# Cordon in release mode: about 30 minutes on 2 cores.
#
# Usage (as root): bash infra/images/build-local.sh [--rebuild-base] [--cordon]
# Installs (apt) if missing: debootstrap, podman (and with it buildah's
# build engine, crun, conmon), runc, uidmap, fuse-overlayfs, slirp4netns
# (infra/images/podman-env.sh, which also picks the OCI runtime and the
# rlimits this host allows).
# Builds run with --network host (apt inside the build reaches the mirror
# the way this host does; no bridge network or CNI plugin needed).
# Work files: CORDON_IMAGE_WORK (default /var/tmp/cordon-images).
# Took on 2 cores: the base 45-70 s, the browser image about 50 s (see
# docs/deployment.md, "Run here").
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
base_image=${CORDON_BASE_IMAGE:-localhost/cordon-base:bookworm}
browser_image=${CORDON_BROWSER_IMAGE:-localhost/cordon-browser:0.1.0}
cordon_image=${CORDON_IMAGE:-localhost/cordon:0.1.0}
work=${CORDON_IMAGE_WORK:-/var/tmp/cordon-images}

rebuild_base=0
build_cordon=0
for arg in "$@"; do
  case $arg in
    --rebuild-base) rebuild_base=1 ;;
    --cordon) build_cordon=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "build-local: unknown argument $arg (see --help)" >&2
      exit 64
      ;;
  esac
done

if [ "$(id -u)" != 0 ]; then
  echo "build-local: run as root (debootstrap and rootful podman)" >&2
  exit 1
fi
if [ "$build_cordon" = 1 ] && [ -z "${CORDON_BUILD_IMAGE:-}" ]; then
  echo "build-local: --cordon needs CORDON_BUILD_IMAGE, an image with a Rust toolchain on bookworm" >&2
  exit 64
fi

# shellcheck source=infra/images/podman-env.sh
. "$root/infra/images/podman-env.sh"
# shellcheck source=infra/images/debian-root.sh
. "$root/infra/images/debian-root.sh"
podman_env_setup debootstrap
echo "build-local: podman $(podman --version | awk '{print $3}'), runtime $PODMAN_ENV_RUNTIME"

started=$(date +%s)
elapsed() { echo "$(($(date +%s) - started)) s"; }

if [ "$rebuild_base" = 1 ] || ! podman image exists "$base_image"; then
  echo "-- base image $base_image: debootstrap bookworm (minbase) from $mirror"
  mkdir -p "$work"
  rootfs="$work/rootfs"
  debian_root "$rootfs" "$mirror" "$security_mirror" "$work/debootstrap.log" || exit 1
  # debian:bookworm-slim's container settings: no recommends, no apt
  # caches kept.
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  printf 'APT::Install-Recommends "false";\n' >"$rootfs/etc/apt/apt.conf.d/docker-no-recommends"
  rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"*
  # No host identity in the image.
  : >"$rootfs/etc/hostname"
  : >"$rootfs/etc/resolv.conf"
  rm -f "$rootfs/etc/machine-id"
  tar --numeric-owner --xattrs -C "$rootfs" -c . |
    podman import --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      - "$base_image" >/dev/null
  rm -rf "$rootfs"
  echo "base image $base_image imported ($(elapsed))"
else
  echo "-- base image $base_image: present (--rebuild-base makes it again)"
fi

echo "-- browser image $browser_image"
podman build --network host --pull=never --build-arg "BASE_IMAGE=$base_image" \
  -t "$browser_image" "$root/infra/images/browser"
echo "browser image $browser_image built ($(elapsed))"

if [ "$build_cordon" = 1 ]; then
  echo "-- control-plane image $cordon_image (release build: long)"
  podman build --network host --pull=never \
    --build-arg "BASE_IMAGE=$base_image" --build-arg "BUILD_IMAGE=$CORDON_BUILD_IMAGE" \
    --ignorefile "$root/infra/images/cordon/Dockerfile.dockerignore" \
    -f "$root/infra/images/cordon/Dockerfile" -t "$cordon_image" "$root"
  echo "control-plane image $cordon_image built ($(elapsed))"
fi
podman image ls --filter reference=localhost/cordon-base --filter reference="${browser_image%%:*}" \
  --filter reference="${cordon_image%%:*}"
