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
# localhost/cordon:0.1.0) with BASE_IMAGE=<that base> and BUILD_IMAGE=
# CORDON_BUILD_IMAGE, an image with a Rust toolchain (rustup and cargo, as
# the rust:*-bookworm images have) that podman can find. Without
# CORDON_BUILD_IMAGE it uses the local build image below, made first if
# missing. That build compiles Cordon in release mode (30-40 minutes on
# 2 cores); cargo's registry and target dir are build cache mounts, kept
# by podman between builds. It is built with --format docker, which keeps
# the image's HEALTHCHECK (the OCI format podman defaults to drops it).
#
# The local build image (--build-image makes it again; CORDON_RUST_IMAGE,
# default localhost/cordon-rust:<rustc version>-bookworm):
# infra/images/rust-local/Dockerfile on the local base, with the host's
# Rust toolchain copied in, since rustup cannot download one here (no
# static.rust-lang.org): one toolchain directory (CORDON_RUST_TOOLCHAIN,
# default $RUSTUP_HOME/toolchains/stable-x86_64-unknown-linux-gnu, with
# RUSTUP_HOME default ~/.rustup; it must have the wasm32-unknown-unknown
# target) and cargo's bin dir ($CARGO_HOME/bin, default ~/.cargo/bin:
# rustup's proxies, and wasm-bindgen if installed there, which spares the
# Dockerfile's `cargo install wasm-bindgen-cli` when its version matches),
# laid out as in the official images (RUSTUP_HOME=/usr/local/rustup,
# CARGO_HOME=/usr/local/cargo). Nothing else from ~/.cargo (no registry,
# no credentials) goes in. The CA certificates the host adds to Debian's
# (CORDON_BUILD_CA_DIR, default /usr/local/share/ca-certificates; empty:
# none) go in too, so cargo in the build reaches crates.io where the host
# does through a TLS-inspecting proxy (here: "self-signed certificate in
# certificate chain" without them). Only this build image has them; the
# control-plane image does not.
#
# Usage (as root): bash infra/images/build-local.sh [--rebuild-base]
#   [--build-image] [--cordon]
# Installs (apt) if missing: debootstrap, podman (and with it buildah's
# build engine, crun, conmon), runc, uidmap, fuse-overlayfs, slirp4netns
# (infra/images/podman-env.sh, which also picks the OCI runtime and the
# rlimits this host allows).
# Builds run with --network host (apt inside the build reaches the mirror
# the way this host does; no bridge network or CNI plugin needed).
# Work files: CORDON_IMAGE_WORK (default /var/tmp/cordon-images).
# Took on 2 cores: the base 45-70 s, the browser image about 50 s, the
# build image 3.7 min, the control-plane image 38 min cold at nice 19 on a
# machine shared with other builds (wasm 5 min, server 31 min) and 35 s
# after a change outside the Rust sources (see docs/deployment.md, "Run
# here").
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
build_rust=0
for arg in "$@"; do
  case $arg in
    --rebuild-base) rebuild_base=1 ;;
    --build-image) build_rust=1 ;;
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
# The host's toolchain, for the local build image.
host_rustup=${RUSTUP_HOME:-$HOME/.rustup}
host_cargo=${CARGO_HOME:-$HOME/.cargo}
toolchain=${CORDON_RUST_TOOLCHAIN:-$host_rustup/toolchains/stable-x86_64-unknown-linux-gnu}
build_image=${CORDON_BUILD_IMAGE:-}
if [ "$build_rust" = 1 ] || { [ "$build_cordon" = 1 ] && [ -z "$build_image" ]; }; then
  if [ ! -x "$toolchain/bin/rustc" ] || [ ! -x "$host_cargo/bin/rustup" ]; then
    echo "build-local: no Rust toolchain at $toolchain (rustc) and $host_cargo/bin (rustup):" \
      "set CORDON_RUST_TOOLCHAIN and CARGO_HOME, or CORDON_BUILD_IMAGE" >&2
    exit 1
  fi
  if [ ! -d "$toolchain/lib/rustlib/wasm32-unknown-unknown" ]; then
    echo "build-local: $toolchain has no wasm32-unknown-unknown target, which the image cannot download:" \
      "rustup target add wasm32-unknown-unknown on the host first" >&2
    exit 1
  fi
  rust_version=$("$toolchain/bin/rustc" --version | awk '{print $2}')
  rust_image=${CORDON_RUST_IMAGE:-localhost/cordon-rust:$rust_version-bookworm}
  [ -n "$build_image" ] || build_image=$rust_image
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

if [ -n "${rust_image:-}" ] && { [ "$build_rust" = 1 ] || ! podman image exists "$rust_image"; }; then
  echo "-- build image $rust_image: the host's Rust $rust_version ($toolchain) on $base_image"
  ctx="$work/rust-local"
  rm -rf "$ctx"
  mkdir -p "$ctx/rustup/toolchains" "$ctx/cargo"
  cp "$root/infra/images/rust-local/Dockerfile" "$ctx/Dockerfile"
  tc_name=$(basename "$toolchain")
  cp -a "$toolchain" "$ctx/rustup/toolchains/$tc_name"
  cp -a "$host_cargo/bin" "$ctx/cargo/bin"
  mkdir -p "$ctx/ca-certificates"
  ca_dir=${CORDON_BUILD_CA_DIR-/usr/local/share/ca-certificates}
  if [ -n "$ca_dir" ] && [ -d "$ca_dir" ]; then
    find "$ca_dir" -maxdepth 1 -name '*.crt' -exec cp {} "$ctx/ca-certificates/" \;
  fi
  printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\nauto_self_update = "disable"\n' \
    "$tc_name" >"$ctx/rustup/settings.toml"
  # Writable by all, as the official images' `chmod -R a+w`.
  chmod -R a+w "$ctx/rustup" "$ctx/cargo"
  podman build --network host --pull=never --build-arg "BASE_IMAGE=$base_image" \
    -t "$rust_image" "$ctx"
  rm -rf "$ctx"
  echo "build image $rust_image built ($(elapsed))"
fi

if [ "$build_cordon" = 1 ]; then
  echo "-- control-plane image $cordon_image from $build_image (release build: long)"
  # --format docker: the OCI image format has no HEALTHCHECK, which podman
  # would drop ("HEALTHCHECK is not supported for OCI image format").
  podman build --format docker --network host --pull=never \
    --build-arg "BASE_IMAGE=$base_image" --build-arg "BUILD_IMAGE=$build_image" \
    --ignorefile "$root/infra/images/cordon/Dockerfile.dockerignore" \
    -f "$root/infra/images/cordon/Dockerfile" -t "$cordon_image" "$root"
  echo "control-plane image $cordon_image built ($(elapsed))"
fi
podman image ls --filter reference=localhost/cordon-base --filter reference="${browser_image%%:*}" \
  --filter reference="${cordon_image%%:*}" ${rust_image:+--filter reference="${rust_image%%:*}"}
