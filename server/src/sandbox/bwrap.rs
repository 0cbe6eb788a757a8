//! The `bwrap` driver: each Chromium runs inside bubblewrap with its own
//! pid, ipc, uts, net, mount, user and cgroup namespaces, no capabilities,
//! and nothing of the host writable but one socket directory.
//!
//! Inside the sandbox:
//!
//! - `/usr`, `/etc` read-only; `/lib`, `/lib64`, `/bin`, `/sbin` as on the
//!   host (the merged-/usr symlinks, or read-only binds);
//! - fresh `/proc` (of its own pid namespace) and a minimal `/dev`;
//! - `/tmp`, `/home`, `/run` empty tmpfs; `HOME=/home/sandbox`, the profile
//!   in `/tmp/profile`, so it never touches a disk and vanishes with the
//!   sandbox;
//! - the `cordon` binary read-only at `/run/cordon-bin/cordon` (the relay);
//! - **the one writable host path**: the sandbox's own `runtime_dir/sock`,
//!   bound at `/run/cordon`. It holds the two sockets the sandbox talks
//!   through (`egress.sock`, made by the host; `cdp.sock`, made by the relay)
//!   and nothing else. The sandbox could create or remove files there, but
//!   the directory belongs to this sandbox alone, is created empty at start
//!   and removed at stop.
//! - a network namespace with only its own loopback: no route anywhere.
//!
//! Plumbing (see [`super::relay`]):
//!
//! ```text
//! Chromium ─► 127.0.0.1:3128 (relay) ─► /run/cordon/egress.sock ═ runtime_dir/sock/egress.sock ─► (driver) ─► egress guard
//! chromiumoxide ─► host 127.0.0.1:<port> (driver) ─► runtime_dir/sock/cdp.sock ═ /run/cordon/cdp.sock ─► (relay) ─► 127.0.0.1:9222 (Chromium)
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::task::JoinHandle;

use super::relay::{Clients, tcp_to_unix, unix_to_tcp};
use super::{Driver, DriverKind, Sandbox, SandboxSpec, chromium, kill_group};

/// The in-sandbox port Chromium's `--proxy-server` points at.
pub const PROXY_PORT: u16 = 3128;
/// Chromium's DevTools port inside the sandbox (its own loopback: no clash).
pub const DEVTOOLS_PORT: u16 = 9222;
/// Where the socket directory appears inside.
pub const INSIDE_SOCK_DIR: &str = "/run/cordon";
/// Where the `cordon` binary appears inside.
pub const INSIDE_RELAY: &str = "/run/cordon-bin/cordon";
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

/// What the sandbox is built from.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    /// Host directory bound writable at `/run/cordon`: the only host path
    /// the sandbox can write to.
    pub sock_dir: &'a Path,
    /// The `cordon` binary, bound read-only at [`INSIDE_RELAY`].
    pub relay_bin: &'a Path,
    /// The Chromium binary; its directory is bound read-only when it is
    /// outside `/usr`.
    pub chromium: &'a Path,
    /// Forbid creating user namespaces inside (when Chromium's own sandbox,
    /// which needs them, is off).
    pub disable_userns: bool,
}

