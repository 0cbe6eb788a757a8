//! The `bwrap` driver: each Chromium runs inside bubblewrap with its own
//! pid, ipc, uts, net, mount, user and cgroup namespaces, no capabilities,
//! and nothing of the host writable but its download directory.
//!
//! Inside the sandbox:
//!
//! - `/usr`, `/etc` read-only; `/lib`, `/lib64`, `/bin`, `/sbin` as on the
//!   host (the merged-/usr symlinks, or read-only binds);
//! - fresh `/proc` (of its own pid namespace) and a minimal `/dev`;
//! - `/tmp`, `/home`, `/run` empty tmpfs; `HOME=/home/sandbox`, the profile
//!   in `/tmp/profile`, so it never touches a disk and vanishes with the
//!   sandbox;
//! - the `cordon` binary read-only at `/run/cordon-bin/cordon` (the relay),
//!   bound from a file the driver opened once (`--ro-bind-fd`), so a binary
//!   replaced on disk cannot run inside next to an older control plane;
//! - the sandbox's own `runtime_dir/uploads` read-only at `/uploads` (files
//!   an `upload` call sets on a file input) and `runtime_dir/downloads`
//!   writable at `/downloads` (where a session that allows downloads has
//!   them saved; the browser refuses downloads otherwise; finished files are
//!   moved out by the control plane, see `sessions/files`): **the only
//!   writable host path**;
//! - the sandbox's own `runtime_dir/sock`, **read-only** at `/run/cordon`.
//!   It holds `egress.sock`, made by the host before the start; connecting
//!   to a socket needs no write access to its mount, so the relay reaches
//!   it, but nothing inside can remove it or put a symlink (to a host
//!   socket, say) in its place;
//! - CDP's socket, `runtime_dir/cdp.sock`, is not in the sandbox at all:
//!   the host binds and listens on it and hands the listening socket to the
//!   relay as its stdin; the relay only accepts on it.
//! - a network namespace with only its own loopback: no route anywhere.
//!
//! Plumbing (see [`super::relay`]):
//!
//! ```text
//! Chromium ─► 127.0.0.1:3128 (relay) ─► /run/cordon/egress.sock ═ runtime_dir/sock/egress.sock ─► (driver) ─► egress guard
//! chromiumoxide ─► host 127.0.0.1:<port> (driver) ─► runtime_dir/cdp.sock ═ relay's stdin (listener) ─► (relay) ─► 127.0.0.1:9222 (Chromium)
//! ```

use crate::fix::WithFix;
use std::collections::HashMap;
use std::io::Read;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::net::{TcpListener, UnixListener};
use tokio::task::JoinHandle;

use super::relay::{Clients, tcp_to_unix, unix_to_tcp};
use super::{Driver, DriverKind, Sandbox, SandboxSpec, kill_group};

mod args;
mod devtools;
mod host;

pub use args::{Layout, bwrap_args, sandbox_command};
use devtools::browser_path;
use host::{
    find_bwrap, first_child, keep_tail, open_relay, reap, relay_binary, running_since,
    spawn_on_keeper, takes_size,
};

/// The in-sandbox port Chromium's `--proxy-server` points at.
pub const PROXY_PORT: u16 = 3128;
/// Chromium's DevTools port inside the sandbox (its own loopback: no clash).
pub const DEVTOOLS_PORT: u16 = 9222;
/// Where the socket directory appears inside.
pub const INSIDE_SOCK_DIR: &str = "/run/cordon";
/// Where the `cordon` binary appears inside.
pub const INSIDE_RELAY: &str = "/run/cordon-bin/cordon";
/// bwrap's fd (its stdout) holding the `cordon` binary for `--ro-bind-fd`.
/// A standard stream, because `posix_spawn` (see `limits`) passes only
/// those to a child; bwrap closes it once bound.
pub const RELAY_FD: i32 = 1;
/// `HOME` inside.
pub const INSIDE_HOME: &str = "/home/sandbox";
/// Chromium's profile inside (on the `/tmp` tmpfs).
pub const INSIDE_PROFILE: &str = "/tmp/profile";

/// How long a browser gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(1500);
/// How long a start may take until CDP answers.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How much of bwrap's stderr is kept for an error message.
const STDERR_TAIL: usize = 2048;

/// One running sandbox's host-side pieces.
struct Running {
    /// bwrap itself (our child, reaped at stop).
    child: Child,
    /// The sandbox's first process (pid 1 of its pid namespace, seen from
    /// the host) and its start time: its exit means every process inside
    /// has exited.
    init: Option<(i32, u64)>,
    /// The two forwarders.
    tasks: Vec<JoinHandle<()>>,
}

