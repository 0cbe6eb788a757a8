//! Starting and stopping one browser per session, behind one trait.
//!
//! Drivers: [`process`] (plain Chromium, own temp profile, own port, own
//! process group), [`bwrap`] (Chromium inside bubblewrap namespaces, reached
//! through unix sockets and the in-sandbox [`relay`]) and [`exec`] (external
//! create/destroy commands: containers, FreeBSD jails) and [`kube`] (one
//! Kubernetes pod per browser). Every sandbox gets
//! its own egress proxy address at start and exposes only a CDP endpoint.

pub mod bwrap;
pub mod chromium;
mod devtools;
pub mod exec;
pub mod handover;
pub mod inotify;
pub mod kube;
pub mod limits;
pub mod process;
mod procs;
pub mod relay;
pub mod settings;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use procs::{is_alive, kill_group};

/// Which driver runs a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriverKind {
    /// Plain Chromium process on this host.
    Process,
    /// Chromium inside bubblewrap namespaces on this host.
    Bwrap,
    /// External create/destroy commands.
    Exec,
    /// One Kubernetes pod per browser.
    Kube,
}

impl DriverKind {
    /// The stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Process => "process",
            Self::Bwrap => "bwrap",
            Self::Exec => "exec",
            Self::Kube => "kube",
        }
    }
}

/// What a driver needs to start one sandbox.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The sandbox's id (`b_…`), unique.
    pub id: String,
    /// The egress proxy this browser must use.
    pub proxy: SocketAddr,
    /// The same proxy, served inside this process: a driver that forwards
    /// the browser's connections itself (bwrap) hands them here instead of
    /// opening a TCP connection to `proxy`.
    pub egress: Option<crate::egress::EgressPort>,
    /// Host directory for this sandbox's runtime files (profile, pid file);
    /// removed at stop.
    pub runtime_dir: PathBuf,
    /// Initial window size.
    pub window: (u32, u32),
    /// The sandbox's cgroups and limits on this host (local drivers join
    /// them before the browser runs; `exec` passes the numbers on).
    pub limits: Option<std::sync::Arc<limits::SandboxLimits>>,
}

/// A started sandbox.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// Its id.
    pub id: String,
    /// The driver that runs it.
    pub driver: DriverKind,
    /// The browser-level CDP WebSocket URL.
    pub cdp_url: String,
    /// Process group id on this host, where the driver has one.
    pub pid: Option<i32>,
    /// A string unique to this sandbox in its process's command line, so a
    /// recycled pid is never signalled.
    pub marker: String,
    /// Host directory for runtime files.
    pub runtime_dir: PathBuf,
    /// Its limits, read for breaches and removed after it stops.
    pub limits: Option<std::sync::Arc<limits::SandboxLimits>>,
}

/// A directory the control plane and a sandbox's browser share: where the
/// control plane reads and writes it, and the path the browser is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedDir {
    /// On this host.
    pub host: PathBuf,
    /// As the browser sees it (the same path unless the driver maps it).
    pub inside: PathBuf,
}

/// Where a bwrap browser sees its upload directory (read-only).
pub const INSIDE_UPLOADS: &str = "/uploads";
/// Where a bwrap browser sees its download directory (its only writable
/// host path).
pub const INSIDE_DOWNLOADS: &str = "/downloads";

impl Sandbox {
    /// Files an `upload` call sets on a file input: written here by the
    /// control plane, only read by the browser.
    pub fn uploads(&self) -> SharedDir {
        self.shared("uploads", INSIDE_UPLOADS)
    }

    /// Where a session that allows downloads has the browser save them
    /// (named by GUID); the control plane moves each finished file out.
    pub fn downloads(&self) -> SharedDir {
        self.shared("downloads", INSIDE_DOWNLOADS)
    }

    /// How Cordon's own CDP connection reaches the browser: a `bwrap`
    /// sandbox's DevTools socket is handed over its `cdp.sock` (so the
    /// connection crosses one join in this process, not two).
    pub fn cdp_reach(&self) -> crate::cdp::meter::Reach {
        match self.driver {
            DriverKind::Bwrap => {
                crate::cdp::meter::Reach::Handed(self.runtime_dir.join("cdp.sock"))
            }
            DriverKind::Process | DriverKind::Exec | DriverKind::Kube => {
                crate::cdp::meter::Reach::Tcp
            }
        }
    }

