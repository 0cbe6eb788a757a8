//! The `bwrap` driver end to end: sessions whose Chromium runs inside
//! bubblewrap, reached only through the relay's unix sockets.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use cordon::egress::Decision;
use cordon::sandbox::bwrap::{Layout, bwrap_args};
use cordon::sandbox::{DriverKind, Sandbox};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{Backend, CHROMIUM, PATIENCE, TestApp, session_app, wait_until};
use crate::site::{self, Canary};

const BWRAP: &[(&str, &str)] = &[("CORDON_SANDBOX_DRIVER", "bwrap")];

/// A process as seen in /proc: pid, start time (so a recycled pid is not
/// mistaken for it) and command line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Proc {
    pid: i32,
    start: u64,
    cmdline: String,
}

/// (ppid, start time) of `pid`.
fn stat(pid: i32) -> Option<(i32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state(0) ppid(1) … starttime(19).
    if fields.first() == Some(&"Z") {
        return None;
    }
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

fn all_procs() -> Vec<(Proc, i32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Some((ppid, start)) = stat(pid) else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        out.push((
            Proc {
                pid,
                start,
                cmdline,
            },
            ppid,
        ));
    }
    out
}

/// `pid` and everything below it.
fn tree(pid: i32) -> Vec<Proc> {
    let procs = all_procs();
    let mut found: Vec<Proc> = procs
        .iter()
        .filter(|(p, _)| p.pid == pid)
        .map(|(p, _)| p.clone())
        .collect();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (p, ppid) in &procs {
            if *ppid == parent {
                found.push(p.clone());
                frontier.push(p.pid);
            }
        }
    }
    found
}

/// Whether `p` is still there, running or as a zombie nobody collected.
fn still_there(p: &Proc) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", p.pid)).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(19)?.parse::<u64>().ok())
            == Some(p.start)
    })
}

fn with_marker(marker: &str) -> Vec<Proc> {
    all_procs()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.cmdline.contains(marker) && p.pid != std::process::id() as i32)
        .collect()
}