/// Tasks aborted when dropped.
struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Runs Chromium inside bubblewrap.
pub struct BwrapDriver {
    chromium: PathBuf,
    bwrap: PathBuf,
    /// The `cordon` binary, opened once: every sandbox runs this file.
    relay: std::fs::File,
    running: Mutex<HashMap<String, Running>>,
    /// Whether this bwrap takes `--size` (0.7.0 and later, not setuid).
    tmpfs_size: bool,
}

impl BwrapDriver {
    /// A driver running the Chromium at `chromium`. Fails if `bwrap` or the
    /// `cordon` binary (for the relay) cannot be found; see also [`Self::probe`].
    pub fn new(chromium: PathBuf) -> anyhow::Result<Self> {
        let bwrap = find_bwrap()?;
        let tmpfs_size = takes_size(&bwrap);
        if !tmpfs_size {
            tracing::warn!(
                bwrap = %bwrap.display(),
                "this bwrap cannot cap tmpfs sizes (needs 0.7.0 or later, not setuid): a \
                 sandbox's tmpfs is bounded only by its memory limit"
            );
        }
        Ok(Self {
            chromium,
            bwrap,
            relay: open_relay(&relay_binary()?)?,
            running: Mutex::default(),
            tmpfs_size,
        })
    }

    /// Whether sandboxes can run here: `bwrap` exists, can create every
    /// namespace with this driver's layout (it runs `/bin/true` in one,
    /// ~20 ms; blocking, meant for startup), Chromium is runnable, and the
    /// `cordon` binary for the relay is found.
    pub fn probe(chromium: &Path) -> anyhow::Result<()> {
        let bwrap = find_bwrap()?;
        if !super::chromium_runnable(chromium) {
            return Err(anyhow::anyhow!(
                "{} is not an executable file",
                chromium.display()
            ))
            .fix(
                "install Debian's chromium package (infra/scripts/setup.sh does), or set \
                 chromium_path (CORDON_CHROMIUM_PATH) to the browser's binary",
            );
        }
        let relay = open_relay(&relay_binary()?)?;
        let dir = std::env::temp_dir().join(format!(
            "cordon-bwrap-probe-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let result = Self::probe_in(&bwrap, &dir, relay, chromium);
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    fn probe_in(
        bwrap: &Path,
        dir: &Path,
        relay: std::fs::File,
        chromium: &Path,
    ) -> anyhow::Result<()> {
        let (uploads_dir, downloads_dir) = (dir.join("uploads"), dir.join("downloads"));
        for d in [&uploads_dir, &downloads_dir] {
            std::fs::create_dir(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let layout = Layout {
            sock_dir: dir,
            uploads_dir: &uploads_dir,
            downloads_dir: &downloads_dir,
            chromium,
            // As the driver will run it.
            disable_userns: nix::unistd::geteuid().is_root(),
            // Sizes are an extra that older bwraps lack (`takes_size`).
            tmpfs_bytes: None,
        };
        let mut child = Command::new(bwrap)
            .args(bwrap_args(&layout, &["/bin/true".into()]))
            .stdin(Stdio::null())
            .stdout(relay)
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot run {}", bwrap.display()))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("bwrap did not finish a trivial sandbox within 5 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        if !status.success() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(anyhow::anyhow!(
                "bwrap cannot create the sandbox's namespaces here ({status}): {}",
                err.trim()
            ))
            .fix(
                "allow user namespaces where Cordon runs (sysctl user.max_user_namespaces above 0; \
                 in Docker, a seccomp profile that allows them and --security-opt \
                 systempaths=unconfined; under systemd, the shipped unit), or set \
                 sandbox_driver = \"process\" on a host without other local users",
            );
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Driver for BwrapDriver {
    fn kind(&self) -> DriverKind {
        DriverKind::Bwrap
    }

    fn caps(&self) -> super::Caps {
        super::Caps {
            remote: false,
            egress: super::EgressReach::Private,
            downloads: true,
            devtools_open_locally: false,
        }
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %spec.id))]
    async fn start(&self, spec: SandboxSpec) -> anyhow::Result<Sandbox> {
        let sock_dir = spec.runtime_dir.join("sock");
        tokio::fs::create_dir_all(&sock_dir)
            .await
            .with_context(|| format!("cannot create {}", sock_dir.display()))?;
        tokio::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o700)).await?;
        let sandbox = Sandbox {
            id: spec.id.clone(),
            driver: DriverKind::Bwrap,
            cdp_url: String::new(),
            pid: None,
            marker: spec.runtime_dir.display().to_string(),
            runtime_dir: spec.runtime_dir.clone(),
            limits: spec.limits.clone(),
        };
        match self.start_inner(&spec, &sock_dir, sandbox.clone()).await {
            Ok(sandbox) => Ok(sandbox),
            Err((e, sandbox)) => {
                let _ = self.stop(&sandbox).await;
                Err(e)
            }
        }
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %sandbox.id))]
    async fn stop(&self, sandbox: &Sandbox) -> anyhow::Result<()> {
        let running = self.running.lock().expect("bwrap lock").remove(&sandbox.id);
        let Some(mut running) = running else {
            // Not started by this driver object (or already stopped).
            if let Some(pid) = sandbox.pid {
                kill_group(pid, &sandbox.marker, STOP_GRACE).await;
                reap(pid);
            }
            return remove_runtime_dir(&sandbox.runtime_dir).await;
        };
        for t in &running.tasks {
            t.abort();
        }
        // First the sandbox's pid 1: the kernel then ends every process of
        // its pid namespace, and bwrap, its parent, collects it and exits,
        // leaving no zombie to the host's init. Nothing inside needs a
        // graceful exit: the profile is on a tmpfs that goes with it.
        let init = running.init.or_else(|| {
            let first = first_child(sandbox.pid?)?;
            Some((first, running_since(first)?))
        });
        let mut ended = false;
        if let Some((init, start)) = init
            && running_since(init) == Some(start)
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(init),
                nix::sys::signal::Signal::SIGKILL,
            );
            ended = wait_exit(&mut running.child, STOP_GRACE).await;
        }
        if !ended {
            // bwrap's process group; pid 1, if still there, dies with bwrap
            // (`--die-with-parent`).
            if let Some(pid) = sandbox.pid {
                kill_group(pid, &sandbox.marker, STOP_GRACE).await;
            }
            if !wait_exit(&mut running.child, STOP_GRACE).await {
                let _ = running.child.kill();
                wait_exit(&mut running.child, STOP_GRACE).await;
            }
        }
        // A pid namespace's pid 1 exits only after all its other processes
        // have: once it is gone, nothing of the sandbox runs. (Its command
        // line is already empty while it waits for them, so it is
        // recognised by its start time, not the marker.)
        if let Some((init, start)) = init {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while running_since(init) == Some(start) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        remove_runtime_dir(&sandbox.runtime_dir).await
    }
}