/// The whole `bwrap` argument list that runs `command` in a sandbox laid
/// out by `layout` (the driver passes the relay and Chromium as `command`).
pub fn bwrap_args(layout: &Layout<'_>, command: &[OsString]) -> Vec<OsString> {
    fn add(a: &mut Vec<OsString>, items: &[&str]) {
        a.extend(items.iter().map(OsString::from));
    }
    fn bind(a: &mut Vec<OsString>, flag: &str, from: &Path, to: &Path) {
        a.extend([flag.into(), from.into(), to.into()]);
    }
    let mut a: Vec<OsString> = Vec::new();
    // Every namespace; the user namespace always (not just "try"), so the
    // layout below is the same everywhere or the probe fails.
    add(&mut a, &["--unshare-all", "--unshare-user"]);
    if layout.disable_userns {
        add(&mut a, &["--disable-userns"]);
    }
    // Run as root, bwrap keeps every capability in the sandbox's user
    // namespace unless told otherwise, and with CAP_SYS_ADMIN there a
    // process could remount the read-only binds writable.
    add(
        &mut a,
        &["--cap-drop", "ALL", "--die-with-parent", "--new-session"],
    );
    add(
        &mut a,
        &["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"],
    );
    for (name, entry) in root_entries() {
        match entry {
            RootEntry::Symlink(target) => bind(&mut a, "--symlink", &target, Path::new(name)),
            RootEntry::Dir => bind(&mut a, "--ro-bind", Path::new(name), Path::new(name)),
        }
    }
    add(&mut a, &["--proc", "/proc", "--dev", "/dev"]);
    add(
        &mut a,
        &["--tmpfs", "/tmp", "--tmpfs", "/home", "--tmpfs", "/run"],
    );
    add(&mut a, &["--dir", INSIDE_HOME, "--chdir", INSIDE_HOME]);
    if let Some(dir) = layout.chromium.parent()
        && !dir.starts_with("/usr")
    {
        bind(&mut a, "--ro-bind", dir, dir);
    }
    bind(
        &mut a,
        "--ro-bind",
        layout.relay_bin,
        Path::new(INSIDE_RELAY),
    );
    // The one writable host path (see the module comment).
    bind(
        &mut a,
        "--bind",
        layout.sock_dir,
        Path::new(INSIDE_SOCK_DIR),
    );
    add(&mut a, &["--clearenv"]);
    for (k, v) in [
        ("HOME", INSIDE_HOME),
        ("PATH", "/usr/bin:/bin"),
        ("TMPDIR", "/tmp"),
        ("LANG", "C.UTF-8"),
    ] {
        add(&mut a, &["--setenv", k, v]);
    }
    add(&mut a, &["--"]);
    a.extend(command.iter().cloned());
    a
}

enum RootEntry {
    Symlink(PathBuf),
    Dir,
}

/// `/lib`, `/lib64`, `/bin`, `/sbin` as this host has them: the symlinks of
/// a merged /usr (`/lib -> usr/lib`), or read-only binds of real directories.
fn root_entries() -> Vec<(&'static str, RootEntry)> {
    let mut out = Vec::new();
    for name in ["/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"] {
        match std::fs::symlink_metadata(name) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(name) {
                    out.push((name, RootEntry::Symlink(target)));
                }
            }
            Ok(m) if m.is_dir() => out.push((name, RootEntry::Dir)),
            _ => {}
        }
    }
    out
}

/// What runs inside: the relay, which starts Chromium as its child.
pub fn sandbox_command(chromium: &Path, window: (u32, u32), no_sandbox: bool) -> Vec<OsString> {
    let proxy = SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT));
    let devtools = SocketAddr::from((Ipv4Addr::LOCALHOST, DEVTOOLS_PORT));
    let mut cmd: Vec<OsString> = vec![
        INSIDE_RELAY.into(),
        "relay".into(),
        "--proxy-listen".into(),
        proxy.to_string().into(),
        "--egress-socket".into(),
        format!("{INSIDE_SOCK_DIR}/egress.sock").into(),
        "--cdp-socket".into(),
        format!("{INSIDE_SOCK_DIR}/cdp.sock").into(),
        "--cdp-target".into(),
        devtools.to_string().into(),
        "--".into(),
        chromium.into(),
    ];
    // The same flags as the process driver, with a fixed DevTools port.
    // `--no-sandbox` (added when Cordon runs as root, where Chromium's own
    // sandbox refuses to start) is acceptable here: bwrap is the sandbox,
    // with no capabilities, no writable host path but the socket directory,
    // no network but its loopback, and no user namespaces to escalate in.
    cmd.extend(
        chromium::args(Path::new(INSIDE_PROFILE), proxy, window, no_sandbox)
            .into_iter()
            .map(|arg| {
                if arg.starts_with("--remote-debugging-port=") {
                    format!("--remote-debugging-port={DEVTOOLS_PORT}")
                } else {
                    arg
                }
                .into()
            }),
    );
    cmd
}

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
    relay_bin: PathBuf,
    running: Mutex<HashMap<String, Running>>,
}

