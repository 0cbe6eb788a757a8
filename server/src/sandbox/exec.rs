//! The `exec` driver: browsers made by external commands. The seam for
//! FreeBSD Bastille clones (seeds/000: hostd `browser-clone-create` /
//! `-destroy`), containers, or anything else that can print a CDP endpoint.
//!
//! `create` runs with `CORDON_SANDBOX_ID`, `CORDON_PROXY` (the egress guard's
//! `host:port` the browser must use) and `CORDON_RUNTIME_DIR` in its
//! environment and must print the browser's CDP endpoint (`ws://…` or
//! `http://host:port`) as its last line of stdout. `destroy` runs with the
//! same variables plus `CORDON_CDP_URL`, must be idempotent, and is also what
//! the reaper calls for orphans. Neither runs through a shell: the command is
//! split on whitespace.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::Command;

use super::{Driver, DriverKind, Sandbox, SandboxSpec};

/// Bound on one create or destroy command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs configured create/destroy commands.
pub struct ExecDriver {
    create: Vec<String>,
    destroy: Vec<String>,
}

impl ExecDriver {
    /// A driver from two command lines (program and arguments, split on whitespace).
    pub fn new(create: &str, destroy: &str) -> anyhow::Result<Self> {
        let split = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let (create, destroy) = (split(create), split(destroy));
        if create.is_empty() || destroy.is_empty() {
            bail!("sandbox_driver \"exec\" needs exec_create and exec_destroy commands");
        }
        Ok(Self { create, destroy })
    }

    async fn run(
        &self,
        argv: &[String],
        sandbox_id: &str,
        proxy: &str,
        runtime_dir: &PathBuf,
        cdp: Option<&str>,
        limits: Option<&super::limits::Limits>,
    ) -> anyhow::Result<String> {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env("CORDON_SANDBOX_ID", sandbox_id)
            .env("CORDON_PROXY", proxy)
            .env("CORDON_RUNTIME_DIR", runtime_dir)
            // Shared with the browser at these same paths (see
            // `Sandbox::uploads`): read-only uploads, writable downloads.
            .env("CORDON_UPLOADS_DIR", runtime_dir.join("uploads"))
            .env("CORDON_DOWNLOADS_DIR", runtime_dir.join("downloads"))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some(cdp) = cdp {
            cmd.env("CORDON_CDP_URL", cdp);
        }
        // The engine behind the commands enforces these (a jail's rctl, a
        // container's cgroup): the same limits the local drivers apply.
        if let Some(l) = limits {
            cmd.env("CORDON_LIMIT_MEMORY_BYTES", l.memory_bytes.to_string())
                .env("CORDON_LIMIT_PIDS", l.pids.to_string())
                .env("CORDON_LIMIT_OPEN_FILES", l.open_files.to_string())
                .env("CORDON_LIMIT_TMPFS_BYTES", l.tmpfs_bytes.to_string())
                .env("CORDON_LIMIT_CPU_WEIGHT", l.cpu_weight.to_string());
        }
        let out = tokio::time::timeout(COMMAND_TIMEOUT, cmd.output())
            .await
            .with_context(|| format!("{} did not finish within {COMMAND_TIMEOUT:?}", argv[0]))?
            .with_context(|| format!("cannot run {}", argv[0]))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr
                .lines()
                .last()
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect::<String>();
            bail!("{} failed ({}): {last}", argv[0], out.status);
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[async_trait::async_trait]
impl Driver for ExecDriver {
    fn kind(&self) -> DriverKind {
        DriverKind::Exec
    }

    fn caps(&self) -> super::Caps {
        super::Caps {
            remote: true,
            egress: super::EgressReach::Loopback,
            downloads: true,
            devtools_open_locally: false,
        }
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %spec.id))]
    async fn start(&self, spec: SandboxSpec) -> anyhow::Result<Sandbox> {
        tokio::fs::create_dir_all(&spec.runtime_dir)
            .await
            .with_context(|| format!("cannot create {}", spec.runtime_dir.display()))?;
        super::create_shared_dirs(&spec.runtime_dir).await?;
        let proxy = spec.proxy.to_string();
        let stdout = self
            .run(
                &self.create,
                &spec.id,
                &proxy,
                &spec.runtime_dir,
                None,
                spec.limits.as_ref().map(|l| l.limits()).as_ref(),
            )
            .await;
        let sandbox = Sandbox {
            id: spec.id.clone(),
            driver: DriverKind::Exec,
            cdp_url: String::new(),
            pid: None,
            marker: spec.id.clone(),
            runtime_dir: spec.runtime_dir.clone(),
            limits: spec.limits.clone(),
        };
        let endpoint = stdout.and_then(|s| {
            let last = s
                .lines()
                .map(str::trim)
                .rfind(|l| !l.is_empty())
                .unwrap_or_default()
                .to_owned();
            if last.starts_with("ws://") || last.starts_with("http://") {
                Ok(last)
            } else {
                bail!(
                    "{} printed no CDP endpoint (ws://… or http://host:port)",
                    self.create[0]
                )
            }
        });
        let endpoint = match endpoint {
            Ok(url) if url.starts_with("http://") => websocket_of(&url).await,
            other => other,
        };
        match endpoint {
            Ok(cdp_url) => Ok(Sandbox { cdp_url, ..sandbox }),
            Err(e) => {
                let _ = self.stop(&sandbox).await;
                Err(e)
            }
        }
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %sandbox.id))]
    async fn stop(&self, sandbox: &Sandbox) -> anyhow::Result<()> {
        let res = self
            .run(
                &self.destroy,
                &sandbox.id,
                "",
                &sandbox.runtime_dir,
                Some(&sandbox.cdp_url),
                None,
            )
            .await
            .map(|_| ());
        let _ = tokio::fs::remove_dir_all(&sandbox.runtime_dir).await;
        res
    }
}

