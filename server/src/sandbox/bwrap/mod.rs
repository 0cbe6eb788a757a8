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
//! Plumbing (see [`super::relay`]): the relay only makes the connections
//! and hands their sockets to the host (`SCM_RIGHTS`,
//! [`super::handover`]), so the bytes cross no process between Chromium
//! and the control plane:
//!
//! ```text
//! Chromium ─► 127.0.0.1:3128 (accepted by the relay) ═ handed over /run/cordon/egress.sock ═► (driver) egress guard
//! raw CDP clients ─► host 127.0.0.1:<port> (driver's join) ─► 127.0.0.1:9222 (Chromium; connected by the relay, handed over runtime_dir/cdp.sock)
//! chromiumoxide ─► host 127.0.0.1:<port'> (`cdp::meter::front`'s join) ─► 127.0.0.1:9222 (the same way)
//! ```
//!
//! Both joins read the browser's frame headers as they pass
//! (`cdp::meter`): no message over the bound reaches the control plane.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinHandle;

use super::{Driver, DriverKind, Sandbox, SandboxSpec, kill_group};

mod args;
mod host;
mod probe;
mod start;

pub use args::{Layout, bwrap_args, sandbox_command};
use host::{find_bwrap, first_child, open_relay, reap, relay_binary, running_since, takes_size};

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
