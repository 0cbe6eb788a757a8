#!/usr/bin/python3
"""Runs Cordon's browser pod template (infra/k8s/browser-pod-template.yaml)
as one podman container, the way a kubelet would run its `browser`
container, and serves as Cordon's `exec` driver commands.

    pod-podman.py args    [options]   print the `podman run` command
    pod-podman.py create  [options]   start it, wait for its readiness probe,
                                      print http://127.0.0.1:<port> (CDP)
    pod-podman.py destroy [options]   remove it (idempotent)

Options: --template FILE (the ConfigMap file, or a bare Pod manifest),
--image IMAGE (instead of the template's), --name NAME, --sandbox-id ID
(default $CORDON_SANDBOX_ID), --proxy HOST:PORT (default $CORDON_PROXY).

As Cordon's exec driver (sandbox_driver = "exec"):
    exec_create  = "/usr/bin/python3 <repo>/infra/tests/pod-podman.py create --template <file>"
    exec_destroy = "/usr/bin/python3 <repo>/infra/tests/pod-podman.py destroy"
Cordon's egress listener is on the host's 127.0.0.1; the container reaches
it through slirp4netns at 10.0.2.2 (allow_host_loopback), so CORDON_PROXY
127.0.0.1:P becomes 10.0.2.2:P inside.

What is translated, field by field (anything else the template sets that
changes how the container runs is refused, naming the field):
  command / args        --entrypoint (JSON) / arguments after the image
  env (value only)      --env; plus CORDON_PROXY and CORDON_WINDOW as the
                        kube driver sets them
  runAsUser/runAsGroup  --user UID:GID (container's, else the pod's)
  runAsNonRoot          refused if the user would be root
  fsGroup               --group-add, and the owner group of emptyDirs
  readOnlyRootFilesystem --read-only --read-only-tmpfs=false (a kubelet
                        adds no tmpfs on /run, /tmp, /var/tmp; podman would)
  allowPrivilegeEscalation: false  --security-opt no-new-privileges
  capabilities drop/add --cap-drop / --cap-add
  seccompProfile        RuntimeDefault: podman's default profile;
                        Unconfined: seccomp=unconfined; Localhost: refused
  privileged, host*     refused
  resources.limits      cpu: --cpus; memory: --memory and --memory-swap
                        (no swap, as a kubelet); ephemeral-storage: not
                        enforced by podman (a kubelet evicts the pod)
  resources.requests    cpu: --cpu-shares (millicores * 1024 / 1000, as a
                        kubelet); memory, ephemeral-storage: scheduling only
  volumes emptyDir      --mount type=tmpfs (medium Memory, sizeLimit as
                        size; mode 0777 as a kubelet makes it, group fsGroup);
                        a disk emptyDir is a tmpfs too here
  ports                 -p 127.0.0.1::<containerPort> (loopback only)
  readinessProbe        polled from the host in the container's network
                        namespace (tcpSocket, httpGet) or with podman exec
                        (exec), with initialDelaySeconds, periodSeconds,
                        timeoutSeconds, failureThreshold
  terminationGracePeriodSeconds  --stop-timeout, and destroy's grace
  restartPolicy Never   --restart=no
  labels                --label, plus cordon.dev/sandbox=<id>
"""

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request

import yaml

SLIRP_HOST = "10.0.2.2"
DEFAULT_TEMPLATE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "k8s", "browser-pod-template.yaml"
)


class Refused(Exception):
    pass