async fn sandbox_of(app: &TestApp, sid: &str) -> Sandbox {
    let live = app
        .state
        .sessions
        .get(&"acme".parse().unwrap(), &sid.parse().unwrap())
        .await
        .unwrap();
    live.sandbox.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bwrap_session_browses_through_the_guard_and_leaves_nothing_behind() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), BWRAP).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let sandbox = sandbox_of(&app, &sid).await;
    assert_eq!(sandbox.driver, DriverKind::Bwrap);
    assert!(
        sandbox.cdp_url.starts_with("ws://127.0.0.1:"),
        "{}",
        sandbox.cdp_url
    );
    let pid = sandbox.pid.unwrap();

    // bwrap → pid 1 → relay → Chromium (and its helpers), Chromium in a
    // network namespace of its own.
    let procs = tree(pid);
    let chromium = procs
        .iter()
        .find(|p| p.cmdline.starts_with(CHROMIUM))
        .unwrap_or_else(|| panic!("no chromium under bwrap: {procs:#?}"));
    assert!(
        procs.iter().any(|p| p.cmdline.contains("cordon relay")),
        "{procs:#?}"
    );
    let netns = |pid: i32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_ne!(netns(chromium.pid), netns(std::process::id() as i32));

    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    assert_eq!(
        (nav["status"].clone(), nav["title"].clone()),
        (json!(200), json!("Login"))
    );
    // Chromium starts one zygote, and the page's renderer comes from it:
    // no second zygote for unsandboxed children (`--no-unsandboxed-zygote`,
    // ~15 MiB a session: BENCHMARKS.md 2026-11-27 20:45). A Chromium that
    // stopped honouring the switch would fail here, not only in a bench.
    let running = tree(pid);
    let parents: std::collections::HashMap<i32, i32> = all_procs()
        .into_iter()
        .map(|(p, ppid)| (p.pid, ppid))
        .collect();
    let kind = |p: &Proc, t: &str| p.cmdline.contains(&format!("--type={t}"));
    let zygotes: Vec<&Proc> = running
        .iter()
        .filter(|p| kind(p, "zygote") && parents.get(&p.pid) == Some(&chromium.pid))
        .collect();
    assert_eq!(zygotes.len(), 1, "one zygote below Chromium: {running:#?}");
    assert!(
        tree(zygotes[0].pid).iter().any(|p| kind(p, "renderer")),
        "no renderer below the zygote: {running:#?}"
    );
    let (status, shot) = agent.tool(&sid, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{shot}");
    assert_eq!(
        (shot["width"].as_u64(), shot["height"].as_u64()),
        (Some(1280), Some(720))
    );
    let (status, closed) = agent.close(&sid).await;
    assert_eq!(
        (status, closed["state"].as_str()),
        (StatusCode::OK, Some("closed"))
    );

    // Nothing of the sandbox is left, not even a zombie, and its runtime
    // dir is gone.
    let left: Vec<&Proc> = procs
        .iter()
        .chain(&running)
        .filter(|p| still_there(p))
        .collect();
    assert!(left.is_empty(), "still running after close: {left:#?}");
    assert_eq!(with_marker(&sandbox.marker), vec![]);
    assert!(!sandbox.runtime_dir.exists());

    // The guard saw (and allowed) the site's request.
    wait_until("an allowed request in the egress log", PATIENCE, || async {
        let log = app
            .state
            .store
            .egress_for_sandbox(&sandbox.id.parse().unwrap(), 10_000)
            .await
            .unwrap();
        if log
            .iter()
            .any(|e| e.entry.port == site.addr.port() && e.entry.decision == Decision::Allowed)
        {
            Ok(())
        } else {
            Err(format!("{log:?}"))
        }
    })
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bwrap_sessions_never_share_cookies_or_local_storage() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_SANDBOX_DRIVER", "bwrap"),
            ("CORDON_POOL_SIZE", "1"),
        ],
    )
    .await;
    let agent = app.agent("acme").await;
    let mut pids = HashSet::new();
    for round in 0..3 {
        let sid = agent.open(json!({ "record": "off" })).await;
        pids.insert(sandbox_of(&app, &sid).await.pid);
        let (_, nav) = agent
            .tool(&sid, "navigate", json!({ "url": site.url("/show-state") }))
            .await;
        assert_eq!(nav["title"], "State", "{nav}");
        let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
        let html = dom["html"].as_str().unwrap();
        assert!(
            html.contains("cookie=[] ls=[]"),
            "round {round}: state leaked into a new session: {html}"
        );
        agent
            .tool(&sid, "navigate", json!({ "url": site.url("/set-state") }))
            .await;
        agent
            .tool(&sid, "navigate", json!({ "url": site.url("/show-state") }))
            .await;
        let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
        assert!(
            dom["html"]
                .as_str()
                .unwrap()
                .contains("cookie=[sid=session-canary-cookie] ls=[persisted-value]"),
            "{dom}"
        );
        agent.close(&sid).await;
    }
    assert_eq!(pids.len(), 3, "every session had its own sandbox");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bwrap_browser_never_reaches_the_canary() {
    let site = site::start().await;
    let canary = Canary::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), BWRAP).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    for url in [
        format!("http://127.0.0.1:{}/", canary.addr.port()),
        format!("http://localhost:{}/", canary.addr.port()),
        site.url(&format!(
            "/redirect?to=http://127.0.0.1:{}/",
            canary.addr.port()
        )),
    ] {
        let (status, res) = agent.tool(&sid, "navigate", json!({ "url": url })).await;
        assert!(
            canary.refused(status, &res, "loopback"),
            "{url}: {status} {res}"
        );
    }
    let sandbox = sandbox_of(&app, &sid).await;
    let log = app
        .state
        .store
        .egress_for_sandbox(&sandbox.id.parse().unwrap(), 10_000)
        .await
        .unwrap();
    let denied = log
        .iter()
        .filter(|e| e.entry.port == canary.addr.port() && e.entry.decision == Decision::Denied)
        .count();
    assert!(denied >= 3, "every attempt is logged as denied: {log:?}");
    agent.close(&sid).await;
    assert_eq!(canary.hits(), 0, "the canary was reached");
    app.stop().await;
}