    fn shared(&self, name: &str, bwrap_inside: &str) -> SharedDir {
        let host = self.runtime_dir.join(name);
        let inside = match self.driver {
            DriverKind::Bwrap => PathBuf::from(bwrap_inside),
            // `process` runs on this host; an `exec` engine is told these
            // paths (`CORDON_UPLOADS_DIR`, `CORDON_DOWNLOADS_DIR`) and must
            // show its browser the same directories at the same paths.
            // A pod shares no directory with the control plane: its
            // browser cannot reach these (uploads go through the page,
            // `upload_transfer`; downloads are taken over CDP,
            // `download_transfer`).
            DriverKind::Process | DriverKind::Exec | DriverKind::Kube => host.clone(),
        };
        SharedDir { host, inside }
    }
}

/// Creates a sandbox's upload and download directories under
/// `runtime_dir` (removed with it), private to this user.
pub async fn create_shared_dirs(runtime_dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    use anyhow::Context;
    let mut out = Vec::with_capacity(2);
    for name in ["uploads", "downloads"] {
        let dir = runtime_dir.join(name);
        tokio::fs::create_dir_all(&dir)
            .await
            .with_context(|| format!("cannot create {}", dir.display()))?;
        tokio::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .await
            .with_context(|| format!("cannot restrict {}", dir.display()))?;
        out.push(dir);
    }
    let downloads = out.pop().expect("two dirs");
    let uploads = out.pop().expect("two dirs");
    Ok((uploads, downloads))
}

/// What a driver's sandboxes can do and need, so that the code around
/// them asks the driver instead of matching on its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Its sandboxes run on another engine (a container host, a cluster):
    /// this host's cgroups do not reach them (the engine gets the limits
    /// as numbers, and `tenant_limits` not at all, since warm sandboxes are
    /// made before their tenant is known), and an orphan is ended only
    /// through the driver's `stop`, never by a signal.
    pub remote: bool,
    /// How its browsers reach their egress listener.
    pub egress: EgressReach,
    /// Whether its browsers share a download folder with this host
    /// (`download_transfer = "files"` needs it; without it downloads are
    /// taken over CDP).
    pub downloads: bool,
    /// Whether every local process can drive its browsers' DevTools port.
    pub devtools_open_locally: bool,
}

/// How a driver's browsers reach the egress guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressReach {
    /// A loopback listener each (any local process could connect).
    Loopback,
    /// Only through this process's own forwarder (bwrap): any other client
    /// of the listener is someone else.
    Private,
    /// From a pod's IP, known once it runs (`Sandbox::cdp_url`'s host):
    /// the listener serves that address alone.
    Pod,
}

/// Which sandbox driver runs browsers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SandboxDriverSetting {
    /// `bwrap` where it works, else `process`.
    Auto,
    /// Plain Chromium processes.
    Process,
    /// Chromium inside bubblewrap namespaces.
    Bwrap,
    /// External create/destroy commands (`exec_create`, `exec_destroy`).
    Exec,
    /// One Kubernetes pod per browser (`kube_*` settings).
    Kube,
}

/// What building a driver needs from the settings
/// ([`settings::SandboxSection::driver_settings`]).
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// `sandbox_driver`.
    pub driver: SandboxDriverSetting,
    /// `chromium_path`.
    pub chromium: std::path::PathBuf,
    /// `exec_create`.
    pub exec_create: Option<String>,
    /// `exec_destroy`.
    pub exec_destroy: Option<String>,
    /// `bind`: the process driver is refused off loopback.
    pub bind: SocketAddr,
    /// `kube_*`.
    pub kube: kube::KubeSettings,
}

