//! The HTTPS accept loop: a TLS handshake per connection, then the same
//! router as plain HTTP, over hyper's HTTP/1.1 with upgrades (the dashboard's
//! WebSockets).
//!
//! *Why hyper's `http1` and not hyper-util's `auto` builder with its
//! `GracefulShutdown`:* that pairing needs hyper-util's `server-auto`
//! feature, which turns on HTTP/2 for every hyper server in the build,
//! `axum::serve`'s plain listener included (it would start taking h2c).
//! The graceful shutdown below is the same few lines `axum::serve` uses:
//! every connection holds a receiver of one watch channel; shutdown sends
//! on it and waits until all receivers are gone.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

/// How long a client may take to finish its TLS handshake; one that
/// connects and says nothing is dropped after this, so it holds a task
/// and a socket no longer.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` over TLS on `listener` until `shutdown` resolves, then
/// stops accepting, lets the requests in flight finish and returns once
/// every connection has closed.
pub async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let acceptor = TlsAcceptor::from(config);
    let (stop_tx, stop_rx) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let (mut tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        crate::startup::no_delay(&mut tcp);
        tokio::spawn(connection(
            tcp,
            peer,
            acceptor.clone(),
            router.clone(),
            stop_rx.clone(),
        ));
    }
    drop(listener);
    drop(stop_rx);
    let _ = stop_tx.send(());
    // Resolves when the last connection task has dropped its receiver.
    stop_tx.closed().await;
}

/// One client: the handshake (bounded by [`HANDSHAKE_TIMEOUT`], cut short
/// by shutdown), then HTTP/1.1 until the client or shutdown ends it.
async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    router: Router,
    mut stop: watch::Receiver<()>,
) {
    let tls = tokio::select! {
        handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)) => {
            match handshake {
                Ok(Ok(tls)) => tls,
                // Scanners and plain-HTTP clients end here; not worth more
                // than a debug line each.
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            }
        }
        _ = stop.changed() => return,
    };
    let conn = http1::Builder::new()
        // With a timer, hyper drops a client that sends no complete request
        // head within its header read timeout (30 s).
        .timer(TokioTimer::new())
        .serve_connection(
            TokioIo::new(tls),
            TowerToHyperService::new(
                tower::ServiceBuilder::new()
                    .layer(axum::Extension(axum::extract::ConnectInfo(peer)))
                    .service(router),
            ),
        )
        .with_upgrades();
    let mut conn = pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Errors of `accept` that concern one connection are skipped; others (out
/// of file descriptors) are logged and retried after a pause, as
/// `axum::serve` does, rather than spinning.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
