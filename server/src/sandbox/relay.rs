//! Byte relays between TCP and unix sockets, and `cordon relay`: the small
//! process that runs inside a `bwrap` sandbox next to Chromium.
//!
//! The sandbox's network namespace holds only its own loopback, so the two
//! ways in and out are unix sockets the host made:
//!
//! - Chromium's proxy: in-sandbox `127.0.0.1:<proxy port>` → relay →
//!   `/run/cordon/egress.sock` (in a read-only bind of the host's socket
//!   directory) → (host side of the driver) → egress guard;
//! - CDP: control plane → (host side) → the host's `cdp.sock`, whose
//!   listening socket is the relay's stdin → relay → Chromium's DevTools
//!   port on the in-sandbox loopback.
//!
//! The relay creates no file: it can run with nothing writable.
//!
//! The relay starts Chromium as its child and exits with it; being the
//! sandbox's first process, its exit ends the sandbox.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::Context;
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinSet;

/// `cordon relay …` (hidden; only the `bwrap` driver starts it).
#[derive(Debug, Clone, clap::Args)]
pub struct RelayArgs {
    /// In-sandbox loopback address where Chromium finds its proxy.
    #[arg(long)]
    pub proxy_listen: SocketAddr,
    /// Unix socket leading to the egress guard outside.
    #[arg(long)]
    pub egress_socket: PathBuf,
    /// Chromium's DevTools address inside the sandbox.
    #[arg(long)]
    pub cdp_target: SocketAddr,
    /// The browser to start, with its arguments.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<OsString>,
}

/// Runs the relay until the browser exits; exits with the browser's status.
/// Its stdin must be the listening unix socket on which the control plane
/// reaches CDP (the driver makes it on the host).
pub async fn run(args: RelayArgs) -> anyhow::Result<ExitCode> {
    // Both listeners exist before the browser starts, so its first request
    // and the control plane's first CDP probe find them.
    let proxy = TcpListener::bind(args.proxy_listen)
        .await
        .with_context(|| format!("relay: cannot listen on {}", args.proxy_listen))?;
    let cdp = cdp_listener_from_stdin()?;
    let (program, rest) = args
        .command
        .split_first()
        .context("relay: no browser command")?;
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        // Not the CDP listener, which is the relay's alone.
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("relay: cannot start {}", program.to_string_lossy()))?;
    let forwarders = [
        tokio::spawn(tcp_to_unix(proxy, args.egress_socket, Clients::Any)),
        tokio::spawn(unix_to_tcp(cdp, args.cdp_target)),
    ];
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("relay: cannot handle SIGTERM")?;
    let status = tokio::select! {
        status = child.wait() => status.context("relay: waiting for the browser")?,
        _ = term.recv() => {
            let _ = child.start_kill();
            child.wait().await.context("relay: waiting for the browser")?
        }
    };
    for f in forwarders {
        f.abort();
    }
    Ok(exit_code(status))
}

/// The listening unix socket the driver passed as stdin.
fn cdp_listener_from_stdin() -> anyhow::Result<UnixListener> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .context("relay: no stdin")?;
    let listener = std::os::unix::net::UnixListener::from(fd);
    // Fails unless stdin is a unix socket.
    listener
        .local_addr()
        .context("relay: stdin is not the CDP listener (a unix socket)")?;
    listener.set_nonblocking(true)?;
    UnixListener::from_std(listener).context("relay: cannot use the CDP listener")
}

fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Who may connect to a [`tcp_to_unix`] listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clients {
    /// Anyone who can reach the port (inside a sandbox: its Chromium).
    Any,
    /// Only this process ([`crate::loopback::opened_by_this_process`]): the
    /// host side of a sandbox's DevTools socket.
    ThisProcess,
}

/// Accepts TCP connections on `listener` and joins each to a new connection
/// to the unix socket `to`. Runs until aborted; aborting it also ends every
/// connection it carries.
pub async fn tcp_to_unix(listener: TcpListener, to: PathBuf, clients: Clients) {
    let mut conns = JoinSet::new();
    let local = listener.local_addr().ok();
    loop {
        let mut inbound = match listener.accept().await {
            Ok((s, peer)) => {
                if clients == Clients::ThisProcess
                    && !local.is_some_and(|l| crate::loopback::opened_by_this_process(l, peer))
                {
                    tracing::warn!(
                        port = local.map(|l| l.port()),
                        "refused a connection to a sandbox's DevTools from another process"
                    );
                    continue;
                }
                s
            }
            Err(e) => {
                accept_failed(&e).await;
                continue;
            }
        };
        while conns.try_join_next().is_some() {}
        let _ = inbound.set_nodelay(true);
        let to = to.clone();
        conns.spawn(async move {
            if let Ok(mut out) = UnixStream::connect(&to).await {
                let _ = copy_bidirectional(&mut inbound, &mut out).await;
            }
        });
    }
}

/// Accepts unix-socket connections on `listener` and joins each to a new TCP
/// connection to `to`. Runs until aborted; aborting it also ends every
/// connection it carries.
pub async fn unix_to_tcp(listener: UnixListener, to: SocketAddr) {
    let mut conns = JoinSet::new();
    loop {
        let mut inbound = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                accept_failed(&e).await;
                continue;
            }
        };
        while conns.try_join_next().is_some() {}
        conns.spawn(async move {
            if let Ok(mut out) = TcpStream::connect(to).await {
                let _ = out.set_nodelay(true);
                let _ = copy_bidirectional(&mut inbound, &mut out).await;
            }
        });
    }
}

/// An accept error (out of file descriptors, say) is passing: wait a little
/// rather than spin.
async fn accept_failed(e: &std::io::Error) {
    tracing::debug!(error = %e, "relay: accept failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_cross_tcp_to_unix_to_tcp_both_ways() {
        // echo server ← unix_to_tcp ← unix socket ← tcp_to_unix ← client
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let inner = tokio::spawn(unix_to_tcp(UnixListener::bind(&sock).unwrap(), echo_addr));
        let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front_addr = front.local_addr().unwrap();
        let outer = tokio::spawn(tcp_to_unix(front, sock, Clients::ThisProcess));

        let mut c = TcpStream::connect(front_addr).await.unwrap();
        c.write_all(b"ping through two relays").await.unwrap();
        let mut buf = [0u8; 23];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping through two relays");

        // Aborting the relays ends the connections they carry.
        outer.abort();
        inner.abort();
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut rest))
            .await
            .expect("the connection ends with its relay")
            .unwrap_or(0);
        assert_eq!(n, 0);
    }

    #[test]
    fn exit_codes_follow_the_browser() {
        use std::os::unix::process::ExitStatusExt;
        let ok = std::process::ExitStatus::from_raw(0);
        assert_eq!(exit_code(ok), ExitCode::SUCCESS);
        let killed = std::process::ExitStatus::from_raw(9); // SIGKILL
        assert_eq!(exit_code(killed), ExitCode::from(137));
    }
}