/// The driver `settings` ask for (`sandbox_driver`): `auto` takes bwrap
/// when it runs here, else the process driver, which is refused then
/// unless `bind` is loopback (its DevTools ports take any local client).
pub async fn build(settings: &SandboxSettings) -> anyhow::Result<std::sync::Arc<dyn Driver>> {
    use SandboxDriverSetting as Setting;
    use anyhow::Context;
    let chromium = settings.chromium.clone();
    let bwrap = || {
        bwrap::BwrapDriver::probe(&chromium)?;
        bwrap::BwrapDriver::new(chromium.clone())
    };
    Ok(match settings.driver {
        Setting::Process => std::sync::Arc::new(process::ProcessDriver::new(chromium.clone())),
        Setting::Exec => std::sync::Arc::new(exec::ExecDriver::new(
            settings.exec_create.as_deref().unwrap_or_default(),
            settings.exec_destroy.as_deref().unwrap_or_default(),
        )?),
        Setting::Kube => {
            std::sync::Arc::new(kube::KubeDriver::from_settings(&settings.kube).await?)
        }
        Setting::Bwrap => std::sync::Arc::new(
            bwrap().context("sandbox_driver = \"bwrap\": bubblewrap cannot run sandboxes here")?,
        ),
        Setting::Auto => match bwrap() {
            Ok(d) => std::sync::Arc::new(d),
            Err(e) => {
                let e = process_fallback(settings.bind, e)?;
                tracing::warn!(
                    reason = %format!("{e:#}"),
                    "sandbox_driver = auto: bwrap is not usable here, using the process driver"
                );
                std::sync::Arc::new(process::ProcessDriver::new(chromium.clone()))
            }
        },
    })
}

/// `sandbox_driver = auto` when bwrap cannot run (`why`): the process
/// driver, whose DevTools ports any local process can use, is refused as
/// it is when asked for by name (`config`), unless `bind` is loopback.
/// Gives back `why` for the warning.
fn process_fallback(bind: SocketAddr, why: anyhow::Error) -> anyhow::Result<anyhow::Error> {
    if bind.ip().is_loopback() {
        return Ok(why);
    }
    Err(why.context(format!(
        "sandbox_driver = auto: bwrap is not usable here, and the process driver, which \
         leaves each browser's DevTools port open to every local process, is refused when \
         bind ({bind}) is not a loopback address"
    )))
}

/// A way to start and stop browsers.
#[async_trait::async_trait]
pub trait Driver: Send + Sync + 'static {
    /// Which driver this is (its stored and displayed name is `kind().as_str()`).
    fn kind(&self) -> DriverKind;
    /// What its sandboxes can do and need.
    fn caps(&self) -> Caps;
    /// Starts a browser and returns once its CDP endpoint answers.
    async fn start(&self, spec: SandboxSpec) -> anyhow::Result<Sandbox>;
    /// Stops it and removes its runtime files. Idempotent.
    async fn stop(&self, sandbox: &Sandbox) -> anyhow::Result<()>;
    /// Stops every sandbox of this deployment the driver can find by
    /// itself (not through the store) whose id is not in `keep`; gives
    /// back how many. Drivers whose sandboxes the store's rows cover
    /// (local processes, exec) find none of their own.
    async fn sweep(&self, keep: &std::collections::HashSet<String>) -> anyhow::Result<usize> {
        let _ = keep;
        Ok(0)
    }
}

/// Whether `path` is a regular file with an execute bit set.
pub fn chromium_runnable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_falls_back_to_the_process_driver_only_on_a_loopback_bind() {
        let why = || anyhow::anyhow!("bwrap (bubblewrap) is not installed");
        for bind in ["127.0.0.1:8080", "[::1]:8080"] {
            let kept = process_fallback(bind.parse().unwrap(), why()).unwrap();
            assert!(format!("{kept:#}").contains("bubblewrap"), "{kept:#}");
        }
        for bind in ["0.0.0.0:8443", "192.0.2.10:8443", "[::]:8443"] {
            let err = format!(
                "{:#}",
                process_fallback(bind.parse().unwrap(), why()).unwrap_err()
            );
            assert!(err.starts_with("sandbox_driver = auto:"), "{err}");
            assert!(
                err.contains("not a loopback address") && err.contains("bubblewrap"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_missing_or_plain_file_is_not_runnable() {
        assert!(!chromium_runnable(Path::new("/nonexistent/chromium")));
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(!chromium_runnable(file.path()));
        assert!(!chromium_runnable(Path::new("/")));
    }

    #[test]
    fn an_executable_file_is_runnable() {
        assert!(chromium_runnable(Path::new("/bin/sh")));
    }
}