def load_pod(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    if len(docs) != 1:
        raise Refused(f"{path}: {len(docs)} documents, expected one")
    doc = docs[0]
    if doc.get("kind") == "ConfigMap":
        text = (doc.get("data") or {}).get("browser-pod.yaml")
        if text is None:
            raise Refused(f"{path}: ConfigMap without data.browser-pod.yaml")
        doc = yaml.safe_load(text)
    if doc.get("kind") != "Pod":
        raise Refused(f"{path}: kind {doc.get('kind')!r}, expected Pod")
    return doc


def quantity(q, what):
    """A Kubernetes quantity as a number (bytes, or cores for cpu)."""
    s = str(q).strip()
    suffixes = {
        "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4,
        "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4, "m": 0.001,
    }
    for suf in sorted(suffixes, key=len, reverse=True):
        if s.endswith(suf):
            try:
                return float(s[: -len(suf)]) * suffixes[suf]
            except ValueError:
                break
    try:
        return float(s)
    except ValueError:
        raise Refused(f"{what}: {q!r} is not a quantity") from None


def ms(seconds):
    return int(seconds * 1000)


class Plan:
    """The podman run arguments and the readiness probe for one sandbox."""

    def __init__(self, pod, name, sandbox_id, proxy, image=None):
        spec = pod.get("spec") or {}
        containers = spec.get("containers") or []
        c = next((c for c in containers if c.get("name") == "browser"), None)
        if c is None:
            raise Refused("spec.containers: no container named browser")
        if len(containers) != 1 or spec.get("initContainers"):
            raise Refused("spec.containers: only the one browser container is translated")
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(key):
                raise Refused(f"spec.{key}: refused")
        psc = spec.get("securityContext") or {}
        csc = c.get("securityContext") or {}

        def sc(key):
            return csc[key] if key in csc else psc.get(key)

        args = ["--name", name, "--restart=no", "--pull=never"]
        labels = dict((pod.get("metadata") or {}).get("labels") or {})
        labels["cordon.dev/sandbox"] = sandbox_id
        for k, v in sorted(labels.items()):
            args += ["--label", f"{k}={v}"]

        # Identity.
        uid, gid = sc("runAsUser"), sc("runAsGroup")
        if uid is not None:
            args += ["--user", f"{uid}:{gid}" if gid is not None else str(uid)]
        # runAsNonRoot without runAsUser: the image's user must be a numeric
        # uid other than 0, as a kubelet checks (see check_image_user).
        self.check_image_user = bool(sc("runAsNonRoot")) and uid is None
        if sc("runAsNonRoot") and uid is not None and int(uid) == 0:
            raise Refused("securityContext.runAsNonRoot with runAsUser 0")
        fs_group = psc.get("fsGroup")
        if fs_group is not None:
            args += ["--group-add", str(fs_group)]
        if psc.get("supplementalGroups"):
            for g in psc["supplementalGroups"]:
                args += ["--group-add", str(g)]

        # Privileges.
        if csc.get("privileged"):
            raise Refused("securityContext.privileged: refused")
        if csc.get("readOnlyRootFilesystem"):
            args += ["--read-only", "--read-only-tmpfs=false"]
        if csc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        caps = csc.get("capabilities") or {}
        for cap in caps.get("drop") or []:
            args += ["--cap-drop", str(cap)]
        for cap in caps.get("add") or []:
            args += ["--cap-add", str(cap)]
        seccomp = (sc("seccompProfile") or {}).get("type")
        if seccomp in (None, "RuntimeDefault"):
            # podman's default profile is its runtime default; a kubelet
            # without seccompDefault would run Unconfined for None.
            pass
        elif seccomp == "Unconfined":
            args += ["--security-opt", "seccomp=unconfined"]
        else:
            raise Refused(f"securityContext.seccompProfile.type {seccomp}: not translated")
        if sc("procMount") not in (None, "Default"):
            raise Refused("securityContext.procMount: not translated")

        # Resources.
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        if "cpu" in limits:
            args += ["--cpus", f"{quantity(limits['cpu'], 'limits.cpu'):g}"]
        if "memory" in limits:
            mem = int(quantity(limits["memory"], "limits.memory"))
            args += ["--memory", f"{mem}b", "--memory-swap", f"{mem}b"]
        if "cpu" in requests:
            shares = max(2, int(quantity(requests["cpu"], "requests.cpu") * 1024))
            args += ["--cpu-shares", str(shares)]
        self.unenforced = [f"limits.{k}" for k in limits if k not in ("cpu", "memory")]

        # Volumes: emptyDirs as tmpfs.
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for m in c.get("volumeMounts") or []:
            v = volumes.get(m.get("name"))
            if v is None:
                raise Refused(f"volumeMounts {m.get('name')}: no such volume")
            if "emptyDir" not in v:
                raise Refused(f"volumes {v['name']}: only emptyDir is translated")
            if m.get("subPath"):
                raise Refused(f"volumeMounts {m['name']}: subPath not translated")
            ed = v.get("emptyDir") or {}
            opts = ["rw", "exec", "nosuid", "nodev", "mode=0777"]
            if ed.get("sizeLimit") is not None:
                size = int(quantity(ed["sizeLimit"], f"volumes {v['name']}.sizeLimit"))
                opts.append(f"size={size}")
            if m.get("readOnly"):
                opts[0] = "ro"
            # (A kubelet also makes it group-owned by fsGroup; mode 0777
            # lets that group, and any other, write it here.)
            args += ["--tmpfs", f"{m['mountPath']}:{','.join(opts)}"]

        # Environment: the template's, then what the kube driver sets.
        env = {}
        for e in c.get("env") or []:
            if "valueFrom" in e:
                raise Refused(f"env {e.get('name')}: valueFrom not translated")
            env[e["name"]] = str(e.get("value", ""))
        if proxy:
            host, _, port = proxy.rpartition(":")
            if host in ("127.0.0.1", "localhost", "[::1]"):
                host = SLIRP_HOST
            env["CORDON_PROXY"] = f"{host}:{port}"
        env.setdefault("CORDON_WINDOW", "1280,720")
        for k, v in env.items():
            args += ["--env", f"{k}={v}"]

        # Network: its own namespace (slirp4netns), the container's ports on
        # the host's loopback only.
        args += ["--network", "slirp4netns:allow_host_loopback=true"]
        self.ports = {}
        for p in c.get("ports") or []:
            if (p.get("protocol") or "TCP") != "TCP":
                continue
            args += ["-p", f"127.0.0.1::{p['containerPort']}"]
            if p.get("name"):
                self.ports[p["name"]] = p["containerPort"]
        self.cdp_port = next(iter(self.ports.values()), None)

        grace = spec.get("terminationGracePeriodSeconds")
        self.grace = int(grace) if grace is not None else 30
        args += ["--stop-timeout", str(self.grace)]
        if spec.get("restartPolicy", "Always") != "Never":
            raise Refused("spec.restartPolicy: a browser pod is never restarted (Never)")

        if c.get("command"):
            args += ["--entrypoint", json.dumps([str(a) for a in c["command"]])]
        image = image or c.get("image")
        if not image:
            raise Refused("containers[browser].image: unset")
        self.image = image
        self.run_args = args + [image] + [str(a) for a in c.get("args") or []]
        self.probe = c.get("readinessProbe")
        self.name = name

    def command(self):
        return ["podman", "run", "--detach"] + self.run_args


def podman(*args, check=True):
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check)


