#!/usr/bin/env bash
# Sourced by infra/images/build-local.sh and the opt-in checks in
# infra/tests/ (pod-container.sh): installs what rootful podman needs and
# works around two host quirks met on the build machines, through a
# containers.conf of its own (CONTAINERS_CONF, only for these scripts;
# the host's podman settings are not touched):
#  - a hybrid cgroup host (cgroup v1 controllers, and a cgroup v2 tree with
#    a controller in it): crun refuses it ("cgroups in hybrid mode not
#    supported, drop all controllers from cgroupv2"), runc runs: runc then;
#  - no CAP_SYS_RESOURCE (a sandboxed root): podman's default rlimits
#    (nofile 1048576, nproc = pid_max) cannot be set ("error setting rlimit
#    type 7: operation not permitted"): the hard limits in force then.
# CORDON_OCI_RUNTIME forces a runtime.
# shellcheck shell=bash

podman_env_setup() {
  local need=() pkg
  for pkg in podman uidmap fuse-overlayfs slirp4netns runc; do
    dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed' || need+=("$pkg")
  done
  if [ "$#" -gt 0 ]; then
    for pkg in "$@"; do
      dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed' || need+=("$pkg")
    done
  fi
  if [ "${#need[@]}" -gt 0 ]; then
    echo "podman-env: installing ${need[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
  fi

  local runtime=${CORDON_OCI_RUNTIME:-}
  if [ -z "$runtime" ]; then
    runtime=crun
    # (cgroupfs files have no size: read them.)
    if [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ] || ! command -v crun >/dev/null; then
      runtime=runc
    fi
  fi
  local conf_dir=${TMPDIR:-/tmp}/cordon-podman-env
  mkdir -p "$conf_dir"
  local conf="$conf_dir/containers.conf"
  {
    echo "[engine]"
    echo "runtime = \"$runtime\""
    echo "[containers]"
    local caps
    caps=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
    # Bit 24 is CAP_SYS_RESOURCE.
    if [ $((0x$caps >> 24 & 1)) = 0 ]; then
      local nofile nproc pid_max
      nofile=$(ulimit -Hn)
      [ "$nofile" != unlimited ] || nofile=1048576
      nproc=$(ulimit -Hu)
      pid_max=$(cat /proc/sys/kernel/pid_max)
      if [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; then nproc=$pid_max; fi
      echo "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]"
    fi
  } >"$conf"
  export CONTAINERS_CONF=$conf
  export PODMAN_ENV_RUNTIME=$runtime
}