/// Accepts the sandbox's egress connections on `listener` and serves each
/// with the guard in this process. Runs until aborted.
async fn unix_to_guard(listener: UnixListener, port: crate::egress::EgressPort) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => port.serve(stream),
            Err(e) => {
                tracing::debug!(error = %e, "bwrap egress: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Waits up to `grace` for our child to exit and collects its status.
async fn wait_exit(child: &mut Child, grace: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(None) => {}
            // Exited, or no longer ours to wait for.
            Ok(Some(_)) | Err(_) => return true,
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn remove_runtime_dir(dir: &Path) -> anyhow::Result<()> {
    match tokio::fs::remove_dir_all(dir).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", dir.display())),
    }
}

impl BwrapDriver {
    /// Starts the forwarders and bwrap and waits for CDP. On error, returns
    /// the sandbox as far as it got, for `stop`.
    async fn start_inner(
        &self,
        spec: &SandboxSpec,
        sock_dir: &Path,
        mut sandbox: Sandbox,
    ) -> Result<Sandbox, (anyhow::Error, Sandbox)> {
        // Aborted if this returns early: a forwarder left running would
        // keep the egress listener's log open (and its close waiting).
        let mut tasks = AbortOnDrop(Vec::new());
        let fail = |e: anyhow::Error, sandbox: &Sandbox| (e, sandbox.clone());

        // Host side of egress: the sandbox's egress.sock → the guard.
        let egress_path = sock_dir.join("egress.sock");
        let egress = UnixListener::bind(&egress_path)
            .with_context(|| {
                format!(
                    "cannot listen on {} (a unix socket path must be under 108 bytes)",
                    egress_path.display()
                )
            })
            .map_err(|e| fail(e, &sandbox))?;
        tasks.0.push(match spec.egress.clone() {
            // Straight into the guard: no TCP hop, no port to share.
            Some(port) => tokio::spawn(unix_to_guard(egress, port)),
            None => tokio::spawn(unix_to_tcp(egress, spec.proxy)),
        });
        // CDP's socket, outside the sandbox's view: the host listens, the
        // relay gets the listener as its stdin and accepts.
        let cdp_path = spec.runtime_dir.join("cdp.sock");
        let cdp_listener = std::os::unix::net::UnixListener::bind(&cdp_path)
            .with_context(|| format!("cannot listen on {}", cdp_path.display()))
            .map_err(|e| fail(e, &sandbox))?;
        let relay = self
            .relay
            .try_clone()
            .context("cannot pass on the relay binary")
            .map_err(|e| fail(e, &sandbox))?;
        // Host side of CDP: a loopback port → cdp.sock.
        let cdp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("cannot listen on a loopback port")
            .map_err(|e| fail(e, &sandbox))?;
        let cdp_port = cdp
            .local_addr()
            .map_err(|e| fail(e.into(), &sandbox))?
            .port();
        // Only this process may use it: another local process that found the
        // port could otherwise drive the browser and read its cookies.
        tasks.0.push(tokio::spawn(tcp_to_unix(
            cdp,
            cdp_path,
            Clients::ThisProcess,
        )));

        let no_sandbox = nix::unistd::geteuid().is_root();
        let (uploads_dir, downloads_dir) =
            match crate::sandbox::create_shared_dirs(&spec.runtime_dir).await {
                Ok(dirs) => dirs,
                Err(e) => return Err((e, sandbox)),
            };
        let layout = Layout {
            sock_dir,
            uploads_dir: &uploads_dir,
            downloads_dir: &downloads_dir,
            chromium: &self.chromium,
            disable_userns: no_sandbox,
            tmpfs_bytes: spec
                .limits
                .as_ref()
                .filter(|_| self.tmpfs_size)
                .map(|l| l.limits().tmpfs_bytes),
        };
        let args = bwrap_args(
            &layout,
            &sandbox_command(&self.chromium, spec.window, no_sandbox),
        );
        let mut cmd = match &spec.limits {
            Some(limits) => limits.command(&self.bwrap),
            None => Command::new(&self.bwrap),
        };
        // Both fds reach bwrap through `posix_spawn`'s own dup2 onto the
        // standard streams: nothing is left inheritable in this process,
        // where another spawn could pick it up.
        cmd.args(args)
            .stdin(std::os::fd::OwnedFd::from(cdp_listener))
            .stdout(relay)
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = spawn_on_keeper(cmd)
            .await
            .with_context(|| format!("cannot start {}", self.bwrap.display()))
            .map_err(|e| fail(e, &sandbox))?;
        let pid = i32::try_from(child.id())
            .context("pid out of range")
            .map_err(|e| fail(e, &sandbox))?;
        sandbox.pid = Some(pid);
        let stderr = Arc::new(Mutex::new(Vec::<u8>::new()));
        if let Some(pipe) = child.stderr.take() {
            keep_tail(pipe, stderr.clone());
        }
        self.running.lock().expect("bwrap lock").insert(
            sandbox.id.clone(),
            Running {
                child,
                init: None,
                tasks: std::mem::take(&mut tasks.0),
            },
        );
        let _ = tokio::fs::write(spec.runtime_dir.join("pid"), pid.to_string()).await;

        let path = self.wait_for_browser(&sandbox.id, cdp_port).await;
        let path = match path {
            Ok(p) => p,
            Err(e) => {
                let tail =
                    String::from_utf8_lossy(&stderr.lock().expect("stderr lock")).into_owned();
                let tail = tail.trim();
                let e = if tail.is_empty() {
                    e
                } else {
                    e.context(format!("bwrap said: {tail}"))
                };
                return Err(fail(e, &sandbox));
            }
        };
        if let Some(r) = self
            .running
            .lock()
            .expect("bwrap lock")
            .get_mut(&sandbox.id)
        {
            r.init = first_child(pid).and_then(|c| Some((c, running_since(c)?)));
        }
        sandbox.cdp_url = format!("ws://127.0.0.1:{cdp_port}{path}");
        Ok(sandbox)
    }

    /// Asks for `/json/version` through the whole CDP path until Chromium
    /// answers; fails fast when bwrap exits. Returns the browser's path
    /// (`/devtools/browser/<id>`).
    async fn wait_for_browser(&self, id: &str, port: u16) -> anyhow::Result<String> {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Ok(path)) =
                tokio::time::timeout(Duration::from_secs(2), browser_path(port)).await
            {
                return Ok(path);
            }
            let exited = match self.running.lock().expect("bwrap lock").get_mut(id) {
                Some(r) => r.child.try_wait().ok().flatten(),
                None => bail!("the sandbox was stopped while starting"),
            };
            if let Some(status) = exited {
                bail!("the sandbox exited before Chromium's DevTools answered ({status})");
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("Chromium's DevTools did not answer within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn the_probe_passes_where_bwrap_works() {
        // This machine has bwrap and user namespaces; elsewhere the probe
        // must fail with a reason rather than panic.
        match BwrapDriver::probe(Path::new("/usr/lib/chromium/chromium")) {
            Ok(()) => {}
            Err(e) => assert!(!format!("{e:#}").is_empty()),
        }
        let err = BwrapDriver::probe(Path::new("/nonexistent/chromium")).unwrap_err();
        assert!(
            format!("{err:#}").contains("/nonexistent/chromium"),
            "{err:#}"
        );
    }
}