def check_image_user(plan):
    user = podman("image", "inspect", "-f", "{{.Config.User}}", plan.image).stdout.strip()
    uid = user.split(":", 1)[0]
    if not uid.isdigit() or int(uid) == 0:
        raise Refused(
            f"securityContext.runAsNonRoot: the image's user {user!r} is not a numeric "
            "non-root uid, and the template sets no runAsUser"
        )


def probe_once(plan, probe, pid):
    timeout = probe.get("timeoutSeconds", 1)

    def port_of(p):
        return plan.ports[p] if isinstance(p, str) else int(p)

    if "tcpSocket" in probe:
        port = port_of(probe["tcpSocket"]["port"])
        code = (
            "import socket,sys\n"
            f"s=socket.create_connection(('127.0.0.1',{port}),timeout={timeout})\n"
            "s.close()\n"
        )
    elif "httpGet" in probe:
        g = probe["httpGet"]
        port = port_of(g["port"])
        path = g.get("path", "/")
        code = (
            "import urllib.request\n"
            f"r=urllib.request.urlopen('http://127.0.0.1:{port}{path}',timeout={timeout})\n"
            "assert 200<=r.status<400\n"
        )
    elif "exec" in probe:
        r = subprocess.run(
            ["podman", "exec", plan.name, *probe["exec"]["command"]],
            capture_output=True, timeout=timeout + 5,
        )
        return r.returncode == 0
    else:
        raise Refused("readinessProbe: only tcpSocket, httpGet and exec are translated")
    # As a kubelet: from outside the container, to its own address, in its
    # network namespace (the published port would answer even with nothing
    # listening inside).
    r = subprocess.run(
        ["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", code],
        capture_output=True, timeout=timeout + 5,
    )
    return r.returncode == 0