impl BwrapDriver {
    /// A driver running the Chromium at `chromium`. Fails if `bwrap` or the
    /// `cordon` binary (for the relay) cannot be found; see also [`Self::probe`].
    pub fn new(chromium: PathBuf) -> anyhow::Result<Self> {
        Ok(Self {
            chromium,
            bwrap: find_bwrap()?,
            relay_bin: relay_binary()?,
            running: Mutex::default(),
        })
    }

    /// Whether sandboxes can run here: `bwrap` exists, can create every
    /// namespace with this driver's layout (it runs `/bin/true` in one,
    /// ~20 ms; blocking, meant for startup), Chromium is runnable, and the
    /// `cordon` binary for the relay is found.
    pub fn probe(chromium: &Path) -> anyhow::Result<()> {
        let bwrap = find_bwrap()?;
        if !super::chromium_runnable(chromium) {
            bail!("{} is not an executable file", chromium.display());
        }
        let relay_bin = relay_binary()?;
        let dir = std::env::temp_dir().join(format!(
            "cordon-bwrap-probe-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let result = Self::probe_in(&bwrap, &dir, &relay_bin, chromium);
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    fn probe_in(bwrap: &Path, dir: &Path, relay_bin: &Path, chromium: &Path) -> anyhow::Result<()> {
        let layout = Layout {
            sock_dir: dir,
            relay_bin,
            chromium,
            // As the driver will run it.
            disable_userns: nix::unistd::geteuid().is_root(),
        };
        let mut child = Command::new(bwrap)
            .args(bwrap_args(&layout, &["/bin/true".into()]))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
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
            bail!(
                "bwrap cannot create the sandbox's namespaces here ({status}): {}",
                err.trim()
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

    #[tracing::instrument(skip_all, err, fields(sandbox.id = %spec.id))]
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
        };
        match self.start_inner(&spec, &sock_dir, sandbox.clone()).await {
            Ok(sandbox) => Ok(sandbox),
            Err((e, sandbox)) => {
                let _ = self.stop(&sandbox).await;
                Err(e)
            }
        }
    }

    #[tracing::instrument(skip_all, err, fields(sandbox.id = %sandbox.id))]
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
        // Host side of CDP: a loopback port → the sandbox's cdp.sock.
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
            sock_dir.join("cdp.sock"),
            Clients::ThisProcess,
        )));

        let no_sandbox = nix::unistd::geteuid().is_root();
        let layout = Layout {
            sock_dir,
            relay_bin: &self.relay_bin,
            chromium: &self.chromium,
            disable_userns: no_sandbox,
        };
        let args = bwrap_args(
            &layout,
            &sandbox_command(&self.chromium, spec.window, no_sandbox),
        );
        let mut cmd = Command::new(&self.bwrap);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
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

/// `GET /json/version` on `127.0.0.1:port`; the path of the browser's
/// WebSocket URL.
async fn browser_path(port: u16) -> anyhow::Result<String> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
    s.write_all(b"GET /json/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await?;
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 64 * 1024 {
            bail!("DevTools answer too long");
        }
        if let Some(path) = parse_version_answer(&buf) {
            return Ok(path);
        }
    }
    parse_version_answer(&buf).context("no browser WebSocket URL in DevTools' answer")
}

/// The `/devtools/browser/<id>` path from a complete `/json/version` HTTP
/// answer, if `raw` holds one.
fn parse_version_answer(raw: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(raw).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let ws = v["webSocketDebuggerUrl"].as_str()?;
    let at = ws.find("/devtools/browser/")?;
    Some(ws[at..].to_owned())
}

/// Keeps the last [`STDERR_TAIL`] bytes of `pipe` in `tail`, on a thread
/// that ends when every writer (bwrap and all inside) has exited.
fn keep_tail(mut pipe: std::process::ChildStderr, tail: Arc<Mutex<Vec<u8>>>) {
    let _ = std::thread::Builder::new()
        .name("cordon-bwrap-stderr".into())
        .spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().expect("stderr lock");
                t.extend_from_slice(&chunk[..n]);
                if t.len() > STDERR_TAIL {
                    let cut = t.len() - STDERR_TAIL;
                    t.drain(..cut);
                }
            }
        });
}

