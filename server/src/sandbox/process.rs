//! The `process` driver: one plain Chromium per sandbox, its own profile
//! directory, its own DevTools port, its own process group.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;

use super::{Driver, DriverKind, Sandbox, SandboxSpec, chromium, kill_group};

/// How long a browser gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_millis(1500);

/// Runs Chromium directly on this host.
pub struct ProcessDriver {
    chromium: PathBuf,
}

impl ProcessDriver {
    /// A driver running the Chromium at `chromium`.
    pub fn new(chromium: PathBuf) -> Self {
        Self { chromium }
    }
}

#[async_trait::async_trait]
impl Driver for ProcessDriver {
    fn kind(&self) -> DriverKind {
        DriverKind::Process
    }

    fn caps(&self) -> super::Caps {
        super::Caps {
            remote: false,
            egress: super::EgressReach::Loopback,
            downloads: true,
            devtools_open_locally: true,
        }
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %spec.id))]
    async fn start(&self, spec: SandboxSpec) -> anyhow::Result<Sandbox> {
        let profile = spec.runtime_dir.join("profile");
        tokio::fs::create_dir_all(&profile)
            .await
            .with_context(|| format!("cannot create {}", profile.display()))?;
        super::create_shared_dirs(&spec.runtime_dir).await?;
        let is_root = nix::unistd::geteuid().is_root();
        let mut cmd = match &spec.limits {
            Some(limits) => limits.command(&self.chromium),
            None => std::process::Command::new(&self.chromium),
        };
        cmd.args(chromium::args(&profile, spec.proxy, spec.window, is_root))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", self.chromium.display()))?;
        let pid = i32::try_from(child.id()).context("pid out of range")?;
        tokio::fs::write(spec.runtime_dir.join("pid"), pid.to_string())
            .await
            .ok();
        let marker = profile.display().to_string();
        let cdp =
            chromium::wait_for_devtools(&profile, "127.0.0.1", Duration::from_secs(20), || {
                matches!(child.try_wait(), Ok(None))
            })
            .await;
        // The child is reaped by whoever stops it; don't keep a handle that
        // would make it a zombie we forget about.
        std::mem::forget(child);
        let sandbox = Sandbox {
            id: spec.id,
            driver: DriverKind::Process,
            cdp_url: String::new(),
            pid: Some(pid),
            marker,
            runtime_dir: spec.runtime_dir,
            limits: spec.limits,
        };
        match cdp {
            Ok(cdp_url) => Ok(Sandbox { cdp_url, ..sandbox }),
            Err(e) => {
                let _ = self.stop(&sandbox).await;
                Err(e)
            }
        }
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %sandbox.id))]
    async fn stop(&self, sandbox: &Sandbox) -> anyhow::Result<()> {
        if let Some(pid) = sandbox.pid {
            kill_group(pid, &sandbox.marker, STOP_GRACE).await;
            reap(pid);
        }
        match tokio::fs::remove_dir_all(&sandbox.runtime_dir).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => {
                Err(e).with_context(|| format!("cannot remove {}", sandbox.runtime_dir.display()))
            }
        }
    }
}

/// Collects the exit status of our own child so it does not linger as a zombie.
fn reap(pid: i32) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let _ = waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}
