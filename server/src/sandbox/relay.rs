//! Byte relays between TCP and unix sockets, and `cordon relay`: the small
//! process that runs inside a `bwrap` sandbox next to Chromium.
//!
//! The sandbox's network namespace holds only its own loopback, so the two
//! ways in and out are unix sockets the host made. Over them the relay
//! hands the host Chromium's own TCP sockets ([`super::handover`]) and
//! keeps no copy, so no byte crosses the relay:
//!
//! - Chromium's proxy: Chromium connects to in-sandbox
//!   `127.0.0.1:<proxy port>`; the relay accepts and hands the socket over
//!   `/run/cordon/egress.sock` (in a read-only bind of the host's socket
//!   directory) to the host side of the driver, whose egress guard serves
//!   it directly;
//! - CDP: the control plane connects to the host's `cdp.sock`, whose
//!   listening socket is the relay's stdin; the relay connects to
//!   Chromium's DevTools port on the in-sandbox loopback and hands that
//!   socket back, which the host joins to its CDP client's connection.
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
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinSet;

use super::handover;

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
        tokio::spawn(hand_over_accepted(proxy, args.egress_socket)),
        tokio::spawn(hand_over_connected(cdp, args.cdp_target)),
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

/// Inside the sandbox: accepts Chromium's connections on `listener` (its
/// proxy address) and hands each to the host over a new connection to the
/// unix socket `to`, keeping no copy. Runs until aborted.
pub async fn hand_over_accepted(listener: TcpListener, to: PathBuf) {
    each_connection(
        || listener.accept(),
        move |(inbound, _)| {
            let to = to.clone();
            async move {
                // No socket option here: the host sets its own on receipt.
                let sent = match UnixStream::connect(&to).await {
                    Ok(out) => handover::send(&out, &inbound).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = sent {
                    tracing::debug!(error = %e, "relay: could not hand a proxy connection over");
                }
            }
        },
    )
    .await;
}

/// Inside the sandbox: for each connection the host makes to `listener`,
/// connects to `to` (Chromium's DevTools) and hands that socket back over
/// it, keeping no copy. Runs until aborted.
pub async fn hand_over_connected(listener: UnixListener, to: SocketAddr) {
    each_connection(
        || listener.accept(),
        move |(inbound, _)| async move {
            // A refused connection (DevTools not up yet) closes `inbound`
            // unanswered: the host's attempt fails and it tries again.
            let sent = match TcpStream::connect(to).await {
                Ok(out) => handover::send(&inbound, &out).await,
                Err(e) => Err(e),
            };
            if let Err(e) = sent {
                tracing::debug!(error = %e, "relay: could not hand a DevTools connection over");
            }
        },
    )
    .await;
}

/// On the host: accepts TCP connections on `listener` from this process
/// only ([`crate::loopback::opened_by_this_process`]: another local process
/// that found the port could otherwise drive the browser and read its
/// cookies) and joins each to the socket the relay hands over a new
/// connection to the unix socket `to`, the browser's side through a
/// [`crate::cdp::meter::join`] (no message over the bound passes). Runs
/// until aborted; aborting it also ends every connection it carries.
pub async fn tcp_to_handed(listener: TcpListener, to: PathBuf) {
    let local = listener.local_addr().ok();
    each_connection(
        || listener.accept(),
        move |(inbound, peer): (TcpStream, SocketAddr)| {
            let to = to.clone();
            async move {
                if !local.is_some_and(|l| crate::loopback::opened_by_this_process(l, peer)) {
                    tracing::warn!(
                        port = local.map(|l| l.port()),
                        "refused a connection to a sandbox's DevTools from another process"
                    );
                    return;
                }
                let _ = inbound.set_nodelay(true);
                match handover::take(&to).await {
                    Ok(out) => {
                        // The browser's messages bounded on the way.
                        let meter = crate::cdp::meter::Meter::new(crate::cdp::MAX_BROWSER_MESSAGE);
                        crate::cdp::meter::join(inbound, out, meter).await;
                    }
                    Err(e) => tracing::debug!(error = %e, "relay: no socket handed over"),
                }
            }
        },
    )
    .await;
}

/// On the host: accepts unix-socket connections on `listener` and gives
/// the TCP socket handed over each to `serve`. Runs until aborted; aborting
/// it also ends what `serve` runs (not what it spawns).
pub async fn serve_handed<F, Fut>(listener: UnixListener, serve: F)
where
    F: Fn(TcpStream) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    each_connection(
        || listener.accept(),
        move |(inbound, _)| {
            let serve = serve.clone();
            // Received in the connection's own task: one that sends
            // nothing holds up no other.
            async move {
                match handover::receive(&inbound, handover::RECEIVE_TIMEOUT).await {
                    Ok(tcp) => {
                        drop(inbound);
                        serve(tcp).await;
                    }
                    Err(e) => tracing::debug!(error = %e, "relay: refused a handed-over socket"),
                }
            }
        },
    )
    .await;
}