/// The first child of `pid` (bwrap's child is the sandbox's pid 1).
fn first_child(pid: i32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The start time (clock ticks after boot) of `pid`, unless it is gone or
/// a zombie.
fn running_since(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    // After the command: state, ppid, … starttime is the 20th.
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

type SpawnJob = (
    Command,
    tokio::sync::oneshot::Sender<std::io::Result<Child>>,
);

/// Spawns `cmd` from one thread that lives as long as the process.
/// `--die-with-parent` is `PR_SET_PDEATHSIG`, which fires when the *thread*
/// that forked bwrap ends, not the process: spawned from a runtime thread
/// (which may come and go), a healthy sandbox could be killed at random.
async fn spawn_on_keeper(cmd: Command) -> std::io::Result<Child> {
    static KEEPER: OnceLock<std::sync::mpsc::Sender<SpawnJob>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("cordon-sandbox-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("cannot start the sandbox spawner thread");
        tx
    });
    let (tx, rx) = tokio::sync::oneshot::channel();
    keeper
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("the sandbox spawner thread is gone"))?;
    rx.await
        .map_err(|_| std::io::Error::other("the sandbox spawner thread is gone"))?
}

/// Finds `bwrap` on `PATH`.
fn find_bwrap() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| super::chromium_runnable(p))
        .context("bwrap (bubblewrap) is not installed (apt-get install bubblewrap)")
}

/// The `cordon` binary, which runs the relay inside. Normally the running
/// executable; when that is a test harness in cargo's `target/<profile>/deps`,
/// the `cordon` binary cargo built next to it.
fn relay_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running executable")?;
    if exe.file_name().is_some_and(|n| n == "cordon") {
        return Ok(exe);
    }
    if let Some(dir) = exe.parent()
        && dir.file_name().is_some_and(|n| n == "deps")
        && let Some(bin) = dir.parent().map(|p| p.join("cordon"))
        && super::chromium_runnable(&bin)
    {
        return Ok(bin);
    }
    bail!(
        "the bwrap driver runs its relay from the `cordon` binary, but this process is {}",
        exe.display()
    )
}

