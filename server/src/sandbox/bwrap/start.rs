//! Starting one sandbox: the egress and CDP forwarders on the host, bwrap
//! spawned with the layout of `args.rs`, and the wait until Chromium's
//! DevTools answer through the whole CDP path.

use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::net::{TcpListener, UnixListener};

use super::host::{first_child, keep_tail, running_since, spawn_on_keeper};
use super::{
    AbortOnDrop, BwrapDriver, Layout, Running, START_TIMEOUT, bwrap_args, sandbox_command,
};
use crate::sandbox::devtools::browser_path;
use crate::sandbox::relay::{serve_handed, tcp_to_handed};
use crate::sandbox::{Sandbox, SandboxSpec};

impl BwrapDriver {
    /// Starts the forwarders and bwrap and waits for CDP. On error, returns
    /// the sandbox as far as it got, for `stop`.
    pub(super) async fn start_inner(
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
        // The relay hands over each of Chromium's proxy connections.
        tasks.0.push(match spec.egress.clone() {
            // The guard serves Chromium's own socket: no hop, no port to
            // share.
            Some(port) => tokio::spawn(serve_handed(egress, move |tcp| {
                port.serve(tcp);
                std::future::ready(())
            })),
            None => {
                let proxy = spec.proxy;
                tokio::spawn(serve_handed(egress, move |mut tcp| async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(proxy).await {
                        let _ = out.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut tcp, &mut out).await;
                    }
                }))
            }
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
        // Host side of CDP: a loopback port, each connection joined to the
        // DevTools socket the relay hands over cdp.sock.
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
        tasks.0.push(tokio::spawn(tcp_to_handed(cdp, cdp_path)));

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
            if let Ok(Ok(path)) = tokio::time::timeout(
                Duration::from_secs(2),
                browser_path((std::net::Ipv4Addr::LOCALHOST, port).into()),
            )
            .await
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