/// Runs `handle` on each connection `accept` gives, each in a task of its
/// own that ends when this is aborted. Runs until aborted.
async fn each_connection<C, A, AF, H, HF>(mut accept: A, mut handle: H)
where
    A: FnMut() -> AF,
    AF: std::future::Future<Output = std::io::Result<C>>,
    H: FnMut(C) -> HF,
    HF: std::future::Future<Output = ()> + Send + 'static,
{
    let mut conns = JoinSet::new();
    loop {
        match accept().await {
            Ok(conn) => {
                while conns.try_join_next().is_some() {}
                conns.spawn(handle(conn));
            }
            Err(e) => accept_failed(&e).await,
        }
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

    /// A TCP echo server on loopback.
    async fn echo() -> SocketAddr {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn the_cdp_path_joins_the_client_to_the_socket_the_relay_hands_over() {
        // echo server (Chromium's DevTools) ← relay's connection, handed
        // over cdp.sock ← host's listener ← client.
        let echo_addr = echo().await;
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("cdp.sock");
        let inner = tokio::spawn(hand_over_connected(
            UnixListener::bind(&sock).unwrap(),
            echo_addr,
        ));
        let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front_addr = front.local_addr().unwrap();
        let outer = tokio::spawn(tcp_to_handed(front, sock));

        let mut c = TcpStream::connect(front_addr).await.unwrap();
        c.write_all(b"ping through the handed socket")
            .await
            .unwrap();
        let mut buf = [0u8; 30];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping through the handed socket");

        // The relay keeps no copy: stopping it leaves the connection up.
        inner.abort();
        let _ = inner.await;
        c.write_all(b"still").await.unwrap();
        let mut still = [0u8; 5];
        c.read_exact(&mut still).await.unwrap();
        assert_eq!(&still, b"still");

        // Aborting the host's side ends the connections it carries.
        outer.abort();
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut rest))
            .await
            .expect("the connection ends with the host's side")
            .unwrap_or(0);
        assert_eq!(n, 0);
    }

    /// A compromised browser's DevTools socket that answers the handshake
    /// and then sends a frame claiming 16 GiB: the host's join ends both
    /// connections at the frame's header, so no raw CDP client behind it
    /// (the dialog follower, the CDP endpoint's) is sent the message.
    #[tokio::test]
    async fn the_cdp_path_ends_a_connection_at_a_message_over_the_bound() {
        let browser = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let browser_addr = browser.local_addr().unwrap();
        let sent = tokio::spawn(async move {
            let (mut s, _) = browser.accept().await.unwrap();
            let mut req = [0u8; 1024];
            let _ = s.read(&mut req).await;
            s.write_all(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")
                .await
                .unwrap();
            s.write_all(&[0x81, 127, 0, 0, 0, 4, 0, 0, 0, 0])
                .await
                .unwrap();
            let chunk = vec![b'z'; 1 << 20];
            let mut sent = 0u64;
            while sent < 1 << 34 && s.write_all(&chunk).await.is_ok() {
                sent += chunk.len() as u64;
            }
            sent
        });
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("cdp.sock");
        let _inner = tokio::spawn(hand_over_connected(
            UnixListener::bind(&sock).unwrap(),
            browser_addr,
        ));
        let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front_addr = front.local_addr().unwrap();
        let _outer = tokio::spawn(tcp_to_handed(front, sock));
        let mut c = TcpStream::connect(front_addr).await.unwrap();
        c.write_all(b"GET /devtools/browser/x HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(60), c.read_to_end(&mut got))
            .await
            .expect("the client's connection was not ended");
        assert!(got.len() < 64, "the client got {} bytes", got.len());
        let sent = tokio::time::timeout(Duration::from_secs(60), sent)
            .await
            .expect("the browser's connection was not ended")
            .unwrap();
        assert!(sent < 1 << 33, "the browser sent {sent} bytes");
    }

    #[tokio::test]
    async fn the_proxy_path_hands_the_browsers_connection_to_the_host() {
        // client (Chromium) → relay's proxy listener, handed over
        // egress.sock → host, which serves it (here: an echo of its own).
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("egress.sock");
        let host = tokio::spawn(serve_handed(
            UnixListener::bind(&sock).unwrap(),
            |mut tcp: TcpStream| async move {
                let (mut r, mut w) = tcp.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            },
        ));
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_addr = proxy.local_addr().unwrap();
        let relay = tokio::spawn(hand_over_accepted(proxy, sock.clone()));

        let mut c = TcpStream::connect(proxy_addr).await.unwrap();
        c.write_all(b"GET / HTTP/1.1").await.unwrap();
        let mut buf = [0u8; 14];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"GET / HTTP/1.1");

        // A hostile connection to egress.sock that sends nothing, or sends
        // something else, holds up no other connection.
        let _idle = UnixStream::connect(&sock).await.unwrap();
        let mut junk = UnixStream::connect(&sock).await.unwrap();
        junk.write_all(b"not a socket").await.unwrap();
        let mut c2 = TcpStream::connect(proxy_addr).await.unwrap();
        c2.write_all(b"second").await.unwrap();
        let mut buf = [0u8; 6];
        tokio::time::timeout(Duration::from_secs(5), c2.read_exact(&mut buf))
            .await
            .expect("a second connection is served while another sends nothing")
            .unwrap();
        assert_eq!(&buf, b"second");
        relay.abort();
        host.abort();
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