/// The browser's WebSocket URL behind an `http://host:port` endpoint,
/// with that host and port (what the browser names for itself may be its
/// own loopback inside a container): every CDP connection of Cordon's,
/// the raw ones included, needs the WebSocket URL.
async fn websocket_of(endpoint: &str) -> anyhow::Result<String> {
    let url =
        url::Url::parse(endpoint).with_context(|| format!("bad CDP endpoint {endpoint:?}"))?;
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        bail!("the CDP endpoint {endpoint:?} names no host and port");
    };
    let addr = url
        .socket_addrs(|| None)
        .ok()
        .and_then(|a| a.into_iter().next())
        .with_context(|| format!("cannot resolve the CDP endpoint {endpoint:?}"))?;
    let path = tokio::time::timeout(Duration::from_secs(5), super::devtools::browser_path(addr))
        .await
        .map_err(|_| {
            anyhow::anyhow!("the browser at {endpoint} did not answer /json/version within 5 s")
        })?
        .with_context(|| format!("cannot ask the browser at {endpoint} for its WebSocket URL"))?;
    Ok(format!("ws://{host}:{port}{path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_commands_are_required() {
        assert!(ExecDriver::new("", "/bin/true").is_err());
        assert!(ExecDriver::new("/bin/true", "  ").is_err());
        assert!(ExecDriver::new("/bin/echo ws://x", "/bin/true").is_ok());
    }

    fn spec(dir: &std::path::Path) -> SandboxSpec {
        SandboxSpec {
            egress: None,
            id: "b_test".into(),
            proxy: "127.0.0.1:1".parse().unwrap(),
            runtime_dir: dir.join("b_test"),
            window: (800, 600),
            limits: None,
        }
    }

    #[tokio::test]
    async fn the_last_line_of_create_is_the_endpoint() {
        let dir = tempfile::tempdir().unwrap();
        let d =
            ExecDriver::new("/bin/echo ws://127.0.0.1:9/devtools/browser/x", "/bin/true").unwrap();
        let sb = d.start(spec(dir.path())).await.unwrap();
        assert_eq!(sb.cdp_url, "ws://127.0.0.1:9/devtools/browser/x");
        d.stop(&sb).await.unwrap();
        assert!(!dir.path().join("b_test").exists());
    }

    /// An engine that prints `http://host:port` (a container whose
    /// browser names its own loopback port) gets the WebSocket URL at that
    /// host and port: raw CDP connections (the CDP endpoint, the gate's
    /// frames, downloads over CDP) need it. One that never answers is an
    /// error, and the sandbox is stopped.
    #[tokio::test]
    async fn an_http_endpoint_is_resolved_to_its_websocket_url() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let body =
                r#"{"webSocketDebuggerUrl":"ws://127.0.0.1:9229/devtools/browser/in-the-box"}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(answer.as_bytes()).await.unwrap();
        });
        let dir = tempfile::tempdir().unwrap();
        let d =
            ExecDriver::new(&format!("/bin/echo http://127.0.0.1:{port}"), "/bin/true").unwrap();
        let sb = d.start(spec(dir.path())).await.unwrap();
        assert_eq!(
            sb.cdp_url,
            format!("ws://127.0.0.1:{port}/devtools/browser/in-the-box")
        );
        d.stop(&sb).await.unwrap();

        // Nothing listens there any more.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let d =
            ExecDriver::new(&format!("/bin/echo http://127.0.0.1:{port}"), "/bin/true").unwrap();
        let err = d.start(spec(dir.path())).await.unwrap_err();
        assert!(format!("{err:#}").contains("WebSocket URL"), "{err:#}");
        assert!(!dir.path().join("b_test").exists());
    }

    #[tokio::test]
    async fn a_failing_or_silent_create_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let d = ExecDriver::new("/bin/false", "/bin/true").unwrap();
        assert!(
            d.start(spec(dir.path()))
                .await
                .unwrap_err()
                .to_string()
                .contains("failed")
        );
        let d = ExecDriver::new("/bin/echo nothing-useful", "/bin/true").unwrap();
        assert!(
            d.start(spec(dir.path()))
                .await
                .unwrap_err()
                .to_string()
                .contains("no CDP endpoint")
        );
    }
}