def wait_ready(plan):
    probe = plan.probe
    if not probe:
        return 0.0
    start = time.monotonic()
    time.sleep(probe.get("initialDelaySeconds", 0))
    period = probe.get("periodSeconds", 10)
    failures, limit = 0, probe.get("failureThreshold", 3)
    while True:
        state = podman("inspect", "-f", "{{.State.Running}} {{.State.Pid}}", plan.name).stdout.split()
        if not state or state[0] != "true":
            logs = podman("logs", "--tail", "20", plan.name, check=False)
            raise Refused(
                "the container stopped before it was ready: "
                + (logs.stdout + logs.stderr).strip().replace("\n", " | ")[-600:]
            )
        if probe_once(plan, probe, state[1]):
            return time.monotonic() - start
        failures += 1
        # A kubelet keeps probing an unready pod; Cordon's kube driver gives
        # up after kube_ready_timeout_s. Here: failureThreshold periods.
        if failures >= limit:
            raise Refused(
                f"readinessProbe failed {failures} times ({period} s apart): never ready"
            )
        time.sleep(period)


def host_port(plan):
    out = podman("port", plan.name, f"{plan.cdp_port}/tcp").stdout.strip().splitlines()
    if not out:
        raise Refused(f"no host port for {plan.cdp_port}")
    return int(out[0].rsplit(":", 1)[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=["args", "create", "destroy"])
    ap.add_argument("--template", default=os.environ.get("CORDON_POD_TEMPLATE", DEFAULT_TEMPLATE))
    ap.add_argument("--image", default=os.environ.get("CORDON_BROWSER_IMAGE"))
    ap.add_argument("--sandbox-id", default=os.environ.get("CORDON_SANDBOX_ID", "b_manual"))
    ap.add_argument("--proxy", default=os.environ.get("CORDON_PROXY", ""))
    ap.add_argument("--name")
    a = ap.parse_args()
    sid = a.sandbox_id
    if not sid or not all(ch.isalnum() or ch in "_-" for ch in sid) or len(sid) > 100:
        print(f"pod-podman: invalid sandbox id {sid!r}", file=sys.stderr)
        return 64
    name = a.name or f"cordon-{sid}".replace("_", "-").lower()
    try:
        if a.action == "destroy":
            grace = 5
            try:
                grace = Plan(load_pod(a.template), name, sid, "", a.image).grace
            except (Refused, OSError):
                pass
            podman("rm", "--force", "--ignore", "--time", str(grace), name, check=False)
            return 0
        plan = Plan(load_pod(a.template), name, sid, a.proxy, a.image)
        if a.action == "args":
            print(shlex.join(plan.command()))
            for u in plan.unenforced:
                print(f"# not enforced by podman: resources.{u}", file=sys.stderr)
            return 0
        if plan.check_image_user:
            check_image_user(plan)
        r = subprocess.run(plan.command(), capture_output=True, text=True)
        if r.returncode != 0:
            podman("rm", "--force", "--ignore", name, check=False)
            raise Refused(f"podman run failed: {r.stderr.strip()[-600:]}")
        try:
            took = wait_ready(plan)
            port = host_port(plan)
        except BaseException:
            podman("rm", "--force", "--ignore", "--time", "0", name, check=False)
            raise
        print(f"pod-podman: {name} ready after {took:.1f} s", file=sys.stderr)
        print(f"http://127.0.0.1:{port}")
        return 0
    except Refused as e:
        print(f"pod-podman: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