/// Runs `script` with bash inside the driver's sandbox layout; what it
/// prints (to stderr: bwrap's stdout carries the relay binary, as the
/// driver starts it).
fn run_in_sandbox(sock_dir: &Path, script: &str) -> String {
    use std::os::unix::process::CommandExt;
    // The upload and download directories beside the socket directory, as
    // a sandbox's runtime directory has them.
    let parent = sock_dir.parent().unwrap();
    let (uploads_dir, downloads_dir) = (parent.join("uploads"), parent.join("downloads"));
    std::fs::create_dir_all(&uploads_dir).unwrap();
    std::fs::create_dir_all(&downloads_dir).unwrap();
    let layout = Layout {
        sock_dir,
        uploads_dir: &uploads_dir,
        downloads_dir: &downloads_dir,
        chromium: Path::new(CHROMIUM),
        disable_userns: true,
        tmpfs_bytes: None,
    };
    let script = format!("exec 1>&2\n{script}");
    let command: Vec<OsString> = vec!["/bin/bash".into(), "-c".into(), script.into()];
    let relay = std::fs::File::open(env!("CARGO_BIN_EXE_cordon")).unwrap();
    let mut child = std::process::Command::new("bwrap")
        .args(bwrap_args(&layout, &command))
        .stdin(std::process::Stdio::null())
        .stdout(relay)
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("bwrap runs");
    let pid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            panic!("the sandboxed shell did not finish");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{}\n{printed}", out.status);
    printed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_the_host_is_writable_or_reachable_from_a_bwrap_sandbox() {
    let canary = Canary::start().await;
    let host = tempfile::tempdir().unwrap();
    let data_dir = host.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    let sock_dir = host.path().join("sock");
    std::fs::create_dir_all(&sock_dir).unwrap();
    // As the driver leaves it: the host's egress socket, listening.
    let egress = std::os::unix::net::UnixListener::bind(sock_dir.join("egress.sock")).unwrap();
    let relay_size = std::fs::metadata(env!("CARGO_BIN_EXE_cordon"))
        .unwrap()
        .len();
    let name = format!("cordon-bwrap-escape-{:08x}", rand::random::<u32>());
    let targets = [
        Path::new("/usr"),
        Path::new("/etc"),
        Path::new("/home"),
        data_dir.as_path(),
    ];
    let mut script = String::new();
    for t in &targets {
        let f = t.join(&name);
        script.push_str(&format!(
            "if (mkdir -p {t} && echo x > {f}) 2>/dev/null && [ -e {f} ]; then echo \"wrote-inside {t}\"; else echo \"denied {t}\"; fi\n",
            t = t.display(),
            f = f.display()
        ));
    }
    let port = canary.addr.port();
    script.push_str(&format!(
        "if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo reached-canary; else echo no-route; fi\n\
         if (exec 3<>/dev/tcp/::1/{port}) 2>/dev/null; then echo reached-canary-v6; else echo no-route-v6; fi\n\
         if mount -o remount,bind,rw /usr 2>/dev/null; then echo remounted; else echo remount-denied; fi\n\
         if unshare -U true 2>/dev/null; then echo userns; else echo no-userns; fi\n\
         grep CapEff /proc/self/status\n\
         awk 'NR > 2 {{ print \"iface\", $1 }}' /proc/net/dev\n\
         if (echo x > /run/cordon/{name}) 2>/dev/null; then echo wrote-sock-dir; else echo sock-dir-read-only; fi\n\
         if ln -s /run/host.sock /run/cordon/{name}.link 2>/dev/null; then echo linked-in-sock-dir; else echo no-link-in-sock-dir; fi\n\
         if rm -f /run/cordon/egress.sock 2>/dev/null && [ ! -e /run/cordon/egress.sock ]; then echo removed-egress-sock; else echo egress-sock-kept; fi\n\
         if [ -S /run/cordon/egress.sock ]; then echo egress-sock-there; fi\n\
         echo relay-size $(stat -c %s /run/cordon-bin/cordon)\n\
         if (echo x >> /run/cordon-bin/cordon) 2>/dev/null; then echo wrote-relay; else echo relay-read-only; fi\n\
         if (echo x > /uploads/{name}) 2>/dev/null; then echo wrote-uploads; else echo uploads-read-only; fi\n\
         echo x > /downloads/{name} && echo wrote-downloads\n"
    ));
    let out = tokio::task::spawn_blocking({
        let sock_dir = sock_dir.clone();
        move || run_in_sandbox(&sock_dir, &script)
    })
    .await
    .unwrap();
    let lines: Vec<&str> = out.lines().collect();

    // /usr and /etc are read-only inside; /home and the data dir's path
    // may be created inside (on the sandbox's own tmpfs), never on the host.
    for t in [Path::new("/usr"), Path::new("/etc")] {
        assert!(
            lines.contains(&format!("denied {}", t.display()).as_str()),
            "{out}"
        );
    }
    for t in &targets {
        assert!(
            !t.join(&name).exists(),
            "{} was written on the host",
            t.display()
        );
    }
    assert!(
        lines.contains(&"no-route") && lines.contains(&"no-route-v6"),
        "{out}"
    );
    assert_eq!(canary.hits(), 0, "the canary was reached from inside");
    assert!(lines.contains(&"remount-denied"), "{out}");
    assert!(lines.contains(&"no-userns"), "{out}");
    assert!(lines.contains(&"CapEff:\t0000000000000000"), "{out}");
    let ifaces: Vec<&&str> = lines.iter().filter(|l| l.starts_with("iface ")).collect();
    assert_eq!(ifaces, [&"iface lo:"], "only loopback inside: {out}");
    // The socket directory is only read: nothing can be put in it or
    // taken out (a symlink to a host socket in place of one of the host's
    // sockets, say), and the host's socket is still there and listening.
    for line in [
        "sock-dir-read-only",
        "no-link-in-sock-dir",
        "egress-sock-kept",
        "egress-sock-there",
    ] {
        assert!(lines.contains(&line), "{line}: {out}");
    }
    assert!(!sock_dir.join(&name).exists());
    assert!(!sock_dir.join(format!("{name}.link")).exists());
    std::os::unix::net::UnixStream::connect(sock_dir.join("egress.sock")).unwrap();
    assert!(egress.accept().is_ok());
    // The relay inside is the binary bwrap got by fd, and only read.
    assert!(
        lines.contains(&format!("relay-size {relay_size}").as_str()),
        "{out}"
    );
    assert!(lines.contains(&"relay-read-only"), "{out}");
    // The documented exception: the sandbox's own download directory; its
    // upload directory is only read.
    assert!(lines.contains(&"wrote-downloads"), "{out}");
    assert!(host.path().join("downloads").join(&name).exists());
    assert!(lines.contains(&"uploads-read-only"), "{out}");
    assert!(!host.path().join("uploads").join(&name).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_reports_bwrap_when_auto_finds_it_usable() {
    let app = TestApp::spawn_with(Backend::Sqlite, &[("CORDON_SANDBOX_DRIVER", "auto")]).await;
    let body: Value = app.get("/readyz").await.json().await.unwrap();
    assert_eq!(body["checks"]["sandbox"]["driver"], "bwrap", "{body}");
    app.stop().await;
    let app = TestApp::spawn_with(Backend::Sqlite, &[("CORDON_SANDBOX_DRIVER", "process")]).await;
    let body: Value = app.get("/readyz").await.json().await.unwrap();
    assert_eq!(body["checks"]["sandbox"]["driver"], "process", "{body}");
    assert_eq!(
        body["checks"]["sandbox"]["devtools_open_to_local_processes"], true,
        "{body}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_local_process_cannot_reach_a_bwrap_sessions_devtools() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_SANDBOX_DRIVER", "bwrap")],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "off" })).await;
    let sandbox = sandbox_of(&app, &sid).await;
    let port: u16 = sandbox
        .cdp_url
        .trim_start_matches("ws://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // This process (the control plane) gets an answer on the same port.
    let mine = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("http://127.0.0.1:{port}/json/version"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(mine.contains("webSocketDebuggerUrl"), "{mine}");
    let theirs = crate::helpers::send_from_another_process(
        port,
        "GET /json/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(
        !theirs.contains("webSocketDebuggerUrl") && !theirs.contains("HTTP/1.1"),
        "another process reached DevTools: {theirs}"
    );
    // The session is unharmed.
    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/show-state") }))
        .await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    app.stop().await;
}

/// A compromised browser can connect to its sandbox's `egress.sock` itself
/// and pose as the relay. What it hands over there gets the guard's whole
/// policy (a socket it holds the other end of is served as a proxy client,
/// and refused the canary), anything else is refused, and a connection that
/// sends nothing holds up no other: the session browses on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_compromised_browser_hands_over_its_egress_socket_gets_the_guards_policy() {
    use std::os::fd::AsRawFd;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream, UnixStream};

    let site = site::start().await;
    let canary = Canary::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), BWRAP).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "off" })).await;
    let sandbox = sandbox_of(&app, &sid).await;
    let egress = sandbox.runtime_dir.join("sock").join("egress.sock");

    // Silent connections, held open.
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(UnixStream::connect(&egress).await.unwrap());
    }
    // Bytes and no descriptor; a file; a unix socket.
    let mut junk = UnixStream::connect(&egress).await.unwrap();
    junk.write_all(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let file = std::fs::File::open("/etc/hostname").unwrap();
    let (u1, _u2) = std::os::unix::net::UnixStream::pair().unwrap();
    for fd in [file.as_raw_fd(), u1.as_raw_fd()] {
        let conn = UnixStream::connect(&egress).await.unwrap();
        nix::sys::socket::sendmsg::<()>(
            conn.as_raw_fd(),
            &[std::io::IoSlice::new(b"S")],
            &[nix::sys::socket::ControlMessage::ScmRights(&[fd])],
            nix::sys::socket::MsgFlags::empty(),
            None,
        )
        .unwrap();
        // Refused: the host closes the connection without serving it.
        let mut conn = conn;
        let mut rest = Vec::new();
        let n = tokio::time::timeout(PATIENCE, conn.read_to_end(&mut rest))
            .await
            .expect("a refused hand-over is closed")
            .unwrap_or(0);
        assert_eq!(n, 0, "{rest:?}");
    }

    // A socket whose other end this test holds: the guard serves it as
    // it serves Chromium's, and refuses the canary on loopback.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut mine = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (handed, _) = listener.accept().await.unwrap();
    let conn = UnixStream::connect(&egress).await.unwrap();
    cordon::sandbox::handover::send(&conn, &handed)
        .await
        .unwrap();
    drop((conn, handed));
    let port = canary.addr.port();
    mine.write_all(
        format!(
            "GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, mine.read_to_end(&mut answer))
        .await
        .expect("the guard answers a handed-over socket")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 403"),
        "the guard did not refuse the canary: {answer}"
    );

    // The browser's own connections are still served while the silent
    // ones wait.
    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    assert_eq!(nav["status"], json!(200), "{nav}");
    drop(silent);
    agent.close(&sid).await;
    assert_eq!(canary.hits(), 0, "the canary was reached");
    app.stop().await;
}