/// Collects the exit status of a child we no longer hold.
fn reap(pid: i32) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let _ = waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[OsString]) -> Vec<String> {
        a.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    fn layout_args(chromium: &str, disable_userns: bool) -> Vec<String> {
        let layout = Layout {
            sock_dir: Path::new("/data/run/b_x/sock"),
            relay_bin: Path::new("/opt/cordon/bin/cordon"),
            chromium: Path::new(chromium),
            disable_userns,
        };
        strings(&bwrap_args(
            &layout,
            &["/bin/sh".into(), "-c".into(), "true".into()],
        ))
    }

    /// The index of `seq` as consecutive items of `a`.
    fn find(a: &[String], seq: &[&str]) -> Option<usize> {
        a.windows(seq.len())
            .position(|w| w.iter().zip(seq).all(|(x, y)| x == y))
    }

    #[test]
    fn every_namespace_no_capabilities_and_death_with_the_parent() {
        let a = layout_args("/usr/lib/chromium/chromium", true);
        for flag in [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ] {
            assert!(a.contains(&flag.to_owned()), "{flag} missing: {a:?}");
        }
        assert!(find(&a, &["--cap-drop", "ALL"]).is_some());
        let b = layout_args("/usr/lib/chromium/chromium", false);
        assert!(!b.contains(&"--disable-userns".to_owned()));
    }

    #[test]
    fn only_the_socket_directory_is_bound_writable() {
        let a = layout_args("/usr/lib/chromium/chromium", true);
        let rw: Vec<usize> = a
            .iter()
            .enumerate()
            .filter(|(_, s)| *s == "--bind" || *s == "--bind-try" || *s == "--dev-bind")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(rw.len(), 1, "{a:?}");
        assert_eq!(
            a[rw[0] + 1..rw[0] + 3],
            ["/data/run/b_x/sock", "/run/cordon"]
        );
        // It comes after the /run tmpfs it lives in, as does the relay.
        let run = find(&a, &["--tmpfs", "/run"]).unwrap();
        assert!(rw[0] > run);
        let relay = find(&a, &["--ro-bind", "/opt/cordon/bin/cordon", INSIDE_RELAY]).unwrap();
        assert!(relay > run);
        for ro in [["--ro-bind", "/usr", "/usr"], ["--ro-bind", "/etc", "/etc"]] {
            assert!(find(&a, &ro).is_some(), "{ro:?}");
        }
        for fs in [
            ["--proc", "/proc"],
            ["--dev", "/dev"],
            ["--tmpfs", "/tmp"],
            ["--tmpfs", "/home"],
        ] {
            assert!(find(&a, &fs).is_some(), "{fs:?}");
        }
        // Chromium under /usr needs no bind of its own; elsewhere, read-only.
        assert!(!a.iter().any(|s| s.contains("chromium")));
        let c = layout_args("/opt/chromium/chrome", true);
        assert!(find(&c, &["--ro-bind", "/opt/chromium", "/opt/chromium"]).is_some());
    }

    #[test]
    fn the_environment_is_cleared_and_the_command_comes_last() {
        let a = layout_args("/usr/lib/chromium/chromium", true);
        let clear = a.iter().position(|s| s == "--clearenv").unwrap();
        let home = find(&a, &["--setenv", "HOME", INSIDE_HOME]).unwrap();
        assert!(home > clear);
        let setenvs: Vec<&String> = a
            .iter()
            .enumerate()
            .filter(|(i, s)| *s == "--setenv" && *i > clear)
            .map(|(i, _)| &a[i + 1])
            .collect();
        assert_eq!(setenvs, ["HOME", "PATH", "TMPDIR", "LANG"]);
        assert_eq!(a[a.len() - 4..], ["--", "/bin/sh", "-c", "true"]);
    }

    #[test]
    fn root_links_mirror_this_host() {
        let a = layout_args("/usr/lib/chromium/chromium", true);
        // On this (merged-/usr) host: the symlinks STACK.md lists.
        if std::fs::read_link("/lib").is_ok() {
            assert!(
                find(&a, &["--symlink", "usr/lib", "/lib"]).is_some(),
                "{a:?}"
            );
            assert!(
                find(&a, &["--symlink", "usr/bin", "/bin"]).is_some(),
                "{a:?}"
            );
        }
    }

    #[test]
    fn chromium_runs_under_the_relay_with_the_in_sandbox_proxy_and_a_fixed_port() {
        let cmd = strings(&sandbox_command(
            Path::new("/usr/lib/chromium/chromium"),
            (1280, 720),
            true,
        ));
        assert_eq!(cmd[..2], [INSIDE_RELAY, "relay"]);
        let dashdash = cmd.iter().position(|s| s == "--").unwrap();
        assert_eq!(cmd[dashdash + 1], "/usr/lib/chromium/chromium");
        let relay = &cmd[..dashdash];
        assert!(find(relay, &["--proxy-listen", "127.0.0.1:3128"]).is_some());
        assert!(find(relay, &["--egress-socket", "/run/cordon/egress.sock"]).is_some());
        assert!(find(relay, &["--cdp-socket", "/run/cordon/cdp.sock"]).is_some());
        assert!(find(relay, &["--cdp-target", "127.0.0.1:9222"]).is_some());
        let browser = &cmd[dashdash + 1..];
        assert!(browser.contains(&"--proxy-server=http://127.0.0.1:3128".to_owned()));
        assert!(browser.contains(&"--proxy-bypass-list=<-loopback>".to_owned()));
        assert!(browser.contains(&"--remote-debugging-port=9222".to_owned()));
        assert!(!browser.contains(&"--remote-debugging-port=0".to_owned()));
        assert!(browser.contains(&"--user-data-dir=/tmp/profile".to_owned()));
        assert!(browser.contains(&"--no-sandbox".to_owned()));
        // The relay's own arguments parse.
        let parsed = <crate::cli::Cli as clap::Parser>::try_parse_from(&cmd);
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn the_browser_path_is_read_from_a_version_answer() {
        let body = r#"{"Browser":"Chrome/156","webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/browser/abc-123"}"#;
        let raw = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(
            parse_version_answer(raw.as_bytes()).as_deref(),
            Some("/devtools/browser/abc-123")
        );
        // Incomplete or refused answers are not (yet) an answer.
        assert!(parse_version_answer(&raw.as_bytes()[..raw.len() - 3]).is_none());
        assert!(parse_version_answer(b"HTTP/1.1 500 Oops\r\n\r\n{}").is_none());
    }

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
